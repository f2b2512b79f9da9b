/**
 * Scenario `kubernetes` of scripts/bench.mjs: multus ADD and DEL of a pod with two extra networks
 * (`k8s.v1.cni.cncf.io/networks: nad-a,nad-b`) against the real kube-apiserver of test/k8s/cluster.ts, through
 * the lean client (a `tokenFile` kubeconfig) and through the @kubernetes/client-node fallback (an `exec`
 * credential kubeconfig), plus the API requests each ADD and DEL makes, counted from the API server's audit log.
 * The cluster runs in the helper process of k8s-helper.mjs. docs/archive/performance.md describes the method and the keys.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  RUNTIME_PATH,
  checkAdd,
  checkDel,
  checkDelegateResult,
  cniEnv,
  countStats,
  cpuMs,
  fail,
  r2,
  rotatedRounds,
  sampleSet,
  say,
  show,
  stats,
  timed,
} from './common.mjs';
import { attribute, pattern, patternCounts, startHelper } from './k8s-helper.mjs';
import { rssMeter } from './rss.mjs';

const EXEC_SCRIPT = join(dirname(fileURLToPath(import.meta.url)), 'exec-credential.sh');
const NAMESPACE = 'multus-bench';
const NADS = [
  { name: 'nad-a', network: 'bench-net-a' },
  { name: 'nad-b', network: 'bench-net-b' },
];
/** Extra networks per pod (N in "N+2 requests per ADD"). */
const N = NADS.length;
const SAMPLE_KEYS = ['floor', 'add', 'del', 'exec_add', 'exec_del', 'delegate_add', 'delegate_del'];

export const description =
  `ADD+DEL of a pod annotated k8s.v1.cni.cncf.io/networks: ${NADS.map((n) => n.name).join(',')} (N=${N}; ` +
  'every network, the cluster one included, is the trivial delegate) against a local kube-apiserver + etcd ' +
  '(test/k8s/cluster.ts); multus kubeconfig = the multus service account with tokenFile (lean client), or the ' +
  'same account through an exec credential plugin (client-node fallback)';

/** The cluster with the namespace, the NADs and the kubeconfigs; pods made ahead of time, taken one by one. */
async function startCluster(helper, delegate, podCount) {
  say(`kubernetes: starting etcd + kube-apiserver (test/k8s/cluster.ts in helper pid ${helper.pid})`);
  const cl = await helper.ask({
    cmd: 'setup',
    namespace: NAMESPACE,
    nads: NADS.map((n) => ({
      name: n.name,
      config: JSON.stringify({ cniVersion: '1.0.0', name: n.network, type: delegate.type }),
    })),
    networks: NADS.map((n) => n.name).join(','),
    execScript: EXEC_SCRIPT,
  });
  say(`kubernetes: ${cl.kubeVersion} at ${cl.server}: started in ${cl.startupMs} ms, set up in ${cl.setupMs} ms`);
  const t0 = performance.now();
  const { pods } = await helper.ask({ cmd: 'pods', namespace: NAMESPACE, prefix: 'pod', count: podCount });
  say(`kubernetes: ${pods.length} pods created in ${Math.round(performance.now() - t0)} ms`);
  let nextPod = 0;
  const takePod = () => {
    const p = pods[nextPod++];
    if (!p) fail('ran out of pre-created pods');
    return { ...p, id: randomBytes(32).toString('hex') };
  };
  return { cl, takePod };
}

/** The multus configs (lean, exec, exec with a run counter), the delegate's, and the environment of a call. */
function callSetup(tmp, delegate, netns, cl) {
  const cniDir = join(tmp, 'cni-k8s');
  mkdirSync(cniDir, { recursive: true });
  const delegateConf = { cniVersion: '1.0.0', name: 'bench-net', type: delegate.type };
  const confOf = (kubeconfig) =>
    JSON.stringify({
      cniVersion: '1.0.0',
      name: 'multus-bench',
      type: 'multus',
      kubeconfig,
      cniDir,
      binDir: delegate.binDir,
      delegates: [delegateConf],
    });
  return {
    confs: { lean: confOf(cl.kubeconfig), exec: confOf(cl.execKubeconfig), execCount: confOf(cl.execCountKubeconfig) },
    delegateBytes: JSON.stringify(delegateConf),
    baseEnv: { PATH: RUNTIME_PATH },
    env: (command, pod) =>
      cniEnv({ command, ...pod, namespace: NAMESPACE, netns, cniPath: delegate.binDir, override: true }),
  };
}

/** Untimed: both paths return the delegate's result; how often the exec plugin runs in one ADD and one DEL. */
function correctness(exe, k, cl, takePod) {
  for (const what of ['lean', 'exec']) {
    const pod = takePod();
    checkDelegateResult(what, timed(exe, [], k.env('ADD', pod), k.confs[what]));
    checkDel(what, timed(exe, [], k.env('DEL', pod), k.confs[what]));
  }
  const pod = takePod();
  const lines = (f) => (existsSync(f) ? readFileSync(f, 'utf8').split('\n').filter(Boolean).length : 0);
  rmSync(cl.execCountFile, { force: true });
  checkAdd('exec (counting)', timed(exe, [], k.env('ADD', pod), k.confs.execCount));
  const runs = { ADD: lines(cl.execCountFile) };
  rmSync(cl.execCountFile, { force: true });
  checkDel('exec (counting)', timed(exe, [], k.env('DEL', pod), k.confs.execCount));
  runs.DEL = lines(cl.execCountFile);
  say(`kubernetes: the exec credential plugin ran ${runs.ADD} times in one ADD, ${runs.DEL} in one DEL`);
  return runs;
}

/** The units of a round; the timed multus calls' wall-clock windows go to `windows` while measuring. */
function units({ exe, node, delegate, opts }, k, takePod, windows, state) {
  const now = () => performance.timeOrigin + performance.now();
  // `before`: --before's build with the lean config
  const call = (variant, command, pod) => {
    const start = now();
    const bin = variant === 'before' ? opts.before : exe;
    const r = timed(bin, [], k.env(command, pod), k.confs[variant === 'before' ? 'lean' : variant]);
    if (state.measuring) windows.push({ variant, command, start, end: now() });
    return r;
  };
  const addDel = (variant) => {
    const pod = takePod();
    const a = call(variant, 'ADD', pod);
    checkAdd(variant, a);
    const d = call(variant, 'DEL', pod);
    checkDel(variant, d);
    const p = variant === 'lean' ? '' : `${variant}_`;
    return { [`${p}add`]: a, [`${p}del`]: d };
  };
  const alone = (command) => () => {
    const r = timed(delegate.path, [], k.env(command, { id: 'x'.repeat(64), name: 'p', uid: 'u' }), k.delegateBytes);
    if (r.status !== 0) fail(show(`delegate ${command}`, r));
    return { [`delegate_${command.toLowerCase()}`]: r };
  };
  const floor = () => {
    const r = timed(node, ['-e', '0'], k.baseEnv);
    if (r.status !== 0) fail(show('node -e 0', r));
    return { floor: r };
  };
  return [
    { name: 'floor', fn: floor },
    { name: 'add+del', fn: () => addDel('lean') },
    { name: 'exec add+del', fn: () => addDel('exec') },
    ...(opts.before ? [{ name: 'before add+del', fn: () => addDel('before') }] : []),
    { name: 'delegate_add', fn: alone('ADD') },
    { name: 'delegate_del', fn: alone('DEL') },
  ];
}

function measureRounds(ctx, k, takePod) {
  const { rounds, warmup } = { rounds: ctx.opts.k8sRounds, warmup: ctx.opts.warmup };
  const windows = [];
  const state = { measuring: false };
  const list = units(ctx, k, takePod, windows, state);
  const set = sampleSet([...SAMPLE_KEYS, ...(ctx.opts.before ? ['before_add', 'before_del'] : [])]);
  say(`kubernetes: ${warmup} warm-up + ${rounds} rounds of ${list.map((u) => u.name).join(', ')} (rotated)`);
  const tr = performance.now();
  rotatedRounds({
    units: list,
    warmup,
    rounds,
    record: set.record,
    measuring: (m) => (state.measuring = m),
    progress: (done) => {
      const m = (key) => stats(set.samples[key]).median_ms;
      say(
        `kubernetes round ${done}/${rounds}: medians floor ${m('floor')} ms, ADD ${m('add')} ms, DEL ${m('del')} ms, ` +
          `exec ADD ${m('exec_add')} ms, delegate ${m('delegate_add')} ms (${((performance.now() - tr) / 1000).toFixed(1)} s)`,
      );
    },
  });
  return { ...set, windows };
}

/** API requests (and events) per call of one variant and command, from the attributed windows. */
function perCall(windows, variant, command) {
  const ws = windows.filter((w) => w.variant === variant && w.command === command);
  const api = ws.map((w) => w.requests.filter((r) => r.resource !== 'events'));
  const ev = ws.map((w) => w.requests.filter((r) => r.resource === 'events'));
  return {
    requests: countStats(api.map((x) => x.length)),
    events: countStats(ev.map((x) => x.length)),
    patterns: patternCounts(api),
    event_pattern: pattern(ev[0] ?? []),
    failed_requests: api.flat().filter((r) => !(r.code >= 200 && r.code < 300)).length,
    failed_events: ev.flat().filter((r) => !(r.code >= 200 && r.code < 300)).length,
    events_total: ev.flat().length,
  };
}

/** The multus service account's requests per call, from the audit log. */
async function apiRequests(helper, windows) {
  const { events } = await helper.ask({ cmd: 'audit' });
  const unattributed = attribute(windows, events);
  const api = {
    lean: { ADD: perCall(windows, 'lean', 'ADD'), DEL: perCall(windows, 'lean', 'DEL') },
    exec: { ADD: perCall(windows, 'exec', 'ADD'), DEL: perCall(windows, 'exec', 'DEL') },
    before: { ADD: perCall(windows, 'before', 'ADD'), DEL: perCall(windows, 'before', 'DEL') },
  };
  say(
    `kubernetes: API requests per ADD (lean): ${JSON.stringify(api.lean.ADD.requests)} ${JSON.stringify(api.lean.ADD.patterns)}; ` +
      `events per ADD ${api.lean.ADD.events.median}; per DEL ${api.lean.DEL.requests.median}; unattributed ${unattributed}`,
  );
  return { api, unattributed };
}

/** Peak RSS of ADD and DEL through both paths, after the timings. */
async function peakRss(exe, k, takePod, samples) {
  const meter = rssMeter();
  const rss = { add: 0, del: 0, exec_add: 0, exec_del: 0 };
  for (let i = 0; i < samples; i++) {
    for (const variant of ['lean', 'exec']) {
      const pod = takePod();
      const p = variant === 'lean' ? '' : 'exec_';
      rss[`${p}add`] = Math.max(rss[`${p}add`], await meter.measure(exe, [], k.env('ADD', pod), k.confs[variant]));
      rss[`${p}del`] = Math.max(rss[`${p}del`], await meter.measure(exe, [], k.env('DEL', pod), k.confs[variant]));
    }
  }
  return rss;
}

/** Wall times, overhead and CPU of one variant: each call minus 3 delegate calls at the median delegate time. */
function figures({ samples, ticks }, addKey, delKey) {
  const calls = 1 + N;
  const dAdd = stats(samples.delegate_add).median_ms;
  const dDel = stats(samples.delegate_del).median_ms;
  const ovAdd = samples[addKey].map((t) => t - calls * dAdd);
  const ovDel = samples[delKey].map((t) => t - calls * dDel);
  return {
    total: stats([...samples[addKey], ...samples[delKey]]),
    overhead: stats([...ovAdd, ...ovDel]),
    add: stats(samples[addKey]),
    del: stats(samples[delKey]),
    overhead_add: stats(ovAdd),
    overhead_del: stats(ovDel),
    add_del_pair: stats(samples[addKey].map((t, i) => t + samples[delKey][i])),
    cpu_mean_ms: {
      add: cpuMs(ticks[addKey], samples[addKey].length),
      del: cpuMs(ticks[delKey], samples[delKey].length),
    },
  };
}

const reqSummary = (a) => ({
  median: a.requests.median,
  max: a.requests.max,
  min: a.requests.min,
  calls: a.requests.n,
  typical: Object.keys(a.patterns)[0] ?? null,
});
const eventsPerAdd = (a) => ({
  median: a.events.median,
  max: a.events.max,
  typical: a.event_pattern,
  failed: a.failed_events,
  of: a.events_total,
});

/** The same calls with an exec credential kubeconfig: @kubernetes/client-node's KubeConfig (SEA asset). */
function execKeys(set, floor, api, execRuns) {
  const exec = figures(set, 'exec_add', 'exec_del');
  return {
    ...exec,
    overhead_minus_floor_ms: r2(exec.overhead.median_ms - floor.median_ms),
    api_requests_per_add: reqSummary(api.exec.ADD),
    api_requests_per_del: reqSummary(api.exec.DEL),
    events_per_add: eventsPerAdd(api.exec.ADD),
    failed_api_requests: api.exec.ADD.failed_requests + api.exec.DEL.failed_requests,
    exec_plugin_runs: execRuns,
    exec_plugin: '/bin/sh scripts/bench/exec-credential.sh (ExecCredential with status.token, no expirationTimestamp)',
  };
}

/** --before's build, timed in the same rounds with the lean config: its figures beside this build's. */
function beforeKeys(exe, set, api) {
  return {
    exe,
    ...figures(set, 'before_add', 'before_del'),
    api_requests_per_add: reqSummary(api.before.ADD),
    api_requests_per_del: reqSummary(api.before.DEL),
    events_per_add: eventsPerAdd(api.before.ADD),
  };
}

/** The object printed under the `kubernetes` key. */
function result({ opts, cl, load, set, api, unattributed, rss, execRuns }) {
  const { samples, ticks } = set;
  const floor = stats(samples.floor);
  const lean = figures(set, 'add', 'del');
  return {
    scenario_description: description,
    kube_apiserver: cl.kubeVersion,
    cluster_startup_ms: cl.startupMs,
    audit:
      'kube-apiserver audit log, level Metadata, stage ResponseComplete, user ' +
      cl.multusUser +
      '; a request belongs to the timed multus call whose wall-clock window holds its requestReceivedTimestamp',
    rounds: opts.k8sRounds,
    warmup_rounds: opts.warmup,
    machine_load_1m: load,
    networks_per_pod: N,
    delegate_calls_per_command: { ADD: 1 + N, DEL: 1 + N },
    floor,
    delegate_add: stats(samples.delegate_add),
    delegate_del: stats(samples.delegate_del),
    cpu_mean_ms_floor: cpuMs(ticks.floor, samples.floor.length),
    cpu_mean_ms_delegate: {
      add: cpuMs(ticks.delegate_add, samples.delegate_add.length),
      del: cpuMs(ticks.delegate_del, samples.delegate_del.length),
    },
    // The lean client (kubeconfig with tokenFile): the headline figures.
    ...lean,
    overhead_minus_floor_ms: r2(lean.overhead.median_ms - floor.median_ms),
    api_requests_per_add: { N, ...reqSummary(api.lean.ADD), goal_n_plus_2: N + 2, multus_go_n_plus_4: N + 4 },
    api_requests_per_del: reqSummary(api.lean.DEL),
    events_per_add: eventsPerAdd(api.lean.ADD),
    api_request_patterns: { add: api.lean.ADD.patterns, del: api.lean.DEL.patterns },
    failed_api_requests: api.lean.ADD.failed_requests + api.lean.DEL.failed_requests,
    unattributed_api_requests: unattributed,
    peak_rss_mib: { add: r2(rss.add), del: r2(rss.del), exec_add: r2(rss.exec_add), exec_del: r2(rss.exec_del) },
    kubernetes_exec_auth: execKeys(set, floor, api, execRuns),
    ...(opts.before ? { before: beforeKeys(opts.before, set, api) } : {}),
    goals: {
      api_requests_per_add_at_most_n_plus_2: api.lean.ADD.requests.max <= N + 2,
      overhead_median_under_80ms: lean.overhead.median_ms < 80,
    },
  };
}

/** Runs the scenario (`ctx` = {opts, exe, node, delegate, tmp}); returns the object under the `kubernetes` key. */
export async function runKubernetes(ctx) {
  const { opts, exe, node, delegate, tmp, netns } = ctx;
  if (opts.k8sRounds < 30)
    say(`WARNING: ${opts.k8sRounds} kubernetes rounds: the figures need at least 30 (--k8s-rounds)`);
  const load0 = r2(loadavg()[0]);
  const helper = startHelper(node, say);
  try {
    // Pods, made ahead of time: 2 per round (lean, exec; 3 with --before), the checks, the RSS runs.
    const podCount = (opts.before ? 3 : 2) * (opts.warmup + opts.k8sRounds) + 3 + 2 * opts.rssSamples;
    const { cl, takePod } = await startCluster(helper, delegate, podCount);
    const k = callSetup(tmp, delegate, netns, cl);
    const execRuns = correctness(exe, k, cl, takePod);
    const set = measureRounds(ctx, k, takePod);
    const load = { start: load0, end: r2(loadavg()[0]) };
    const { api, unattributed } = await apiRequests(helper, set.windows);
    const rss = await peakRss(exe, k, takePod, opts.rssSamples);
    return result({ opts, cl, load, set, api, unattributed, rss, execRuns });
  } finally {
    await helper.stop();
  }
}
