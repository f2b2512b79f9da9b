/**
 * Scenario `delegates-only` of scripts/bench.mjs: a multus config with one inline delegate (no Kubernetes) and
 * the trivial delegate plugin. Each round runs, in an order rotated by one every round: a bare `node -e 0` of the
 * base binary (the floor), the stripped base's `node -e 0` when the build cached one, multus VERSION, multus ADD
 * then DEL of one container, and the trivial delegate alone for ADD and for DEL; when build/multus is the launcher,
 * also VERSION of the Bun executable it starts, run directly (`direct_version`: the same call without the
 * launcher's exec, so `launcher` is its cost side by side). Then peak RSS in a phase of its own. Its keys go at the top level of the JSON line (docs/archive/performance.md explains each).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { join } from 'node:path';
import {
  DELEGATE_TYPE,
  checkAdd,
  checkDel,
  checkDelegateResult,
  cniEnv,
  cpuMs,
  fail,
  parseJson,
  r2,
  rotatedRounds,
  sampleSet,
  say,
  show,
  stats,
  timed,
  RUNTIME_PATH,
} from './common.mjs';
import { contextKeys } from './artifacts.mjs';
import { rssMeter } from './rss.mjs';

export const description = 'multus conf with one inline delegate (no Kubernetes), trivial delegate plugin';

/** What multus is asked to do: its config, the delegate config it passes on, delegate calls per command. */
function setup({ tmp, delegate, netns }) {
  const delegateConf = { cniVersion: '1.0.0', name: 'bench-net', type: DELEGATE_TYPE };
  const conf = {
    cniVersion: '1.0.0',
    name: 'multus-bench',
    type: 'multus',
    cniDir: join(tmp, 'cni'),
    binDir: delegate.binDir,
    delegates: [delegateConf],
  };
  let seq = 0;
  return {
    conf,
    confBytes: JSON.stringify(conf),
    delegateBytes: JSON.stringify(delegateConf),
    delegateCalls: { ADD: 1, DEL: 1 },
    versionInput: JSON.stringify({ cniVersion: conf.cniVersion }),
    baseEnv: { PATH: RUNTIME_PATH },
    env: (command, pod) =>
      cniEnv({ command, ...pod, namespace: 'bench', netns, cniPath: delegate.binDir, override: true }),
    newPod: () => ({ id: randomBytes(32).toString('hex'), name: `pod-${++seq}`, uid: randomUUID() }),
  };
}

function checkVersion(r) {
  const j = parseJson(r.stdout);
  if (r.status !== 0 || !j || !Array.isArray(j.supportedVersions)) fail(`multus VERSION: ${show('VERSION', r)}`);
}

/**
 * VERSION and ADD+DEL of `exe` (VERSION alone with `versionOnly`), its sample keys prefixed with `p` (`before_` for
 * --before's build, `direct_` for the Bun executable the launcher starts).
 */
function multusUnits(sc, exe, p, versionOnly = false) {
  const what = p === 'before_' ? 'multus (--before)' : 'multus';
  return [
    {
      name: `${p}version`,
      fn: () => {
        const r = timed(exe, [], { ...sc.baseEnv, CNI_COMMAND: 'VERSION' }, sc.versionInput);
        checkVersion(r);
        return { [`${p}version`]: r };
      },
    },
    ...(versionOnly ? [] : [addDelUnit(sc, exe, p, what)]),
  ];
}

/** ADD then DEL of one container through `exe`. */
function addDelUnit(sc, exe, p, what) {
  return {
    name: `${p}add+del`,
    keys: [`${p}add`, `${p}del`],
    fn: () => {
      const pod = sc.newPod();
      const a = timed(exe, [], sc.env('ADD', pod), sc.confBytes);
      checkAdd(what, a);
      const d = timed(exe, [], sc.env('DEL', pod), sc.confBytes);
      checkDel(what, d);
      return { [`${p}add`]: a, [`${p}del`]: d };
    },
  };
}

/** The units of a round; each returns {sample key: run} (its `keys`, else its name). */
function units(sc, { exe, node, stripped, delegate, opts, payload }) {
  const floor = (key, file) => ({
    name: key,
    fn: () => {
      const r = timed(file, ['-e', '0'], sc.baseEnv);
      if (r.status !== 0) fail(show(`${key} node -e 0`, r));
      return { [key]: r };
    },
  });
  const alone = (command) => ({
    name: `delegate_${command.toLowerCase()}`,
    fn: () => {
      const r = timed(delegate.path, [], sc.env(command, sc.newPod()), sc.delegateBytes);
      if (r.status !== 0) fail(show(`delegate ${command}`, r));
      return { [`delegate_${command.toLowerCase()}`]: r };
    },
  });
  return [
    floor('floor', node),
    ...(stripped ? [floor('floor_stripped', stripped)] : []),
    ...multusUnits(sc, exe, ''),
    ...(payload ? multusUnits(sc, payload, 'direct_', true) : []),
    ...(opts.before ? multusUnits(sc, opts.before, 'before_') : []),
    alone('ADD'),
    alone('DEL'),
  ];
}

/** Peak RSS of VERSION, ADD, DEL and `node -e 0`, after the timings. */
async function peakRss(sc, { exe, node }, samples) {
  const meter = rssMeter();
  say(`peak RSS: ${samples} runs each, ${meter.method}`);
  const rss = { version: 0, add: 0, del: 0, floor: 0 };
  for (let i = 0; i < samples; i++) {
    const pod = sc.newPod();
    rss.floor = Math.max(rss.floor, await meter.measure(node, ['-e', '0'], sc.baseEnv, ''));
    const versionEnv = { ...sc.baseEnv, CNI_COMMAND: 'VERSION' };
    rss.version = Math.max(rss.version, await meter.measure(exe, [], versionEnv, sc.versionInput));
    rss.add = Math.max(rss.add, await meter.measure(exe, [], sc.env('ADD', pod), sc.confBytes));
    rss.del = Math.max(rss.del, await meter.measure(exe, [], sc.env('DEL', pod), sc.confBytes));
  }
  return { rss, method: meter.method };
}

/** The timed rounds; the sample set. */
function measureRounds(sc, ctx) {
  const { opts, exe, node } = ctx;
  const list = units(sc, ctx);
  const set = sampleSet(list.flatMap((u) => u.keys ?? [u.name]));
  const { samples } = set;
  say(
    `${opts.scenario}: ${exe} vs ${node} -e 0; ${opts.warmup} warm-up + ${opts.rounds} rounds of ` +
      `${list.map((u) => u.name).join(', ')} (rotated)`,
  );
  const t0 = performance.now();
  rotatedRounds({
    units: list,
    warmup: opts.warmup,
    rounds: opts.rounds,
    record: set.record,
    progress: (done) => {
      const m = (k) => stats(samples[k]).median_ms;
      say(
        `round ${done}/${opts.rounds}: medians floor ${m('floor')} ms, VERSION ${m('version')} ms` +
          (samples.direct_version ? ` (without the launcher ${m('direct_version')} ms), ` : ', ') +
          `ADD ${m('add')} ms, DEL ${m('del')} ms, delegate ${m('delegate_add')} ms ` +
          `(${((performance.now() - t0) / 1000).toFixed(1)} s)`,
      );
    },
  });
  return set;
}

/** VERSION without the launcher, and the launcher's cost: the same call through it minus without it. */
function launcherKeys(samples, ticks, payload) {
  const through = stats(samples.version);
  const direct = stats(samples.direct_version);
  return {
    direct_version: { ...direct, exe: payload },
    launcher: {
      median_ms: r2(through.median_ms - direct.median_ms),
      cpu_mean_ms: r2(
        cpuMs(ticks.version, samples.version.length) - cpuMs(ticks.direct_version, samples.direct_version.length),
      ),
      method:
        'VERSION through build/multus (launcher exec, then the Bun executable) minus VERSION of the Bun executable run directly, same rounds',
    },
  };
}

/** The scenario's keys of the JSON line. */
function figures(sc, ctx, { samples, ticks }, { rss, method }) {
  const { opts, stripped, payload } = ctx;
  // Overhead: each ADD/DEL minus its delegate calls, each at the run's median delegate time.
  const dAdd = stats(samples.delegate_add).median_ms;
  const dDel = stats(samples.delegate_del).median_ms;
  const ovAdd = samples.add.map((t) => t - sc.delegateCalls.ADD * dAdd);
  const ovDel = samples.del.map((t) => t - sc.delegateCalls.DEL * dDel);
  const peak = Math.max(rss.version, rss.add, rss.del);
  const floor = stats(samples.floor);
  const overhead = stats([...ovAdd, ...ovDel]);
  const cpu = (k) => cpuMs(ticks[k], samples[k].length);
  const context = contextKeys(ctx);
  return {
    scenario_description: description,
    ...context,
    delegate: { ...context.delegate, calls_per_command: sc.delegateCalls },
    rounds: opts.rounds,
    warmup_rounds: opts.warmup,
    floor,
    ...(stripped ? { floor_stripped: stats(samples.floor_stripped) } : {}),
    version: stats(samples.version),
    ...(payload ? launcherKeys(samples, ticks, payload) : {}),
    total: stats([...samples.add, ...samples.del]),
    overhead,
    add: stats(samples.add),
    del: stats(samples.del),
    overhead_add: stats(ovAdd),
    overhead_del: stats(ovDel),
    add_del_pair: stats(samples.add.map((t, i) => t + samples.del[i])),
    delegate_add: stats(samples.delegate_add),
    delegate_del: stats(samples.delegate_del),
    overhead_method:
      'per ADD (DEL) call: wall time minus calls_per_command x the median wall time of the delegate alone ' +
      'for ADD (DEL) in this run; total/overhead pool the ADD and DEL calls',
    overhead_minus_floor_ms: r2(overhead.median_ms - floor.median_ms),
    peak_rss_mib: r2(peak),
    rss_method: method,
    rss_mib: { version: r2(rss.version), add: r2(rss.add), del: r2(rss.del), floor_node_e_0: r2(rss.floor) },
    // Mean CPU time (user + sys) per call, from the children's rusage: insensitive to competing load.
    cpu_mean_ms: Object.fromEntries(
      [
        'floor',
        ...(stripped ? ['floor_stripped'] : []),
        'version',
        ...(payload ? ['direct_version'] : []),
        'add',
        'del',
        'delegate_add',
        'delegate_del',
      ].map((k) => [k, cpu(k)]),
    ),
    ...(opts.before ? { before: beforeKeys(opts.before, samples, cpu) } : {}),
    goals: {
      overhead_median_within_10ms_of_floor: overhead.median_ms - floor.median_ms <= 10,
      peak_rss_under_60_mib: peak < 60,
    },
  };
}

/** --before's build, timed in the same rounds: its wall times and CPU beside this build's. */
function beforeKeys(exe, samples, cpu) {
  return {
    exe,
    version: stats(samples.before_version),
    add: stats(samples.before_add),
    del: stats(samples.before_del),
    cpu_mean_ms: { version: cpu('before_version'), add: cpu('before_add'), del: cpu('before_del') },
  };
}

/** Runs the scenario: `ctx` = {opts, tmp, exe, node, stripped, delegate, mach}; its keys of the JSON line. */
export async function runDelegatesOnly(ctx) {
  const sc = setup(ctx);
  // Correctness first: the ADD result must be the delegate's, converted to the conf's version.
  for (const [what, exe] of [
    ['multus', ctx.exe],
    ...(ctx.opts.before ? [['multus (--before)', ctx.opts.before]] : []),
  ]) {
    const pod = sc.newPod();
    checkDelegateResult(what, timed(exe, [], sc.env('ADD', pod), sc.confBytes));
    checkDel(what, timed(exe, [], sc.env('DEL', pod), sc.confBytes));
  }
  const set = measureRounds(sc, ctx);
  const rss = await peakRss(sc, ctx, ctx.opts.rssSamples);
  return figures(sc, ctx, set, rss);
}
