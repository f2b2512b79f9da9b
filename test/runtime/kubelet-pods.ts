/**
 * The kubelet tier's pods with a NAD (kubelet-suite.ts, multus-lane.ts): a macvlan NAD on the node's veth end,
 * a pause pod requesting it, the checks that it runs with eth0 and net1 (interfaces, network-status, pod IP,
 * AddedInterface events, caches, leases), and that deleting it leaves nothing on the node.
 */
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'vitest';
import { until } from './kubelet-boot.ts';

export { until };
import { type Cluster, podPath } from '../k8s/cluster.ts';
import { NETWORKS_ANNOTATION, type PodRef, createNad, networkStatus, podEvents } from '../e2e-k8s/world.ts';
import { NODE_LINK, NODE_LINK_PEER, type NodeRuntime } from './node.ts';
import { type SandboxInfo, runOk } from './runtime.ts';

export interface Link {
  ifname: string;
  address?: string;
  linkinfo?: { info_kind?: string };
  addr_info?: { family: string; local: string; prefixlen: number }[];
}
export const v4 = (l: Link | undefined): string[] =>
  (l?.addr_info ?? []).filter((a) => a.family === 'inet').map((a) => `${a.local}/${a.prefixlen}`);

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface PodKitCtx {
  cluster: () => Cluster;
  node: () => NodeRuntime;
  /** the namespace of the test's pods and NADs */
  ns: string;
  /** the node's default network (its name in network-status) */
  clusterNet: string;
  logs: () => Promise<string>;
  /** leases held for these containers are not counted (multus-lane.ts' probe accounts for its own) */
  ignoreLease?: (containerId: string) => boolean;
}

export interface NadPod {
  p: PodRef;
  sb: SandboxInfo;
  links: Map<string, Link>;
  ipOf(ifname: string): string[];
}

/** The pod helpers over a node and a cluster the caller starts (getters: they exist once beforeAll ran). */
export function podKit(k: PodKitCtx) {
  /** Files of multus' and containerd's CNI caches (in the node) that name the sandbox. */
  const cniCaches = async (id: string): Promise<string[]> => {
    const found: string[] = [];
    for (const d of ['/var/lib/cni/multus', '/var/lib/cni/multus/results', '/var/lib/cni/results']) {
      const names = await readdir(k.node().path(d)).catch(() => [] as string[]);
      found.push(...names.filter((n) => n.includes(id)).map((n) => join(d, n)));
    }
    return found;
  };
  /** `<network>/<ip>` leases in host-local's data dir (in the node). */
  const reservedIps = async (): Promise<string[]> => {
    const found: string[] = [];
    const dir = k.node().path('/var/lib/cni/networks');
    for (const net of await readdir(dir).catch(() => [] as string[])) {
      for (const f of await readdir(join(dir, net))) {
        if (!/^[0-9.]+$/.test(f)) continue;
        const owner = k.ignoreLease ? (await readFile(join(dir, net, f), 'utf8')).split(/\s/)[0]! : '';
        if (!k.ignoreLease?.(owner)) found.push(`${net}/${f}`);
      }
    }
    return found.sort();
  };

  /** A macvlan NAD on the node's veth end, host-local in 10.251.<third>.0/24. */
  const macvlanNad = (name: string, third: number) =>
    createNad(k.cluster(), k.ns, name, {
      cniVersion: '1.0.0',
      name,
      type: 'macvlan',
      master: NODE_LINK_PEER,
      mode: 'bridge',
      ipam: { type: 'host-local', ranges: [[{ subnet: `10.251.${third}.0/24` }]] },
    });

  /** Waits until kubelet reports the pod Running; its API object. */
  const untilRunning = (p: PodRef) =>
    until(
      `pod ${p.name} Running`,
      180_000,
      async () => {
        const got = await k.cluster().admin.get(podPath(k.ns, p.name));
        return got.status?.phase === 'Running' ? got : undefined;
      },
      async () => `${JSON.stringify((await k.cluster().admin.get(podPath(k.ns, p.name))).status)}\n${await k.logs()}`,
    );

  /** The one sandbox kubelet made for the pod (found through CRI by its UID). */
  const sandboxOf = async (p: PodRef): Promise<SandboxInfo> => {
    const ids = (await k.node().crictl(['pods', '-q', '--label', `io.kubernetes.pod.uid=${p.uid}`])).stdout
      .trim()
      .split('\n');
    expect(ids).toHaveLength(1);
    return k.node().inspect(ids[0]!);
  };

  /** `ip -j <args>` inside the sandbox's network namespace, parsed. */
  const ipIn = async <T>(sb: SandboxInfo, args: string[]): Promise<T> =>
    JSON.parse(await runOk('nsenter', ['-t', String(sb.pid), '--net', 'ip', '-j', ...args])) as T;
  const linksIn = async (sb: SandboxInfo): Promise<Map<string, Link>> =>
    new Map((await ipIn<Link[]>(sb, ['-d', 'addr', 'show'])).map((l) => [l.ifname, l]));

  /**
   * Creates a pod requesting the `mv` NAD, waits until kubelet reports it Running, and checks its sandbox's
   * interfaces, its network-status (MACs included), its pod IP and its AddedInterface events.
   */
  const runNadPod = async (name: string): Promise<NadPod> => expectRunningWithNad(await createNadPod(name));

  /** A pod (pause image) requesting the `mv` NAD, in the API (the scheduler places it, kubelet runs it). */
  const createNadPod = async (name: string, networks = 'mv'): Promise<PodRef> => {
    const created = await k.cluster().admin.post(podPath(k.ns), {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: k.ns, annotations: { [NETWORKS_ANNOTATION]: networks } },
      spec: {
        containers: [{ name: 'pause', image: k.node().sandboxImage, imagePullPolicy: 'Never' }],
        terminationGracePeriodSeconds: 1,
      },
    });
    return { namespace: k.ns, name, uid: created.metadata.uid };
  };

  const expectRunningWithNad = async (p: PodRef): Promise<NadPod> => {
    const running = await untilRunning(p);
    expect(running.spec.nodeName).toBe(k.node().nodeName);

    // the sandbox kubelet made, and its network namespace
    const sb = await sandboxOf(p);
    const links = await linksIn(sb);
    expect([...links.keys()].sort()).toEqual(['eth0', 'lo', 'net1']);
    expect(v4(links.get('eth0'))).toEqual([expect.stringMatching(/^10\.251\.0\.\d+\/24$/)]);
    expect(v4(links.get('net1'))).toEqual([expect.stringMatching(/^10\.251\.1\.\d+\/24$/)]);
    expect(links.get('net1')?.linkinfo?.info_kind).toBe('macvlan');

    const ipOf = (ifname: string) => v4(links.get(ifname)).map((a) => a.split('/')[0]!);
    const st = await networkStatus(k.cluster(), p);
    expect(st?.map((e) => [e.name, e.interface, e.ips, e.mac, e.default === true])).toEqual([
      [k.clusterNet, 'eth0', ipOf('eth0'), links.get('eth0')?.address, true],
      [`${k.ns}/mv`, 'net1', ipOf('net1'), links.get('net1')?.address, false],
    ]);
    // the pod's IP as kubelet reports it is eth0's (the CRI result multus returned)
    expect(running.status.podIP).toBe(ipOf('eth0')[0]);
    const events = await podEvents(k.cluster(), p, 'AddedInterface');
    expect(events.map((e) => e.message).sort()).toEqual(
      [
        `Add eth0 [${v4(links.get('eth0'))[0]}] from ${k.clusterNet}`,
        `Add net1 [${v4(links.get('net1'))[0]}] from ${k.ns}/mv`,
      ].sort(),
    );
    expect(await cniCaches(sb.id), 'caches while the pod runs').not.toEqual([]);
    expect(await reservedIps()).toEqual([`${k.clusterNet}/${ipOf('eth0')[0]}`, `mv/${ipOf('net1')[0]}`].sort());
    return { p, sb, links, ipOf };
  };

  /** Deletes the pod (kubelet stops its sandbox: CNI DEL), waits for the API's 404, and checks nothing is left. */
  const deleteAndExpectNothingLeft = async ({ p, sb }: { p: PodRef; sb: SandboxInfo }): Promise<void> => {
    await k.cluster().admin.del(podPath(k.ns, p.name));
    await until(
      `pod ${p.name} gone from the API`,
      60_000,
      async () => ((await k.cluster().admin.request('GET', podPath(k.ns, p.name))).status === 404 ? true : undefined),
      k.logs,
    );
    const state = JSON.parse((await k.node().crictl(['inspectp', sb.id])).stdout || '{}').status?.state;
    expect(state ?? 'removed', 'the sandbox').not.toBe('SANDBOX_READY');
    expect(await reservedIps(), "IPs reserved in host-local's data dir").toEqual([]);
    expect(await cniCaches(sb.id), 'cache files of the sandbox').toEqual([]);
    expect(await k.node().netnsFiles(), "the pods' netns files").toEqual([]);
    const hostLinks = JSON.parse(await runOk('ip', ['-n', k.node().hostNs, '-j', '-d', 'link', 'show'])) as Link[];
    expect(
      hostLinks
        .filter((l) => !['lo', NODE_LINK, NODE_LINK_PEER].includes(l.ifname) && l.linkinfo?.info_kind !== 'bridge')
        .map((l) => l.ifname),
      "links left in the node's namespace",
    ).toEqual([]);
  };

  return {
    cniCaches,
    reservedIps,
    macvlanNad,
    untilRunning,
    sandboxOf,
    ipIn,
    linksIn,
    runNadPod,
    createNadPod,
    expectRunningWithNad,
    deleteAndExpectNothingLeft,
  };
}
