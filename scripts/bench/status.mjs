/**
 * Scenario `status` of scripts/bench.mjs: CNI STATUS, which CRI-O sends every 5 s (Multus #1519), through the four
 * modes of scenario resident side by side in one run, rounds rotated (docs/performance.md, "STATUS"):
 *
 *   thin_ts      build/multus, exec'd per call
 *   resident_ts  build/multus-shim, exec'd per call, answered by `build/multus daemon`
 *   go_thin      Go Multus v4.3.0 cmd/multus
 *   go_thick     Go Multus v4.3.0 cmd/multus-shim + cmd/multus-daemon (it needs the API server)
 *
 * Every mode has the same cluster network: the trivial delegate at cniVersion 1.1.0, so that STATUS reaches it,
 * then again at 1.0.0 (below 1.1.0 libcni and multus-ts skip it: what multus itself costs, `below_1_1`), and the
 * thin modes a kubeconfig (as installed: Go thin builds its client on STATUS too). Per call: the wall time (spawn
 * to exit) and the CPU time (user + system) of the process the runtime execs and of everything it waited for (the
 * delegate, in thin modes), plus, in resident modes, what the daemon used (/proc/<pid>/stat utime, stime, cutime,
 * cstime) between the shim's start and its exit. The daemon's CPU outside those windows (between calls) is
 * reported apart. NODE_OPTIONS and NODE_EXTRA_CA_CERTS never
 * reach the measured processes (each gets PATH and the CNI variables only).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { CLK_TCK, RUNTIME_PATH, fail, r2, rotatedRounds, say, show, stats, timed } from './common.mjs';
import { startHelper } from './k8s-helper.mjs';
import { addGoThick, prepare, tsAndGoThin } from './resident.mjs';

const STATUS_VERSION = '1.1.0';

export const description =
  'CNI STATUS through multus-ts thin, multus-ts resident (shim + daemon), Go Multus v4.3.0 thin and Go Multus ' +
  'v4.3.0 thick (shim + daemon), interleaved; cluster network: the trivial delegate at cniVersion 1.1.0';

/** CPU ticks a process has used and waited for: utime + stime + cutime + cstime. */
function processTicks(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const after = f.slice(f.lastIndexOf(')') + 2).split(' '); // after[0] is field 3 (state)
  return Number(after[11]) + Number(after[12]) + Number(after[13]) + Number(after[14]);
}

const uptime = () => execFileSync('uptime', { encoding: 'utf8' }).trim();

/** One STATUS of a mode: {ms, ticks} (the daemon's ticks of the window included); fails unless it succeeded. */
function statusCall(mode, env) {
  const d0 = mode.daemonPid ? processTicks(mode.daemonPid) : 0;
  const r = timed(mode.file, [], env, mode.conf);
  const daemonTicks = mode.daemonPid ? processTicks(mode.daemonPid) - d0 : 0;
  if (r.status !== 0 || String(r.stdout).trim() !== '') fail(`status ${mode.what}: ${show('STATUS', r)}`);
  return { ms: r.ms, ticks: r.ticks + daemonTicks, daemonTicks };
}

/** The figures of each mode and the ratios the issue asks for (thin to Go thin, resident to Go thick). */
function figures(modes, samples, ticks, daemonTicks, rounds) {
  const ms = (t) => r2((t * 1000) / CLK_TCK / rounds);
  const out = {};
  for (const [m, mode] of Object.entries(modes)) {
    const wall = stats(samples[m]);
    out[m] = {
      what: mode.what,
      cpu_ms_per_call: ms(ticks[m]),
      wall_ms_per_call: wall.median_ms,
      wall,
      ...(mode.daemonPid ? { daemon_cpu_ms_per_call: ms(daemonTicks[m]) } : {}),
    };
  }
  const ratio = (a, b, k) => (out[a] && out[b] ? r2(out[a][k] / out[b][k]) : null);
  const ratios = {
    thin_ts_to_go_thin: {
      cpu: ratio('thin_ts', 'go_thin', 'cpu_ms_per_call'),
      wall: ratio('thin_ts', 'go_thin', 'wall_ms_per_call'),
    },
    resident_ts_to_go_thick: {
      cpu: ratio('resident_ts', 'go_thick', 'cpu_ms_per_call'),
      wall: ratio('resident_ts', 'go_thick', 'wall_ms_per_call'),
    },
  };
  return { modes: out, ratios };
}

/** The timed rounds over `modes`; the daemons' CPU between the calls too. */
function measure(rc, modes) {
  const names = Object.keys(modes);
  const { statusRounds: rounds, warmup } = rc.opts;
  const env = { PATH: RUNTIME_PATH, CNI_COMMAND: 'STATUS', CNI_PATH: rc.env('STATUS', {}).CNI_PATH };
  for (const m of names) statusCall(modes[m], env); // correctness: every mode answers STATUS with success
  const samples = Object.fromEntries(names.map((m) => [m, []]));
  const ticks = Object.fromEntries(names.map((m) => [m, 0]));
  const daemonTicks = Object.fromEntries(names.map((m) => [m, 0]));
  const daemons = names.filter((m) => modes[m].daemonPid);
  let total0 = {};
  say(`status: ${warmup} warm-up + ${rounds} rounds of ${names.join(', ')} (rotated)`);
  rotatedRounds({
    units: names.map((m) => ({ name: m, fn: () => ({ [m]: statusCall(modes[m], env) }) })),
    warmup,
    rounds,
    measuring: (on) => {
      if (on && !Object.keys(total0).length)
        total0 = Object.fromEntries(daemons.map((m) => [m, processTicks(modes[m].daemonPid)]));
    },
    record: (got) => {
      for (const [m, r] of Object.entries(got)) {
        samples[m].push(r.ms);
        ticks[m] += r.ticks;
        daemonTicks[m] += r.daemonTicks;
      }
    },
    progress: (done) =>
      say(
        `status round ${done}/${rounds}: medians ${names.map((m) => `${m} ${stats(samples[m]).median_ms}`).join(', ')} ms`,
      ),
  });
  const res = figures(modes, samples, ticks, daemonTicks, rounds);
  for (const m of daemons) {
    const outside = processTicks(modes[m].daemonPid) - total0[m] - daemonTicks[m];
    res.modes[m].daemon_cpu_ms_outside_calls = r2((outside * 1000) / CLK_TCK);
  }
  return res;
}

/**
 * The four modes with the cluster network at `delegateVersion` (the multus configs stay at 1.1.0), measured; the
 * daemons started for it are stopped after.
 */
async function configuration(rc, cl, delegateVersion) {
  rc.delegateConf = { ...rc.delegateConf, cniVersion: delegateVersion };
  rc.delegateBytes = JSON.stringify(rc.delegateConf);
  const extra = { delegates: [rc.delegateConf], ...(cl ? { kubeconfig: cl.kubeconfig } : {}) };
  const tag = `status-${delegateVersion.replaceAll('.', '')}`;
  const { modes, ts } = await tsAndGoThin(rc, tag, extra, cl ? { kubeconfig: cl.kubeconfig } : {});
  if (ts?.daemon) modes.resident_ts.daemonPid = ts.daemon.child.pid;
  if (cl && !rc.unavailable.go_thick) {
    const gd = await addGoThick(rc, modes, cl);
    if (gd) modes.go_thick.daemonPid = gd.daemon.child.pid;
  }
  try {
    return { delegate_cni_version: delegateVersion, ...measure(rc, modes) };
  } finally {
    for (const d of rc.daemons.splice(0)) await d.stop().catch(() => {});
  }
}

/**
 * Runs the scenario (`ctx` as for scenario resident: {opts, exe, node, delegate (with its type), tmp, root,
 * k8sPresent}); returns the object printed under the `status` key: the modes with a cluster network of 1.1.0 (its
 * plugin asked) at the top, and under `below_1_1` the same with one of 1.0.0 (not asked: multus' own cost).
 */
export async function runStatus(ctx) {
  const load = { start: { load1: r2(loadavg()[0]), uptime: uptime() } };
  const rc = prepare(ctx, STATUS_VERSION);
  const out = {
    scenario_description: description,
    gomultus: rc.go,
    rounds: ctx.opts.statusRounds,
    warmup_rounds: ctx.opts.warmup,
    delegate: { path: ctx.delegate.path, kind: ctx.delegate.kind },
  };
  let helper;
  try {
    let cl;
    if (ctx.k8sPresent) {
      helper = startHelper(ctx.node, say);
      say(`status: starting etcd + kube-apiserver (helper pid ${helper.pid})`);
      cl = await helper.ask({
        cmd: 'setup',
        namespace: 'multus-bench-status',
        nads: [],
        networks: '',
        execScript: `${rc.root}/scripts/bench/exec-credential.sh`,
      });
    }
    out.kubeconfig_in_thin_configs = Boolean(cl);
    Object.assign(out, await configuration(rc, cl, STATUS_VERSION));
    out.below_1_1 = await configuration(rc, cl, '1.0.0');
    out.unavailable = rc.unavailable;
  } finally {
    for (const d of rc.daemons) await d.stop().catch(() => {});
    for (const stop of rc.stops) stop();
    await helper?.stop();
    spawnSync('umount', [rc.netns]);
  }
  load.end = { load1: r2(loadavg()[0]), uptime: uptime() };
  out.machine_load = load;
  return out;
}
