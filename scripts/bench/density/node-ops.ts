/**
 * The density bench's node: a fresh kubelet node of the runtime tier (test/runtime/node.ts: containerd, kubelet,
 * kube-controller-manager's DaemonSet controller, kube-scheduler) per measured run, with the images imported and
 * the API server relayed in; a mode installed by its DaemonSet; what is left on the node after the pods are gone
 * (host-local leases, CNI caches, links in the node's network namespace, pod network namespaces); the daemon's
 * process and its peak RSS.
 */
import { readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ApiTunnel } from '../../../test/e2e-k8s/world.ts';
import type { Cluster } from '../../../test/k8s/cluster.ts';
import { type NodeOptions, NodeRuntime } from '../../../test/runtime/node.ts';
import { CTR_BIN, runOk } from '../../../test/runtime/runtime.ts';
import { containerPids } from '../../../test/runtime/node-power.ts';
import { DS, type Mode, hasDaemon, isOurDaemon, modeObjects } from './modes.ts';

export const CLUSTER_NET = 'density-cluster';
export const BRIDGE = 'mtsdnbr0';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface Node {
  node: NodeRuntime;
  tunnel: ApiTunnel;
}

/** Polls `check` every 250 ms until it gives a value; throws `what` after `timeoutMs`. */
export async function until<T>(what: string, timeoutMs: number, check: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not after ${timeoutMs} ms`);
    await sleep(250);
  }
}

/**
 * A new node with the cluster network (bridge + host-local), the images, kubelet Ready (`controllerManagerArgs`:
 * more flags for the control plane's kube-controller-manager).
 */
export async function startNode(
  cluster: Cluster,
  images: string[],
  opts: NodeOptions = {},
  controllerManagerArgs: string[] = [],
): Promise<Node> {
  const node = await new NodeRuntime(opts).prepare();
  await node.forDaemonSet(CLUSTER_NET, BRIDGE, '10.240.0.0/16');
  // the CNI caches on a filesystem of their own, so that the cache-full fault can fill it (burst.ts)
  await runOk('nsenter', ['-t', String(node.holderPid), '--mount', '--', 'mkdir', '-p', '/var/lib/cni']);
  const tmpfs = ['mount', '-t', 'tmpfs', '-o', 'size=256m,mode=0755', 'tmpfs', '/var/lib/cni'];
  await runOk('nsenter', ['-t', String(node.holderPid), '--mount', '--', ...tmpfs]);
  await node.start();
  for (const tar of images)
    await runOk(CTR_BIN, ['-a', node.socket, '-n', 'k8s.io', 'images', 'import', '--all-platforms', tar]);
  const tunnel = new ApiTunnel();
  await tunnel.open(cluster, node.hostNs, node.dir);
  await node.startControlPlane(cluster, controllerManagerArgs);
  await node.startKubelet(cluster, 120_000);
  return { node, tunnel };
}

/**
 * The mode's DaemonSet pod on the node, once Ready and its 00-multus.conf(list) is on the node. `objects`: the
 * mode's objects (default: modeObjects with the API server's port).
 */
export async function install(
  cluster: Cluster,
  n: Node,
  mode: Mode,
  timeoutMs = 300_000,
  objects = modeObjects(mode, new URL(cluster.server).port),
): Promise<any> {
  for (const { url, obj } of objects) {
    const r = await cluster.admin.request('POST', url, obj);
    // an existing object is applied (server-side, as kubectl apply --server-side): a PUT without a resourceVersion
    // is refused for some kinds (ValidatingAdmissionPolicy: 422 "must be specified for an update")
    const apply = `${url}/${obj.metadata.name}?fieldManager=multus-ts-bench&force=true`;
    if (r.status === 409) await cluster.admin.patch(apply, obj, 'application/apply-patch+yaml');
    else if (r.status >= 300) throw new Error(`POST ${url}: ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
  }
  return until(`the ${mode} DaemonSet pod Ready`, timeoutMs, async () => {
    const pods = (await dsPods(cluster, mode)).filter((p) => !p.metadata.deletionTimestamp);
    const ready = pods.find((p) =>
      (p.status?.conditions ?? []).some((c: any) => c.type === 'Ready' && c.status === 'True'),
    );
    const confs = await readdir(n.node.path('/etc/cni/net.d')).catch(() => [] as string[]);
    return ready && confs.some((f) => f.startsWith('00-multus.conf')) ? ready : undefined;
  });
}

export async function dsPods(cluster: Cluster, mode: Mode): Promise<any[]> {
  const sel = encodeURIComponent(DS[mode].label);
  return (await cluster.admin.get(`/api/v1/namespaces/kube-system/pods?labelSelector=${sel}`)).items as any[];
}

/** Removes the mode's DaemonSet (and its ConfigMaps); waits until its pods are gone. */
export async function uninstall(cluster: Cluster, mode: Mode): Promise<void> {
  const port = new URL(cluster.server).port;
  for (const { url, obj } of modeObjects(mode, port)) {
    if (obj.kind === 'DaemonSet' || obj.kind === 'ConfigMap')
      await cluster.admin.request('DELETE', `${url}/${obj.metadata.name}`);
  }
  for (const p of await dsPods(cluster, mode))
    await cluster.admin.request(
      'DELETE',
      `/api/v1/namespaces/kube-system/pods/${p.metadata.name}?gracePeriodSeconds=0`,
    );
  await until(`the ${mode} DaemonSet pods gone`, 60_000, async () =>
    (await dsPods(cluster, mode)).length === 0 ? true : undefined,
  );
}

/** Restarts of the DaemonSet pod's containers so far, and the last termination reasons (OOMKilled, ...). */
export async function dsRestarts(cluster: Cluster, mode: Mode): Promise<{ restarts: number; reasons: string[] }> {
  const statuses = (await dsPods(cluster, mode)).flatMap((p) => p.status?.containerStatuses ?? []);
  return {
    restarts: statuses.reduce((s: number, c: any) => s + (c.restartCount ?? 0), 0),
    reasons: statuses.map((c: any) => c.lastState?.terminated?.reason).filter(Boolean),
  };
}

/** Stops the node (kubelet, control plane, containerd; cleanup.sh) and removes its Node object. */
export async function stopNode(cluster: Cluster, n: Node): Promise<void> {
  await n.node.stop();
  await n.tunnel.close();
  await cluster.admin.request('DELETE', `/api/v1/nodes/${n.node.nodeName}`);
}

/** What the pods left on the node: host-local leases, CNI cache files, links, pod network namespaces. */
export async function leaks(n: Node): Promise<any> {
  const node = n.node;
  let ips = 0;
  const nets = node.path('/var/lib/cni/networks');
  for (const net of await readdir(nets).catch(() => [] as string[])) {
    ips += (await readdir(join(nets, net)).catch(() => [] as string[])).filter((f) => /^[0-9a-f.:]+$/.test(f)).length;
  }
  const cacheFiles: string[] = [];
  for (const d of ['/var/lib/cni/multus', '/var/lib/cni/multus/results', '/var/lib/cni/results']) {
    const names = await readdir(node.path(d), { withFileTypes: true }).catch(() => []);
    cacheFiles.push(...names.filter((e) => e.isFile()).map((e) => join(d, e.name)));
  }
  const caches = cacheFiles.length;
  const links = JSON.parse(await runOk('ip', ['-n', node.hostNs, '-j', 'link', 'show'])) as { ifname: string }[];
  const known = new Set(['lo', node.link, node.linkPeer, BRIDGE]);
  return {
    ips,
    caches,
    links: links.filter((l) => !known.has(l.ifname)).length,
    netns: (await node.netnsFiles()).length,
    ...(caches ? { cache_files: cacheFiles.slice(0, 10) } : {}),
  };
}

/** The DaemonSet pod's container log files on the node (every container, this boot's and the ones before). */
async function dsLogs(n: Node, mode: Mode): Promise<{ container: string; file: string; text: string }[]> {
  const base = n.node.path('/var/log/pods');
  const prefix = `kube-system_${DS[mode].name}-`;
  const out: { container: string; file: string; text: string }[] = [];
  for (const pod of (await readdir(base).catch(() => [] as string[])).filter((d) => d.startsWith(prefix))) {
    for (const container of await readdir(join(base, pod)).catch(() => [] as string[])) {
      for (const file of await readdir(join(base, pod, container)).catch(() => [] as string[])) {
        const text = await readFile(join(base, pod, container, file), 'utf8').catch(() => '');
        out.push({ container, file, text });
      }
    }
  }
  return out;
}

/** The last lines of the DaemonSet pod's container logs on the node (for a run with failures). */
export async function dsLogTail(n: Node, mode: Mode, lines = 15): Promise<string> {
  const out = (await dsLogs(n, mode)).flatMap(({ container, file, text }) => [
    `${container}/${file}:`,
    ...text.trimEnd().split('\n').slice(-lines),
  ]);
  return out.join('\n').slice(-4000);
}

/** The DaemonSet pod's log lines that match `re` (every container and boot), the last `max`. */
export async function dsLogGrep(n: Node, mode: Mode, re: RegExp, max = 20): Promise<string[]> {
  const out = (await dsLogs(n, mode)).flatMap(({ container, text }) =>
    text
      .split('\n')
      .filter((l) => re.test(l))
      .map((l) => `${container}: ${l.slice(0, 600)}`),
  );
  return out.slice(-max);
}

/**
 * The CNI ADDs our daemon answered 200 since `since` (ms), from its container logs (CRI format: each line starts
 * with its RFC 3339 time; the daemon logs `ADD <container id>: 200` at logLevel verbose): how many calls of a
 * burst went through the daemon rather than the shim's thin fallback.
 */
export async function daemonServedAdds(n: Node, mode: Mode, since: number): Promise<number | undefined> {
  if (!isOurDaemon(mode)) return undefined;
  const logs = (await dsLogs(n, mode)).filter((l) => l.container === 'daemon');
  return logs.reduce((sum, l) => sum + countServedAdds(l.text, since), 0);
}

/** `ADD <64 hex>: 200` lines of a CRI log text whose time is at or after `since` (pure). */
export function countServedAdds(text: string, since: number): number {
  let count = 0;
  for (const line of text.split('\n')) {
    if (!/ ADD [0-9a-f]{64}: 200\b/.test(line)) continue;
    const t = Date.parse(line.slice(0, line.indexOf(' ')));
    if (Number.isFinite(t) && t >= since) count++;
  }
  return count;
}

/** The IDs of the mode's running daemon containers (resident modes), as the API reports them. */
export async function daemonContainerIds(cluster: Cluster, mode: Mode): Promise<string[]> {
  if (!hasDaemon(mode)) return [];
  const name = isOurDaemon(mode) ? 'daemon' : 'kube-multus';
  return (await dsPods(cluster, mode).catch(() => [] as any[]))
    .flatMap((p) => p.status?.containerStatuses ?? [])
    .filter((c: any) => c.name === name && c.state?.running)
    .map((c: any) => String(c.containerID ?? '').replace(/^containerd:\/\//, ''));
}

/** The pid of the mode's daemon process (resident modes; the daemon container of its DaemonSet pod), if it runs. */
export async function daemonPid(cluster: Cluster, mode: Mode): Promise<number | undefined> {
  const goThick = !isOurDaemon(mode);
  const ids = await daemonContainerIds(cluster, mode);
  for (const pid of await containerPids(ids)) {
    const argv = (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).split('\0');
    const isDaemon = goThick
      ? argv[0]?.endsWith('/multus-daemon')
      : argv[0]?.endsWith('/multus') && argv[1] === 'daemon';
    if (isDaemon) return pid;
  }
  return undefined;
}

/** VmHWM of a process in MiB; `reset` first clears it (clear_refs 5), so the next read is the peak since. */
export async function peakRssMib(pid: number | undefined, reset = false): Promise<number | undefined> {
  if (!pid) return undefined;
  if (reset) await writeFile(`/proc/${pid}/clear_refs`, '5').catch(() => {});
  const s = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const kib = Number(/VmHWM:\s+(\d+)/.exec(s)?.[1]);
  return Number.isFinite(kib) ? Math.round((kib / 1024) * 10) / 10 : undefined;
}

/**
 * The daemon container's memory cgroup, what its memory limit is enforced on: the daemon, the delegate plugins it
 * runs (they are its children, in its cgroup) and the page cache they add; the peak since the last reset (`reset`
 * clears it first) and the cgroup's OOM kills, in MiB. cgroup v1 (memory.max_usage_in_bytes) or v2 (memory.peak).
 */
export async function daemonCgroupPeak(
  cluster: Cluster,
  mode: Mode,
  reset = false,
): Promise<{ peak_mib: number; oom_kills: number } | undefined> {
  const [id] = await daemonContainerIds(cluster, mode);
  if (!id) return undefined;
  const v1 = `/sys/fs/cgroup/memory/k8s.io/${id}`;
  const v2 = `/sys/fs/cgroup/k8s.io/${id}`;
  const read = (f: string) => readFile(f, 'utf8').catch(() => undefined);
  const isV1 = (await read(`${v1}/memory.max_usage_in_bytes`)) !== undefined;
  const peakFile = isV1 ? `${v1}/memory.max_usage_in_bytes` : `${v2}/memory.peak`;
  if (reset) await writeFile(peakFile, isV1 ? '0' : 'reset\n').catch(() => {});
  const bytes = Number((await read(peakFile))?.trim());
  if (!Number.isFinite(bytes)) return undefined;
  const events = (await read(isV1 ? `${v1}/memory.oom_control` : `${v2}/memory.events`)) ?? '';
  return {
    peak_mib: Math.round((bytes / 1048576) * 10) / 10,
    oom_kills: Number(/oom_kill (\d+)/.exec(events)?.[1] ?? 0),
  };
}

/** The process's resident memory now, split: its own (anonymous) pages and the mapped files' (its executable's). */
export async function rssSplitMib(pid: number | undefined): Promise<{ anon: number; file: number } | undefined> {
  if (!pid) return undefined;
  const s = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const mib = (k: string) => Math.round((Number(new RegExp(`${k}:\\s+(\\d+)`).exec(s)?.[1]) / 1024) * 10) / 10;
  const [anon, file] = [mib('RssAnon'), mib('RssFile')];
  return Number.isFinite(anon) && Number.isFinite(file) ? { anon, file } : undefined;
}

export interface CgroupCpu {
  cpu_s: number;
  throttled_s: number;
  throttled_periods: number;
}

/**
 * CPU of the daemon container's cgroup so far (the daemon and the delegates it runs), in seconds, and how long its
 * CPU limit held it back (CFS throttling): what a 100m limit costs a burst. cgroup v1 (cpuacct.usage, cpu.stat's
 * throttled_time in ns) or v2 (cpu.stat's usage_usec and throttled_usec).
 */
export async function daemonCgroupCpu(cluster: Cluster, mode: Mode): Promise<CgroupCpu | undefined> {
  const [id] = await daemonContainerIds(cluster, mode);
  if (!id) return undefined;
  const read = (f: string) => readFile(f, 'utf8').catch(() => undefined);
  const field = (s: string, k: string) => Number(new RegExp(`^${k} (\\d+)$`, 'm').exec(s)?.[1]);
  const v1 = await read(`/sys/fs/cgroup/cpu/k8s.io/${id}/cpu.stat`);
  const s = v1 ?? (await read(`/sys/fs/cgroup/k8s.io/${id}/cpu.stat`));
  if (s === undefined) return undefined;
  const usageNs = v1
    ? Number((await read(`/sys/fs/cgroup/cpuacct/k8s.io/${id}/cpuacct.usage`))?.trim())
    : field(s, 'usage_usec') * 1000;
  const throttledNs = v1 ? field(s, 'throttled_time') : field(s, 'throttled_usec') * 1000;
  const r = (ns: number) => Math.round(ns / 1e7) / 100;
  if (!Number.isFinite(usageNs) || !Number.isFinite(throttledNs)) return undefined;
  return { cpu_s: r(usageNs), throttled_s: r(throttledNs), throttled_periods: field(s, 'nr_throttled') || 0 };
}

/**
 * CPU seconds of the CRI runtime's reaped children so far (cutime + cstime of `<kind>.pid`): the CNI plugin it
 * execs, with what that plugin ran and waited for. With `delegateExec: "caller"` the delegates are there (the shim
 * runs them), no longer in the daemon's container (docs/resident.md).
 */
export async function runtimeChildrenCpuS(n: Node): Promise<number | undefined> {
  const pid = Number(await readFile(join(n.node.dir, `${n.node.kind}.pid`), 'utf8').catch(() => ''));
  if (!pid) return undefined;
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(f[13]) + Number(f[14]);
  return Number.isFinite(ticks) ? ticks / 100 : undefined;
}

/** CPU seconds the process itself has used (utime + stime; its children's are the cgroup's rest). */
export async function processCpuS(pid: number | undefined): Promise<number | undefined> {
  if (!pid) return undefined;
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  // the fields after the command's closing parenthesis: state is the 3rd field, utime the 14th, stime the 15th
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(f[11]) + Number(f[12]);
  return Number.isFinite(ticks) ? ticks / 100 : undefined;
}
