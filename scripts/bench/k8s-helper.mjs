/**
 * The bench's Kubernetes: the kube-apiserver + etcd of test/k8s/cluster.ts in a child process
 * (scripts/bench/k8s-cluster.ts, run by the Node 24 base binary with --experimental-strip-types) that answers
 * JSON lines; it stops the cluster when its stdin closes, so the cluster goes with the bench however the bench
 * ends. Also the audit log's requests, attributed to the timed calls.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const HELPER = join(dirname(fileURLToPath(import.meta.url)), 'k8s-cluster.ts');

/** Where test/k8s/build.sh puts the binaries (as test/k8s/cluster.ts computes it). */
export function k8sBinaries(root) {
  const dir = join(process.env.MULTUS_TS_CACHE_DIR || join(root, '.cache'), 'k8s');
  const bins = ['kube-apiserver', 'etcd'].map((b) => join(dir, b));
  return { dir, bins, present: bins.every((b) => existsSync(b)) };
}

/** Answers to the helper's lines, in order; a line that is not `{"ok":true}` rejects its request. */
function answerer(child, say) {
  const waiting = [];
  createInterface({ input: child.stdout }).on('line', (line) => {
    const w = waiting.shift();
    if (!w) return say(`unexpected line from the cluster helper: ${line.slice(0, 200)}`);
    let j;
    try {
      j = JSON.parse(line);
    } catch {
      return w.reject(new Error(`cluster helper: not JSON: ${line.slice(0, 200)}`));
    }
    if (j.ok) w.resolve(j);
    else w.reject(new Error(`cluster helper: ${j.error}`));
  });
  return waiting;
}

/** The helper process and a request/answer function over its stdin/stdout. */
export function startHelper(node, say) {
  const child = spawn(node, ['--experimental-strip-types', '--disable-warning=ExperimentalWarning', HELPER], {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: { ...process.env, NODE_OPTIONS: '' },
  });
  const waiting = answerer(child, say);
  let dead = null;
  const exited = new Promise((res) => {
    child.on('exit', (code, signal) => {
      dead = `the cluster helper exited (${signal ?? `code ${code}`})`;
      for (const w of waiting.splice(0)) w.reject(new Error(dead));
      res();
    });
  });
  child.on('error', (e) => {
    dead = `the cluster helper did not start: ${e.message}`;
    for (const w of waiting.splice(0)) w.reject(new Error(dead));
  });
  const ask = (req) =>
    new Promise((resolve, reject) => {
      if (dead) return reject(new Error(dead));
      waiting.push({ resolve, reject });
      child.stdin.write(JSON.stringify(req) + '\n');
    });
  /** Closes its stdin (it stops the cluster and exits); SIGKILL after `ms` if it has not. */
  const stop = async (ms = 30_000) => {
    if (child.exitCode !== null || child.signalCode !== null || dead) return exited;
    child.stdin.end();
    const t = setTimeout(() => child.kill('SIGKILL'), ms);
    await exited;
    clearTimeout(t);
  };
  return { ask, stop, pid: child.pid };
}

/** A one-line summary of a call's requests: `get pods, get network-attachment-definitions x2, update pods/status`. */
export function pattern(reqs) {
  const counts = new Map();
  for (const r of reqs) {
    const k = `${r.verb} ${r.resource}${r.subresource ? `/${r.subresource}` : ''}${r.code >= 300 ? ` (${r.code})` : ''}`;
    counts.set(k, (counts.get(k) ?? 0) + 1);
  }
  return [...counts].map(([k, n]) => (n > 1 ? `${k} x${n}` : k)).join(', ') || '(none)';
}

/** How many calls had each pattern, most frequent first. */
export function patternCounts(calls) {
  const patterns = new Map();
  for (const reqs of calls) patterns.set(pattern(reqs), (patterns.get(pattern(reqs)) ?? 0) + 1);
  return Object.fromEntries([...patterns].sort((a, b) => b[1] - a[1]));
}

/** Assigns each audit event to the timed multus call whose wall-clock window holds its requestReceivedTimestamp. */
export function attribute(windows, events) {
  const ws = [...windows].sort((a, b) => a.start - b.start);
  for (const w of ws) w.requests = [];
  const first = ws[0]?.start ?? 0;
  const last = ws[ws.length - 1]?.end ?? 0;
  let unattributed = 0;
  let i = 0;
  for (const e of [...events].sort((a, b) => a.t - b.t)) {
    if (e.t < first || e.t > last) continue; // correctness checks, warm-up, RSS phase
    while (i < ws.length && ws[i].end < e.t) i++;
    if (i < ws.length && ws[i].start <= e.t) ws[i].requests.push(e);
    else unattributed++;
  }
  return unattributed;
}
