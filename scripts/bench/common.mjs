/**
 * The helpers every scenario of scripts/bench.mjs shares: progress and failure, statistics, the timed run of one
 * process (wall time and CPU ticks), the runtime's environment, the checks of an ADD and a DEL answer, and the
 * rotated rounds that interleave the units of a scenario.
 */
import { spawn, spawnSync } from 'node:child_process';
import {
  closeSync,
  fsyncSync,
  openSync,
  readFileSync,
  readSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { basename, delimiter, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
/** The PATH of a runtime exec: nothing of this shell. */
export const RUNTIME_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
/** The trivial delegate's plugin type (test/data/bench). */
export const DELEGATE_TYPE = 'bench-delegate';

export const say = (s) => process.stderr.write(`bench: ${s}\n`);
export class BenchError extends Error {}
export const fail = (msg) => {
  throw new BenchError(msg);
};

// ---------------------------------------------------------------------------------------------------------------
// Statistics

/** Nearest rank: the smallest sample with at least q of the samples at or below it. */
export function quantile(sorted, q) {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}
export const r2 = (x) => Math.round(x * 100) / 100;
export function stats(samples) {
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

/** n, median, min, max, mean of counts (API requests per call). */
export function countStats(xs) {
  const s = [...xs].sort((a, b) => a - b);
  if (!s.length) return { n: 0 };
  const median = s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  return {
    n: s.length,
    median: r2(median),
    min: s[0],
    max: s[s.length - 1],
    mean: r2(s.reduce((a, b) => a + b, 0) / s.length),
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Processes

/** Clock ticks per second of /proc's CPU times. */
export const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout) || 100;

/** CPU time (user + system, in clock ticks) of this process's waited-for children so far: /proc/self/stat
 *  cutime + cstime. Ticks are coarse (10 ms), but the kernel keeps exact sums, so the delta summed over many runs
 *  divided by the run count is an accurate mean; it barely moves when other work competes for the cores. */
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
export function timed(file, args, env, input) {
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

/** Mean CPU milliseconds per run from summed ticks. */
export const cpuMs = (ticks, runs) => r2((ticks * 1000) / CLK_TCK / (runs || 1));

/**
 * Drops each file's pages from the page cache (fsynced first, then `dd iflag=nocache count=0`; pages a running
 * process maps stay), so that the executables compared start in one state. A file just written (our build, an
 * image unpacked, an install's copy) sits in the page cache in large folios, and a fault on it maps the whole
 * folio: 528 KiB per fault on a freshly built build/multus.bun against 64 KiB (the kernel's fault-around) once it
 * was read back from disk, which is where the Go peers' binaries, built days earlier, usually are
 * (docs/archive/performance.md, "The installed executable's page cache"). The advice drops clean pages only: without the
 * fsync, a file written less than the kernel's writeback interval (30 s) before kept them all, so a run right
 * after `npm run build` ran our executable from the build's folios and Go's from disk (docs/archive/performance.md, "Each
 * event as its attachment is added"). Returns the files it dropped; a file that cannot be is left out.
 */
export function evictPageCache(files) {
  const done = [];
  for (const f of new Set(files)) {
    if (!f) continue;
    try {
      const fd = openSync(f, 'r');
      try {
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
    } catch (e) {
      say(`page cache: cannot write ${f} back before dropping it: ${/** @type {Error} */ (e).message}`);
    }
    const r = spawnSync('dd', [`if=${f}`, 'iflag=nocache', 'count=0', 'status=none'], { encoding: 'utf8' });
    if (r.status === 0) done.push(f);
    else say(`page cache: cannot drop ${f}: ${(r.stderr || r.error?.message || '').trim()}`);
  }
  return done;
}

/**
 * Writes each file again, in place, as its installer leaves it on a node: a temp file in its directory, fsynced and
 * renamed over it. `pieces`: as `multus install` copies (src/install/files.ts): 64 KiB writes, and the page cache
 * keeps them as written; `piecesDropped`: the same, then dropped from the page cache (the Bun executable, the
 * launcher); `copied`: as Go Multus' installers copy (`io.Copy` between two files is copy_file_range(2); so is `cp`'s). Returns the
 * files, by how each was written (docs/archive/performance.md, "The installed copy kept in the page cache").
 */
export function rewriteAsInstalled({ pieces = [], piecesDropped = [], copied = [] }) {
  const done = { pieces_64k_kept: [], pieces_64k_dropped: [], copy_file_range_kept: [] };
  const rewrite = (f, how) => {
    const tmp = join(dirname(f), `.${basename(f)}.bench-${process.pid}`);
    try {
      if (how === 'copy') {
        const r = spawnSync('cp', ['--preserve=mode', f, tmp], { encoding: 'utf8' });
        if (r.status !== 0) throw new Error((r.stderr || r.error?.message || '').trim());
      } else {
        const fin = openSync(f, 'r');
        const fout = openSync(tmp, 'wx', statSync(f).mode & 0o7777);
        const buf = Buffer.allocUnsafe(64 << 10);
        for (let n; (n = readSync(fin, buf, 0, buf.length, null)) > 0;)
          for (let off = 0; off < n;) off += writeSync(fout, buf, off, n - off);
        closeSync(fin);
        closeSync(fout);
      }
      const fd = openSync(tmp, 'r');
      fsyncSync(fd);
      closeSync(fd);
      renameSync(tmp, f);
      return true;
    } catch (e) {
      rmSync(tmp, { force: true });
      say(`page cache: cannot write ${f} again: ${e.message}`);
      return false;
    }
  };
  for (const f of new Set(pieces)) if (f && rewrite(f, 'pieces')) done.pieces_64k_kept.push(f);
  for (const f of new Set(piecesDropped))
    if (f && rewrite(f, 'pieces') && evictPageCache([f]).length) done.pieces_64k_dropped.push(f);
  for (const f of new Set(copied)) if (f && rewrite(f, 'copy')) done.copy_file_range_kept.push(f);
  return done;
}

export function which(name) {
  for (const d of (process.env.PATH || '/usr/bin:/bin').split(delimiter)) {
    try {
      const p = join(d, name);
      if (statSync(p).isFile()) return p;
    } catch {}
  }
  return null;
}

export function parseJson(s) {
  try {
    return JSON.parse(s);
  } catch {
    return undefined;
  }
}

/** What a run printed, for a failure message. */
export const show = (what, r) =>
  `${what} exited ${r.status}${r.signal ? ` (signal ${r.signal})` : ''}\n  stdout: ${String(r.stdout).trim().slice(0, 2000)}\n  stderr: ${String(r.stderr).trim().slice(0, 2000)}`;

/** The ADD answer as JSON; fails unless it is a result. */
export function checkAdd(what, r) {
  const j = parseJson(r.stdout);
  if (r.status !== 0 || !j || j.code !== undefined || typeof j.cniVersion !== 'string')
    fail(`${what} ADD: ${show('ADD', r)}`);
  return j;
}

/** Fails unless the DEL succeeded (no output, or output that is not an error). */
export function checkDel(what, r) {
  const j = String(r.stdout).trim() ? parseJson(r.stdout) : null;
  if (r.status !== 0 || (j && j.code !== undefined)) fail(`${what} DEL: ${show('DEL', r)}`);
}

/** The trivial delegate's ADD result carries this address: a multus ADD must return it. */
export function checkDelegateResult(what, r) {
  const ip = checkAdd(what, r).ips?.[0]?.address;
  if (ip !== '10.88.0.5/16') fail(`${what}: the ADD result is not the delegate's (ips[0].address ${ip}): ${r.stdout}`);
}

/** The runtime's environment of one CNI call (a plain PATH, the CNI_* variables). */
/** A call's environment through a mode: the runtime's, or what the mode's `env` makes of it (thin_ts_direct). */
export const modeEnv = (rc, mode, command, pod) => (mode.env ? mode.env(rc.env(command, pod)) : rc.env(command, pod));

export function cniEnv({ command, id, netns, cniPath, namespace, name, uid, override = false, base = {} }) {
  return {
    PATH: RUNTIME_PATH,
    ...base,
    CNI_COMMAND: command,
    CNI_CONTAINERID: id,
    CNI_NETNS: netns,
    ...(override ? { CNI_NETNS_OVERRIDE: '1' } : {}),
    CNI_IFNAME: 'eth0',
    CNI_PATH: cniPath,
    CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${namespace};K8S_POD_NAME=${name};K8S_POD_INFRA_CONTAINER_ID=${id};K8S_POD_UID=${uid}`,
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Rounds

/** Sample lists (wall ms) and CPU tick sums per key; `record` adds one unit's runs. */
export function sampleSet(keys) {
  const samples = Object.fromEntries(keys.map((k) => [k, []]));
  const ticks = Object.fromEntries(keys.map((k) => [k, 0]));
  const record = (got) => {
    for (const [key, r] of Object.entries(got)) {
      samples[key].push(r.ms);
      ticks[key] += r.ticks;
    }
  };
  return { samples, ticks, record };
}

/**
 * `warmup` discarded rounds, then `rounds` measured ones, of every unit ({name, fn}: fn returns {key: run}); the
 * order rotates by one every round. `measuring(bool)` is told before each round; `progress(done)` every 10.
 */
export function rotatedRounds({
  units,
  warmup,
  rounds,
  record,
  progress,
  measuring = (/** @type {boolean} */ _m) => {},
}) {
  for (let round = -warmup; round < rounds; round++) {
    measuring(round >= 0);
    const k = ((round % units.length) + units.length) % units.length;
    for (const { fn } of [...units.slice(k), ...units.slice(0, k)]) {
      const got = fn();
      if (round >= 0) record(got);
    }
    if (round >= 0 && ((round + 1) % 10 === 0 || round + 1 === rounds)) progress(round + 1);
  }
  measuring(false);
}

/**
 * Runs a TypeScript runner of a scenario (scripts/bench/<scenario>/run.ts) with the tools' Node, its arguments as
 * one JSON argument, its progress on our stderr; the last line of its stdout, parsed. Transform, not strip:
 * test/e2e-k8s/world.ts has parameter properties.
 */
export async function runTs(node, file, args, what) {
  const flags = ['--experimental-transform-types', '--disable-warning=ExperimentalWarning'];
  const out = await new Promise((resolve, reject) => {
    const c = spawn(node, [...flags, file, JSON.stringify(args)], {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, NODE_OPTIONS: '' },
    });
    let stdout = '';
    c.stdout.on('data', (b) => (stdout += b));
    c.on('error', reject);
    c.on('close', (code) => (code === 0 ? resolve(stdout) : reject(new Error(`${what} exited ${code}`))));
  });
  const line = String(out).trim().split('\n').pop();
  return parseJson(line) ?? fail(`${what}: not JSON: ${line}`);
}

/**
 * An empty network namespace bound on `<tmp>/netns` for CNI_NETNS (multus-ts refuses a path that is not one since
 * issue 28, src/cni/netns.ts); the trivial delegate never enters it. Root only; `umount` it before removing tmp.
 */
export function boundNetns(tmp) {
  const path = join(tmp, 'netns');
  writeFileSync(path, '');
  const r = spawnSync('unshare', [`--net=${path}`, 'true'], { encoding: 'utf8' });
  if (r.status !== 0) fail(`cannot bind a network namespace on ${path} (root needed): ${r.stderr}`);
  return path;
}
