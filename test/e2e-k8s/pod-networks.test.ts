/**
 * Kubernetes mode end to end: a real kube-apiserver (test/k8s/cluster.ts) holds pods and
 * NetworkAttachmentDefinitions; libcni (the Go driver, as containerd) runs the built `multus` with a
 * kubeconfig, which runs Debian's bridge/macvlan/host-local/static plugins in real network namespaces.
 *
 * Network selection by the text and the JSON forms, NADs in other namespaces with and without namespace
 * isolation, NADs with an empty spec.config, the default-network override, the pod UID check, a service
 * account without RBAC, the API economy of one ADD, and a malformed annotation.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Cluster, MULTUS_NAMESPACE, k8sRequirements, startCluster } from '../k8s/cluster.ts';
import { needs } from '../helpers/skip.ts';
import {
  CLUSTER_NET,
  describeRun,
  e2eRequirements,
  listDir,
  readLinks,
  readRoutes,
  writeJson,
} from '../e2e/helpers.ts';
import {
  DEFAULT_NETWORK_ANNOTATION,
  NETWORKS_ANNOTATION,
  type K8sWorld,
  type NetworkStatusEntry,
  type Sandbox,
  auditLine,
  createNad,
  multusAudit,
  networkStatus,
  podEvents,
  randomUid,
  readPod,
  v4,
  withWorld,
} from './world.ts';
import { join } from 'node:path';

const ready = needs(...e2eRequirements(), ...k8sRequirements());

describe.skipIf(!ready)('Kubernetes mode through libcni with a real kube-apiserver', () => {
  let cluster: Cluster;
  let index = 0;
  /** A fresh world index (subnets 10.24x.<index>.0/24). */
  const next = () => ++index;

  beforeAll(async () => {
    cluster = await startCluster();
    console.log(`startCluster took ${cluster.startupMs} ms ${JSON.stringify(cluster.startupPhases)}`);
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  /** The MAC of a pod-namespace link. */
  const macOf = async (kw: K8sWorld, sb: Sandbox, ifname: string) => (await kw.podLinks(sb)).get(ifname)?.address;

  /** Checks one network-status entry against the pod namespace's link. */
  async function expectEntry(
    kw: K8sWorld,
    sb: Sandbox,
    entry: NetworkStatusEntry | undefined,
    want: { name: string; ifname: string; ips: string[]; isDefault: boolean },
  ) {
    expect(entry, `network-status entry for ${want.ifname}`).toBeDefined();
    expect(entry!.name).toBe(want.name);
    expect(entry!.interface).toBe(want.ifname);
    expect(entry!.ips).toEqual(want.ips);
    expect(entry!.mac).toBe(await macOf(kw, sb, want.ifname));
    expect(entry!.default === true).toBe(want.isDefault);
  }

  it('text form "net-a,<ns>/net-b@data1": eth0, net1, data1 with their addresses; network-status, events, CHECK, DEL', async () => {
    await withWorld(cluster, { index: next(), cniVersion: '1.0.0' }, async (kw) => {
      await createNad(cluster, kw.ns, 'net-a', kw.macvlan('net-a', 1));
      // no "name" in the config: the NAD's name is injected
      await createNad(cluster, kw.otherNs, 'net-b', kw.bridge('', 2, 'b'));
      const sb = await kw.pod('pod-text', { [NETWORKS_ANNOTATION]: `net-a,${kw.otherNs}/net-b@data1` });
      const conf = await kw.writeConf(kw.multusConfig(cluster.multusKubeconfig));

      const add = await kw.add(conf, sb);
      const ips = (add.json?.ips ?? []) as { address: string }[];
      expect(
        ips.map((i) => i.address),
        "the result is the cluster network's",
      ).toEqual([`${kw.addr(0, 2)}/24`]);

      const links = await kw.podLinks(sb);
      expect([...links.keys()].sort()).toEqual(['data1', 'eth0', 'lo', 'net1']);
      expect(v4(links.get('eth0'))).toEqual([`${kw.addr(0, 2)}/24`]);
      expect(v4(links.get('net1'))).toEqual([`${kw.addr(1, 2)}/24`]);
      expect(v4(links.get('data1'))).toEqual([`${kw.addr(2, 2)}/24`]);
      expect(links.get('net1')?.linkinfo?.info_kind).toBe('macvlan');
      expect(links.get('data1')?.linkinfo?.info_kind).toBe('veth');
      expect((await readRoutes(sb.netns)).filter((r) => r.dst === 'default')).toEqual([
        expect.objectContaining({ gateway: kw.addr(0, 1), dev: 'eth0' }),
      ]);

      const status = await networkStatus(cluster, sb.pod);
      expect(status, 'network-status annotation').toHaveLength(3);
      expect(
        (await readPod(cluster, sb.pod)).metadata.annotations[NETWORKS_ANNOTATION],
        'the selection annotation is kept',
      ).toBe(`net-a,${kw.otherNs}/net-b@data1`);
      await expectEntry(kw, sb, status![0], {
        name: CLUSTER_NET,
        ifname: 'eth0',
        ips: [kw.addr(0, 2)],
        isDefault: true,
      });
      await expectEntry(kw, sb, status![1], {
        name: `${kw.ns}/net-a`,
        ifname: 'net1',
        ips: [kw.addr(1, 2)],
        isDefault: false,
      });
      await expectEntry(kw, sb, status![2], {
        name: `${kw.otherNs}/net-b`,
        ifname: 'data1',
        ips: [kw.addr(2, 2)],
        isDefault: false,
      });
      expect(status!.filter((e) => e.default === true)).toHaveLength(1);
      expect(status![0]!.gateway, "the default route's gateway").toEqual([kw.addr(0, 1)]);
      expect(status![1]!.gateway).toBeUndefined();
      expect(status!.map((e) => e.dns)).toEqual([{}, {}, {}]);

      const events = await podEvents(cluster, sb.pod, 'AddedInterface');
      const eventPosts = await multusAudit(
        cluster,
        (e) => e.objectRef?.resource === 'events' && e.objectRef?.namespace === kw.ns,
        3,
      );
      // soft: a lost event must not hide what CHECK and DEL do
      expect
        .soft(
          events.map((e) => e.message).sort(),
          `event requests of multus:\n${eventPosts.map((e) => `${e.verb} ${e.requestURI} -> ${e.responseStatus?.code} ${JSON.stringify((e.responseStatus as { message?: string } | undefined)?.message ?? '')}`).join('\n')}`,
        )
        .toEqual(
          [
            `Add eth0 [${kw.addr(0, 2)}/24] from ${CLUSTER_NET}`,
            `Add net1 [${kw.addr(1, 2)}/24] from ${kw.ns}/net-a`,
            `Add data1 [${kw.addr(2, 2)}/24] from ${kw.otherNs}/net-b`,
          ].sort(),
        );
      expect.soft(events.every((e) => e.type === 'Normal' && e.source?.component === 'multus')).toBe(true);

      // multus' result caches: one per attachment, named by the CNI network name (net-b got the NAD's name)
      expect(await listDir(join(kw.w.cniDir, 'results'))).toEqual(
        [
          `${CLUSTER_NET}-${sb.containerId}-eth0`,
          `net-a-${sb.containerId}-net1`,
          `net-b-${sb.containerId}-data1`,
        ].sort(),
      );

      const check = await kw.driver('check', conf, sb);
      expect(check.code, `CHECK: ${describeRun(check)}\n${await kw.logTail()}`).toBe(0);

      await kw.del(conf, sb);
      await kw.expectTornDown(sb);
    });
  });

  it('JSON form with "interface" and "ips"/"mac" (static IPAM): eth0, data0, net2 at the requested address; CHECK, DEL', async () => {
    await withWorld(cluster, { index: next(), cniVersion: '0.4.0' }, async (kw) => {
      await createNad(cluster, kw.ns, 'net-a', kw.macvlan('net-a', 1));
      await createNad(cluster, kw.otherNs, 'net-s', {
        ...kw.staticMacvlan('net-s'),
        capabilities: { ips: true, mac: true },
      });
      const staticIp = `${kw.addr(3, 77)}/24`;
      const mac = '02:5a:8c:11:22:33';
      const selection = [
        { name: 'net-a', interface: 'data0' },
        { name: 'net-s', namespace: kw.otherNs, ips: [staticIp], mac },
      ];
      const sb = await kw.pod('pod-json', { [NETWORKS_ANNOTATION]: JSON.stringify(selection) });
      const conf = await kw.writeConf(kw.multusConfig(cluster.multusKubeconfig));

      await kw.add(conf, sb);
      const links = await kw.podLinks(sb);
      expect([...links.keys()].sort()).toEqual(['data0', 'eth0', 'lo', 'net2']);
      expect(v4(links.get('eth0'))).toEqual([`${kw.addr(0, 2)}/24`]);
      expect(v4(links.get('data0'))).toEqual([`${kw.addr(1, 2)}/24`]);
      expect(v4(links.get('net2')), 'the address the selection asked for').toEqual([staticIp]);
      expect(links.get('net2')?.address, 'the MAC the selection asked for').toBe(mac);

      const status = await networkStatus(cluster, sb.pod);
      expect(status).toHaveLength(3);
      await expectEntry(kw, sb, status![0], {
        name: CLUSTER_NET,
        ifname: 'eth0',
        ips: [kw.addr(0, 2)],
        isDefault: true,
      });
      await expectEntry(kw, sb, status![1], {
        name: `${kw.ns}/net-a`,
        ifname: 'data0',
        ips: [kw.addr(1, 2)],
        isDefault: false,
      });
      await expectEntry(kw, sb, status![2], {
        name: `${kw.otherNs}/net-s`,
        ifname: 'net2',
        ips: [kw.addr(3, 77)],
        isDefault: false,
      });
      expect(status![2]!.mac).toBe(mac);
      expect
        .soft(
          (await podEvents(cluster, sb.pod, 'AddedInterface')).map((e) => e.message).sort(),
          'AddedInterface events',
        )
        .toEqual(
          [
            `Add eth0 [${kw.addr(0, 2)}/24] from ${CLUSTER_NET}`,
            `Add data0 [${kw.addr(1, 2)}/24] from ${kw.ns}/net-a`,
            `Add net2 [${staticIp}] from ${kw.otherNs}/net-s`,
          ].sort(),
        );

      const check = await kw.driver('check', conf, sb);
      expect(check.code, `CHECK: ${describeRun(check)}\n${await kw.logTail()}`).toBe(0);

      await kw.del(conf, sb);
      await kw.expectTornDown(sb);
    });
  });

  describe('a NAD in another namespace', () => {
    it('is attached without namespaceIsolation', async () => {
      await withWorld(cluster, { index: next() }, async (kw) => {
        await createNad(cluster, kw.otherNs, 'net-x', kw.macvlan('net-x', 1));
        const sb = await kw.pod('pod-cross', { [NETWORKS_ANNOTATION]: `${kw.otherNs}/net-x` });
        const conf = await kw.writeConf(kw.multusConfig(cluster.multusKubeconfig));
        await kw.add(conf, sb);
        expect(v4((await kw.podLinks(sb)).get('net1'))).toEqual([`${kw.addr(1, 2)}/24`]);
        await kw.del(conf, sb);
        await kw.expectTornDown(sb);
      });
    });

    it('fails the ADD with namespaceIsolation, naming both namespaces, and attaches nothing', async () => {
      await withWorld(cluster, { index: next() }, async (kw) => {
        await createNad(cluster, kw.otherNs, 'net-x', kw.macvlan('net-x', 1));
        const sb = await kw.pod('pod-isolated', { [NETWORKS_ANNOTATION]: `${kw.otherNs}/net-x` });
        const conf = await kw.writeConf(kw.multusConfig(cluster.multusKubeconfig, { namespaceIsolation: true }));
        const r = await kw.driver('add', conf, sb);
        expect(r.code, describeRun(r)).toBe(1);
        const msg = String(r.json?.error);
        expect(msg).toContain(`pod is in namespace ${kw.ns}`);
        expect(msg).toContain(`target namespace ${kw.otherNs}`);
        expect(msg).toContain(`${kw.ns}/pod-isolated`);
        await kw.expectNothingAttached(sb);
      });
    });

    it('is attached again with namespaceIsolation when its namespace is in globalNamespaces', async () => {
      await withWorld(cluster, { index: next() }, async (kw) => {
        await createNad(cluster, kw.otherNs, 'net-x', kw.macvlan('net-x', 1));
        const sb = await kw.pod('pod-global', { [NETWORKS_ANNOTATION]: `${kw.otherNs}/net-x` });
        const conf = await kw.writeConf(
          kw.multusConfig(cluster.multusKubeconfig, {
            namespaceIsolation: true,
            globalNamespaces: `default,${kw.otherNs}`,
          }),
        );
        await kw.add(conf, sb);
        expect(v4((await kw.podLinks(sb)).get('net1'))).toEqual([`${kw.addr(1, 2)}/24`]);
        expect((await networkStatus(cluster, sb.pod))?.map((e) => e.name)).toEqual([
          CLUSTER_NET,
          `${kw.otherNs}/net-x`,
        ]);
        await kw.del(conf, sb);
        await kw.expectTornDown(sb);
      });
    });
  });

  it('NADs with an empty spec.config use the file in confDir whose network name is the NAD name', async () => {
    await withWorld(cluster, { index: next() }, async (kw) => {
      // spec: {} → a single-plugin .conf; spec.config "" → a .conflist
      await writeJson(join(kw.confDir, '10-file-a.conf'), kw.macvlan('file-a', 1));
      await writeJson(join(kw.confDir, '20-file-b.conflist'), {
        cniVersion: kw.cniVersion,
        name: 'file-b',
        plugins: [
          {
            type: 'bridge',
            bridge: `${kw.w.bridge}f`,
            ipam: { type: 'host-local', dataDir: kw.w.ipamDir, subnet: kw.subnet(2) },
          },
        ],
      });
      await createNad(cluster, kw.ns, 'file-a', undefined);
      await createNad(cluster, kw.ns, 'file-b', '');
      const sb = await kw.pod('pod-files', { [NETWORKS_ANNOTATION]: 'file-a,file-b' });
      const conf = await kw.writeConf(kw.multusConfig(cluster.multusKubeconfig));

      await kw.add(conf, sb);
      const links = await kw.podLinks(sb);
      expect([...links.keys()].sort()).toEqual(['eth0', 'lo', 'net1', 'net2']);
      expect(v4(links.get('net1'))).toEqual([`${kw.addr(1, 2)}/24`]);
      expect(v4(links.get('net2'))).toEqual([`${kw.addr(2, 2)}/24`]);
      expect(links.get('net1')?.linkinfo?.info_kind).toBe('macvlan');
      expect((await networkStatus(cluster, sb.pod))?.map((e) => [e.name, e.interface])).toEqual([
        [CLUSTER_NET, 'eth0'],
        [`${kw.ns}/file-a`, 'net1'],
        [`${kw.ns}/file-b`, 'net2'],
      ]);
      await kw.del(conf, sb);
      await kw.expectTornDown(sb);
    });
  });

  it('v1.multus-cni.io/default-network: eth0 comes from the kube-system NAD, not delegates[0] (isolation does not apply)', async () => {
    await withWorld(cluster, { index: next() }, async (kw) => {
      const nadName = `dflt-${kw.id}`;
      await createNad(cluster, MULTUS_NAMESPACE, nadName, {
        cniVersion: kw.cniVersion,
        name: 'alt-cluster',
        type: 'bridge',
        bridge: `${kw.w.bridge}d`,
        isGateway: true,
        isDefaultGateway: true,
        ipam: { type: 'host-local', dataDir: kw.w.ipamDir, subnet: kw.subnet(3) },
      });
      await createNad(cluster, kw.ns, 'net-a', kw.macvlan('net-a', 1));
      const sb = await kw.pod('pod-override', {
        [DEFAULT_NETWORK_ANNOTATION]: nadName,
        [NETWORKS_ANNOTATION]: 'net-a',
      });
      const conf = await kw.writeConf(kw.multusConfig(cluster.multusKubeconfig, { namespaceIsolation: true }));

      const add = await kw.add(conf, sb);
      expect(((add.json?.ips ?? []) as { address: string }[]).map((i) => i.address)).toEqual([`${kw.addr(3, 2)}/24`]);
      const links = await kw.podLinks(sb);
      expect([...links.keys()].sort()).toEqual(['eth0', 'lo', 'net1']);
      expect(v4(links.get('eth0'))).toEqual([`${kw.addr(3, 2)}/24`]);
      expect(v4(links.get('net1'))).toEqual([`${kw.addr(1, 2)}/24`]);
      expect((await readRoutes(sb.netns)).filter((r) => r.dst === 'default')).toEqual([
        expect.objectContaining({ gateway: kw.addr(3, 1), dev: 'eth0' }),
      ]);
      const hostLinks = (await readLinks(kw.w.hostNs)).map((l) => l.ifname);
      expect(hostLinks).toContain(`${kw.w.bridge}d`);
      expect(hostLinks, 'delegates[0] never ran').not.toContain(kw.w.bridge);

      const status = await networkStatus(cluster, sb.pod);
      await expectEntry(kw, sb, status?.[0], {
        name: `${MULTUS_NAMESPACE}/${nadName}`,
        ifname: 'eth0',
        ips: [kw.addr(3, 2)],
        isDefault: true,
      });
      await expectEntry(kw, sb, status?.[1], {
        name: `${kw.ns}/net-a`,
        ifname: 'net1',
        ips: [kw.addr(1, 2)],
        isDefault: false,
      });
      expect(status).toHaveLength(2);

      await kw.del(conf, sb);
      await kw.expectTornDown(sb);
    });
  });

  it("K8S_POD_UID that is not the pod's: ADD fails naming both UIDs and attaches nothing", async () => {
    await withWorld(cluster, { index: next() }, async (kw) => {
      await createNad(cluster, kw.ns, 'net-a', kw.macvlan('net-a', 1));
      const sb = await kw.pod('pod-uid', { [NETWORKS_ANNOTATION]: 'net-a' });
      const conf = await kw.writeConf(kw.multusConfig(cluster.multusKubeconfig));
      const staleUid = randomUid();
      const r = await kw.driver('add', conf, sb, { uid: staleUid });
      expect(r.code, describeRun(r)).toBe(1);
      const msg = String(r.json?.error);
      expect(msg).toContain(staleUid);
      expect(msg).toContain(sb.pod.uid);
      await kw.expectNothingAttached(sb);
    });
  });

  it('a service account without the multus ClusterRole: ADD fails with Forbidden naming the verb and resource, nothing attached', async () => {
    await withWorld(cluster, { index: next() }, async (kw) => {
      await createNad(cluster, kw.ns, 'net-a', kw.macvlan('net-a', 1));
      const sb = await kw.pod('pod-norole', { [NETWORKS_ANNOTATION]: 'net-a' });
      const conf = await kw.writeConf(kw.multusConfig(cluster.noRoleKubeconfig));
      const t0 = performance.now();
      const r = await kw.driver('add', conf, sb);
      const ms = Math.round(performance.now() - t0);
      console.log(`Forbidden ADD failed after ${ms} ms: ${String(r.json?.error)}`);
      expect(r.code, describeRun(r)).toBe(1);
      const msg = String(r.json?.error);
      expect(msg).toMatch(/forbidden/i);
      expect(msg).toContain('cannot get resource "pods"');
      expect(msg).toContain(`${kw.ns}/pod-norole`);
      expect(ms, 'a 403 is not retried like an outage').toBeLessThan(5_000);
      await kw.expectNothingAttached(sb);
    });
  });

  it('API economy: an ADD with N NADs makes at most N+2 requests (GET pod, N GET NAD, 1 status update) besides events; DEL makes none', async () => {
    await withWorld(cluster, { index: next() }, async (kw) => {
      await createNad(cluster, kw.ns, 'net-a', kw.macvlan('net-a', 1));
      await createNad(cluster, kw.otherNs, 'net-b', kw.bridge('net-b', 2, 'b'));
      await createNad(cluster, kw.ns, 'net-c', kw.macvlan('net-c', 3));
      const n = 3;
      const sb = await kw.pod('pod-economy', { [NETWORKS_ANNOTATION]: `net-a,${kw.otherNs}/net-b,net-c` });
      const conf = await kw.writeConf(kw.multusConfig(cluster.multusKubeconfig));
      const mine = (e: { objectRef?: { namespace?: string } }) =>
        e.objectRef?.namespace === kw.ns || e.objectRef?.namespace === kw.otherNs;
      const notEvents = (e: { objectRef?: { resource?: string } }) => e.objectRef?.resource !== 'events';

      await kw.add(conf, sb);
      const all = await multusAudit(cluster, mine, n + 2 + (n + 1));
      const api = all.filter(notEvents);
      console.log(
        `ADD with ${n} NADs: ${api.length} API requests besides events (limit ${n + 2}):\n  ${api.map(auditLine).join('\n  ')}\n  + ${all.length - api.length} event requests`,
      );
      expect(api.length).toBeLessThanOrEqual(n + 2);
      expect(api.map(auditLine).sort()).toEqual(
        [
          `get pods ${kw.ns}/pod-economy -> 200`,
          `get network-attachment-definitions ${kw.ns}/net-a -> 200`,
          `get network-attachment-definitions ${kw.otherNs}/net-b -> 200`,
          `get network-attachment-definitions ${kw.ns}/net-c -> 200`,
          `update pods/status ${kw.ns}/pod-economy -> 200`,
        ].sort(),
      );
      expect(all.length - api.length, 'one AddedInterface event per interface').toBeLessThanOrEqual(n + 1);

      await kw.del(conf, sb);
      const after = await multusAudit(cluster, mine, 0);
      expect(after.map(auditLine), 'DEL with a scratch cache needs no API request').toEqual(all.map(auditLine));
      await kw.expectTornDown(sb);
    });
  });

  it('a NAD that does not exist: ADD fails naming it, a NoNetworkFound warning event, nothing attached', async () => {
    await withWorld(cluster, { index: next() }, async (kw) => {
      await createNad(cluster, kw.ns, 'net-a', kw.macvlan('net-a', 1));
      const sb = await kw.pod('pod-missing', { [NETWORKS_ANNOTATION]: 'net-a,net-missing' });
      const conf = await kw.writeConf(kw.multusConfig(cluster.multusKubeconfig));
      const r = await kw.driver('add', conf, sb);
      expect(r.code, describeRun(r)).toBe(1);
      const msg = String(r.json?.error);
      expect(msg).toContain('net-missing');
      expect(msg).toContain(kw.ns);
      const warnings = await podEvents(cluster, sb.pod, 'NoNetworkFound');
      expect(warnings.map((e) => [e.type, e.message])).toEqual([
        [
          'Warning',
          expect.stringContaining(`cannot find a network-attachment-definition (net-missing) in namespace (${kw.ns})`),
        ],
      ]);
      await kw.expectNothingAttached(sb);
    });
  });

  it('a malformed annotation "net-a,BAD_NAME": ADD fails naming the pod and the bad element, nothing attached', async () => {
    await withWorld(cluster, { index: next() }, async (kw) => {
      await createNad(cluster, kw.ns, 'net-a', kw.macvlan('net-a', 1));
      const sb = await kw.pod('pod-bad', { [NETWORKS_ANNOTATION]: 'net-a,BAD_NAME' });
      const conf = await kw.writeConf(kw.multusConfig(cluster.multusKubeconfig));
      const r = await kw.driver('add', conf, sb);
      expect(r.code, describeRun(r)).toBe(1);
      const msg = String(r.json?.error);
      expect(msg).toContain(`${kw.ns}/pod-bad`);
      expect(msg).toContain('BAD_NAME');
      expect(r.json?.code).toBe(7);
      await kw.expectNothingAttached(sb);
    });
  });
});
