/**
 * Per-attachment requests end to end: pods in a real kube-apiserver carry a JSON selection annotation, libcni
 * (the Go driver, as containerd) runs the built `multus`, which runs Debian's plugins (bridge, host-local,
 * static, bandwidth, portmap) and the recorder test double in real network namespaces.
 *
 * - `default-route` (IPv4; IPv6 on a dual-stack pod): the pod's default route of the requested family goes via
 *   the requested gateway on the requesting interface only, the other family is untouched, the libcni result
 *   caches of both attachments say the same, CHECK (bridge validates the cached routes) passes, DEL leaves
 *   nothing; `"default-route": []` leaves the pod no default route of either family (Multus' behaviour); a gateway
 *   off every subnet fails the ADD and rolls back;
 * - `ips`/`mac` land on a bridge interface (static IPAM) through runtimeConfig and CNI_ARGS IP=/MAC=, and do not
 *   leak to the cluster network;
 * - `cni-args` are merged into `args.cni` of every plugin of the NAD's list (bridge acts on `mac`), on ADD and DEL;
 * - `bandwidth` shapes net1 with tc (tbf on the host veth, an ifb for egress), `portMappings` make portmap's DNAT
 *   rules; both go only to the attachment that asked (the runtime's own values go to the cluster network), reach
 *   DEL from the scratch cache, and DEL removes what they set;
 * - the auxiliary chain (passthru = this executable, then the chain's *.conf plugins) runs last, on ADD and DEL;
 *   CHECK skips it (it makes no interface of its own);
 * - `strictCapabilities` turns an undeclared request into an error before anything runs;
 * - a bad selection element (mac, ips, infiniband-guid, gateway, repeated default-route, cni-args)
 *   attaches nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Cluster, k8sRequirements, startCluster } from '../k8s/cluster.ts';
import { needs } from '../helpers/skip.ts';
import { join } from 'node:path';
import { CLUSTER_NET, describeRun, e2eRequirements, readLinks, readSysctl, writeJson } from '../e2e/helpers.ts';
import { NETWORKS_ANNOTATION, type K8sWorld, type Sandbox, createNad, networkStatus, v4, withWorld } from './world.ts';
import {
  addr6,
  argPairs,
  cachedResult,
  cachedRoutes,
  clusterNet,
  defaultRoutes,
  dnatTargets,
  driverWithCaps,
  expectRolledBack,
  hostLinksOfKind,
  hostLocalRanges,
  hostPeer,
  installPassthru,
  installRecorder,
  multusWith,
  natRules,
  qdiscs,
  recorderLines,
  recorderPlugin,
  routeGet,
  subnet6,
  v6,
} from './per-attachment-helpers.ts';

const ready = needs(...e2eRequirements(), ...k8sRequirements());

/** A selection annotation in the JSON form. */
const selection = (...elements: Record<string, unknown>[]) => ({ [NETWORKS_ANNOTATION]: JSON.stringify(elements) });

describe.skipIf(!ready)('per-attachment requests through libcni with a real kube-apiserver', () => {
  let cluster: Cluster;
  let index = 0;
  const next = () => ++index;

  beforeAll(async () => {
    cluster = await startCluster();
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  /** A bridge NAD config (`<w.bridge><suffix>`) over the given host-local ranges, with a gateway address on the bridge. */
  const gwBridge = (kw: K8sWorld, name: string, suffix: string, subnets: string[]) => ({
    cniVersion: kw.cniVersion,
    name,
    type: 'bridge',
    bridge: `${kw.w.bridge}${suffix}`,
    isGateway: true,
    ipam: hostLocalRanges(kw, subnets),
  });

  describe('default-route', () => {
    it('IPv4: the default route goes via net1 only, both caches agree, CHECK passes, DEL leaves nothing', async () => {
      await withWorld(cluster, { index: next() }, async (kw) => {
        const gw = kw.addr(1, 1);
        await createNad(cluster, kw.ns, 'net-gw', gwBridge(kw, 'net-gw', 'r', [kw.subnet(1)]));
        const sb = await kw.pod('pod-dr4', selection({ name: 'net-gw', 'default-route': [gw] }));
        const conf = await kw.writeConf(kw.multusConfig(cluster.multusKubeconfig));

        const add = await kw.add(conf, sb);
        const links = await kw.podLinks(sb);
        expect(v4(links.get('eth0'))).toEqual([`${kw.addr(0, 2)}/24`]);
        expect(v4(links.get('net1'))).toEqual([`${kw.addr(1, 2)}/24`]);
        expect(await defaultRoutes(sb, '4'), "the pod's IPv4 default routes").toEqual([`${gw} net1`]);
        expect(await routeGet(sb, '192.0.2.1'), 'an off-link destination').toBe(`${gw} net1`);

        const eth0 = await cachedResult(kw, sb, CLUSTER_NET, 'eth0');
        expect(cachedRoutes(eth0), "the cluster network's cached routes").not.toContainEqual(
          expect.stringMatching(/^0\.0\.0\.0\/0 /),
        );
        expect(eth0.ips, 'the rest of the cached result is kept').toEqual([
          expect.objectContaining({ address: `${kw.addr(0, 2)}/24`, gateway: kw.addr(0, 1) }),
        ]);
        expect(cachedRoutes(await cachedResult(kw, sb, 'net-gw', 'net1')), "net1's cached routes").toEqual([
          `0.0.0.0/0 via ${gw}`,
        ]);

        // docs/behaviour.md#default-route: the result returned to the runtime and network-status keep the delegates'
        // original routes
        expect(add.json?.routes, "the printed result is eth0's, as the bridge returned it").toEqual([
          { dst: '0.0.0.0/0', gw: kw.addr(0, 1) },
        ]);
        const status = await networkStatus(cluster, sb.pod);
        expect(status?.map((e) => [e.name, e.interface, e.default === true, e.gateway])).toEqual([
          [CLUSTER_NET, 'eth0', true, [kw.addr(0, 1)]],
          [`${kw.ns}/net-gw`, 'net1', false, undefined],
        ]);

        const check = await kw.driver('check', conf, sb);
        expect(check.code, `CHECK: ${describeRun(check)}\n${await kw.logTail()}`).toBe(0);

        await kw.del(conf, sb);
        await kw.expectTornDown(sb);
      });
    });

    it('IPv6 on a dual-stack pod: only the IPv6 default route moves to net1, IPv4 stays on eth0; caches, CHECK, DEL', async () => {
      await withWorld(cluster, { index: next() }, async (kw) => {
        const gw6 = addr6(kw, 1, 1);
        await createNad(cluster, kw.ns, 'net-gw6', gwBridge(kw, 'net-gw6', 's', [kw.subnet(1), subnet6(kw, 1)]));
        const sb = await kw.pod('pod-dr6', selection({ name: 'net-gw6', 'default-route': [gw6] }));
        const conf = await kw.writeConf(
          multusWith(kw, cluster.multusKubeconfig, clusterNet(kw, [kw.subnet(0), subnet6(kw, 0)])),
        );

        await kw.add(conf, sb);
        const links = await kw.podLinks(sb);
        expect(v6(links.get('eth0'))).toEqual([`${addr6(kw, 0, 2)}/64`]);
        expect(v6(links.get('net1'))).toEqual([`${addr6(kw, 1, 2)}/64`]);
        expect(await defaultRoutes(sb, '6'), "the pod's IPv6 default routes").toEqual([`${gw6} net1`]);
        expect(await defaultRoutes(sb, '4'), 'the IPv4 default route is not touched').toEqual([
          `${kw.addr(0, 1)} eth0`,
        ]);
        expect(await routeGet(sb, '2001:db8::1')).toBe(`${gw6} net1`);

        const eth0 = await cachedResult(kw, sb, CLUSTER_NET, 'eth0');
        expect(cachedRoutes(eth0), 'eth0 keeps its IPv4 default route in the cache, loses the IPv6 one').toEqual([
          `0.0.0.0/0 via ${kw.addr(0, 1)}`,
        ]);
        expect(cachedRoutes(await cachedResult(kw, sb, 'net-gw6', 'net1'))).toEqual([`::/0 via ${gw6}`]);

        const check = await kw.driver('check', conf, sb);
        expect(check.code, `CHECK: ${describeRun(check)}\n${await kw.logTail()}`).toBe(0);

        await kw.del(conf, sb);
        await kw.expectTornDown(sb);
      });
    });

    it("IPv4 and IPv6 in one element on a dual-stack macvlan: both default routes move to net1, eth0's cache has none left; CHECK, DEL", async () => {
      await withWorld(cluster, { index: next() }, async (kw) => {
        const gw4 = kw.addr(1, 1);
        const gw6 = addr6(kw, 1, 1);
        await createNad(cluster, kw.ns, 'net-mv', {
          ...kw.macvlan('net-mv', 1),
          ipam: hostLocalRanges(kw, [kw.subnet(1), subnet6(kw, 1)]),
        });
        const sb = await kw.pod('pod-dr46', selection({ name: 'net-mv', 'default-route': [gw4, gw6] }));
        const conf = await kw.writeConf(
          multusWith(kw, cluster.multusKubeconfig, clusterNet(kw, [kw.subnet(0), subnet6(kw, 0)])),
        );

        await kw.add(conf, sb);
        const links = await kw.podLinks(sb);
        expect(links.get('net1')?.linkinfo?.info_kind).toBe('macvlan');
        expect([...v4(links.get('net1')), ...v6(links.get('net1'))]).toEqual([
          `${kw.addr(1, 2)}/24`,
          `${addr6(kw, 1, 2)}/64`,
        ]);
        expect(await defaultRoutes(sb, '4')).toEqual([`${gw4} net1`]);
        expect(await defaultRoutes(sb, '6')).toEqual([`${gw6} net1`]);

        expect(cachedRoutes(await cachedResult(kw, sb, CLUSTER_NET, 'eth0')), "eth0's cached routes").toEqual([]);
        expect(cachedRoutes(await cachedResult(kw, sb, 'net-mv', 'net1'))).toEqual([
          `0.0.0.0/0 via ${gw4}`,
          `::/0 via ${gw6}`,
        ]);

        const check = await kw.driver('check', conf, sb);
        expect(check.code, `CHECK: ${describeRun(check)}\n${await kw.logTail()}`).toBe(0);

        await kw.del(conf, sb);
        await kw.expectTornDown(sb);
      });
    });

    it('an empty list (NPWG: "this list may be empty"): as in Multus, no interface keeps a default route of either family; caches, CHECK, DEL', async () => {
      await withWorld(cluster, { index: next() }, async (kw) => {
        await createNad(cluster, kw.ns, 'net-gw', gwBridge(kw, 'net-gw', 'r', [kw.subnet(1)]));
        const sb = await kw.pod('pod-dr0', selection({ name: 'net-gw', 'default-route': [] }));
        const conf = await kw.writeConf(
          multusWith(kw, cluster.multusKubeconfig, clusterNet(kw, [kw.subnet(0), subnet6(kw, 0)])),
        );

        const add = await kw.add(conf, sb);
        const links = await kw.podLinks(sb);
        expect(v4(links.get('net1'))).toEqual([`${kw.addr(1, 2)}/24`]);
        expect(await defaultRoutes(sb, '4'), "the pod's IPv4 default routes").toEqual([]);
        expect(await defaultRoutes(sb, '6'), "the pod's IPv6 default routes").toEqual([]);
        expect(cachedRoutes(await cachedResult(kw, sb, CLUSTER_NET, 'eth0')), "eth0's cached routes").toEqual([]);
        expect(add.json?.routes, "the printed result is eth0's as the bridge returned it").toContainEqual({
          dst: '0.0.0.0/0',
          gw: kw.addr(0, 1),
        });

        const check = await kw.driver('check', conf, sb);
        expect(check.code, `CHECK: ${describeRun(check)}\n${await kw.logTail()}`).toBe(0);

        await kw.del(conf, sb);
        await kw.expectTornDown(sb);
      });
    });

    it("a gateway outside net1's subnet: ADD fails with the kernel's reason and rolls every attachment back", async () => {
      await withWorld(cluster, { index: next() }, async (kw) => {
        await createNad(cluster, kw.ns, 'net-gw', gwBridge(kw, 'net-gw', 'r', [kw.subnet(1)]));
        const sb = await kw.pod('pod-drbad', selection({ name: 'net-gw', 'default-route': ['192.0.2.1'] }));
        const conf = await kw.writeConf(kw.multusConfig(cluster.multusKubeconfig));
        const r = await kw.driver('add', conf, sb);
        expect(r.code, describeRun(r)).toBe(1);
        const msg = String(r.json?.error);
        expect(msg).toContain('192.0.2.1');
        expect(msg, "the kernel's reason").toContain('Nexthop has invalid gateway');
        expect(msg).toContain('net1');
        expect(msg).toContain(`${kw.ns}/pod-drbad`);
        await expectRolledBack(kw, sb);
      });
    });
  });

  it('ips/mac on a bridge with static IPAM: the interface gets them (runtimeConfig and CNI_ARGS); the cluster network does not', async () => {
    await withWorld(cluster, { index: next() }, async (kw) => {
      await installRecorder(kw);
      const caps = { ips: true, mac: true };
      await createNad(cluster, kw.ns, 'net-s', {
        cniVersion: kw.cniVersion,
        name: 'net-s',
        plugins: [
          { type: 'bridge', bridge: `${kw.w.bridge}m`, capabilities: caps, ipam: { type: 'static' } },
          recorderPlugin(kw, 'net-s', { capabilities: caps }),
        ],
      });
      const staticIp = `${kw.addr(3, 77)}/24`;
      const mac = '02:5a:8c:44:55:66';
      const sb = await kw.pod('pod-ipsmac', selection({ name: 'net-s', interface: 'stat0', ips: [staticIp], mac }));
      const cluster0 = clusterNet(kw, [kw.subnet(0)], [recorderPlugin(kw, 'cluster', { capabilities: caps })]);
      const conf = await kw.writeConf(multusWith(kw, cluster.multusKubeconfig, cluster0));

      await kw.add(conf, sb);
      const links = await kw.podLinks(sb);
      expect([...links.keys()].sort()).toEqual(['eth0', 'lo', 'stat0']);
      expect(v4(links.get('stat0')), 'the requested address').toEqual([staticIp]);
      expect(links.get('stat0')?.address, 'the requested MAC').toBe(mac);
      expect(v4(links.get('eth0'))).toEqual([`${kw.addr(0, 2)}/24`]);
      expect(links.get('eth0')?.address).not.toBe(mac);

      const [rec] = await recorderLines(kw, 'net-s', 'ADD');
      expect(rec?.stdin.runtimeConfig, "runtimeConfig of the NAD's plugins").toEqual({ ips: [staticIp], mac });
      expect(argPairs(rec!).filter(([k]) => k === 'IP' || k === 'MAC')).toEqual([
        ['MAC', mac],
        ['IP', staticIp],
      ]);
      const [recCluster] = await recorderLines(kw, 'cluster', 'ADD');
      expect(recCluster?.stdin.runtimeConfig ?? {}, 'the cluster network gets no selection request').toEqual({});
      expect(argPairs(recCluster!).filter(([k]) => k === 'IP' || k === 'MAC')).toEqual([]);

      const status = await networkStatus(cluster, sb.pod);
      expect(status?.[1]).toEqual(
        expect.objectContaining({ name: `${kw.ns}/net-s`, interface: 'stat0', ips: [kw.addr(3, 77)], mac }),
      );

      const check = await kw.driver('check', conf, sb);
      expect(check.code, `CHECK: ${describeRun(check)}\n${await kw.logTail()}`).toBe(0);
      const [recCheck] = await recorderLines(kw, 'net-s', 'CHECK');
      expect(
        argPairs(recCheck!).filter(([k]) => k === 'IP' || k === 'MAC'),
        'IP=/MAC= are sent on ADD only',
      ).toEqual([]);

      await kw.del(conf, sb);
      await kw.expectTornDown(sb);
    });
  });

  it('cni-args are merged into args.cni of every plugin of the NAD (bridge sets the MAC it names), on ADD and DEL', async () => {
    await withWorld(cluster, { index: next() }, async (kw) => {
      await installRecorder(kw);
      const mac = '02:5a:8c:77:88:99';
      await createNad(cluster, kw.ns, 'net-c', {
        cniVersion: kw.cniVersion,
        name: 'net-c',
        plugins: [
          { type: 'bridge', bridge: `${kw.w.bridge}c`, ipam: hostLocalRanges(kw, [kw.subnet(2)]) },
          recorderPlugin(kw, 'net-c', { args: { cni: { keep: 'yes', foo: 'old' }, other: 1 } }),
        ],
      });
      const cniArgs = { mac, foo: 'bar', n: 3, nested: { list: [1, 'two'] } };
      const sb = await kw.pod('pod-cniargs', selection({ name: 'net-c', 'cni-args': cniArgs }));
      const conf = await kw.writeConf(
        multusWith(kw, cluster.multusKubeconfig, clusterNet(kw, [kw.subnet(0)], [recorderPlugin(kw, 'cluster')])),
      );

      await kw.add(conf, sb);
      const links = await kw.podLinks(sb);
      expect(v4(links.get('net1'))).toEqual([`${kw.addr(2, 2)}/24`]);
      expect(links.get('net1')?.address, 'bridge applied args.cni.mac').toBe(mac);

      const [rec] = await recorderLines(kw, 'net-c', 'ADD');
      expect(rec?.stdin.args, "the annotation's keys win, the NAD's other keys stay").toEqual({
        cni: { keep: 'yes', ...cniArgs },
        other: 1,
      });
      const [recCluster] = await recorderLines(kw, 'cluster', 'ADD');
      expect(recCluster?.stdin.args, 'nothing reaches the cluster network').toBeUndefined();

      await kw.del(conf, sb);
      const [recDel] = await recorderLines(kw, 'net-c', 'DEL');
      expect(recDel?.stdin.args?.cni, 'DEL gets the same args.cni').toEqual({ keep: 'yes', ...cniArgs });
      await kw.expectTornDown(sb);
    });
  });

  it("bandwidth: the selection's request shapes net1, the runtime's shapes eth0 only (tbf on the host veths, one ifb each); CHECK; DEL removes them", async () => {
    await withWorld(cluster, { index: next() }, async (kw) => {
      await installRecorder(kw);
      const caps = { bandwidth: true };
      const bwPlugin = { type: 'bandwidth', capabilities: caps };
      await createNad(cluster, kw.ns, 'net-bw', {
        cniVersion: kw.cniVersion,
        name: 'net-bw',
        plugins: [
          { type: 'bridge', bridge: `${kw.w.bridge}w`, ipam: hostLocalRanges(kw, [kw.subnet(3)]) },
          bwPlugin,
          recorderPlugin(kw, 'net-bw', { capabilities: caps }),
        ],
      });
      const requested = { ingressRate: 8_000_000, ingressBurst: 80_000, egressRate: 16_000_000, egressBurst: 160_000 };
      // what containerd sends from the pod's kubernetes.io/*-bandwidth annotations
      const runtime = { ingressRate: 2_000_000, ingressBurst: 40_000, egressRate: 4_000_000, egressBurst: 40_000 };
      const sb = await kw.pod('pod-bw', selection({ name: 'net-bw', bandwidth: requested }));
      const cluster0 = clusterNet(
        kw,
        [kw.subnet(0)],
        [bwPlugin, recorderPlugin(kw, 'cluster', { capabilities: caps })],
      );
      const conf = await kw.writeConf(multusWith(kw, cluster.multusKubeconfig, cluster0, { capabilities: caps }));
      const capArgs = { bandwidth: runtime };

      const add = await driverWithCaps(kw, 'add', conf, sb, capArgs);
      expect(add.code, `ADD: ${describeRun(add)}\n${await kw.logTail()}`).toBe(0);
      await kw.notePeers(sb);
      const tbfRate = async (dev: string) =>
        (await qdiscs(kw, dev)).find((q) => q.kind === 'tbf')?.options?.rate as number | undefined;
      expect(await tbfRate(await hostPeer(kw, sb, 'net1')), "net1's ingress shaping (bytes/s): the selection's").toBe(
        requested.ingressRate / 8,
      );
      expect(await tbfRate(await hostPeer(kw, sb, 'eth0')), "eth0's ingress shaping (bytes/s): the runtime's").toBe(
        runtime.ingressRate / 8,
      );
      const ifbs = await hostLinksOfKind(kw, 'ifb');
      expect(ifbs, 'one ifb per shaped attachment').toHaveLength(2);
      const egress = await Promise.all(ifbs.map(tbfRate));
      expect(
        egress.sort((a, b) => (a ?? 0) - (b ?? 0)),
        'egress shaping on the ifbs (bytes/s)',
      ).toEqual([runtime.egressRate / 8, requested.egressRate / 8]);

      const [rec] = await recorderLines(kw, 'net-bw', 'ADD');
      expect(rec?.stdin.runtimeConfig, "the NAD's plugins get the selection's request").toEqual({
        bandwidth: requested,
      });
      const [recCluster] = await recorderLines(kw, 'cluster', 'ADD');
      expect(recCluster?.stdin.runtimeConfig, "the cluster network gets the runtime's").toEqual({ bandwidth: runtime });

      const check = await driverWithCaps(kw, 'check', conf, sb, capArgs);
      expect(check.code, `CHECK: ${describeRun(check)}\n${await kw.logTail()}`).toBe(0);

      const del = await driverWithCaps(kw, 'del', conf, sb, capArgs);
      expect(del.code, `DEL: ${describeRun(del)}\n${await kw.logTail()}`).toBe(0);
      const [recDel] = await recorderLines(kw, 'net-bw', 'DEL');
      expect(recDel?.stdin.runtimeConfig, 'DEL gets the request from the scratch cache').toEqual({
        bandwidth: requested,
      });
      expect(await hostLinksOfKind(kw, 'ifb')).toEqual([]);
      await kw.expectTornDown(sb);
    });
  });

  it("portMappings: the selection's go to net1, the runtime's to eth0 only (portmap DNAT rules in iptables); DEL removes them", async () => {
    await withWorld(cluster, { index: next() }, async (kw) => {
      await installRecorder(kw);
      const caps = { portMappings: true };
      const portmap = { type: 'portmap', capabilities: caps, snat: false };
      await createNad(cluster, kw.ns, 'net-pm', {
        cniVersion: kw.cniVersion,
        name: 'net-pm',
        // portmap 1.1.1's CHECK fails on an IPv4-only attachment (a missing IPv6 chain): the lists opt out
        disableCheck: true,
        plugins: [
          { type: 'bridge', bridge: `${kw.w.bridge}p`, ipam: hostLocalRanges(kw, [kw.subnet(4)]) },
          portmap,
          recorderPlugin(kw, 'net-pm', { capabilities: caps }),
        ],
      });
      const requested = [{ hostPort: 8080, containerPort: 80, protocol: 'tcp' }];
      const runtime = [{ hostPort: 9090, containerPort: 90, protocol: 'tcp' }];
      const sb = await kw.pod('pod-pm', selection({ name: 'net-pm', portMappings: requested }));
      const cluster0 = { ...clusterNet(kw, [kw.subnet(0)], [portmap]), disableCheck: true };
      const conf = await kw.writeConf(multusWith(kw, cluster.multusKubeconfig, cluster0, { capabilities: caps }));
      const capArgs = { portMappings: runtime };

      const add = await driverWithCaps(kw, 'add', conf, sb, capArgs);
      expect(add.code, `ADD: ${describeRun(add)}\n${await kw.logTail()}`).toBe(0);
      await kw.notePeers(sb);
      const nat = await natRules(kw);
      expect(dnatTargets(nat, 8080), "hostPort 8080 (the selection's)").toEqual([`${kw.addr(4, 2)}:80`]);
      expect(dnatTargets(nat, 9090), "hostPort 9090 (the runtime's)").toEqual([`${kw.addr(0, 2)}:90`]);
      expect(nat).toMatch(/^:CNI-DN-/m);
      const [rec] = await recorderLines(kw, 'net-pm', 'ADD');
      expect(rec?.stdin.runtimeConfig).toEqual({ portMappings: requested });

      const check = await driverWithCaps(kw, 'check', conf, sb, capArgs);
      expect(check.code, `CHECK: ${describeRun(check)}\n${await kw.logTail()}`).toBe(0);

      const del = await driverWithCaps(kw, 'del', conf, sb, capArgs);
      expect(del.code, `DEL: ${describeRun(del)}\n${await kw.logTail()}`).toBe(0);
      const [recDel] = await recorderLines(kw, 'net-pm', 'DEL');
      expect(recDel?.stdin.runtimeConfig, 'DEL gets the request from the scratch cache').toEqual({
        portMappings: requested,
      });
      const after = await natRules(kw);
      expect(dnatTargets(after, 8080)).toEqual([]);
      expect(dnatTargets(after, 9090)).toEqual([]);
      expect(after).not.toMatch(/^:CNI-DN-/m);
      await kw.expectTornDown(sb);
    });
  });

  /** The auxiliary chain "aux" in `<dir>/net.d/aux/` (tuning, recorder, a non-.conf file) and a config that uses it. */
  async function auxWorld(kw: K8sWorld): Promise<{ conf: string; sb: Sandbox }> {
    await installRecorder(kw);
    await installPassthru(kw);
    const netd = join(kw.dir, 'net.d');
    const clusterFile = await writeJson(join(netd, '10-cluster.conflist'), clusterNet(kw, [kw.subnet(0)]));
    await writeJson(join(netd, 'aux', '10-tuning.conf'), {
      type: 'tuning',
      sysctl: { 'net.ipv4.conf.eth0.arp_notify': '1', 'net.ipv4.conf.net1.arp_notify': '1' },
    });
    await writeJson(join(netd, 'aux', '20-recorder.conf'), recorderPlugin(kw, 'aux'));
    await writeJson(join(netd, 'aux', '30-ignored.json'), recorderPlugin(kw, 'ignored'));
    await createNad(cluster, kw.ns, 'net-a', kw.macvlan('net-a', 1));
    const sb = await kw.pod('pod-aux', { [NETWORKS_ANNOTATION]: 'net-a' });
    const conf = await kw.writeConf(
      kw.multusConfig(cluster.multusKubeconfig, { clusterNetwork: clusterFile, auxiliaryCNIChainName: 'aux' }),
    );
    return { conf, sb };
  }

  it("auxiliary chain: passthru (this executable) then the chain's *.conf plugins run last as net2, after every interface exists; DEL runs it too", async () => {
    await withWorld(cluster, { index: next() }, async (kw) => {
      const { conf, sb } = await auxWorld(kw);
      await kw.add(conf, sb);
      expect([...(await kw.podLinks(sb)).keys()].sort(), 'the chain adds no interface').toEqual(['eth0', 'lo', 'net1']);
      expect(await readSysctl(sb.netns, 'net.ipv4.conf.eth0.arp_notify'), 'tuning ran in the pod').toBe('1');
      expect(await readSysctl(sb.netns, 'net.ipv4.conf.net1.arp_notify'), 'after net1 existed').toBe('1');
      const [rec] = await recorderLines(kw, 'aux', 'ADD');
      expect(rec?.env.CNI_IFNAME).toBe('net2');
      expect(rec?.stdin.name).toBe('aux');
      expect(rec?.stdin.cniVersion).toBe(kw.cniVersion);
      expect(rec?.stdin.prevResult?.interfaces ?? [], "passthru's empty result, passed on by tuning").toEqual([]);
      expect(rec?.stdin.prevResult?.ips ?? []).toEqual([]);
      expect(await recorderLines(kw, 'ignored'), 'only *.conf files join the chain').toEqual([]);
      expect(
        (await networkStatus(cluster, sb.pod))?.map((e) => e.interface),
        'the chain has no network-status entry',
      ).toEqual(['eth0', 'net1']);
      expect(await kw.cacheFiles(sb)).toContain(`cniDir/results/aux-${sb.containerId}-net2`);

      await kw.del(conf, sb);
      expect(
        (await recorderLines(kw, 'aux', 'DEL')).map((l) => l.env.CNI_IFNAME),
        'DEL runs the chain too',
      ).toEqual(['net2']);
      await kw.expectTornDown(sb);
    });
  });

  // CHECK must skip the auxiliary chain: tuning's CHECK looks up CNI_IFNAME "net2", which no plugin of the
  // chain creates ('Cannot find container link net2' before the fix).
  it('auxiliary chain: CHECK right after ADD passes', async () => {
    await withWorld(cluster, { index: next() }, async (kw) => {
      const { conf, sb } = await auxWorld(kw);
      await kw.add(conf, sb);
      const check = await kw.driver('check', conf, sb);
      expect(check.code, `CHECK: ${describeRun(check)}`).toBe(0);
    });
  });

  it('strictCapabilities: a request no plugin declares fails the ADD before anything runs; without it the request is ignored with a warning', async () => {
    await withWorld(cluster, { index: next() }, async (kw) => {
      await createNad(cluster, kw.ns, 'net-a', kw.bridge('net-a', 1, 'a'));
      const bandwidth = { ingressRate: 8_000_000, ingressBurst: 80_000, egressRate: 8_000_000, egressBurst: 80_000 };
      const sb = await kw.pod('pod-strict', selection({ name: 'net-a', bandwidth }));

      const strict = await kw.writeConf(
        kw.multusConfig(cluster.multusKubeconfig, { strictCapabilities: true }),
        '00-strict.conf',
      );
      const r = await kw.driver('add', strict, sb);
      expect(r.code, describeRun(r)).toBe(1);
      expect(r.json?.code).toBe(7);
      const msg = String(r.json?.error);
      expect(msg).toContain(`${kw.ns}/net-a`);
      expect(msg).toContain('bandwidth');
      await kw.expectNothingAttached(sb);

      const lax = await kw.writeConf(kw.multusConfig(cluster.multusKubeconfig));
      await kw.add(lax, sb);
      expect(v4((await kw.podLinks(sb)).get('net1'))).toEqual([`${kw.addr(1, 2)}/24`]);
      expect(await hostLinksOfKind(kw, 'ifb'), 'nothing shaped').toEqual([]);
      expect(await kw.logTail(200)).toMatch(
        /requests bandwidth but no plugin of network "net-a" declares that capability; the request is ignored/,
      );
      await kw.del(lax, sb);
      await kw.expectTornDown(sb);
    });
  });

  describe('a bad selection element attaches nothing', () => {
    const cases: {
      what: string;
      element: (kw: K8sWorld) => Record<string, unknown>[];
      mentions: (kw: K8sWorld) => string[];
      podInMessage?: boolean;
    }[] = [
      {
        what: 'a malformed mac',
        element: () => [{ name: 'net-a', mac: '02:5a:8c:44:55' }],
        mentions: () => ['02:5a:8c:44:55'],
      },
      {
        what: 'a malformed ips entry',
        element: () => [{ name: 'net-a', ips: ['10.1.2.300/24'] }],
        mentions: () => ['10.1.2.300/24'],
      },
      {
        what: 'a malformed infiniband-guid',
        element: () => [{ name: 'net-a', 'infiniband-guid': 'zz:zz' }],
        mentions: () => ['zz:zz'],
      },
      {
        what: 'a malformed default-route gateway',
        element: () => [{ name: 'net-a', 'default-route': ['10.1.2'] }],
        mentions: () => ['10.1.2'],
      },
      {
        what: 'two elements with an IPv4 default-route each (ECMP)',
        element: (kw) => [
          { name: 'net-a', 'default-route': [kw.addr(1, 1)] },
          { name: 'net-b', 'default-route': [kw.addr(2, 1)] },
        ],
        mentions: (kw) => ['default-route', kw.addr(1, 1), kw.addr(2, 1)],
      },
      {
        what: 'two elements with default-route, one IPv4 and one IPv6',
        element: (kw) => [
          { name: 'net-a', 'default-route': [kw.addr(1, 1)] },
          { name: 'net-b', 'default-route': ['fd00::1'] },
        ],
        mentions: () => ['default-route'],
      },
      {
        what: 'cni-args that is not an object',
        element: () => [{ name: 'net-a', 'cni-args': 'mac=02:00:00:00:00:01' }],
        mentions: () => ['cni-args'],
      },
      {
        what: 'cni-args for a NAD whose args.cni is not an object',
        element: () => [{ name: 'net-a' }, { name: 'net-x', 'cni-args': { foo: 'bar' } }],
        mentions: () => ['"net-x"', '"args.cni"', 'not an object'],
      },
    ];
    it.each(cases)('$what', async ({ element, mentions }) => {
      await withWorld(cluster, { index: next() }, async (kw) => {
        await createNad(cluster, kw.ns, 'net-a', gwBridge(kw, 'net-a', 'a', [kw.subnet(1)]));
        await createNad(cluster, kw.ns, 'net-b', gwBridge(kw, 'net-b', 'b', [kw.subnet(2)]));
        await createNad(cluster, kw.ns, 'net-x', {
          ...gwBridge(kw, 'net-x', 'x', [kw.subnet(3)]),
          args: { cni: 'not-an-object' },
        });
        const sb = await kw.pod('pod-bad', selection(...element(kw)));
        const conf = await kw.writeConf(kw.multusConfig(cluster.multusKubeconfig));
        const r = await kw.driver('add', conf, sb);
        expect(r.code, describeRun(r)).toBe(1);
        expect(r.json?.code).toBe(7);
        const msg = String(r.json?.error);
        expect(msg).toContain(`${kw.ns}/pod-bad`);
        for (const m of mentions(kw)) expect(msg).toContain(m);
        await kw.expectNothingAttached(sb);
        expect(
          await readLinks(kw.w.hostNs).then((l) => l.filter((x) => x.linkinfo?.info_kind === 'bridge')),
          'no bridge was created',
        ).toEqual([]);
      });
    });
  });
});
