/**
 * The cases of the two-node tier (kubelet-cluster.ts sets up node-a and node-b): pods on both nodes, whereabouts
 * across them, traffic between them, dynamic networks and hot-plug on their own node (resident), node-b rebooted
 * and drained beside node-a's pods, nothing left.
 */
import { readFile, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { type Cluster, podPath } from '../k8s/cluster.ts';
import { NETWORKS_ANNOTATION, type PodRef, createNad, networkStatus } from '../e2e-k8s/world.ts';
import type { NodeRuntime } from './node.ts';
import { powerOff } from './node-power.ts';
import { type Link, type Mode } from './kubelet-suite.ts';
import { until } from './kubelet-boot.ts';
import { type SandboxInfo, run, runOk } from './runtime.ts';

const WB_API = '/apis/whereabouts.cni.cncf.io/v1alpha1';
export const BUSYBOX = '/bin/busybox';
/** Each node's cluster network (a bridge with host-local in the node's pod CIDR: node-a's, node-b's). */
export const POD_CIDRS = ['10.252.0.0/24', '10.252.1.0/24'];
export const CLUSTER_NET = 'kc-cluster';
export const BRIDGE = 'mtskcbr0';
/** The link between the nodes: a veth pair with this name at both ends. */
export const INTER = 'mtsx0';
/** whereabouts' pool of the secondary network `wb`, one for the whole cluster. */
export const WB_RANGE = '10.253.0.0/24';

/** A NAD for pods on either node: macvlan on the link between the nodes, whereabouts' pool `range`. */
export const whereaboutsNad = (cluster: Cluster, ns: string, name: string, range: string) =>
  createNad(cluster, ns, name, {
    cniVersion: '1.0.0',
    name,
    type: 'macvlan',
    master: INTER,
    mode: 'bridge',
    ipam: { type: 'whereabouts', range, log_level: 'error' },
  });

export interface Placed {
  p: PodRef;
  node: NodeRuntime;
}

export interface ClusterCtx {
  mode: Mode;
  ns: string;
  cluster(): Cluster;
  nodes(): NodeRuntime[];
  createPodOn(name: string, node: NodeRuntime, networks?: string): Promise<Placed>;
  logs(): Promise<string>;
}

/** What a running pod is made of on its node, as the case saw it. */
interface Seen {
  sb: SandboxInfo;
  links: Map<string, Link>;
  status: string;
}

const v4 = (l: Link | undefined): string[] =>
  (l?.addr_info ?? []).filter((a) => a.family === 'inet').map((a) => `${a.local}/${a.prefixlen}`);
const ip = (l: Link | undefined) => v4(l)[0]?.split('/')[0] ?? '';
const linkNames = (links: Map<string, Link>) => [...links.keys()].sort();

/** The sandboxes the node's containerd has for a pod UID (`ready`: only the running one). */
async function sandboxIds(node: NodeRuntime, uid: string, ready = true): Promise<string[]> {
  const args = ['pods', '-q', '--label', `io.kubernetes.pod.uid=${uid}`, ...(ready ? ['--state', 'ready'] : [])];
  return (await node.crictl(args)).stdout.split('\n').filter(Boolean);
}

async function linksIn(sb: SandboxInfo): Promise<Map<string, Link>> {
  const out = await runOk('nsenter', ['-t', String(sb.pid), '--net', 'ip', '-j', '-d', 'addr', 'show']);
  return new Map((JSON.parse(out) as Link[]).map((l) => [l.ifname, l]));
}

/** Multus' caches and containerd's libcni cache. */
const CACHE_DIRS = ['/var/lib/cni/multus', '/var/lib/cni/multus/results', '/var/lib/cni/results'];

/** Files of multus' and containerd's CNI caches on the node that name the sandbox. */
async function cachesOf(node: NodeRuntime, id: string): Promise<string[]> {
  const found: string[] = [];
  for (const d of CACHE_DIRS) {
    const names = await readdir(node.ownPath(d)).catch(() => [] as string[]);
    found.push(...names.filter((n) => n.includes(id)).map((n) => join(d, n)));
  }
  return found;
}

/** Lines of the node's resident daemon log (its DaemonSet pod's `daemon` container) that contain `text`. */
async function daemonLog(node: NodeRuntime, text: string): Promise<string[]> {
  const base = node.path('/var/log/pods');
  const lines: string[] = [];
  for (const pod of (await readdir(base)).filter((d) => d.startsWith('kube-system_multus-ts-'))) {
    const dir = join(base, pod, 'daemon');
    for (const f of await readdir(dir).catch(() => [] as string[])) {
      lines.push(...(await readFile(join(dir, f), 'utf8')).split('\n'));
    }
  }
  return lines.filter((l) => l.includes(text));
}

/** busybox's ping from the sandbox's network namespace; true when `addr` answered. */
async function pings(sb: SandboxInfo, addr: string): Promise<boolean> {
  const r = await run('nsenter', ['-t', String(sb.pid), '--net', BUSYBOX, 'ping', '-c', '2', '-W', '3', addr]);
  return r.code === 0;
}

/**
 * What pods left in the node (its own overlay layers: node.ownPath): host-local leases, pod netns files, CNI
 * cache files, links but the node's own and the bridge.
 */
async function leftovers(node: NodeRuntime): Promise<string[]> {
  const out: string[] = [];
  const nets = node.ownPath('/var/lib/cni/networks');
  for (const net of await readdir(nets).catch(() => [] as string[])) {
    const leases = (await readdir(join(nets, net))).filter((f) => /^[0-9.]+$/.test(f));
    out.push(...leases.map((f) => `lease ${net}/${f}`));
  }
  out.push(...(await node.netnsFiles()).map((f) => `netns ${f}`));
  for (const d of CACHE_DIRS) {
    const files = await readdir(node.ownPath(d), { withFileTypes: true }).catch(() => []);
    out.push(...files.filter((e) => e.isFile()).map((e) => `cache ${d}/${e.name}`));
  }
  const known = ['lo', node.link, node.linkPeer, INTER, BRIDGE];
  const links = JSON.parse(await runOk('ip', ['-n', node.hostNs, '-j', 'link', 'show'])) as Link[];
  out.push(...links.filter((l) => !known.includes(l.ifname)).map((l) => `link ${l.ifname}`));
  return out;
}

export function nodeCases(k: ClusterCtx): void {
  const api = () => k.cluster().admin;
  const [nodeA, nodeB] = [() => k.nodes()[0]!, () => k.nodes()[1]!];
  const pods = new Map<string, Placed>();
  const allocations = async () =>
    ((await api().get(`${WB_API}/namespaces/${k.ns}/ippools`)).items as any[]).flatMap((pool) =>
      Object.values(pool.spec.allocations ?? {}).map((a: any) => `${a.podref} ${a.id}`),
    );

  /** Waits until the pod is Ready with one ready sandbox on its node (not `old`, when given: a reboot's). */
  const untilUp = (x: Placed, old?: string) =>
    until(
      `pod ${x.p.name} Ready on ${x.node.nodeName}`,
      180_000,
      async () => {
        const got = await api().get(podPath(k.ns, x.p.name));
        const ready = (got.status?.conditions ?? []).find((c: { type: string }) => c.type === 'Ready');
        const ids = ready?.status === 'True' ? await sandboxIds(x.node, x.p.uid) : [];
        return ids.length === 1 && ids[0] !== old ? got : undefined;
      },
      k.logs,
    );

  /** The pod's sandbox on its node, its links and network-status, checked against its node and the other. */
  const seeOnItsNode = async (x: Placed, byDaemon = true): Promise<Seen> => {
    const got = await untilUp(x);
    expect(got.spec.nodeName, `${x.p.name}'s node`).toBe(x.node.nodeName);
    const other = k.nodes().find((n) => n !== x.node)!;
    expect(await sandboxIds(other, x.p.uid, false), `${x.p.name}'s sandboxes on ${other.nodeName}`).toEqual([]);
    const sb = await x.node.inspect((await sandboxIds(x.node, x.p.uid))[0]!);
    const links = await linksIn(sb);
    expect(linkNames(links)).toEqual(['eth0', 'lo', 'net1']);
    const cidr = POD_CIDRS[k.nodes().indexOf(x.node)]!.replace(/0\/24$/, '');
    const eth0 = v4(links.get('eth0'));
    expect(eth0.length === 1 && eth0[0]!.startsWith(cidr), `${x.p.name} eth0 ${eth0} in ${cidr}0/24`).toBe(true);
    expect(v4(links.get('net1'))).toEqual([expect.stringMatching(/^10\.253\.0\.\d+\/24$/)]);
    expect(links.get('net1')?.linkinfo?.info_kind).toBe('macvlan');
    const st = await networkStatus(k.cluster(), x.p);
    expect(st?.map((e) => [e.name, e.interface, e.ips, e.mac, e.default === true])).toEqual([
      [CLUSTER_NET, 'eth0', [ip(links.get('eth0'))], links.get('eth0')?.address, true],
      [`${k.ns}/wb`, 'net1', [ip(links.get('net1'))], links.get('net1')?.address, false],
    ]);
    expect(got.status.podIP).toBe(ip(links.get('eth0')));
    // made by its own node's plugin: the caches are there and not on the other node; resident: its daemon's ADD
    expect(await cachesOf(x.node, sb.id), `caches of ${x.p.name} on its node`).not.toEqual([]);
    expect(await cachesOf(other, sb.id), `caches of ${x.p.name} on ${other.nodeName}`).toEqual([]);
    if (k.mode === 'resident' && byDaemon) {
      expect(await daemonLog(x.node, `ADD ${sb.id}: 200`), `${x.p.name}'s ADD by its node's daemon`).toHaveLength(1);
    }
    if (k.mode === 'resident') {
      expect(await daemonLog(other, sb.id), `${x.p.name} in ${other.nodeName}'s daemon log`).toEqual([]);
    }
    return { sb, links, status: JSON.stringify(st) };
  };

  it('pods on both nodes get their networks and network-status from their own node; whereabouts hands distinct addresses from one pool', async () => {
    const want: [string, NodeRuntime][] = [
      ['a1', nodeA()],
      ['a2', nodeA()],
      ['b1', nodeB()],
      ['b2', nodeB()],
    ];
    for (const x of await Promise.all(want.map(([n, node]) => k.createPodOn(n, node)))) pods.set(x.p.name, x);
    const seen = new Map<string, Seen>();
    for (const [name, x] of pods) seen.set(name, await seeOnItsNode(x));
    const net1 = [...seen.values()].map((s) => ip(s.links.get('net1')));
    expect(new Set(net1).size, `distinct addresses from ${WB_RANGE}: ${net1}`).toBe(4);
    expect((await allocations()).sort()).toEqual(
      [...pods].map(([name]) => `${k.ns}/${name} ${seen.get(name)!.sb.id}`).sort(),
    );
  }, 400_000);

  it('pods on different nodes reach each other over the secondary network: ping both ways, not with the link down', async () => {
    const [a1, b1] = [await seeOnItsNode(pods.get('a1')!), await seeOnItsNode(pods.get('b1')!)];
    const [ipA, ipB] = [ip(a1.links.get('net1')), ip(b1.links.get('net1'))];
    expect(await pings(a1.sb, ipB), `a1 -> b1 (${ipB})`).toBe(true);
    expect(await pings(b1.sb, ipA), `b1 -> a1 (${ipA})`).toBe(true);
    // the only way between them is the nodes' link
    await runOk('ip', ['-n', nodeB().hostNs, 'link', 'set', INTER, 'down']);
    try {
      expect(await pings(a1.sb, ipB), 'a1 -> b1 with the link down').toBe(false);
    } finally {
      await runOk('ip', ['-n', nodeB().hostNs, 'link', 'set', INTER, 'up']);
    }
    expect(await pings(a1.sb, ipB), 'a1 -> b1 with the link up again').toBe(true);
  }, 120_000);

  if (k.mode === 'resident') residentCases(k, pods, seeOnItsNode);

  it("node-b rebooted, then drained: its pods come back with their networks, then leave nothing; node-a's pods untouched", async () => {
    const aPods = [pods.get('a1')!, pods.get('a2')!];
    const bPods = [pods.get('b1')!, pods.get('b2')!];
    const bSandboxes = await Promise.all(bPods.map(async (x) => (await sandboxIds(x.node, x.p.uid))[0]));
    const snapshot = async () => {
      const out: string[] = [];
      for (const x of aPods) {
        const s = await seeOnItsNode(x);
        const got = await api().get(podPath(k.ns, x.p.name));
        const restarts = got.status.containerStatuses.map((c: any) => c.restartCount);
        out.push(`${x.p.name} ${s.sb.id} ${JSON.stringify(linkNames(s.links))} ${s.status} restarts ${restarts}`);
      }
      // a CNI call for them would show: the daemon's log lines, the caches' modification times
      const calls = k.mode === 'resident' ? (await daemonLog(nodeA(), ': 200')).length : 0;
      const caches: string[] = [];
      for (const l of (await leftovers(nodeA())).filter((l) => l.startsWith('cache ')).sort()) {
        caches.push(`${l} ${(await stat(nodeA().ownPath(l.slice('cache '.length)))).mtimeMs}`);
      }
      const own = (await allocations()).filter((a) => a.startsWith(`${k.ns}/a`));
      return { pods: out, calls, caches, allocations: own.sort() };
    };
    const atStart = await snapshot();

    // the reboot: kubelet, containerd, every container and the pods' netns gone; then containerd and kubelet again
    await powerOff(nodeB());
    await nodeB().start();
    await nodeB().startKubelet(k.cluster(), 120_000);
    const seenB: Seen[] = [];
    for (const [i, x] of bPods.entries()) {
      await untilUp(x, bSandboxes[i]);
      // resident: the shim's thin fallback may serve them while the daemon's container restarts
      seenB.push(await seeOnItsNode(x, false));
    }
    // the dead sandboxes' addresses released (kubelet stops them: a DEL each), the new ones hold theirs
    await until(
      "whereabouts' pool: the four running pods",
      60_000,
      async () => ((await allocations()).length === 4 ? true : undefined),
      async () => JSON.stringify(await allocations()),
    );
    const a1 = await seeOnItsNode(pods.get('a1')!);
    expect(await pings(a1.sb, ip(seenB[0]!.links.get('net1'))), 'a1 -> b1 after the reboot').toBe(true);
    expect(await snapshot(), "node-a's pods after node-b's reboot").toEqual(atStart);

    // the drain: cordoned, its pods evicted (policy/v1 Eviction), as `kubectl drain` does
    const nodePath = `/api/v1/nodes/${nodeB().nodeName}`;
    await api().patch(nodePath, { spec: { unschedulable: true } });
    for (const x of bPods) {
      await api().post(`${podPath(k.ns, x.p.name)}/eviction`, {
        apiVersion: 'policy/v1',
        kind: 'Eviction',
        metadata: { name: x.p.name, namespace: k.ns },
      });
    }
    for (const x of bPods) {
      await until(
        `${x.p.name} evicted`,
        120_000,
        async () => ((await api().request('GET', podPath(k.ns, x.p.name))).status === 404 ? true : undefined),
        k.logs,
      );
      pods.delete(x.p.name);
    }
    await until(
      'nothing left on node-b',
      30_000,
      async () => ((await leftovers(nodeB())).length === 0 ? true : undefined),
      async () => JSON.stringify(await leftovers(nodeB())),
    );
    // kubelet removes the dead sandboxes later (its garbage collection): none runs
    for (const x of bPods) expect(await sandboxIds(nodeB(), x.p.uid), `${x.p.name}'s ready sandboxes`).toEqual([]);
    expect(await snapshot(), "node-a's pods after node-b's drain").toEqual(atStart);
    await api().patch(nodePath, { spec: { unschedulable: false } });
  }, 600_000);

  it('deleting the pods leaves nothing on either node: leases, caches, netns, links, the pool', async () => {
    await Promise.all([...pods.keys()].map((name) => api().del(podPath(k.ns, name))));
    for (const name of pods.keys()) {
      await until(
        `pod ${name} gone`,
        120_000,
        async () => ((await api().request('GET', podPath(k.ns, name))).status === 404 ? true : undefined),
        k.logs,
      );
    }
    for (const node of k.nodes()) {
      await until(
        `nothing left on ${node.nodeName}`,
        30_000,
        async () => ((await leftovers(node)).length === 0 ? true : undefined),
        async () => JSON.stringify(await leftovers(node)),
      );
    }
    expect(await allocations(), "whereabouts' pool").toEqual([]);
    expect((await api().get(`${WB_API}/namespaces/${k.ns}/overlappingrangeipreservations`)).items).toEqual([]);
  }, 300_000);
}

/** Resident: dynamic networks and hot-plug act on their own node's pods only. */
function residentCases(
  k: ClusterCtx,
  pods: Map<string, Placed>,
  see: (x: Placed, byDaemon?: boolean) => Promise<Seen>,
): void {
  const api = () => k.cluster().admin;
  const [nodeA, nodeB] = [() => k.nodes()[0]!, () => k.nodes()[1]!];
  const statusNames = async (x: Placed) =>
    ((await networkStatus(k.cluster(), x.p)) ?? []).map((e) => `${e.name} ${e.interface}`);
  const setNetworks = (x: Placed, value: string) =>
    api().patch(podPath(k.ns, x.p.name), { metadata: { annotations: { [NETWORKS_ANNOTATION]: value } } });
  /** `multus hotplug` in the node's mount namespace, against its daemon's socket. */
  const hotplug = (node: NodeRuntime, verb: string, x: Placed, network: string) =>
    run('nsenter', [
      '-t',
      String(node.holderPid),
      '--mount',
      '--',
      '/opt/cni/bin/multus',
      'hotplug',
      verb,
      '--pod',
      `${k.ns}/${x.p.name}`,
      '--network',
      network,
      '--socket-dir',
      '/run/multus',
      '--conf',
      '/etc/cni/net.d/00-multus.conf',
    ]);

  it("dynamic networks: each node's daemon plugs and unplugs its own pods' networks only", async () => {
    await whereaboutsNad(k.cluster(), k.ns, 'wb2', '10.253.1.0/24');
    for (const [name, node, other] of [
      ['a1', nodeA(), nodeB()],
      ['b1', nodeB(), nodeA()],
    ] as const) {
      const x = pods.get(name)!;
      const { sb } = await see(x);
      const where = `in ${k.ns}/${name}`;
      await setNetworks(x, 'wb,wb2');
      await until(
        `net2 in ${name}'s network-status`,
        60_000,
        async () => ((await statusNames(x)).length === 3 ? true : undefined),
        async () => `${JSON.stringify(await statusNames(x))}\n${(await daemonLog(node, 'dynamic')).join('\n')}`,
      );
      expect(linkNames(await linksIn(sb))).toEqual(['eth0', 'lo', 'net1', 'net2']);
      await setNetworks(x, 'wb');
      await until(
        `net2 out of ${name}'s network-status`,
        60_000,
        async () => ((await statusNames(x)).length === 2 ? true : undefined),
        async () => JSON.stringify(await statusNames(x)),
      );
      expect(linkNames(await linksIn(sb))).toEqual(['eth0', 'lo', 'net1']);
      expect(await daemonLog(node, `dynamic networks: add`), `${node.nodeName}'s daemon`).toEqual([
        expect.stringContaining(where),
      ]);
      expect(await daemonLog(other, where), `${name} in ${other.nodeName}'s daemon log`).toEqual([]);
      // every line of either daemon about a pod's dynamic networks names a pod of its own node
      for (const n of k.nodes()) {
        const own = [...pods.values()].filter((p) => p.node === n).map((p) => `in ${k.ns}/${p.p.name}`);
        for (const l of await daemonLog(n, ` in ${k.ns}/`)) {
          expect(
            own.some((o) => l.includes(o)),
            `${n.nodeName}: ${l}`,
          ).toBe(true);
        }
      }
    }
  }, 300_000);

  it("hot-plug: node-b's `multus hotplug` refuses node-a's pod; node-a's plugs and unplugs it", async () => {
    const a1 = pods.get('a1')!;
    const { sb } = await see(a1);
    const refused = await hotplug(nodeB(), 'add', a1, 'wb2@net3');
    expect(refused.code, refused.stdout).toBe(1);
    expect(JSON.parse(refused.stdout).msg).toContain(`no sandbox of pod ${k.ns}/a1`);
    expect(await daemonLog(nodeB(), `${k.ns}/a1/`), "node-b's daemon heard nothing of a1").toEqual([]);
    expect(linkNames(await linksIn(sb))).toEqual(['eth0', 'lo', 'net1']);

    const add = await hotplug(nodeA(), 'add', a1, 'wb2@net3');
    expect(add.code, `${add.stdout}${add.stderr}`).toBe(0);
    expect(linkNames(await linksIn(sb))).toEqual(['eth0', 'lo', 'net1', 'net3']);
    expect(await daemonLog(nodeA(), `/delegate ADD ${sb.id} net3: 200`)).toHaveLength(1);
    expect(await statusNames(a1)).toEqual([`${CLUSTER_NET} eth0`, `${k.ns}/wb net1`, `${k.ns}/wb2 net3`]);
    const del = await hotplug(nodeA(), 'del', a1, 'wb2@net3');
    expect(del.code, `${del.stdout}${del.stderr}`).toBe(0);
    expect(linkNames(await linksIn(sb))).toEqual(['eth0', 'lo', 'net1']);
    expect(await statusNames(a1)).toEqual([`${CLUSTER_NET} eth0`, `${k.ns}/wb net1`]);
  }, 120_000);
}
