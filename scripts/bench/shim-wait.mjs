/**
 * Scenario `shim-wait` of scripts/bench.mjs (only when asked for: `--scenario shim-wait`): what build/multus-shim's
 * bounded wait for the daemon's socket (shim/wait.go, docs/resident.md "When the daemon is not there") does to a
 * burst of calls when the daemon is not there, against the thin fallback at once (`shimWaitSeconds: 0`, the shim
 * before the wait). `--shim-calls` ADDs of different containers (the trivial delegate, delegates-only) start at
 * once through the shim, then their DELs:
 *
 *   slow_start    no socket at first; `build/multus daemon` started `--shim-daemon-delay` seconds later (a node
 *                 after a reboot: the runtime execs shims before the daemon's container is up)
 *   crash_loop    a socket left by a daemon that died (refusing) and no daemon for the whole burst (crash-looping,
 *                 or gone): the first calls wait the bound (`shimWaitSeconds` 5 here, to keep the scenario short;
 *                 the default is 30), a second burst right after falls back at once (the marker)
 *
 * Per case and mode: wall time until every ADD answered (and the ADDs' p50/p99/max), failures, how many ADDs the
 * daemon served (its log) and how many the thin fallback ran, the CPU time of all the calls (the shims, the thin
 * plugins they exec and the delegates: the children's rusage).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { RUNTIME_PATH, cniEnv, fail, r2, say } from './common.mjs';
import { sleep } from './daemons.mjs';

export const description =
  'a burst of ADDs through build/multus-shim while the daemon is not there: slow to start (it comes up later) or ' +
  'crash-looping (never there); the bounded wait for its socket against the thin fallback at once';

/** One CNI call through the shim: wall ms, exit code, and the CPU of the shim and what it exec'd (ms). */
function call(shim, env, conf) {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const c = spawn('/usr/bin/time', ['-f', '%U %S', shim], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    c.stdout.on('data', (b) => (out += b));
    c.stderr.on('data', (b) => (err += b));
    c.stdin.end(conf);
    c.on('close', (code) => {
      const [u, s] = (/(\d+\.\d+) (\d+\.\d+)\s*$/.exec(err) ?? []).slice(1).map(Number);
      resolve({ ms: performance.now() - t0, code, cpuMs: ((u ?? 0) + (s ?? 0)) * 1000, out });
    });
  });
}

const q = (xs, f) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? Math.round(s[Math.min(s.length - 1, Math.ceil(f * s.length) - 1)]) : null;
};

/** A daemon of `exe` on `sockDir` serving `confFile`, logging each call (verbose) to `log`. */
function startDaemon(exe, dir, sockDir, confFile, log) {
  const cfg = join(dir, `daemon-config-${randomBytes(3).toString('hex')}.json`);
  const netd = join(dir, 'net.d');
  mkdirSync(netd, { recursive: true });
  writeFileSync(
    cfg,
    JSON.stringify({
      socketDir: sockDir,
      cniConfigDir: netd,
      multusConfigFile: confFile,
      logLevel: 'verbose',
      logFile: log,
      logToStderr: false,
    }),
  );
  const child = spawn(exe, ['daemon', '--config', cfg], { env: { PATH: RUNTIME_PATH }, stdio: 'ignore' });
  return {
    stop: () =>
      new Promise((r) => {
        if (child.exitCode !== null || child.signalCode !== null) return r();
        child.once('exit', r);
        child.kill('SIGTERM');
      }),
  };
}

/** A socket file left by a daemon that was SIGKILLed while listening: it refuses connections. */
async function staleSocket(node, sockDir) {
  mkdirSync(sockDir, { recursive: true, mode: 0o700 });
  const sock = JSON.stringify(join(sockDir, 'multus.sock'));
  const c = spawn(node, [
    '-e',
    `require('net').createServer().listen(${sock}, () => process.kill(process.pid, 'SIGKILL'))`,
  ]);
  await new Promise((r) => c.on('exit', r));
}

/** `n` ADDs at once through the shim, then their DELs; figures. */
async function burst(rc, n, log) {
  const pods = Array.from({ length: n }, (_, i) => ({
    id: randomBytes(32).toString('hex'),
    namespace: 'bench',
    name: `p${i}`,
    uid: `u${i}`,
  }));
  const served0 = existsSync(log) ? (readFileSync(log, 'utf8').match(/ADD [0-9a-f]{64}: 200/g)?.length ?? 0) : 0;
  const t0 = performance.now();
  const adds = await Promise.all(pods.map((p) => call(rc.shim, rc.env('ADD', p), rc.conf)));
  const seconds = (performance.now() - t0) / 1000;
  const dels = await Promise.all(pods.map((p) => call(rc.shim, rc.env('DEL', p), rc.conf)));
  const served =
    (existsSync(log) ? (readFileSync(log, 'utf8').match(/ADD [0-9a-f]{64}: 200/g)?.length ?? 0) : 0) - served0;
  const ms = adds.map((a) => a.ms);
  return {
    adds: n,
    seconds_until_all_answered: r2(seconds),
    add_ms: { p50: q(ms, 0.5), p99: q(ms, 0.99), max: q(ms, 1) },
    failed: [...adds, ...dels].filter((r) => r.code !== 0).length,
    served_by_daemon: served,
    thin_fallback: n - served,
    cpu_seconds_of_the_adds: r2(adds.reduce((s, a) => s + a.cpuMs, 0) / 1000),
  };
}

/** One case in one mode, in a fresh directory. */
async function runCase(ctx, kind, waitSeconds) {
  const dir = join(ctx.tmp, `shim-wait-${kind}-${waitSeconds}`);
  const bin = join(dir, 'bin');
  mkdirSync(bin, { recursive: true });
  for (const f of ['multus', 'multus-shim']) symlinkSync(join(dirname(ctx.exe), f), join(bin, f));
  symlinkSync(ctx.delegate.path, join(bin, ctx.delegate.type));
  const sockDir = join(dir, 'run');
  const conf = {
    cniVersion: '1.0.0',
    name: 'multus-bench',
    type: 'multus-shim',
    daemonSocketDir: sockDir,
    shimWaitSeconds: waitSeconds,
    cniDir: join(dir, 'cni'),
    binDir: bin,
    delegates: [{ cniVersion: '1.0.0', name: 'bench-net', type: ctx.delegate.type }],
  };
  const confFile = join(dir, 'multus.conf');
  writeFileSync(confFile, JSON.stringify({ ...conf, type: 'multus' }));
  const rc = {
    shim: join(bin, 'multus-shim'),
    conf: JSON.stringify(conf),
    env: (command, p) => cniEnv({ command, ...p, netns: ctx.netns, cniPath: bin }),
  };
  const log = join(dir, 'daemon.log');
  const n = ctx.opts.shimCalls;
  if (kind === 'slow_start') {
    const delay = ctx.opts.shimDaemonDelay;
    const later = sleep(delay * 1000).then(() => startDaemon(ctx.exe, dir, sockDir, confFile, log));
    const out = { daemon_started_after_s: delay, ...(await burst(rc, n, log)) };
    await (await later).stop();
    return out;
  }
  await staleSocket(ctx.node, sockDir);
  const first = await burst(rc, n, log);
  const second = await burst(rc, n, log);
  return { first_burst: first, second_burst: second };
}

/** Runs the scenario (`ctx` = {opts, exe, node, delegate, tmp}); the object under the `shim_wait` key. */
export async function runShimWait(ctx) {
  if (!existsSync(join(dirname(ctx.exe), 'multus-shim'))) fail('build/multus-shim is missing (npm run build with Go)');
  const load0 = r2(loadavg()[0]);
  const netns = join(ctx.tmp, 'netns-shim-wait');
  writeFileSync(netns, '');
  const ns = await spawnOk('unshare', [`--net=${netns}`, 'true']);
  if (!ns) fail(`cannot create a network namespace on ${netns} (root needed)`);
  const c = { ...ctx, netns };
  const out = { scenario_description: description, calls: ctx.opts.shimCalls };
  try {
    for (const kind of ['slow_start', 'crash_loop']) {
      const bound = kind === 'crash_loop' ? 5 : 30;
      out[kind] = {};
      for (const [mode, wait] of [
        ['thin_fallback_at_once', 0],
        [`wait_${bound}s`, bound],
      ]) {
        say(`shim-wait: ${kind}, ${mode}: ${ctx.opts.shimCalls} ADDs at once`);
        out[kind][mode] = await runCase(c, kind, wait);
        say(`shim-wait: ${kind}, ${mode}: ${JSON.stringify(out[kind][mode])}`);
      }
    }
  } finally {
    await spawnOk('umount', [netns]);
    rmSync(netns, { force: true });
  }
  out.machine_load_1m = { start: load0, end: r2(loadavg()[0]) };
  return out;
}

/** Runs a command; whether it exited 0. */
function spawnOk(cmd, args) {
  return new Promise((resolve) => {
    const c = spawn(cmd, args, { stdio: 'ignore' });
    c.on('close', (code) => resolve(code === 0));
    c.on('error', () => resolve(false));
  });
}
