/**
 * The measurements of scenario `resident` (resident.mjs), each over a set of modes ({mode: {file, conf, what}}):
 * the interleaved timed rounds of one configuration with the API requests per call, C concurrent ADDs of
 * different containers with host-local IPAM, and the resident daemons' RSS after N back-to-back ADD/DEL pairs.
 * `rc` is the run's context (resident.mjs): opts, tmp, delegate, delegateBytes, env(command, pod).
 */
import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import {
  checkAdd,
  checkDel,
  checkDelegateResult,
  countStats,
  cpuMs,
  fail,
  parseJson,
  quantile,
  r2,
  rotatedRounds,
  say,
  show,
  stats,
  timed,
  modeEnv,
} from './common.mjs';
import { heapOf, sleep } from './daemons.mjs';
import { attribute, patternCounts } from './k8s-helper.mjs';
import { rssMeter } from './rss.mjs';

const now = () => performance.timeOrigin + performance.now();

/** One ADD then DEL through every mode, untimed: each returns the delegate's result. */
function checkModes(rc, tag, modes, takePod) {
  for (const [m, mode] of Object.entries(modes)) {
    const pod = takePod();
    checkDelegateResult(`${tag} ${m}`, timed(mode.file, [], modeEnv(rc, mode, 'ADD', pod), mode.conf));
    checkDel(`${tag} ${m}`, timed(mode.file, [], modeEnv(rc, mode, 'DEL', pod), mode.conf));
  }
}

/**
 * `--writeback before-del` (off by default, so runs stay comparable), untimed, between an ADD and its DEL: every
 * dirty page written back, as the kernel has done on a node by the time a pod is deleted (after 30 s). Without it a
 * DEL comes a few ms after its ADD, while a file the ADD wrote without fsync has no blocks on disk yet, and removing
 * it costs less than on a node (docs/archive/performance.md, "The daemon's delegates without chroot(8)", `--writeback`).
 */
export function writebackBeforeDel(opts) {
  if (opts.writeback !== 'before-del') return;
  const r = spawnSync('sync', [], { stdio: 'ignore' });
  if (r.status !== 0) fail(`sync (--writeback before-del) exited ${r.status}${r.error ? `: ${r.error.message}` : ''}`);
}

/** A unit per mode (ADD then DEL of a new pod) and the delegate alone; windows of the measured calls. */
function units(rc, tag, modes, takePod, windows, state) {
  const modeUnit = (m, mode) => () => {
    const pod = takePod();
    const s1 = now();
    const a = timed(mode.file, [], modeEnv(rc, mode, 'ADD', pod), mode.conf);
    const e1 = now();
    checkAdd(`${tag} ${m}`, a);
    writebackBeforeDel(rc.opts);
    const s2 = now();
    const d = timed(mode.file, [], modeEnv(rc, mode, 'DEL', pod), mode.conf);
    const e2 = now();
    checkDel(`${tag} ${m}`, d);
    if (state.measuring)
      windows.push({ mode: m, command: 'ADD', start: s1, end: e1 }, { mode: m, command: 'DEL', start: s2, end: e2 });
    return { [`${m}_add`]: a, [`${m}_del`]: d };
  };
  const delegateUnit = () => {
    const pod = takePod();
    const a = timed(rc.delegate.path, [], rc.env('ADD', pod), rc.delegateBytes);
    writebackBeforeDel(rc.opts);
    const d = timed(rc.delegate.path, [], rc.env('DEL', pod), rc.delegateBytes);
    if (a.status !== 0 || d.status !== 0) fail(`delegate: ${show('delegate', a.status ? a : d)}`);
    return { delegate_add: a, delegate_del: d };
  };
  return [
    ...Object.entries(modes).map(([m, mode]) => ({ name: m, fn: modeUnit(m, mode) })),
    { name: 'delegate', fn: delegateUnit },
  ];
}

/**
 * Wall times and overhead (minus the delegate calls at this run's median) per mode, CPU per call (user + system of
 * the process and its delegates, mean; `ticks` summed per key), and ratios to Go. `overhead` pools the ADD and DEL
 * samples: where a mode's ADD and DEL differ by more than their spread (Kubernetes mode), its median falls between
 * the two, the mean of the slowest DEL and the fastest ADD, and one slow call moves it. `overhead_pod` is each
 * round's ADD and DEL of one pod summed, the median over rounds: what a pod costs (docs/archive/performance.md, "A pod's
 * ADD and DEL together").
 */
export function modeFigures(modes, samples, ticks, delegateCalls) {
  const names = Object.keys(modes);
  const dAdd = stats(samples.delegate_add).median_ms;
  const dDel = stats(samples.delegate_del).median_ms;
  const out = {};
  for (const m of names) {
    const ovAdd = samples[`${m}_add`].map((t) => t - delegateCalls * dAdd);
    const ovDel = samples[`${m}_del`].map((t) => t - delegateCalls * dDel);
    out[m] = {
      what: modes[m].what,
      add: stats(samples[`${m}_add`]),
      del: stats(samples[`${m}_del`]),
      overhead: stats([...ovAdd, ...ovDel]),
      overhead_add: stats(ovAdd),
      overhead_del: stats(ovDel),
      overhead_pod: stats(ovAdd.map((a, i) => a + ovDel[i])),
      cpu_add_ms: cpuMs(ticks[`${m}_add`], samples[`${m}_add`].length),
      cpu_del_ms: cpuMs(ticks[`${m}_del`], samples[`${m}_del`].length),
    };
  }
  // Ratios of medians (overhead) to each Go mode: < 1 is faster than Go.
  for (const m of names) {
    const ratios = {};
    for (const g of ['go_thin', 'go_thick']) {
      if (!out[g] || g === m) continue;
      const r = (k) => r2(out[m][k].median_ms / out[g][k].median_ms);
      const c = (k) => r2(out[m][k] / out[g][k]);
      ratios[`to_${g}`] = {
        overhead: r('overhead'),
        overhead_add: r('overhead_add'),
        overhead_del: r('overhead_del'),
        overhead_pod: r('overhead_pod'),
        cpu_add: c('cpu_add_ms'),
        cpu_del: c('cpu_del_ms'),
      };
    }
    out[m].ratios = ratios;
  }
  return out;
}

/** API requests per ADD and DEL of each mode, from the audit events attributed to the windows. */
function apiFigures(res, names, windows, events) {
  const unattributed = attribute(windows, events);
  for (const m of names) {
    for (const command of ['ADD', 'DEL']) {
      const ws = windows.filter((w) => w.mode === m && w.command === command);
      const api = ws.map((w) => w.requests.filter((r) => r.resource !== 'events'));
      const ev = ws.map((w) => w.requests.filter((r) => r.resource === 'events'));
      res.modes[m][`api_requests_per_${command.toLowerCase()}`] = {
        ...countStats(api.map((x) => x.length)),
        events: countStats(ev.map((x) => x.length)).median ?? 0,
        patterns: patternCounts(api),
      };
    }
  }
  res.unattributed_api_requests = unattributed;
}

/** The timed rounds of one configuration ({modes, takePod, delegateCalls, audit?}); returns its figures. */
export async function measureConfig(rc, tag, { modes, takePod, delegateCalls, audit = undefined }) {
  const names = Object.keys(modes);
  const { residentRounds: rounds, warmup } = rc.opts;
  say(`resident/${tag}: correctness check of ${names.join(', ')}`);
  checkModes(rc, tag, modes, takePod);
  const samples = { delegate_add: [], delegate_del: [] };
  for (const m of names) Object.assign(samples, { [`${m}_add`]: [], [`${m}_del`]: [] });
  const ticks = Object.fromEntries(Object.keys(samples).map((k) => [k, 0]));
  const windows = [];
  const state = { measuring: false };
  const list = units(rc, tag, modes, takePod, windows, state);
  say(`resident/${tag}: ${warmup} warm-up + ${rounds} rounds of ${list.map((u) => u.name).join(', ')} (rotated)`);
  const t0 = performance.now();
  rotatedRounds({
    units: list,
    warmup,
    rounds,
    measuring: (m) => (state.measuring = m),
    record: (got) =>
      Object.entries(got).forEach(([key, r]) => {
        samples[key].push(r.ms);
        ticks[key] += r.ticks;
      }),
    progress: (done) => {
      const med = names
        .map((m) => `${m} ${stats(samples[`${m}_add`]).median_ms}/${stats(samples[`${m}_del`]).median_ms}`)
        .join(', ');
      const s = ((performance.now() - t0) / 1000).toFixed(1);
      say(`resident/${tag} round ${done}/${rounds}: ADD/DEL medians ${med} ms (${s} s)`);
    },
  });
  const res = {
    delegate_calls_per_command: delegateCalls,
    delegate_add: stats(samples.delegate_add),
    delegate_del: stats(samples.delegate_del),
    delegate_cpu_ms: { add: cpuMs(ticks.delegate_add, rounds), del: cpuMs(ticks.delegate_del, rounds) },
    modes: modeFigures(modes, samples, ticks, delegateCalls),
  };
  await peakRss(rc, tag, modes, takePod, res.modes);
  if (audit) {
    const events = (await audit()).filter((e) => e.verb !== 'list' && e.verb !== 'watch');
    apiFigures(res, names, windows, events);
  }
  return res;
}

/**
 * Peak RSS of the process a runtime execs for one call (the plugin in thin modes, the shim in resident ones; a
 * daemon's memory is rssPairs'), `--rss-samples` ADDs and DELs per mode, interleaved; median and max MiB, and
 * the ratio of the medians to each Go mode.
 */
async function peakRss(rc, tag, modes, takePod, figures) {
  const n = rc.opts.rssSamples;
  if (!n) return;
  const meter = rssMeter();
  const kib = Object.fromEntries(Object.keys(modes).map((m) => [m, { add: [], del: [] }]));
  say(`resident/${tag}: peak RSS per call, ${n} ADDs and DELs per mode (${meter.method})`);
  for (let i = 0; i < n; i++) {
    for (const [m, mode] of Object.entries(modes)) {
      const pod = takePod();
      kib[m].add.push(await meter.measure(mode.file, [], modeEnv(rc, mode, 'ADD', pod), mode.conf));
      kib[m].del.push(await meter.measure(mode.file, [], modeEnv(rc, mode, 'DEL', pod), mode.conf));
    }
  }
  const med = (xs) => stats(xs).median_ms;
  for (const m of Object.keys(modes)) {
    const all = [...kib[m].add, ...kib[m].del];
    figures[m].peak_rss_mib = {
      add: med(kib[m].add),
      del: med(kib[m].del),
      median: med(all),
      max: r2(Math.max(...all)),
    };
    figures[m].peak_rss_method = meter.method;
  }
  for (const m of Object.keys(modes))
    for (const g of ['go_thin', 'go_thick'])
      if (figures[g] && g !== m)
        figures[m].ratios[`to_${g}`].peak_rss = r2(figures[m].peak_rss_mib.median / figures[g].peak_rss_mib.median);
}

/** One CNI call as a child process, not waited for synchronously (the concurrency test). */
function runAsync(file, env, conf) {
  return new Promise((resolve) => {
    const t = performance.now();
    const c = spawn(file, [], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    c.stdout.on('data', (b) => (stdout += b));
    c.stderr.on('data', (b) => (stderr += b));
    c.on('error', (e) => resolve({ ms: performance.now() - t, status: -1, stdout, stderr: e.message }));
    c.on('close', (status, signal) => resolve({ ms: performance.now() - t, status, signal, stdout, stderr }));
    c.stdin.end(conf);
  });
}

const q = (xs, p) =>
  r2(
    quantile(
      [...xs].sort((a, b) => a - b),
      p,
    ),
  );

/** n concurrent ADDs, then n concurrent DELs, of different containers through one mode. */
async function concurrentMode(rc, pods, file, conf) {
  const n = pods.length;
  const adds = await Promise.all(pods.map((p) => runAsync(file, rc.env('ADD', p), conf)));
  const failed = adds.filter((r) => r.status !== 0 || parseJson(r.stdout)?.code !== undefined);
  const ips = adds.map((r) => parseJson(r.stdout)?.ips?.[0]?.address).filter(Boolean);
  const dels = await Promise.all(pods.map((p) => runAsync(file, rc.env('DEL', p), conf)));
  const delFailed = dels.filter((r) => r.status !== 0 || (r.stdout.trim() && parseJson(r.stdout)?.code !== undefined));
  const addMs = adds.map((r) => r.ms);
  const delMs = dels.map((r) => r.ms);
  return {
    adds: n,
    failed_adds: failed.length,
    distinct_ips: new Set(ips).size,
    all_succeeded_distinct: failed.length === 0 && new Set(ips).size === n,
    add_p50_ms: q(addMs, 0.5),
    add_p99_ms: q(addMs, 0.99),
    failed_dels: delFailed.length,
    del_p50_ms: q(delMs, 0.5),
    del_p99_ms: q(delMs, 0.99),
    ...(failed[0] ? { first_failure: show('ADD', failed[0]).slice(0, 1500) } : {}),
  };
}

/** At rest: this long without a call before a burst and before each at-rest sample. */
const SETTLE_MS = 3000;

/**
 * C concurrent ADDs (then DELs) of different containers per mode, host-local IPAM; `extra(mode)`: conf keys.
 * `daemons[mode]` (the resident modes'): its VmHWM is reset before the burst and read after it (`daemon.hwm_mib`:
 * the burst's own high-water), with its RSS then (and its file pages by mapping), its RSS split into anonymous and
 * file pages at the highest of its samples every 20 ms, and its RSS at rest 3 s later. Each burst but a first one
 * without a daemon starts 3 s after whatever ran before it, and a daemon's RSS is read then (`daemon.at_start`).
 */
export async function concurrency(rc, tag, modes, takePod, extra, daemons = {}) {
  const n = rc.opts.concurrency;
  if (n === 0) return { skipped: '--concurrency 0' };
  const result = {};
  let k = 0;
  for (const [m, mode] of Object.entries(modes)) {
    k++;
    const hl = {
      cniVersion: '1.0.0',
      name: `bench-hl-${m}`,
      type: 'host-local',
      ipam: {
        type: 'host-local',
        ranges: [[{ subnet: `10.${200 + k}.0.0/16` }]],
        dataDir: join(rc.tmp, `hl-${tag}-${m}`),
      },
    };
    const conf = JSON.stringify({ ...JSON.parse(mode.conf), delegates: [hl], ...extra(m) });
    const pods = Array.from({ length: n }, () => takePod());
    say(`resident/${tag}: ${n} concurrent ADDs through ${m}`);
    const d = daemons[m];
    // every burst from a quiet machine: the previous mode's burst (its calls' pod updates reach every daemon's
    // informer) has settled, and a daemon at rest has had its second without a call (docs/archive/performance.md, "The
    // burst from rest")
    if (k > 1 || d) await sleep(SETTLE_MS);
    const atStart = d?.rss();
    d?.resetHwm();
    // the daemon's RSS every 20 ms: its split into anonymous and file pages at the burst's highest sample
    let peak = null;
    const sampler = d
      ? setInterval(() => {
          const s = d.rss();
          if (s && (!peak || s.rss_mib > peak.rss_mib)) peak = s;
        }, 20)
      : undefined;
    result[m] = await concurrentMode(rc, pods, mode.file, conf);
    clearInterval(sampler);
    const r = result[m];
    if (d) {
      const after = d.rss();
      const mappings = d.fileMappings();
      await sleep(SETTLE_MS);
      r.daemon = {
        ...after,
        at_start: atStart,
        file_mappings: mappings,
        at_highest_sample: peak,
        rss_at_rest_mib: d.rss()?.rss_mib,
      };
    }
    say(
      `resident/${tag}: ${m}: ${n - r.failed_adds}/${n} ADDs, ${r.distinct_ips} distinct IPs, ` +
        `p50 ${r.add_p50_ms} ms, p99 ${r.add_p99_ms} ms`,
    );
  }
  return result;
}

/** Back-to-back ADD/DEL pairs through a resident mode; the daemon's RSS after each checkpoint. */
export async function rssPairs(rc, mode, daemon, takePod) {
  const checkpoints = [...rc.opts.rssPairs].sort((a, b) => a - b);
  // multus-ts' daemon: also its V8 heap from /metrics (a growing heap is a leak; RSS alone may be the allocator)
  const sample = async () => ({ ...daemon.rss(), ...(daemon.metricsPort ? await heapOf(daemon.metricsPort) : {}) });
  // at rest: SETTLE_MS without a call (a daemon's idle work, ours and Go's scavenger, has run); its RSS every 250 ms
  const settle = async () => {
    const series = [];
    const t = performance.now();
    for (let i = 1; i <= SETTLE_MS / 250; i++) {
      await sleep(t + i * 250 - performance.now());
      const r = daemon.rss();
      series.push({ ms: Math.round(performance.now() - t), anon_mib: r?.anon_mib, file_mib: r?.file_mib });
    }
    return series;
  };
  const res = { start: await sample(), after: {} };
  res.settle_start = await settle();
  res.start_at_rest = await sample();
  const times = [];
  let done = 0;
  const t0 = performance.now();
  for (const target of checkpoints) {
    for (; done < target; done++) {
      const pod = takePod();
      const a = timed(mode.file, [], modeEnv(rc, mode, 'ADD', pod), mode.conf);
      checkAdd(`rss ${daemon.name}`, a);
      checkDel(`rss ${daemon.name}`, timed(mode.file, [], modeEnv(rc, mode, 'DEL', pod), mode.conf));
      times.push(a.ms);
      if ((done + 1) % 1000 === 0)
        say(`resident: ${daemon.name}: ${done + 1} pairs (${((performance.now() - t0) / 1000).toFixed(0)} s)`);
    }
    res.after[target] = await sample();
  }
  const [lo, hi] = [checkpoints[0], checkpoints[checkpoints.length - 1]];
  res.settle_end = await settle();
  res.end_at_rest = await sample();
  if (res.start_at_rest?.rss_mib && res.end_at_rest?.rss_mib) {
    res.growth_ratio_at_rest = r2(res.end_at_rest.rss_mib / res.start_at_rest.rss_mib);
    res.goal_at_rest_within_10_percent = res.growth_ratio_at_rest <= 1.1;
  }
  if (lo !== hi && res.after[lo] && res.after[hi]) {
    res.growth_ratio = r2(res.after[hi].rss_mib / res.after[lo].rss_mib);
    res.goal_within_10_percent = res.growth_ratio <= 1.1;
  }
  const s = stats(times);
  res.add_back_to_back = {
    ...s,
    p95_over_median: r2(s.p95_ms / s.median_ms),
    goal_p95_at_most_2x_median: s.p95_ms <= 2 * s.median_ms,
  };
  return res;
}
