/**
 * The reboot burst and the faults injected into it (docs/reliability.md, "Density faults"). A reboot of the
 * node, as far as Multus can tell: kubelet SIGKILLed, containerd stopped, every container killed (the shims and
 * every process in the pods' cgroups), the pods' network namespaces unmounted and removed (their veths go with
 * them), /run/multus and /run/k8s.cni.cncf.io emptied, /var/lib/cni kept as on disk; then containerd and kubelet
 * started again, and the time until every pod is Ready again (a Ready transition after the start) with all its
 * networks in its network-status. One fault may run in the burst:
 *   api          kube-apiserver stopped (SIGTERM) as the burst starts and started again 30 s later, on the same
 *                port and etcd (test/k8s/cluster.ts startApiserver); the bench's own polls fail meanwhile
 *   daemon-kill  the resident daemon SIGKILLed once it serves again (kubelet restarts its container; the shim's
 *                fallback serves meanwhile)
 *   containerd   containerd restarted once a third of the pods are Ready
 *   kubelet      kubelet restarted once a third of the pods are Ready
 *   cache-full   the node's /var/lib/cni (a 256 MiB tmpfs in every run) full from the power-on for 20 s
 * Then: pods recovered / N, seconds to recover, and what is left beyond the N pods' own (host-local leases,
 * network namespaces, links, CNI plugin processes still running).
 */
import { readFile, readdir } from 'node:fs/promises';
import type { Cluster } from '../../../test/k8s/cluster.ts';
import { runOk } from '../../../test/runtime/runtime.ts';
import { type Mode, hasDaemon } from './modes.ts';
import { hasAllNetworks, isReady } from './pods.ts';
import {
  BRIDGE,
  type Node,
  containerPids,
  daemonCgroupPeak,
  daemonServedAdds,
  daemonPid,
  dsLogGrep,
  peakRssMib,
  rssSplitMib,
} from './node-ops.ts';
import { NODE_LINK, NODE_LINK_PEER } from '../../../test/runtime/node.ts';

export const FAULTS = ['api', 'daemon-kill', 'containerd', 'kubelet', 'cache-full'] as const;
export type Fault = (typeof FAULTS)[number];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Runs a shell command in the node's mount namespace (no input from outside: fixed scripts only). */
const inNode = (n: Node, script: string) =>
  runOk('nsenter', ['-t', String(n.node.holderPid), '--mount', '--', 'sh', '-c', script]);

/** Pids whose command line matches. */
async function pidsWhere(test: (cmdline: string[]) => boolean): Promise<number[]> {
  const out: number[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const cmd = (await readFile(`/proc/${name}/cmdline`, 'utf8').catch(() => '')).split('\0');
    if (test(cmd)) out.push(Number(name));
  }
  return out;
}

function kill(pids: number[]): void {
  for (const p of pids) {
    try {
      process.kill(p, 'SIGKILL');
    } catch {
      // gone
    }
  }
}

const kubelet = (n: Node): any => (n.node as any).procs.get('kubelet');

async function killKubelet(n: Node): Promise<void> {
  const k = kubelet(n);
  if (!k || k.child.exitCode !== null || k.child.signalCode !== null) return;
  k.child.kill('SIGKILL');
  await k.exited;
}

/** Power off: kubelet, containerd, every container, the pods' network namespaces, the runtime dirs of /run. */
async function powerOff(n: Node): Promise<void> {
  const ids = async (args: string[]) => (await n.node.crictl(args)).stdout.split('\n').filter(Boolean);
  const containers = [...(await ids(['pods', '-q'])), ...(await ids(['ps', '-a', '-q']))];
  await killKubelet(n);
  await n.node.stopContainerd();
  const socket = n.node.socket;
  kill(await pidsWhere((cmd) => cmd.includes(socket))); // the shims
  kill(await containerPids(containers)); // what ran in the containers (a shim's death leaves them)
  await sleep(500);
  await inNode(
    n,
    'for f in /run/netns/cni-*; do [ -e "$f" ] || continue; umount "$f" 2>/dev/null; rm -f "$f"; done; ' +
      'rm -rf /run/multus/* /run/k8s.cni.cncf.io/*',
  );
}

/** The workload's pods that are Ready since `since` (ms) with all three networks in their network-status. */
export async function recovered(cluster: Cluster, ns: string, nads: string[], since: number): Promise<number> {
  const items = (await cluster.admin.get(`/api/v1/namespaces/${ns}/pods`)).items as any[];
  return items.filter((p) => isReady(p, since) && hasAllNetworks(p, nads)).length;
}

/** Up to three of the workload's pods not counted as recovered since `since`: what their status says. */
async function notRecovered(cluster: Cluster, ns: string, nads: string[], since: number): Promise<any[]> {
  const items = (await cluster.admin.get(`/api/v1/namespaces/${ns}/pods`).catch(() => ({ items: [] }))).items as any[];
  return items
    .filter((p) => !(isReady(p, since) && hasAllNetworks(p, nads)))
    .slice(0, 3)
    .map((p) => ({
      name: p.metadata.name,
      ready: (p.status?.conditions ?? []).find((c: any) => c.type === 'Ready'),
      containers: (p.status?.containerStatuses ?? []).map((c: any) => c.state),
      network_status: String(p.metadata.annotations?.['k8s.v1.cni.cncf.io/network-status'] ?? '(none)').slice(0, 600),
    }));
}

/** Fills the node's /var/lib/cni: 1 MiB blocks, then 512-byte ones for what a last partial block leaves. */
const fillCache = (n: Node) =>
  inNode(
    n,
    'dd if=/dev/zero of=/var/lib/cni/.density-fill bs=1M 2>/dev/null; ' +
      'dd if=/dev/zero of=/var/lib/cni/.density-fill2 bs=512 2>/dev/null; true',
  );

/** Injects `fault` while the burst runs; resolves when the fault is over. */
async function inject(fault: Fault, ctx: BurstCtx, progress: () => Promise<number>): Promise<string> {
  const { n, cluster, mode, pods } = ctx;
  const third = async () => {
    for (let i = 0; i < 2400 && (await progress()) < pods / 3; i++) await sleep(250);
  };
  if (fault === 'api') {
    await cluster.stopApiserver();
    const t = Date.now();
    await sleep(30_000);
    await cluster.startApiserver();
    return `kube-apiserver stopped for 30 s (serving again after ${Math.round((Date.now() - t) / 100) / 10} s)`;
  }
  if (fault === 'daemon-kill') {
    if (!hasDaemon(mode)) return 'n/a (no daemon)';
    let pid: number | undefined;
    for (let i = 0; i < 480 && !(pid = await daemonPid(cluster, mode)); i++) await sleep(250);
    if (pid) kill([pid]);
    return pid ? `daemon pid ${pid} SIGKILLed` : 'the daemon never came back';
  }
  if (fault === 'containerd') {
    await third();
    await n.node.restart();
    return 'containerd restarted';
  }
  if (fault === 'kubelet') {
    await third();
    await killKubelet(n);
    await n.node.startKubelet(cluster, 300_000);
    return 'kubelet restarted';
  }
  // filled before the power-on (fillCache), and kept full for 20 s: the burst's first DELs (the dead sandboxes')
  // free pages, which the ADDs after them would use
  await inNode(
    n,
    'end=$(( $(date +%s) + 20 )); while [ "$(date +%s)" -lt "$end" ]; do ' +
      'dd if=/dev/zero of=/var/lib/cni/.density-fill2 bs=512 oflag=append conv=notrunc 2>/dev/null; sleep 0.1; done',
  );
  await inNode(n, 'rm -f /var/lib/cni/.density-fill /var/lib/cni/.density-fill2');
  return '/var/lib/cni full for 20 s';
}

export interface BurstCtx {
  n: Node;
  cluster: Cluster;
  mode: Mode;
  ns: string;
  nads: string[];
  pods: number;
}

/** What is there beyond the N pods' own: leases, network namespaces, veths on the bridge, plugin processes. */
async function excess(ctx: BurstCtx): Promise<Record<string, number>> {
  const { n, pods } = ctx;
  const leases = await inNode(n, 'ls /var/lib/cni/networks/*/ 2>/dev/null | grep -c "^[0-9]" || true');
  const links = JSON.parse(await runOk('ip', ['-n', n.node.hostNs, '-j', 'link', 'show'])) as { ifname: string }[];
  const known = new Set(['lo', NODE_LINK, NODE_LINK_PEER, BRIDGE]);
  const plugins = await pidsWhere((cmd) => /\/opt\/cni\/bin\/(?!multus)/.test(cmd[0] ?? ''));
  return {
    ips: Number(leases.trim()) - 3 * pods,
    netns: (await n.node.netnsFiles()).length - pods,
    links: links.filter((l) => !known.has(l.ifname)).length - pods,
    processes: plugins.length,
  };
}

/** One reboot burst, with `fault` in it or none; the recovery figures. */
export async function burst(ctx: BurstCtx, fault?: Fault): Promise<any> {
  const { n, cluster, ns, nads, pods, mode } = ctx;
  await powerOff(n);
  if (fault === 'cache-full') await fillCache(n); // full from the power-on, not after the first ADDs
  const t0 = Date.now();
  await n.node.start();
  const progress = () => recovered(cluster, ns, nads, t0).catch(() => 0);
  const kubeletUp = n.node.startKubelet(cluster, 300_000);
  const injected = fault ? inject(fault, ctx, progress) : Promise.resolve('');
  await kubeletUp.catch(() => {}); // with the API away it is not Ready within its wait; the pods say when it is
  const deadline = t0 + 300_000;
  let ready = 0;
  while ((ready = await progress()) < pods && Date.now() < deadline) await sleep(500);
  const seconds = Math.round((Date.now() - t0) / 100) / 10;
  const missing = ready < pods ? await notRecovered(cluster, ns, nads, t0) : [];
  const what = await injected;
  await sleep(2000);
  const pid = await daemonPid(cluster, mode);
  const rss = await peakRssMib(pid);
  const split = await rssSplitMib(pid);
  // the container's cgroup is new after the power-on (its first peak is the burst's), unless the fault killed it
  const cgroup = await daemonCgroupPeak(cluster, mode);
  const over = await excess(ctx);
  // resident modes: how many of the burst's ADDs the daemon served (the rest: the shim's thin fallback)
  const served = await daemonServedAdds(n, mode, t0).catch(() => undefined);
  const errors = (over.ips ?? 0) > 0 ? await dsLogGrep(n, mode, /error|fail/i, 10) : [];
  return {
    ...(fault ? { fault: what } : {}),
    recovered: `${ready}/${pods}`,
    seconds,
    daemon_peak_rss_mib: rss,
    ...(split ? { daemon_rss_now_mib: split } : {}),
    ...(cgroup ? { daemon_cgroup_peak_mib: cgroup.peak_mib, daemon_cgroup_oom_kills: cgroup.oom_kills } : {}),
    ...(served === undefined ? {} : { adds_served_by_daemon: served }),
    excess: over,
    ...(errors.length ? { daemonset_errors: errors } : {}),
    ...(missing.length ? { not_recovered: missing } : {}),
  };
}
