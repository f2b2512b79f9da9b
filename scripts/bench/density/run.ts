/**
 * The density bench (`npm run bench -- --scenario density [--pods N]`, docs/archive/performance.md "Density"), run by
 * scripts/bench/density.mjs as a child of the bench (Node 24 with --experimental-transform-types). One kube-apiserver
 * for the whole run; for each measured run a fresh kubelet node (node-ops.ts) with the mode installed by its
 * DaemonSet (modes.ts), N pods with two macvlan + host-local NADs each created by kube-burner (burner.ts), then the
 * pods deleted and what they left counted. Modes interleaved A B C D D C B A, each run (and each burst) started on a
 * quiet machine (quiet.ts); per mode the two runs' figures.
 *
 *   node --experimental-transform-types scripts/bench/density/run.ts '{"pods":N,"modes":[...],"images":{...},"dir":D}'
 *
 * Prints one JSON line (the `density` object) on stdout; progress on stderr.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createNad, ensureNamespace } from '../../../test/e2e-k8s/world.ts';
import { type Cluster, startCluster } from '../../../test/k8s/cluster.ts';
import { NODE_LINK_PEER } from '../../../test/runtime/node.ts';
import { runBurner } from './burner.ts';
import { type Fault, burst } from './burst.ts';
import { type Mode, daemonLimitMib } from './modes.ts';
import { hasAllNetworks, isReady } from './pods.ts';
import { type Watched, watchMemory } from './memory-watch.ts';
import { waitQuiet } from './quiet.ts';
import {
  type CgroupCpu,
  type Node,
  daemonCgroupCpu,
  daemonCgroupPeak,
  daemonPid,
  dsLogGrep,
  dsLogTail,
  dsPods,
  dsRestarts,
  install,
  leaks,
  peakRssMib,
  processCpuS,
  rssSplitMib,
  runtimeChildrenCpuS,
  startNode,
  stopNode,
  uninstall,
  until,
} from './node-ops.ts';

const say = (s: string) => process.stderr.write(`bench density: ${s}\n`);
const NADS = ['density-a', 'density-b'];

interface Args {
  pods: number;
  modes: Mode[];
  images: string[];
  dir: string;
  /** the reboot burst in each mode's second run */
  burst: boolean;
  /** the faults, each in a burst of its own, in the second run of these modes */
  faults: Fault[];
  faultModes: Mode[];
}

/** A namespace with its default service account and the two NADs (macvlan on the node's veth, host-local). */
async function workloadNamespace(cluster: Cluster, ns: string): Promise<void> {
  await ensureNamespace(cluster, ns);
  await until(`service account default in ${ns}`, 60_000, async () =>
    (await cluster.admin.request('GET', `/api/v1/namespaces/${ns}/serviceaccounts/default`)).status === 200
      ? true
      : undefined,
  );
  for (const [k, name] of NADS.entries()) {
    await createNad(cluster, ns, name, {
      cniVersion: '1.0.0',
      name,
      type: 'macvlan',
      master: NODE_LINK_PEER,
      mode: 'bridge',
      ipam: { type: 'host-local', ranges: [[{ subnet: `10.${241 + k}.0.0/16` }]] },
    });
  }
}

/** Pods of the workload: how many are Ready, and how many have a network-status with all three networks. */
async function podCheck(cluster: Cluster, ns: string): Promise<any> {
  const items = (await cluster.admin.get(`/api/v1/namespaces/${ns}/pods`)).items as any[];
  const ready = items.filter((p) => isReady(p));
  const ok = ready.filter((p) => hasAllNetworks(p, NADS));
  // the same figure as kube-burner's (Ready's lastTransitionTime - creationTimestamp, one-second resolution),
  // from the API: kube-burner's watcher now and then records no pod of a job whose pods all got Ready
  const ms = ready
    .map((p) => {
      const c = p.status.conditions.find((x: any) => x.type === 'Ready');
      return Date.parse(c.lastTransitionTime) - Date.parse(p.metadata.creationTimestamp);
    })
    .sort((x, y) => x - y);
  const q = (f: number) => ms[Math.min(ms.length - 1, Math.max(0, Math.ceil(f * ms.length) - 1))];
  const bad = ready.find((p) => !ok.includes(p));
  const sample = bad?.metadata?.annotations?.['k8s.v1.cni.cncf.io/network-status'] ?? (bad ? '(none)' : undefined);
  return {
    pods: items.length,
    ready: ready.length,
    netstatus_ok: ok.length,
    ...(ms.length ? { pod_ready_ms_from_api: { p50: q(0.5), p99: q(0.99) } } : {}),
    ...(sample ? { netstatus_wrong_example: String(sample).slice(0, 1500) } : {}),
  };
}

/** Deletes every pod of the namespace; waits until the API has none. */
async function deletePods(cluster: Cluster, ns: string): Promise<void> {
  await cluster.admin.request('DELETE', `/api/v1/namespaces/${ns}/pods`);
  await until(`the pods of ${ns} gone`, 600_000, async () =>
    ((await cluster.admin.get(`/api/v1/namespaces/${ns}/pods`)).items as any[]).length === 0 ? true : undefined,
  );
}

/** Requests of Multus' service accounts (ours and Go's) received in [t0, t1]. */
async function apiRequests(cluster: Cluster, t0: number, t1: number): Promise<number> {
  const events = await cluster.auditEvents();
  return events.filter((e) => {
    if (!/^system:serviceaccount:kube-system:multus(-ts)?$/.test(e.user.username)) return false;
    const t = Date.parse(String(e.requestReceivedTimestamp));
    return t >= t0 && t <= t1;
  }).length;
}

/** The reboot burst, then each fault in a burst of its own, with the pods of the run; their figures. */
async function bursts(cluster: Cluster, a: Args, n: Node, mode: Mode, ns: string): Promise<any> {
  const ctx = { n, cluster, mode, ns, nads: NADS, pods: a.pods };
  const before = await dsRestarts(cluster, mode);
  const quiet = await waitQuiet();
  say(`${mode}: reboot burst (${JSON.stringify(quiet)})`);
  const watch = watchMemory(cluster, mode);
  const b = await burst(ctx);
  const watched = await watch.stop();
  say(`${mode}: burst: ${JSON.stringify(b)}`);
  const after = await dsRestarts(cluster, mode);
  const out: any = {
    burst: {
      ...b,
      daemon_restarts: after.restarts - before.restarts,
      daemon_exit_reasons: after.reasons,
      quiet,
      ...watchedFigures(watched),
    },
    faults: {},
  };
  if (!a.faultModes.includes(mode)) return out;
  for (const f of a.faults) {
    say(`${mode}: reboot burst with fault ${f}`);
    out.faults[f] = await burst(ctx, f);
    say(`${mode}: ${f}: ${JSON.stringify(out.faults[f])}`);
  }
  return out;
}

/** A run whose DaemonSet pod never became Ready: every pod counts as failed; what the DaemonSet pod says. */
async function installFailure(cluster: Cluster, a: Args, n: Node, mode: Mode, error: string): Promise<any> {
  say(`${mode}: ${error}`);
  const pods = await dsPods(cluster, mode).catch(() => []);
  const status = pods.map((p) => ({
    phase: p.status?.phase,
    init: (p.status?.initContainerStatuses ?? []).map((c: any) => c.state),
    containers: (p.status?.containerStatuses ?? []).map((c: any) => ({ state: c.state, last: c.lastState })),
  }));
  return {
    mode,
    error,
    failed_pods: a.pods,
    daemonset_pod: JSON.stringify(status).slice(0, 2000),
    daemonset_log: await dsLogTail(n, mode),
  };
}

/** One measured run of a mode on a fresh node (the second run of a mode also runs the bursts). */
async function measuredRun(cluster: Cluster, a: Args, mode: Mode, k: number): Promise<any> {
  say(`run ${k}: ${mode}: starting a node`);
  const n: Node = await startNode(cluster, a.images);
  try {
    const installed = await install(cluster, n, mode).then(
      () => undefined,
      (e: Error) => e.message,
    );
    if (installed) return await installFailure(cluster, a, n, mode, installed);
    const ns = `density-${k}`;
    await workloadNamespace(cluster, ns);
    const quiet = await waitQuiet();
    say(
      `run ${k}: ${mode}: ${quiet.reached ? 'quiet' : 'still busy'} after ${quiet.waited_s} s (${JSON.stringify(quiet)})`,
    );
    const pid = await daemonPid(cluster, mode);
    await peakRssMib(pid, true);
    await daemonCgroupPeak(cluster, mode, true);
    const restartsBefore = await dsRestarts(cluster, mode);
    const cpuBefore = await daemonCgroupCpu(cluster, mode);
    const ownCpuBefore = await processCpuS(pid);
    const runtimeCpuBefore = await runtimeChildrenCpuS(n);
    say(`run ${k}: ${mode}: kube-burner, ${a.pods} pods`);
    const watch = watchMemory(cluster, mode);
    const t0 = Date.now();
    const w = { namespace: ns, networks: NADS.join(','), image: n.node.sandboxImage, nodeName: n.node.nodeName };
    const burner = await runBurner(join(a.dir, `run-${k}-${mode}`), cluster.adminKubeconfig, w, a.pods);
    const t1 = Date.now();
    const check = await podCheck(cluster, ns);
    const watched = await watch.stop();
    const rss = await peakRssMib(pid);
    const cgroup = await daemonCgroupPeak(cluster, mode);
    const split = await rssSplitMib(pid);
    const restarts = await dsRestarts(cluster, mode);
    const cpu = await daemonCgroupCpu(cluster, mode);
    const ownCpu = await processCpuS(pid);
    const runtimeCpu = await runtimeChildrenCpuS(n);
    const dsLog = check.netstatus_ok < a.pods ? await dsLogTail(n, mode) : undefined;
    const requests = await apiRequests(cluster, t0, t1);
    say(`run ${k}: ${mode}: ${JSON.stringify(burner.pod_ready_ms)} ${JSON.stringify(check)}`);
    const second = k > a.modes.length;
    const b = second && a.burst && check.ready === a.pods ? await bursts(cluster, a, n, mode, ns) : undefined;
    say(`run ${k}: ${mode}: deleting the pods`);
    await deletePods(cluster, ns);
    await new Promise((r) => setTimeout(r, 2000));
    const left = await leaks(n);
    // what the mode's own log says went wrong, when it left something (the DELs' errors)
    const leakLog = left.ips || left.caches ? await dsLogGrep(n, mode, /error|fail/i) : undefined;
    return {
      mode,
      kube_burner_exit: burner.exitCode,
      pod_ready_ms: burner.pod_ready_ms,
      ...check,
      failed_pods: a.pods - check.netstatus_ok,
      api_requests_per_pod: Math.round((requests / a.pods) * 100) / 100,
      daemon_peak_rss_mib: rss,
      ...(split ? { daemon_rss_now_mib: split } : {}),
      ...(cgroup ? { daemon_cgroup_peak_mib: cgroup.peak_mib, daemon_cgroup_oom_kills: cgroup.oom_kills } : {}),
      // the DaemonSet pod's container restarts while the pods were created (an OOM kill shows as OOMKilled)
      daemonset_restarts: restarts.restarts - restartsBefore.restarts,
      daemonset_exit_reasons: restarts.reasons,
      ...(cpu && cpuBefore ? { daemon_cgroup_cpu: cpuDelta(cpuBefore, cpu) } : {}),
      // of it, the daemon process's own (the rest: the delegates it ran)
      ...(ownCpu !== undefined && ownCpuBefore !== undefined
        ? { daemon_process_cpu_s: Math.round((ownCpu - ownCpuBefore) * 100) / 100 }
        : {}),
      // the runtime's CNI calls: the plugin (the shim, or the thin plugin) and what it ran (the delegates, in caller mode)
      ...(runtimeCpu !== undefined && runtimeCpuBefore !== undefined
        ? { runtime_children_cpu_s: Math.round((runtimeCpu - runtimeCpuBefore) * 100) / 100 }
        : {}),
      leaked: left,
      quiet,
      ...watchedFigures(watched),
      ...(burner.pod_ready_ms ? {} : { kube_burner_log: burner.log }),
      ...(b ? { bursts: b } : {}),
      ...(dsLog ? { daemonset_log: dsLog } : {}),
      ...(leakLog?.length ? { daemonset_errors: leakLog } : {}),
      seconds: Math.round((t1 - t0) / 100) / 10,
    };
  } finally {
    await uninstall(cluster, mode).catch((e) => say(`uninstall ${mode}: ${e.message}`));
    await stopNode(cluster, n).catch((e) => say(`stop node: ${e.message}`));
  }
}

/** The machine's load while it ran; the daemon container's memory as sampled, and the kernel's OOM reports. */
function watchedFigures(w: Watched): any {
  return {
    load: w.load,
    ...(w.cgroup ? { daemon_cgroup_watch: w.cgroup } : {}),
    ...(w.kernel_oom_reports?.length ? { kernel_oom_reports: w.kernel_oom_reports } : {}),
  };
}

/** The daemon container's CPU and throttling while the pods were created (a restarted container: since its start). */
function cpuDelta(a: CgroupCpu, b: CgroupCpu): CgroupCpu {
  const d = (k: keyof CgroupCpu) => Math.round((b[k] >= a[k] ? b[k] - a[k] : b[k]) * 100) / 100;
  return { cpu_s: d('cpu_s'), throttled_s: d('throttled_s'), throttled_periods: d('throttled_periods') };
}

const avg = (xs: number[]) => Math.round((xs.reduce((s, x) => s + x, 0) / (xs.length || 1)) * 10) / 10;
const sumLeaks = (rs: any[]) =>
  Object.fromEntries(
    ['ips', 'caches', 'links', 'netns'].map((k) => [k, rs.reduce((s, r) => s + (r.leaked?.[k] ?? 0), 0)]),
  );

/** The per-mode figures: p50/p99 the mean of the runs', failures and leaks summed, the worst peak RSS. */
function summary(runs: any[], modes: Mode[]): any {
  const out: any = { modes: {}, daemon_peak_rss_mib: {} };
  for (const m of modes) {
    const rs = runs.filter((r) => r.mode === m);
    // a run with failed pods has quantiles of the few pods that got Ready: not comparable, left out
    const ok = rs.filter((r) => r.pod_ready_ms && r.failed_pods === 0);
    const api = rs.filter((r) => r.pod_ready_ms_from_api && r.failed_pods === 0);
    out.modes[m] = {
      // null, not 0, when kube-burner measured no run of the mode
      pod_ready_ms: ok.length
        ? { p50: avg(ok.map((r) => r.pod_ready_ms.p50)), p99: avg(ok.map((r) => r.pod_ready_ms.p99)) }
        : null,
      kube_burner_runs_measured: `${ok.length}/${rs.length}`,
      pod_ready_ms_from_api: api.length
        ? {
            p50: avg(api.map((r) => r.pod_ready_ms_from_api.p50)),
            p99: avg(api.map((r) => r.pod_ready_ms_from_api.p99)),
          }
        : null,
      failed_pods: rs.reduce((s, r) => s + r.failed_pods, 0),
      api_requests_per_pod: avg(
        rs.filter((r) => typeof r.api_requests_per_pod === 'number').map((r) => r.api_requests_per_pod),
      ),
      leaked: sumLeaks(rs),
      runs: rs.map(({ mode: _m, ...r }) => r),
    };
    const rss = rs.map((r) => r.daemon_peak_rss_mib).filter((x) => typeof x === 'number');
    const cg = rs.map((r) => r.daemon_cgroup_peak_mib).filter((x) => typeof x === 'number');
    if (rss.length)
      out.daemon_peak_rss_mib[m] = {
        peak: Math.max(...rss),
        limit: daemonLimitMib(m),
        ...(cg.length ? { container_cgroup_peak: Math.max(...cg) } : {}),
      };
    const b = rs.find((r) => r.bursts)?.bursts;
    if (b) {
      (out.burst ??= {})[m] = { ...b.burst, daemon_limit_mib: daemonLimitMib(m) };
      if (Object.keys(b.faults).length) (out.faults ??= {})[m] = b.faults;
    }
  }
  return out;
}

async function main(): Promise<void> {
  const a = JSON.parse(process.argv[2] ?? '{}') as Args;
  await mkdir(a.dir, { recursive: true });
  const order = [...a.modes, ...[...a.modes].reverse()];
  say(`order ${order.join(' ')}; ${a.pods} pods per run`);
  const cluster = await startCluster({ serviceAccountAdmission: true, apiserverArgs: ['--allow-privileged=true'] });
  const runs: any[] = [];
  try {
    for (const [k, mode] of order.entries()) {
      runs.push(await measuredRun(cluster, a, mode, k + 1));
      // each run's record as soon as it is there: a long run stopped midway keeps what it measured
      await writeFile(join(a.dir, `run-${k + 1}-${mode}.json`), JSON.stringify(runs.at(-1)) + '\n');
    }
  } finally {
    await cluster.stop();
  }
  process.stdout.write(JSON.stringify({ pods: a.pods, order, ...summary(runs, a.modes) }) + '\n');
}

main().catch((e) => {
  process.stderr.write(`bench density: FAILED: ${e?.stack ?? e}\n`);
  process.exit(1);
});
