/**
 * One mode of the cluster bench on the real node (run.ts): the mode's DaemonSet (density/modes.ts; Go thick with
 * our daemon's resources, so that neither daemon's limit cuts its figures) pinned to the real node, its API
 * traffic through a relay of its own; the node's M pods; then
 *   1. memory with the pods' NADs only, then with all K (the NAD informer's cost per NAD, from the watch's adds);
 *   2. the daemon killed: from its new process's start to /healthz 200 (both daemons answer once their initial
 *      lists are done), the lists' completion from the audit log, the requests and bytes of the start, the
 *      memory once settled;
 *   3. at rest for `restSeconds`: requests and bytes per minute;
 *   4. a churn of 10% of the cluster's pods (every node's first tenth deleted, as many new ones created), until
 *      all run again (the real node's with their networks): requests and bytes per minute and in all, the
 *      requests of each of the real node's DEL + ADD;
 *   5. with `apiserverRestart` (a count), the API server restarted: the time until the daemon is synced again, its
 *      requests and bytes (apiserver-restart.ts);
 * then the real node's pods deleted, the DaemonSet removed and the NADs back to the pods' own.
 */
import type { ApiTunnel } from '../../../test/e2e-k8s/world.ts';
import type { Cluster } from '../../../test/k8s/cluster.ts';
import { type Node, daemonPid, dsRestarts, install, uninstall, until } from '../density/node-ops.ts';
import { type Mode, daemonLimitMib, modeObjects } from '../density/modes.ts';
import { hasAllNetworks, isReady } from '../density/pods.ts';
import {
  type Api,
  POD_NADS,
  type PodSlot,
  createNads,
  createPods,
  deleteExtraNads,
  deletePods,
  untilAllRunning,
  untilNodePods,
} from './kwok.ts';
import {
  bytesNow,
  bytesSince,
  connectionsSince,
  initialListsDoneMs,
  memoryMib,
  perMin,
  requestsIn,
  untilHealthy,
} from './measure.ts';
import { apiserverRestart } from './apiserver-restart.ts';
import { type ExecTrace, containerLog, cpuSoFar, startTicksMs, steps } from './timeline.ts';

export type BenchMode = 'resident_ts' | 'go_thick';
/** The kwok pods' image: never pulled, kwok runs nothing. */
export const FAKE_IMAGE = 'registry.invalid/fake:1';
/** The port of Multus' relay in the real node's network namespace (its containers' KUBERNETES_SERVICE_PORT). */
export const RELAY_PORT = 16443;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface Workload {
  namespaces: string[];
  /** NADs per namespace (the pods' two included). */
  perNs: number;
  /** Each node's pods (kwok's and the real node's), first the oldest. */
  byNode: Map<string, PodSlot[]>;
  realNode: string;
  /** The NADs' macvlan master on the real node. */
  master: string;
}

interface Ctx {
  cluster: Cluster;
  api: Api;
  n: Node;
  relay: ApiTunnel;
  w: Workload;
  mode: BenchMode;
  restSeconds: number;
  startRepeats: number;
  /** Restart the API server this many times at the end (apiserver-restart.ts; 0: not). */
  apiserverRestart: number;
  /** Restarts measured (the first one's traffic and memory too); ready_ms is their median. */
  restarts: number;
  /** The kernel's fork and exec events (timeline.ts), when tracefs is there. */
  trace: ExecTrace | undefined;
  /** The boot time, ms since the epoch (timeline.ts: the boot clock of the start times and the trace). */
  bootMs: number;
  say(s: string): void;
}

/** The density bench's layout of the mode: Go thick with our daemon's resources (go_thick_300mi). */
const layout = (mode: BenchMode): Mode => (mode === 'go_thick' ? 'go_thick_300mi' : mode);
const bytes = (b: { up: number; down: number }) => b.up + b.down;
const realReady = (p: any) => isReady(p) && hasAllNetworks(p, POD_NADS);

/** The mode's objects: the API server reached through Multus' relay, the DaemonSet on the real node only. */
function objects(c: Ctx) {
  const objs = modeObjects(layout(c.mode), String(RELAY_PORT));
  for (const { obj } of objs) {
    if (obj.kind === 'DaemonSet')
      (obj as any).spec.template.spec.nodeSelector = { 'kubernetes.io/hostname': c.w.realNode };
  }
  return objs;
}

/**
 * How long a killed daemon may take to come back: kubelet restarts a container that keeps dying after a back-off
 * of 10 s doubling to 300 s (reset after 10 minutes of running), so the 6th kill of a run (`--restarts` plus
 * `--start-repeats`) waits 160 s and the 7th 300 s before its start; the start's figures are taken from the new
 * process's own start, so the wait changes none of them.
 */
const RESTART_WITHIN_MS = 330_000;
/** Between two API-server restarts of a mode: longer than client-go's 2 min after which its backoff starts over. */
const API_RESTART_GAP_MS = 130_000;
async function pidOf(c: Ctx, not?: number): Promise<number> {
  return until(`the ${c.mode} daemon's process`, RESTART_WITHIN_MS, async () => {
    const pid = await daemonPid(c.cluster, c.mode);
    return pid && pid !== not ? pid : undefined;
  });
}

/** 1. Memory with the pods' NADs, then with all K: the NAD informer's KiB per NAD. */
async function nadCost(c: Ctx, pid: number): Promise<any> {
  const base = c.w.namespaces.length * POD_NADS.length;
  await sleep(10_000);
  const before = await memoryMib(pid);
  c.say(`${c.mode}: the other ${c.w.namespaces.length * c.w.perNs - base} NADs`);
  await createNads(c.api, c.w.namespaces, POD_NADS.length, c.w.perNs, c.w.master);
  await sleep(20_000);
  const after = await memoryMib(pid);
  const added = c.w.namespaces.length * c.w.perNs - base;
  return {
    nads_before: base,
    nads_after: base + added,
    anon_before_mib: before.anon,
    anon_after_mib: after.anon,
    kib_per_nad: added > 0 ? Math.round(((after.anon - before.anon) * 1024 * 100) / added) / 100 : null,
  };
}

/** The mode's DaemonSet and daemon container (their CRI log files under the node's /var/log/pods). */
const logOf = (mode: BenchMode) =>
  mode === 'go_thick' ? { ds: 'kube-multus-ds', container: 'kube-multus' } : { ds: 'multus-ts', container: 'daemon' };

/**
 * The daemon SIGKILLed, kubelet starts its container again: from the new process's creation (the kernel's fork
 * event, else /proc/<pid>/stat) to the first /healthz 200, on the boot clock; the exec of the daemon proper (the
 * container's set-up before it) and the start's steps (timeline.ts).
 */
async function killAndTime(c: Ctx, pid: number) {
  process.kill(pid, 'SIGKILL');
  await sleep(100);
  // polled from now on: finding the new process through the API takes longer than some starts
  const healthy = untilHealthy(c.n.node.path('/run/multus/multus.sock'), RESTART_WITHIN_MS);
  const fresh = await pidOf(c, pid);
  const traced = c.trace?.of(fresh);
  const t0 = traced?.fork ?? (await startTicksMs(fresh));
  const readyAt = (await healthy) - c.bootMs;
  const cpu = await cpuSoFar(fresh);
  const { ds, container } = logOf(c.mode);
  await sleep(1000); // the runtime's last lines
  const log = await containerLog(c.n.node.path('/var/log/pods'), ds, container, c.bootMs);
  const lastExec = traced?.execs.at(-1);
  const dir = lastExec ? lastExec.file.slice(0, lastExec.file.lastIndexOf('/') + 1) : '/usr/src/multus-cni/';
  const others = c.trace?.othersBetween(fresh, dir, t0, readyAt);
  const timeline = steps(t0, traced, log, readyAt, others?.execs);
  const r = (ms: number) => Math.round(ms * 10) / 10;
  c.say(
    `${c.mode}: ready ${r(readyAt - t0)} ms, ${JSON.stringify(cpu)}: ${timeline.map((s) => `${s.at_ms} ${s.step}`).join(' | ')}`,
  );
  const run = {
    ready_ms: r(readyAt - t0),
    exec_ms: lastExec ? r(lastExec.ms - t0) : null,
    fork_from: traced?.fork !== undefined ? 'trace' : 'stat',
    ...cpu,
    // other multus execs on the machine during the start (other work: its load)
    execs_elsewhere: others?.elsewhere ?? null,
    timeline,
  };
  return { pid: fresh, startedAtMs: t0 + c.bootMs, run };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;

/** 2. Restarts: ready time (their median), the first one's start traffic, memory once settled. */
async function restart(c: Ctx, pid: number): Promise<any> {
  const at = bytesNow(c.relay);
  const first = await killAndTime(c, pid);
  const started = first.startedAtMs;
  await sleep(2000);
  const lists = await initialListsDoneMs(c.cluster, started - 1000);
  const reqs = await requestsIn(c.cluster, started - 1000, Date.now());
  // each connection of the new process (a watch each, or both on one): where the start's bytes went
  const connections = connectionsSince(c.relay, at);
  const start = { requests: reqs.count, bytes: bytes(bytesSince(c.relay, at)), by: reqs.by, connections };
  await sleep(15_000);
  const memory = await memoryMib(first.pid);
  let last = first;
  const runs = [first.run];
  for (let i = 1; i < c.restarts; i++) {
    last = await killAndTime(c, last.pid);
    runs.push(last.run);
    await sleep(3000);
  }
  return {
    pid: last.pid,
    ready_ms: median(runs.map((x) => x.ready_ms)),
    exec_ms: runs.every((x) => x.exec_ms !== null) ? median(runs.map((x) => x.exec_ms!)) : null,
    cpu_ms: median(runs.map((x) => x.cpu_ms)),
    restarts: runs,
    initial_lists_done_ms: {
      pods: lists.pods ? lists.pods - started : null,
      nads: lists.nads ? lists.nads - started : null,
    },
    start,
    memory,
  };
}

/**
 * 2b. The start's bytes again, `startRepeats - 1` more times (each daemon killed and started again by kubelet): the
 * API server's gzip flushes of a watch's initial events make them vary run to run (docs/archive/performance.md, "Where a
 * daemon's start bytes go").
 */
async function startBytesAgain(c: Ctx, pid: number): Promise<{ bytes: number; connections: unknown[] }[]> {
  const out = [];
  for (let i = 1; i < c.startRepeats; i++) {
    const at = bytesNow(c.relay);
    process.kill(pid, 'SIGKILL');
    await sleep(100);
    const healthy = untilHealthy(c.n.node.path('/run/multus/multus.sock'), RESTART_WITHIN_MS);
    pid = await pidOf(c, pid);
    await healthy;
    await sleep(3000);
    out.push({ bytes: bytes(bytesSince(c.relay, at)), connections: connectionsSince(c.relay, at) });
    await sleep(5000);
  }
  return out;
}

/** 3. Requests and bytes of a window at rest. */
async function atRest(c: Ctx): Promise<any> {
  const t0 = Date.now();
  const at = bytesNow(c.relay);
  await sleep(c.restSeconds * 1000);
  const t1 = Date.now();
  const reqs = await requestsIn(c.cluster, t0, t1);
  return {
    requests_per_min: perMin(reqs.count, t1 - t0),
    bytes_per_min: perMin(bytes(bytesSince(c.relay, at)), t1 - t0),
    by: reqs.by,
  };
}

/** 4. The churn: every node's first tenth of pods deleted and as many new ones made; until all run again. */
async function churn(c: Ctx, round: number): Promise<any> {
  const gone: PodSlot[] = [];
  const made: PodSlot[] = [];
  for (const [node, list] of c.w.byNode) {
    const k = Math.max(1, Math.round(list.length / 10));
    gone.push(...list.slice(0, k));
    const fresh = Array.from({ length: k }, (_, j) => ({ ns: list[j]!.ns, name: `${node}-c${round}-${j}`, node }));
    made.push(...fresh);
    c.w.byNode.set(node, [...list.slice(k), ...fresh]);
  }
  const real = made.filter((p) => p.node === c.w.realNode).length;
  c.say(`${c.mode}: churn of ${gone.length} pods (${real} on the real node)`);
  const t0 = Date.now();
  const at = bytesNow(c.relay);
  const [onReal, onKwok] = [made.filter((p) => p.node === c.w.realNode), made.filter((p) => p.node !== c.w.realNode)];
  await Promise.all([
    deletePods(c.api, gone, 24),
    createPods(c.api, onKwok, FAKE_IMAGE, 24),
    createPods(c.api, onReal, c.n.node.sandboxImage, 4),
  ]);
  await untilAllRunning(c.api, 900_000);
  await untilNodePods(c.api, c.w.realNode, c.w.byNode.get(c.w.realNode)!.length, 600_000, realReady);
  await sleep(5000); // the last status writes and events
  const t1 = Date.now();
  const reqs = await requestsIn(c.cluster, t0, t1);
  const b = bytes(bytesSince(c.relay, at));
  const calls = reqs.events.filter((e) => e.verb !== 'watch' && e.verb !== 'list').length;
  return {
    pods: gone.length,
    real_node_pods: real,
    seconds: Math.round((t1 - t0) / 100) / 10,
    requests: reqs.count,
    requests_per_min: perMin(reqs.count, t1 - t0),
    bytes: b,
    bytes_per_min: perMin(b, t1 - t0),
    // the requests of the real node's DELs and ADDs (not its informers' lists and watches), per pod replaced
    requests_per_del_add: real ? Math.round((calls / real) * 100) / 100 : null,
    by: reqs.by,
  };
}

/** The real node's pods deleted (their DELs through the mode), the DaemonSet removed, the NADs back. */
async function cleanUp(c: Ctx): Promise<void> {
  await deletePods(c.api, c.w.byNode.get(c.w.realNode)!, 8);
  await uninstall(c.cluster, layout(c.mode));
  await deleteExtraNads(c.api, c.w.namespaces);
}

export async function measureMode(c: Ctx): Promise<any> {
  c.say(`${c.mode}: install`);
  await install(c.cluster, c.n, layout(c.mode), 300_000, objects(c));
  const real = c.w.byNode.get(c.w.realNode)!;
  await createPods(c.api, real, c.n.node.sandboxImage, 8);
  await untilNodePods(c.api, c.w.realNode, real.length, 600_000, realReady);
  c.say(`${c.mode}: ${real.length} pods on the real node`);
  try {
    const nads = await nadCost(c, await pidOf(c));
    c.say(`${c.mode}: restart`);
    const r = await restart(c, await pidOf(c));
    c.say(`${c.mode}: at rest ${c.restSeconds} s`);
    const rest = await atRest(c);
    const ch = await churn(c, 1);
    const afterChurn = await memoryMib(r.pid);
    const again = await startBytesAgain(c, r.pid);
    const socket = c.n.node.path('/run/multus/multus.sock');
    const { ds: logDs, container } = logOf(c.mode);
    const log = () => containerLog(c.n.node.path('/var/log/pods'), logDs, container, 0);
    const say = (s: string) => c.say(`${c.mode}: ${s}`);
    const restartApi = [];
    for (let i = 0; i < c.apiserverRestart; i++) {
      // client-go's reflector backoff starts over after 2 min without a failure: each restart from the first step
      if (i > 0) await sleep(API_RESTART_GAP_MS);
      restartApi.push(await apiserverRestart({ cluster: c.cluster, relay: c.relay, socket, say, log }));
    }
    const ds = await dsRestarts(c.cluster, layout(c.mode));
    return {
      ...(restartApi.length ? { apiserver_restart: restartApi[0] } : {}),
      ...(restartApi.length > 1 ? { apiserver_restart_more: restartApi.slice(1) } : {}),
      daemon_rss_mib: r.memory.rss,
      daemon_anon_mib: r.memory.anon,
      daemon_file_mib: r.memory.file,
      daemon_peak_rss_mib: r.memory.peak,
      daemon_limit_mib: daemonLimitMib(layout(c.mode)),
      ready_ms: r.ready_ms,
      // the exec of the daemon proper (runc's container set-up before it), from the process's creation
      exec_ms: r.exec_ms,
      // the daemon's CPU (user + system) from its start to that first 200: what a loaded node stretches
      ready_cpu_ms: r.cpu_ms,
      restarts: r.restarts,
      initial_lists_done_ms: r.initial_lists_done_ms,
      api_requests_per_node: {
        start: r.start.requests,
        rest_per_min: rest.requests_per_min,
        churn_per_min: ch.requests_per_min,
        churn: ch.requests,
      },
      api_bytes_per_node: {
        start: r.start.bytes,
        start_connections: r.start.connections,
        ...(again.length ? { start_repeats: [r.start.bytes, ...again.map((a) => a.bytes)], again } : {}),
        rest_per_min: rest.bytes_per_min,
        churn_per_min: ch.bytes_per_min,
        churn: ch.bytes,
      },
      add_api_requests: ch.requests_per_del_add,
      nad_informer: nads,
      after_churn_mib: { rss: afterChurn.rss, anon: afterChurn.anon, peak: afterChurn.peak },
      churn: { pods: ch.pods, real_node_pods: ch.real_node_pods, seconds: ch.seconds },
      requests_by_verb: { start: r.start.by, rest: rest.by, churn: ch.by },
      daemon_restarts: ds.restarts,
      daemon_exit_reasons: ds.reasons,
    };
  } finally {
    c.say(`${c.mode}: clean up`);
    await cleanUp(c).catch((e: Error) => c.say(`${c.mode}: clean up: ${e.message}`));
  }
}
