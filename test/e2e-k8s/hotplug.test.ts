/**
 * Hot-plug end to end (docs/hotplug.md): a real kube-apiserver, `build/multus daemon` in the test's host
 * namespace, pods created through the shim (libcni -> build/multus-shim -> the daemon; bridge cluster network),
 * then macvlan NADs (on the world's veth end) plugged into and out of the running sandboxes through
 * `multus hotplug` (the CLI) or a raw `POST /delegate`:
 * - add: the interface and its IP appear, network-status has 2 entries, the scratch cache 2 attachments,
 *   an AddedInterface event; CHECK passes;
 * - static IP and MAC; unplug (interface gone, IP released, status and caches back to 1, RemovedInterface);
 * - hot-plug then the runtime's DEL only: nothing left;
 * - a name clash and a UID mismatch are refused with nothing changed;
 * - 10 concurrent hot-plugs into one pod and into 10 pods;
 * - the body Multus' dynamic networks controller sends (CreateDelegateRequest) is accepted.
 */
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Cluster, k8sRequirements, podPath, startCluster } from '../k8s/cluster.ts';
import { fileExists, needs } from '../helpers/skip.ts';
import { MULTUS_BIN, REPO_ROOT, describeRun, e2eRequirements, reservedIps, run, withSbin } from '../e2e/helpers.ts';
import { http } from '../helpers/daemon.ts';
import { summarize, timesToReach } from '../helpers/latency.ts';
import { reportName } from '../../src/hotplug/dynamic-plan.ts';
import {
  NETWORKS_ANNOTATION,
  type K8sWorld,
  type Sandbox,
  createNad,
  networkStatus,
  podEvents,
  v4,
  withWorld,
} from './world.ts';

const SHIM = process.env.MULTUS_TS_SHIM ?? join(REPO_ROOT, 'build/multus-shim');
const ready = needs(
  ...e2eRequirements(),
  ...k8sRequirements(),
  fileExists(SHIM, 'the native shim build/multus-shim (npm run build with Go)'),
);

interface Daemon {
  child: ChildProcess;
  log(): string;
  stop(): Promise<void>;
}

const socketDir = (kw: K8sWorld) => join(kw.dir, 'run');
/** The node the daemon serves (MULTUS_NODE_NAME): its pod informer follows the pods bound to it. */
const NODE = 'mts-hotplug-node';

/** The daemon in the world's host namespace, serving `conf` (type multus-shim) as its multus config. */
async function startDaemon(kw: K8sWorld, conf: string, extra: Record<string, unknown> = {}): Promise<Daemon> {
  const file = join(kw.dir, 'daemon-config.json');
  writeFileSync(
    file,
    JSON.stringify({
      socketDir: socketDir(kw),
      cniConfigDir: join(kw.dir, 'net.d'),
      multusConfigFile: conf,
      logLevel: 'verbose',
      logToStderr: true,
      ...extra,
    }),
  );
  const child = spawn('ip', ['netns', 'exec', kw.w.hostNs, MULTUS_BIN, 'daemon', '--config', file], {
    env: { PATH: withSbin(process.env.PATH), MULTUS_NODE_NAME: NODE },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  child.stderr!.on('data', (d: Buffer) => (log += d.toString()));
  const exited = new Promise<void>((r) => child.on('exit', () => r()));
  const sock = join(socketDir(kw), 'multus.sock');
  for (let i = 0; i < 1000 && !existsSync(sock) && child.exitCode === null; i++)
    await new Promise((r) => setTimeout(r, 10));
  if (!existsSync(sock)) throw new Error(`the daemon did not start: ${log}`);
  return {
    child,
    log: () => log,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/** A world with the shim installed, a served multus-shim config, a running daemon and a macvlan NAD `mv`. */
async function hotplugWorld(
  kw: K8sWorld,
  cluster: Cluster,
  extra: Record<string, unknown> = {},
): Promise<{ conf: string; daemon: Daemon }> {
  copyFileSync(SHIM, join(kw.w.binDir, 'multus-shim'));
  chmodSync(join(kw.w.binDir, 'multus-shim'), 0o755);
  const conf = await kw.writeConf(
    kw.multusConfig(cluster.multusKubeconfig, { type: 'multus-shim', daemonSocketDir: socketDir(kw) }),
  );
  await createNad(cluster, kw.ns, 'mv', kw.macvlan('', 1));
  return { conf, daemon: await startDaemon(kw, conf, extra) };
}

/** `multus hotplug ...` with this world's socket and cniDir. */
async function hotplug(kw: K8sWorld, verb: string, sb: Sandbox, network: string, ...extra: string[]) {
  const r = await run(
    MULTUS_BIN,
    [
      'hotplug',
      verb,
      '--pod',
      `${sb.pod.namespace}/${sb.pod.name}`,
      '--network',
      network,
      '--socket-dir',
      socketDir(kw),
      '--cni-dir',
      kw.w.cniDir,
      ...extra,
    ],
    { env: { PATH: withSbin(process.env.PATH) } },
  );
  return { ...r, json: () => JSON.parse(r.stdout) as Record<string, unknown> };
}

async function hotplugOk(kw: K8sWorld, verb: string, sb: Sandbox, network: string, ...extra: string[]) {
  const r = await hotplug(kw, verb, sb, network, ...extra);
  expect(r.code, `multus hotplug ${verb} ${network}: ${describeRun(r)}\n${await kw.logTail()}`).toBe(0);
  return r;
}

/** The container's scratch cache: the attachments' names and interface requests. */
function scratch(kw: K8sWorld, sb: Sandbox): { Name: string; ifnameRequest?: string }[] {
  const path = join(kw.w.cniDir, sb.containerId);
  return existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as { Name: string }[]) : [];
}

interface PodObject {
  metadata: { name: string; annotations?: Record<string, string> };
}
const statusOf = (o: PodObject): { interface?: string }[] =>
  JSON.parse(o.metadata.annotations?.['k8s.v1.cni.cncf.io/network-status'] ?? '[]');

const ifaces = async (kw: K8sWorld, sb: Sandbox) => [...(await kw.podLinks(sb)).keys()].sort();

/** A `/delegate` body as Multus' CreateDelegateRequest builds it (pkg/server/api). */
function delegateBody(
  command: string,
  sb: Sandbox,
  ifName: string,
  config: unknown,
  attrs: Record<string, unknown> = {},
  uid = sb.pod.uid,
) {
  return JSON.stringify({
    env: {
      CNI_COMMAND: command,
      CNI_CONTAINERID: sb.containerId,
      CNI_NETNS: `/var/run/netns/${sb.netns}`,
      CNI_IFNAME: ifName,
      CNI_ARGS: `K8S_POD_NAMESPACE=${sb.pod.namespace};K8S_POD_NAME=${sb.pod.name};K8S_POD_UID=${uid}`,
    },
    config: Buffer.from(JSON.stringify(config)).toString('base64'),
    interfaceAttributes: { 'cni-args': null, ...attrs },
  });
}

describe.skipIf(!ready)('hot-plug through the daemon with a real kube-apiserver', () => {
  let cluster: Cluster;
  let index = 60;
  const next = () => ++index;

  beforeAll(async () => {
    cluster = await startCluster();
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  it('adds a macvlan NAD as net1, checks it, removes it', async () => {
    await withWorld(cluster, { index: next() }, async (kw) => {
      const { conf, daemon } = await hotplugWorld(kw, cluster);
      try {
        const sb = await kw.pod('p');
        await kw.add(conf, sb);
        expect(daemon.log()).toContain(`ADD ${sb.containerId}: 200`);
        const before = await reservedIps(kw.w.ipamDir);

        const add = await hotplugOk(kw, 'add', sb, 'mv@net1');
        expect(add.json()).toMatchObject({
          cniVersion: '1.0.0',
          ips: [{ address: expect.stringMatching(/^10\.241\./) }],
        });
        expect(await ifaces(kw, sb)).toEqual(['eth0', 'lo', 'net1']);
        expect(v4((await kw.podLinks(sb)).get('net1'))).toEqual([
          (add.json().ips as { address: string }[])[0]!.address,
        ]);
        const status = (await networkStatus(cluster, sb.pod))!;
        expect(status.map((s) => [s.name, s.interface])).toEqual([
          ['mts-cluster', 'eth0'],
          [`${kw.ns}/mv`, 'net1'],
        ]);
        expect(scratch(kw, sb).map((d) => d.Name)).toEqual(['mts-cluster', `${kw.ns}/mv`]);
        expect(await kw.cacheFiles(sb)).toContain(`cniDir/results/mv-${sb.containerId}-net1`);
        expect((await podEvents(cluster, sb.pod, 'AddedInterface')).map((e) => e.message)).toContainEqual(
          expect.stringMatching(new RegExp(`^Add net1 \\[10\\.241\\..*\\] from ${kw.ns}/mv$`)),
        );
        await hotplugOk(kw, 'check', sb, 'mv');
        // the runtime's CHECK of the pod checks the hot-plugged attachment too
        const check = await kw.driver('check', conf, sb);
        expect(check.code, describeRun(check)).toBe(0);

        await hotplugOk(kw, 'del', sb, 'mv');
        expect(await ifaces(kw, sb)).toEqual(['eth0', 'lo']);
        expect(await reservedIps(kw.w.ipamDir)).toEqual(before);
        expect((await networkStatus(cluster, sb.pod))!.map((s) => s.interface)).toEqual(['eth0']);
        expect(scratch(kw, sb).map((d) => d.Name)).toEqual(['mts-cluster']);
        expect((await kw.cacheFiles(sb)).filter((f) => f.includes('-net1'))).toEqual([]);
        expect((await podEvents(cluster, sb.pod, 'RemovedInterface')).map((e) => e.message)).toEqual([
          `Removed net1 from ${kw.ns}/mv`,
        ]);

        await kw.del(conf, sb);
        await kw.expectTornDown(sb);
      } finally {
        await daemon.stop();
      }
    });
  });

  it('a static IP and MAC reach the hot-plugged interface', async () => {
    await withWorld(cluster, { index: next() }, async (kw) => {
      const { conf, daemon } = await hotplugWorld(kw, cluster);
      try {
        await createNad(cluster, kw.ns, 'mvs', { ...kw.staticMacvlan('mvs'), capabilities: { ips: true, mac: true } });
        const sb = await kw.pod('p');
        await kw.add(conf, sb);
        const ipAddr = `${kw.addr(3, 77)}/24`;
        await hotplugOk(kw, 'add', sb, 'mvs@net5', '--ip', ipAddr, '--mac', '02:11:22:33:44:55');
        const link = (await kw.podLinks(sb)).get('net5');
        expect(v4(link)).toEqual([ipAddr]);
        expect(link?.address).toBe('02:11:22:33:44:55');
        const entry = (await networkStatus(cluster, sb.pod))!.find((s) => s.interface === 'net5');
        expect(entry).toMatchObject({ name: `${kw.ns}/mvs`, ips: [kw.addr(3, 77)], mac: '02:11:22:33:44:55' });
        await kw.del(conf, sb);
        await kw.expectTornDown(sb);
      } finally {
        await daemon.stop();
      }
    });
  });

  it("hot-plug, then only the runtime's DEL of the pod: nothing is left", async () => {
    await withWorld(cluster, { index: next() }, async (kw) => {
      const { conf, daemon } = await hotplugWorld(kw, cluster);
      try {
        const sb = await kw.pod('p');
        await kw.add(conf, sb);
        await hotplugOk(kw, 'add', sb, 'mv');
        await hotplugOk(kw, 'add', sb, 'mv');
        expect(await ifaces(kw, sb)).toEqual(['eth0', 'lo', 'net1', 'net2']);
        expect(await reservedIps(kw.w.ipamDir)).toHaveLength(3);
        await kw.del(conf, sb);
        await kw.expectTornDown(sb); // no interface, no reserved IP, no cache
      } finally {
        await daemon.stop();
      }
    });
  });

  it('a name clash and a UID mismatch are refused with nothing changed', async () => {
    await withWorld(cluster, { index: next() }, async (kw) => {
      const { conf, daemon } = await hotplugWorld(kw, cluster);
      try {
        const sb = await kw.pod('p');
        await kw.add(conf, sb);
        await hotplugOk(kw, 'add', sb, 'mv@net1');
        const snapshot = async () => ({
          links: await ifaces(kw, sb),
          ips: await reservedIps(kw.w.ipamDir),
          caches: (await kw.cacheFiles(sb)).sort(),
          scratch: scratch(kw, sb),
          status: await networkStatus(cluster, sb.pod),
        });
        const before = await snapshot();

        // net1 and eth0 are attachments; lo is a link of the sandbox that is no attachment
        for (const taken of ['net1', 'eth0', 'lo']) {
          const clash = await hotplug(kw, 'add', sb, `mv@${taken}`);
          expect(clash.code, describeRun(clash)).toBe(1);
          expect(clash.json()).toMatchObject({ code: 7, msg: expect.stringContaining(`interface "${taken}"`) });
        }
        const sock = join(socketDir(kw), 'multus.sock');
        const uid = await http(sock, '/delegate', {
          body: delegateBody('ADD', sb, 'net7', kw.macvlan('mv', 1), {}, 'wrong-uid'),
        });
        expect(uid.status).toBe(400);
        expect(uid.json()).toMatchObject({ code: 7, msg: expect.stringContaining('UID') });
        const missing = await hotplug(kw, 'add', sb, 'nosuchnad@net8');
        expect(missing.json()).toMatchObject({
          code: 7,
          msg: expect.stringContaining('cannot find a network-attachment-definition (nosuchnad)'),
        });
        expect(await snapshot()).toEqual(before);
      } finally {
        await daemon.stop();
      }
    });
  });

  it('10 concurrent hot-plugs into one pod, and into 10 pods', async () => {
    await withWorld(cluster, { index: next() }, async (kw) => {
      const { conf, daemon } = await hotplugWorld(kw, cluster);
      try {
        const one = await kw.pod('p');
        await kw.add(conf, one);
        const names = Array.from({ length: 10 }, (_, i) => `net${i + 1}`);
        await Promise.all(names.map((n) => hotplugOk(kw, 'add', one, `mv@${n}`)));
        expect(await ifaces(kw, one)).toEqual(['eth0', 'lo', ...names].sort());
        expect(scratch(kw, one)).toHaveLength(11);
        expect((await networkStatus(cluster, one.pod))!.map((s) => s.interface).sort()).toEqual(
          ['eth0', ...names].sort(),
        );

        const pods: Sandbox[] = [];
        for (let i = 0; i < 10; i++) {
          const sb = await kw.pod(`q${i}`);
          await kw.add(conf, sb);
          pods.push(sb);
        }
        await Promise.all(pods.map((sb) => hotplugOk(kw, 'add', sb, 'mv@net1')));
        for (const sb of pods) {
          expect(await ifaces(kw, sb)).toEqual(['eth0', 'lo', 'net1']);
          expect((await networkStatus(cluster, sb.pod))!).toHaveLength(2);
          expect(scratch(kw, sb)).toHaveLength(2);
        }
        expect(await reservedIps(kw.w.ipamDir)).toHaveLength(11 + 20);
        for (const sb of [one, ...pods]) await kw.del(conf, sb);
        expect(await reservedIps(kw.w.ipamDir)).toEqual([]);
      } finally {
        await daemon.stop();
      }
    });
  });

  it("accepts the body of Multus' dynamic networks controller (CreateDelegateRequest)", async () => {
    await withWorld(cluster, { index: next() }, async (kw) => {
      const { conf, daemon } = await hotplugWorld(kw, cluster);
      try {
        const sb = await kw.pod('p');
        await kw.add(conf, sb);
        const sock = join(socketDir(kw), 'multus.sock');
        const nad = kw.macvlan('mv', 1);
        const add = await http(sock, '/delegate', { body: delegateBody('ADD', sb, 'net1', nad) });
        expect(add.status, add.body).toBe(200);
        expect(add.json()).toMatchObject({ Result: { cniVersion: '1.0.0', interfaces: [{ name: 'net1' }] } });
        expect(await ifaces(kw, sb)).toEqual(['eth0', 'lo', 'net1']);
        expect(scratch(kw, sb)).toHaveLength(2);
        const del = await http(sock, '/delegate', { body: delegateBody('DEL', sb, 'net1', nad) });
        expect(del.status, del.body).toBe(200);
        expect(await ifaces(kw, sb)).toEqual(['eth0', 'lo']);
        expect(scratch(kw, sb)).toHaveLength(1);
        await kw.del(conf, sb);
        await kw.expectTornDown(sb);
      } finally {
        await daemon.stop();
      }
    });
  });

  /**
   * A body exactly as multus-dynamic-networks-controller v0.3.7 marshals it (its pkg/controller/pod.go through
   * Multus' CreateDelegateRequest): `interfaceAttributes` omitted unless the element has ips, mac or cni-args,
   * each omitted when empty; the config is the NAD's config with its defaults (name); the same attributes on DEL.
   */
  function controllerBody(command: string, sb: Sandbox, ifName: string, config: unknown, ips?: string[], mac?: string) {
    const attrs = { ...(ips?.length ? { ips } : {}), ...(mac ? { mac } : {}) };
    return JSON.stringify({
      env: {
        CNI_COMMAND: command,
        CNI_CONTAINERID: sb.containerId,
        CNI_NETNS: `/var/run/netns/${sb.netns}`,
        CNI_IFNAME: ifName,
        CNI_ARGS: `K8S_POD_NAMESPACE=${sb.pod.namespace};K8S_POD_NAME=${sb.pod.name};K8S_POD_UID=${sb.pod.uid}`,
      },
      config: Buffer.from(JSON.stringify(config)).toString('base64'),
      ...(Object.keys(attrs).length ? { interfaceAttributes: attrs } : {}),
    });
  }

  it("replays the requests of multus-dynamic-networks-controller v0.3.7's e2e specs against /delegate", async () => {
    await withWorld(cluster, { index: next() }, async (kw) => {
      const { conf, daemon } = await hotplugWorld(kw, cluster);
      try {
        const sock = join(socketDir(kw), 'multus.sock');
        const send = async (body: string) => {
          const r = await http(sock, '/delegate', { body });
          expect(r.status, r.body).toBe(200);
          return r.json();
        };
        const mv = kw.macvlan('mv', 1);
        const tenant = kw.macvlan('tenant', 2);
        const ipam = { ...kw.staticMacvlan('tenant-ipam'), capabilities: { ips: true, mac: true } };
        await createNad(cluster, kw.ns, 'tenant', tenant);
        await createNad(cluster, kw.ns, 'tenant-ipam', ipam);
        const status = async (sb: Sandbox) =>
          ((await networkStatus(cluster, sb.pod)) ?? []).map((e) => `${e.interface} ${e.name}`).sort();

        // a provisioned pod with one network selection element (net1)
        const sb = await kw.pod('tiny-winy-pod', { [NETWORKS_ANNOTATION]: 'mv@net1' });
        await kw.add(conf, sb);
        // "manages to add a new interface to a running pod": ADD ens58, no attributes
        expect(await send(controllerBody('ADD', sb, 'ens58', tenant))).toMatchObject({
          Result: { interfaces: [{ name: 'ens58' }] },
        });
        // "manages to remove an interface from a running pod": DEL net1 with the NAD's config
        await send(controllerBody('DEL', sb, 'net1', mv));
        expect(await ifaces(kw, sb)).toEqual(['ens58', 'eth0', 'lo']);
        // "interfaces can be added / removed in the same operation": the controller adds, then removes
        await send(controllerBody('ADD', sb, 'net2', mv));
        await send(controllerBody('DEL', sb, 'ens58', tenant));
        expect(await ifaces(kw, sb)).toEqual(['eth0', 'lo', 'net2']);
        // "a network with IPAM ... can be hotplugged", "... hot unplugged": ips and mac, on ADD and on DEL
        const ip = `${kw.addr(3, 111)}/24`;
        const mac = '02:10:10:10:01:11';
        await send(controllerBody('ADD', sb, 'ens202', ipam, [ip], mac));
        const link = (await kw.podLinks(sb)).get('ens202');
        expect([v4(link), link?.address]).toEqual([[ip], mac]);
        // with `config` (the controller's form) an entry is named by the config's network name (docs/hotplug.md)
        expect(await status(sb)).toEqual(['ens202 tenant-ipam', 'eth0 mts-cluster', 'net2 mv']);
        await send(controllerBody('DEL', sb, 'ens202', ipam, [ip], mac));
        expect(await ifaces(kw, sb)).toEqual(['eth0', 'lo', 'net2']);
        expect(scratch(kw, sb).map((d) => d.Name)).toEqual(['mts-cluster', 'mv']);
        expect(await status(sb)).toEqual(['eth0 mts-cluster', 'net2 mv']);

        // "a provisioned pod featuring *only* the cluster's default network": ADD ens58 with a MAC
        const only = await kw.pod('default-only');
        await kw.add(conf, only);
        await send(controllerBody('ADD', only, 'ens58', tenant, [], '02:10:10:10:00:58'));
        expect((await kw.podLinks(only)).get('ens58')?.address).toBe('02:10:10:10:00:58');
        // (the 7th spec, elements without interface names, makes the controller send nothing)

        // the runtime's DEL of each pod removes what was hot-plugged into it, and nothing is left
        for (const x of [sb, only]) await kw.del(conf, x);
        await kw.expectTornDown(sb, { last: false });
        await kw.expectTornDown(only);
      } finally {
        await daemon.stop();
      }
    });
  });

  it('multus plan prints what an ADD would do and every error it would hit, writing nothing', async () => {
    await withWorld(cluster, { index: next() }, async (kw) => {
      const conf = await kw.writeConf(kw.multusConfig(cluster.multusKubeconfig, { namespaceIsolation: true }));
      await createNad(cluster, kw.ns, 'mv', kw.macvlan('', 1));
      await createNad(cluster, kw.otherNs, 'far', kw.macvlan('', 2));
      const plan = (sb: Sandbox, ...extra: string[]) =>
        run(MULTUS_BIN, ['plan', '--pod', `${sb.pod.namespace}/${sb.pod.name}`, '--conf', conf, ...extra], {
          env: { PATH: withSbin(process.env.PATH) },
        });
      const good = await kw.pod('good', {
        [NETWORKS_ANNOTATION]: JSON.stringify([{ name: 'mv', ips: ['10.9.9.9/24'] }]),
      });
      const ok = await plan(good, '--output', 'json');
      expect(ok.code, describeRun(ok)).toBe(0);
      const x = JSON.parse(ok.stdout);
      expect(x.errors).toEqual([]);
      expect(x.attachments.map((a: any) => [a.ifName, a.displayName, a.plugins.map((p: any) => p.type)])).toEqual([
        ['eth0', 'mts-cluster', ['bridge']],
        ['net1', `${kw.ns}/mv`, ['macvlan']],
      ]);
      expect(x.attachments[1].cniArgs).toBe(
        `IgnoreUnknown=true;K8S_POD_NAMESPACE=${kw.ns};K8S_POD_NAME=good;K8S_POD_INFRA_CONTAINER_ID=<container ID>;` +
          `K8S_POD_UID=${good.pod.uid};IP=10.9.9.9/24`,
      );
      const text = await plan(good);
      expect(text.stdout).toContain(`2. net1: ${kw.ns}/mv, network "mv", plugins macvlan`);

      const bad = await kw.pod('bad', { [NETWORKS_ANNOTATION]: `mv@net1,missing,${kw.otherNs}/far,mv@net1` });
      const failed = await plan(bad, '--output', 'json');
      expect(failed.code, describeRun(failed)).toBe(1);
      const msgs = JSON.parse(failed.stdout).errors.map((e: any) => e.msg);
      expect(msgs).toEqual([
        'cannot find a network-attachment-definition (missing) in namespace (' + kw.ns + ')',
        expect.stringContaining(
          `namespace isolation enabled, annotation violates permission, pod is in namespace ${kw.ns}`,
        ),
        expect.stringContaining('interface name "net1" is requested by both'),
      ]);
      // nothing was attached or written
      for (const sb of [good, bad]) {
        expect(await ifaces(kw, sb)).toEqual(['lo']);
        expect(await networkStatus(cluster, sb.pod)).toBeUndefined();
        expect(await kw.cacheFiles(sb)).toEqual([]);
        expect(await podEvents(cluster, sb.pod)).toEqual([]);
      }
    });
  });

  describe('dynamicNetworks: the daemon follows the networks annotation', () => {
    // The daemon's informers (its kubeconfig is the multus config's) drive it; the resync is an hour away, so
    // only the pod informer's updates can make these changes within the tests' waits.
    const dynamic = () => ({
      dynamicNetworks: true,
      dynamicNetworksPollSeconds: 3600,
      kubeconfig: cluster.multusKubeconfig,
    });
    /** Binds the pod to the daemon's node (as the scheduler would): its pod informer then sees it. */
    const bind = (sb: Sandbox) =>
      cluster.admin.post(`${podPath(sb.pod.namespace, sb.pod.name)}/binding`, {
        apiVersion: 'v1',
        kind: 'Binding',
        metadata: { name: sb.pod.name, namespace: sb.pod.namespace },
        target: { apiVersion: 'v1', kind: 'Node', name: NODE },
      });

    /** Polls `probe` until it returns true (bounded: 30 s), then returns; the failure message says what. */
    async function until(what: string, probe: () => Promise<boolean>): Promise<void> {
      const deadline = Date.now() + 30_000;
      while (!(await probe())) {
        if (Date.now() > deadline) throw new Error(`not within 30 s: ${what}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    const annotate = (sb: Sandbox, value: string) =>
      cluster.admin.patch(podPath(sb.pod.namespace, sb.pod.name), {
        metadata: { annotations: { [NETWORKS_ANNOTATION]: value } },
      });
    /** Interface name -> ifindex in the sandbox (a re-done attachment gets a new index). */
    const indexes = async (kw: K8sWorld, sb: Sandbox) =>
      Object.fromEntries(
        [...(await kw.podLinks(sb)).entries()].map(([n, l]) => [n, (l as { ifindex?: number }).ifindex]),
      );
    const statusIfaces = async (sb: Sandbox) =>
      ((await networkStatus(cluster, sb.pod)) ?? []).map((s) => s.interface).sort();

    it('adds, removes, ignores a reorder, reports a bad element once, and survives a restart', async () => {
      await withWorld(cluster, { index: next() }, async (kw) => {
        const started = await hotplugWorld(kw, cluster, dynamic());
        const conf = started.conf;
        let daemon = started.daemon;
        try {
          await createNad(cluster, kw.ns, 'mv2', kw.macvlan('', 2));
          const sb = await kw.pod('p', { [NETWORKS_ANNOTATION]: 'mv@net1' });
          await bind(sb);
          await kw.add(conf, sb);
          expect(await ifaces(kw, sb)).toEqual(['eth0', 'lo', 'net1']);

          // add
          await annotate(sb, 'mv@net1,mv2@net2');
          await until(
            'net2 plugged',
            async () => (await ifaces(kw, sb)).includes('net2') && (await statusIfaces(sb)).includes('net2'),
          );
          expect(await statusIfaces(sb)).toEqual(['eth0', 'net1', 'net2']);
          expect(scratch(kw, sb).map((d) => d.Name)).toEqual(['mts-cluster', `${kw.ns}/mv`, `${kw.ns}/mv2`]);
          expect(v4((await kw.podLinks(sb)).get('net2'))[0]).toMatch(/^10\.242\./);
          const before = await indexes(kw, sb);

          // reorder (nothing to do), then a bad element next to a good one: the good one is plugged,
          // the bad one reported once
          await annotate(sb, 'mv2@net2,mv@net1');
          const withBad = 'mv2@net2,mv@net1,nosuch@net5,mv@net6';
          await annotate(sb, withBad);
          await until('net6 plugged', async () => (await ifaces(kw, sb)).includes('net6'));
          await until(
            'NetworkChangeFailed reported',
            async () => (await podEvents(cluster, sb.pod, 'NetworkChangeFailed')).length > 0,
          );
          const after = await indexes(kw, sb);
          expect({ net1: after.net1, net2: after.net2 }).toEqual({ net1: before.net1, net2: before.net2 });
          expect(await ifaces(kw, sb)).toEqual(['eth0', 'lo', 'net1', 'net2', 'net6']);

          // remove (net1), across a restart of the daemon: nothing redone or undone by the restart itself, and what
          // was reported not reported again (docs/hotplug.md "Failures")
          await daemon.stop();
          const beforeRestart = await indexes(kw, sb);
          daemon = await startDaemon(kw, conf, dynamic());
          // the restarted daemon meets the value it was stopped at (its start-up pass) before the next edit
          await until('the restarted daemon met nosuch@net5', async () =>
            daemon.log().includes('not retried for this'),
          );
          await annotate(sb, 'mv2@net2,nosuch@net5,mv@net6');
          await until(
            'net1 unplugged',
            async () => !(await ifaces(kw, sb)).includes('net1') && !(await statusIfaces(sb)).includes('net1'),
          );
          const now = await indexes(kw, sb);
          expect({ net2: now.net2, net6: now.net6 }).toEqual({ net2: beforeRestart.net2, net6: beforeRestart.net6 });
          expect(await statusIfaces(sb)).toEqual(['eth0', 'net2', 'net6']);
          expect(scratch(kw, sb)).toHaveLength(3);
          // events are posted after the work, in the background (informers/informers.ts createEvent): wait for them
          const removed = async () => (await podEvents(cluster, sb.pod, 'RemovedInterface')).map((e) => e.message);
          await until('RemovedInterface posted', async () => (await removed()).length > 0);
          expect(await removed()).toEqual([`Removed net1 from ${kw.ns}/mv`]);
          // once per annotation value, each under its own name (docs/hotplug.md "Failures"): the value the
          // restarted daemon met again was reported by the first daemon only (the second create is refused)
          const reported = [withBad, 'mv2@net2,nosuch@net5,mv@net6']
            .map((value) => reportName(sb.pod, value, `add ${kw.ns}/nosuch@net5`))
            .sort();
          const failures = () => podEvents(cluster, sb.pod, 'NetworkChangeFailed');
          // (or more reports than values: then the assertion below says which)
          await until('both values reported', async () => {
            const names = (await failures()).map((e) => e.metadata.name);
            return names.length > reported.length || reported.every((n) => names.includes(n));
          });
          const all = await failures();
          expect(all.map((e) => e.metadata.name).sort()).toEqual(reported);
          expect(all.every((e) => e.type === 'Warning' && e.message.includes('nosuch') && e.count === 1)).toBe(true);

          await kw.del(conf, sb);
          await kw.expectTornDown(sb);
        } finally {
          await daemon.stop();
        }
      });
    });

    it('10 pods edited at once: each plugged, then unplugged, from the informer (latency printed)', async () => {
      await withWorld(cluster, { index: next() }, async (kw) => {
        const { conf, daemon } = await hotplugWorld(kw, cluster, dynamic());
        try {
          const pods: Sandbox[] = [];
          for (let i = 0; i < 10; i++) {
            const sb = await kw.pod(`d${i}`);
            await bind(sb);
            await kw.add(conf, sb);
            pods.push(sb);
          }
          const list = async () =>
            ((await cluster.admin.get(podPath(kw.ns))).items as PodObject[]).filter((o) =>
              /^d\d$/.test(o.metadata.name),
            );
          const edit = async (value: string) => {
            const since = new Map<string, number>();
            await Promise.all(
              pods.map((sb) => {
                since.set(sb.pod.name, performance.now());
                return annotate(sb, value);
              }),
            );
            return since;
          };
          const hasNet1 = (o: PodObject) => statusOf(o).some((e) => e.interface === 'net1');
          const plugged = await timesToReach(await edit('mv@net1'), list, hasNet1, 60_000);
          for (const sb of pods) expect(await ifaces(kw, sb)).toEqual(['eth0', 'lo', 'net1']);
          const unplugged = await timesToReach(await edit(''), list, (o) => !hasNet1(o), 60_000);
          for (const sb of pods) expect(await ifaces(kw, sb)).toEqual(['eth0', 'lo']);
          console.log(
            `dynamic networks, 10 pods edited at once (annotation PATCH -> network-status; ms): ` +
              JSON.stringify({ plug: summarize([...plugged.values()]), unplug: summarize([...unplugged.values()]) }),
          );
          expect(daemon.log()).not.toContain('NetworkChangeFailed');
          for (const sb of pods) await kw.del(conf, sb);
          expect(await reservedIps(kw.w.ipamDir)).toEqual([]);
        } finally {
          await daemon.stop();
        }
      });
    }, 180_000);
  });
});
