/**
 * The cluster bench (`npm run bench -- --scenario cluster [--nodes N] [--pods-per-node M] [--nads K]`,
 * docs/archive/performance.md "A cluster"), run by scripts/bench/cluster.mjs as a child of the bench (Node 24 with
 * --experimental-transform-types). One kube-apiserver whose audit log keeps Multus' requests only; kwok
 * (kwok.ts) simulates N-1 nodes with M pods each, every pod requesting two NADs of its namespace, and K NADs in
 * all across the namespaces; one real kubelet node (the density bench's, test/runtime/node.ts, with names and an
 * address of its own) with M pods of its own. Then for resident_ts and go_thick in turn on the real node
 * (mode.ts): the daemon's memory, its time from start to ready, its API requests and bytes at rest and during a
 * churn of 10% of the cluster's pods, the requests of an ADD.
 *
 *   node --experimental-transform-types scripts/bench/cluster/run.ts '{"nodes":N,"podsPerNode":M,"nads":K,...}'
 *
 * Prints one JSON line (the `cluster` object) on stdout; progress on stderr.
 */
import { spawn, spawnSync } from 'node:child_process';
import { loadavg } from 'node:os';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ApiTunnel } from '../../../test/e2e-k8s/world.ts';
import { type Cluster, startCluster } from '../../../test/k8s/cluster.ts';
import { startNode, stopNode } from '../density/node-ops.ts';
import {
  Api,
  POD_NADS,
  createNads,
  createNamespaces,
  deleteExtraNads,
  createNodes,
  createPods,
  slots,
  startKwok,
  untilAllRunning,
} from './kwok.ts';
import { AUDIT_POLICY } from './measure.ts';
import { ExecTrace, bootTimeMs } from './timeline.ts';
import { type BenchMode, FAKE_IMAGE, type Workload, RELAY_PORT, measureMode } from './mode.ts';

const say = (s: string) => process.stderr.write(`bench cluster: ${s}\n`);
const load = () => Math.round(loadavg()[0]! * 100) / 100;

interface Args {
  nodes: number;
  podsPerNode: number;
  nads: number;
  restSeconds: number;
  /** Restarts of each mode's daemon (ready_ms: their median). */
  restarts: number;
  /** Starts measured per mode (the first one's memory and ready time; every one's bytes). */
  startRepeats?: number;
  modes: BenchMode[];
  /** The API server restarted this many times per mode, at its end (apiserver-restart.ts; 0: not). */
  apiserverRestart?: number;
  images: string[];
  kwok: string;
  dir: string;
  /** A lock file held (flock) while the real node runs, as a shared machine asks of every kubelet node. */
  nodeLock?: string;
}

/** The real node: a name, an address and veth names none of the tiers' default node's. */
const REAL = { name: 'cluster-real', ip: '10.249.253.1', link: 'mtscl0', linkPeer: 'mtscl1' };

/**
 * Holds `file` with flock(1) until the clean-up (a `cat` on our pipe: closing it ends the hold); a bench stopped
 * while it waits for the lock stops its flock too.
 */
async function holdLock(file: string): Promise<void> {
  const child = spawn('flock', [file, 'sh', '-c', 'echo locked; exec cat'], { stdio: ['pipe', 'pipe', 'inherit'] });
  cleanups.push(() => {
    child.stdin.end();
    if (child.exitCode === null) child.kill();
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (b: Buffer) => b.toString().includes('locked') && resolve());
    child.once('exit', (c) => reject(new Error(`flock ${file} exited ${c}`)));
  });
}

/** The simulated part: kwok, its nodes, the namespaces and the pods' NADs, the pods; its figures. */
async function simulated(a: Args, cluster: Cluster, api: Api, w: Workload): Promise<any> {
  const t0 = Date.now();
  say(`kwok: ${a.nodes - 1} nodes`);
  await createNodes(api, a.nodes - 1);
  const t1 = Date.now();
  say(`${w.namespaces.length} namespaces, their pods' NADs`);
  await createNads(api, w.namespaces, 0, POD_NADS.length, REAL.linkPeer);
  const kwokPods = slots(
    Array.from({ length: a.nodes - 1 }, (_, i) => `kwok-${i}`),
    a.podsPerNode,
    w.namespaces,
  );
  say(`kwok: ${kwokPods.length} pods`);
  await createPods(api, kwokPods, FAKE_IMAGE);
  await untilAllRunning(api, 1_800_000);
  w.byNode = new Map();
  for (const p of kwokPods) w.byNode.set(p.node, [...(w.byNode.get(p.node) ?? []), p]);
  const t2 = Date.now();
  say(`kwok: ${kwokPods.length} pods Running (${Math.round((t2 - t1) / 1000)} s), load ${load()}`);
  return {
    nodes_ready_s: Math.round((t1 - t0) / 1000),
    pods_running_s: Math.round((t2 - t1) / 1000),
    load_after: load(),
  };
}

const ROOT = join(import.meta.dirname, '../../..');

/**
 * The NAD informer's JS heap per NAD at K (nad-heap.ts, under Bun as the daemon runs): all K NADs made, measured,
 * and the extra ones deleted again (the modes start with the pods' NADs only).
 */
async function nadHeap(cluster: Cluster, api: Api, w: Workload): Promise<any> {
  const total = w.namespaces.length * w.perNs;
  await createNads(api, w.namespaces, POD_NADS.length, w.perNs, w.master);
  const bun = join(ROOT, 'node_modules/@oven/bun-linux-x64/bin/bun');
  const script = join(ROOT, 'scripts/bench/cluster/nad-heap.ts');
  const out: any = { load: load() };
  for (const kind of ['trimmed', 'whole']) {
    const r = spawnSync(bun, [script, cluster.multusKubeconfig, String(total), kind], {
      cwd: ROOT,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
      timeout: 900_000,
    });
    out[kind] = r.status === 0 ? JSON.parse(r.stdout.trim().split('\n').pop()!) : { error: `exit ${r.status}` };
  }
  await deleteExtraNads(api, w.namespaces);
  return out;
}

/** What to stop, last made first: run on the way out, and on SIGTERM/SIGINT (kwok has no watchdog of its own). */
const cleanups: (() => Promise<void> | void)[] = [];
async function cleanUp(): Promise<void> {
  for (const f of cleanups.splice(0).reverse()) await Promise.resolve(f()).catch((e: Error) => say(e.message));
}
for (const sig of ['SIGTERM', 'SIGINT'] as const) {
  process.once(sig, () => void cleanUp().finally(() => process.exit(1)));
}

async function main(): Promise<void> {
  const a = JSON.parse(process.argv[2] ?? '{}') as Args;
  await mkdir(a.dir, { recursive: true });
  const policy = join(a.dir, 'audit-policy.yaml');
  await writeFile(policy, AUDIT_POLICY, { mode: 0o600 });
  const nsCount = Math.max(1, Math.min(100, Math.floor(a.nads / 10)));
  const perNs = Math.max(POD_NADS.length, Math.floor(a.nads / nsCount));
  const out: any = {
    nodes: a.nodes,
    pods_per_node: a.podsPerNode,
    pods: a.nodes * a.podsPerNode,
    nads: nsCount * perNs,
    namespaces: nsCount,
    load_start: load(),
  };
  say(`N=${a.nodes} M=${a.podsPerNode} K=${out.nads} (${nsCount} namespaces x ${perNs}), load ${load()}`);
  const cluster = await startCluster({
    serviceAccountAdmission: true,
    readyTimeoutMs: 180_000,
    apiserverArgs: [
      '--allow-privileged=true',
      `--audit-policy-file=${policy}`,
      '--max-requests-inflight=800',
      '--max-mutating-requests-inflight=400',
    ],
  });
  cleanups.push(() => cluster.stop());
  const api = new Api(cluster);
  cleanups.push(() => api.close());
  const kwok = startKwok(join(a.kwok, 'kwok'), join(a.kwok, 'stages.yaml'), cluster, a.dir);
  cleanups.push(() => kwok.stop());
  try {
    const namespaces = await createNamespaces(api, nsCount);
    const w: Workload = { namespaces, perNs, byNode: new Map(), realNode: REAL.name, master: REAL.linkPeer };
    out.simulated = await simulated(a, cluster, api, w);
    say(`the NAD informer's heap at K=${out.nads}`);
    out.nad_informer_heap = await nadHeap(cluster, api, w);
    say(`nad_informer_heap: ${JSON.stringify(out.nad_informer_heap)}`);
    if (a.nodeLock) {
      say(`waiting for ${a.nodeLock}`);
      await holdLock(a.nodeLock);
    }
    say('the real node');
    // kwok renews 1,000 leases every 10 s; on a loaded machine one can be late, and the node lifecycle controller
    // would then taint its node and evict its pods after 5 min: a churn the bench did not make
    const n = await startNode(cluster, a.images, REAL, ['--node-monitor-grace-period=1h']);
    cleanups.push(() => stopNode(cluster, n));
    // Multus' own relay into the node: its bytes counted apart from kubelet's
    const relay = new ApiTunnel();
    cleanups.push(() => relay.close());
    await relay.open(cluster, n.node.hostNs, n.node.dir, { listenPort: RELAY_PORT });
    w.byNode.set(REAL.name, slots([REAL.name], a.podsPerNode, namespaces));
    const trace = await ExecTrace.start(say);
    cleanups.push(() => trace?.stop());
    const bootMs = await bootTimeMs();
    out.modes = {};
    for (const mode of a.modes) {
      const loadAtStart = load();
      say(`${mode}: load ${loadAtStart}`);
      out.modes[mode] = await measureMode({
        ...{ cluster, api, n, relay, w, mode, restSeconds: a.restSeconds, say },
        ...{ restarts: Math.max(1, a.restarts ?? 1), trace, bootMs, startRepeats: a.startRepeats ?? 1 },
        apiserverRestart: a.apiserverRestart ?? 0,
      });
      out.modes[mode].load = { start: loadAtStart, end: load() };
      say(`${mode}: ${JSON.stringify(out.modes[mode])}`);
      await writeFile(join(a.dir, `${mode}.json`), JSON.stringify(out.modes[mode]) + '\n');
    }
  } finally {
    await cleanUp();
  }
  out.load_end = load();
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((e) => {
  process.stderr.write(`bench cluster: FAILED: ${e?.stack ?? e}\n`);
  process.exit(1);
});
