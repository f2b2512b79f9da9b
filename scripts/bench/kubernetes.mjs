/**
 * Scenario `kubernetes` of scripts/bench.mjs: multus ADD and DEL of a pod with two extra networks
 * (`k8s.v1.cni.cncf.io/networks: nad-a,nad-b`) against the real kube-apiserver of test/k8s/cluster.ts, through
 * the lean client (a `tokenFile` kubeconfig) and through the @kubernetes/client-node fallback (an `exec`
 * credential kubeconfig), plus the API requests each ADD and DEL makes, counted from the API server's audit log.
 *
 * The cluster lives in a child process (scripts/bench/k8s-cluster.ts, run by the Node 24 base binary with
 * --experimental-strip-types) that answers JSON lines; it stops the cluster when its stdin closes, so the
 * cluster goes with the bench however the bench ends. docs/performance.md describes the method and the keys.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
const HELPER = join(HERE, 'k8s-cluster.ts');
const EXEC_SCRIPT = join(HERE, 'exec-credential.sh');
const NAMESPACE = 'multus-bench';
const NADS = [
  { name: 'nad-a', network: 'bench-net-a' },
  { name: 'nad-b', network: 'bench-net-b' },
];
/** Extra networks per pod (N in "N+2 requests per ADD"). */
const N = NADS.length;

export const description =
  `ADD+DEL of a pod annotated k8s.v1.cni.cncf.io/networks: ${NADS.map((n) => n.name).join(',')} (N=${N}; ` +
  'every network, the cluster one included, is the trivial delegate) against a local kube-apiserver + etcd ' +
  '(test/k8s/cluster.ts); multus kubeconfig = the multus service account with tokenFile (lean client), or the ' +
  'same account through an exec credential plugin (client-node fallback)';

/** Where test/k8s/build.sh puts the binaries (as test/k8s/cluster.ts computes it). */
export function k8sBinaries(root) {
  const dir = join(process.env.MULTUS_TS_CACHE_DIR || join(root, '.cache'), 'k8s');
  const bins = ['kube-apiserver', 'etcd'].map((b) => join(dir, b));
  return { dir, bins, present: bins.every((b) => existsSync(b)) };
}

/** The helper process and a request/answer function over its stdin/stdout. */
export function startHelper(node, say) {
  const child = spawn(node, ['--experimental-strip-types', '--disable-warning=ExperimentalWarning', HELPER], {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: { ...process.env, NODE_OPTIONS: '' },
  });
  const waiting = [];
  let dead = null;
  const exited = new Promise((res) => {
    child.on('exit', (code, signal) => {
      dead = `the cluster helper exited (${signal ?? `code ${code}`})`;
      for (const w of waiting.splice(0)) w.reject(new Error(dead));
      res();
    });
  });
  child.on('error', (e) => {
    dead = `the cluster helper did not start: ${e.message}`;
    for (const w of waiting.splice(0)) w.reject(new Error(dead));
  });
  createInterface({ input: child.stdout }).on('line', (line) => {
    const w = waiting.shift();
    if (!w) return say(`unexpected line from the cluster helper: ${line.slice(0, 200)}`);
    let j;
    try {
      j = JSON.parse(line);
    } catch {
      return w.reject(new Error(`cluster helper: not JSON: ${line.slice(0, 200)}`));
    }
    if (j.ok) w.resolve(j);
    else w.reject(new Error(`cluster helper: ${j.error}`));
  });
  const ask = (req) =>
    new Promise((resolve, reject) => {
      if (dead) return reject(new Error(dead));
      waiting.push({ resolve, reject });
      child.stdin.write(JSON.stringify(req) + '\n');
    });
  /** Closes its stdin (it stops the cluster and exits); SIGKILL after `ms` if it has not. */
  const stop = async (ms = 30_000) => {
    if (child.exitCode !== null || child.signalCode !== null || dead) return exited;
    child.stdin.end();
    const t = setTimeout(() => child.kill('SIGKILL'), ms);
    await exited;
    clearTimeout(t);
  };
  return { ask, stop, pid: child.pid };
}

/** A one-line summary of a call's requests: `get pods, get network-attachment-definitions x2, update pods/status`. */
export function pattern(reqs) {
  const counts = new Map();
  for (const r of reqs) {
    const k = `${r.verb} ${r.resource}${r.subresource ? `/${r.subresource}` : ''}${r.code >= 300 ? ` (${r.code})` : ''}`;
    counts.set(k, (counts.get(k) ?? 0) + 1);
  }
  return [...counts].map(([k, n]) => (n > 1 ? `${k} x${n}` : k)).join(', ') || '(none)';
}

export function countStats(xs, r2) {
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

/** Assigns each audit event to the timed multus call whose wall-clock window holds its requestReceivedTimestamp. */
export function attribute(windows, events) {
  const ws = [...windows].sort((a, b) => a.start - b.start);
  for (const w of ws) w.requests = [];
  const first = ws[0]?.start ?? 0;
  const last = ws[ws.length - 1]?.end ?? 0;
  let unattributed = 0;
  let i = 0;
  for (const e of [...events].sort((a, b) => a.t - b.t)) {
    if (e.t < first || e.t > last) continue; // correctness checks, warm-up, RSS phase
    while (i < ws.length && ws[i].end < e.t) i++;
    if (i < ws.length && ws[i].start <= e.t) ws[i].requests.push(e);
    else unattributed++;
  }
  return unattributed;
}

/**
 * Runs the scenario; returns the object printed under the `kubernetes` key.
 * `lib`: the bench's timed/stats/r2/fail/say/parseJson/rssMeter/RUNTIME_PATH/CLK_TCK.
 */
export async function runKubernetes({ opts, exe, node, delegate, tmp, lib }) {
  const { timed, stats, r2, fail, say, parseJson, rssMeter, RUNTIME_PATH, CLK_TCK } = lib;
  const rounds = opts.k8sRounds;
  const warmup = opts.warmup;
  if (rounds < 30) say(`WARNING: ${rounds} kubernetes rounds: the figures need at least 30 (--k8s-rounds)`);
  const load0 = r2(loadavg()[0]);

  const helper = startHelper(node, say);
  try {
    const now = () => performance.timeOrigin + performance.now();
    say(`kubernetes: starting etcd + kube-apiserver (test/k8s/cluster.ts in helper pid ${helper.pid})`);
    const delegateConf = { cniVersion: '1.0.0', name: 'bench-net', type: delegate.type };
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

    // Pods, made ahead of time: 2 per round (lean, exec), the checks, the RSS runs.
    const podCount = 2 * (warmup + rounds) + 3 + 2 * opts.rssSamples;
    const t0 = performance.now();
    const { pods } = await helper.ask({ cmd: 'pods', namespace: NAMESPACE, prefix: 'pod', count: podCount });
    say(`kubernetes: ${pods.length} pods created in ${Math.round(performance.now() - t0)} ms`);
    let nextPod = 0;
    const takePod = () => {
      const p = pods[nextPod++];
      if (!p) fail('ran out of pre-created pods');
      return { ...p, id: randomBytes(32).toString('hex') };
    };

    const cniDir = join(tmp, 'cni-k8s');
    mkdirSync(cniDir, { recursive: true });
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
    const confs = {
      lean: confOf(cl.kubeconfig),
      exec: confOf(cl.execKubeconfig),
      execCount: confOf(cl.execCountKubeconfig),
    };
    const delegateBytes = JSON.stringify(delegateConf);
    const netns = join(tmp, 'netns-k8s');
    writeFileSync(netns, '');
    const baseEnv = { PATH: RUNTIME_PATH };
    const cniEnv = (command, pod) => ({
      ...baseEnv,
      CNI_COMMAND: command,
      CNI_CONTAINERID: pod.id,
      CNI_NETNS: netns,
      CNI_NETNS_OVERRIDE: '1',
      CNI_IFNAME: 'eth0',
      CNI_PATH: delegate.binDir,
      CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${NAMESPACE};K8S_POD_NAME=${pod.name};K8S_POD_INFRA_CONTAINER_ID=${pod.id};K8S_POD_UID=${pod.uid}`,
    });
    const show = (what, r) =>
      `${what} exited ${r.status}${r.signal ? ` (signal ${r.signal})` : ''}\n  stdout: ${r.stdout.trim()}\n  stderr: ${r.stderr.trim()}`;
    const checkAdd = (what, r) => {
      const j = parseJson(r.stdout);
      if (r.status !== 0 || !j || j.code !== undefined || typeof j.cniVersion !== 'string')
        fail(`${what} ADD: ${show('ADD', r)}`);
      return j;
    };
    const checkDel = (what, r) => {
      const j = r.stdout.trim() ? parseJson(r.stdout) : null;
      if (r.status !== 0 || (j && j.code !== undefined)) fail(`${what} DEL: ${show('DEL', r)}`);
    };

    // Correctness first, untimed: both paths return the delegate's result; count the exec plugin's runs.
    for (const [what, conf] of [
      ['lean', confs.lean],
      ['exec', confs.exec],
    ]) {
      const pod = takePod();
      const a = timed(exe, [], cniEnv('ADD', pod), conf);
      const ip = checkAdd(what, a).ips?.[0]?.address;
      if (ip !== '10.88.0.5/16') fail(`${what} ADD result is not the delegate's (ips[0].address ${ip}): ${a.stdout}`);
      checkDel(what, timed(exe, [], cniEnv('DEL', pod), conf));
    }
    const execRuns = {};
    {
      const pod = takePod();
      rmSync(cl.execCountFile, { force: true });
      checkAdd('exec (counting)', timed(exe, [], cniEnv('ADD', pod), confs.execCount));
      const lines = (f) => (existsSync(f) ? readFileSync(f, 'utf8').split('\n').filter(Boolean).length : 0);
      execRuns.ADD = lines(cl.execCountFile);
      rmSync(cl.execCountFile, { force: true });
      checkDel('exec (counting)', timed(exe, [], cniEnv('DEL', pod), confs.execCount));
      execRuns.DEL = lines(cl.execCountFile);
      say(`kubernetes: the exec credential plugin ran ${execRuns.ADD} times in one ADD, ${execRuns.DEL} in one DEL`);
    }

    const samples = {
      floor: [],
      add: [],
      del: [],
      exec_add: [],
      exec_del: [],
      delegate_add: [],
      delegate_del: [],
    };
    const ticks = Object.fromEntries(Object.keys(samples).map((k) => [k, 0]));
    const windows = [];
    let measuring = false;
    const call = (variant, command, pod) => {
      const start = now();
      const r = timed(exe, [], cniEnv(command, pod), confs[variant]);
      const end = now();
      if (measuring) windows.push({ variant, command, start, end });
      return r;
    };
    const addDel = (variant) => {
      const pod = takePod();
      const a = call(variant, 'ADD', pod);
      checkAdd(variant, a);
      const d = call(variant, 'DEL', pod);
      checkDel(variant, d);
      return variant === 'lean' ? { add: a, del: d } : { exec_add: a, exec_del: d };
    };
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
      ['add+del', () => addDel('lean')],
      ['exec add+del', () => addDel('exec')],
      [
        'delegate_add',
        () => {
          const r = timed(delegate.path, [], cniEnv('ADD', { id: 'x'.repeat(64), name: 'p', uid: 'u' }), delegateBytes);
          if (r.status !== 0) fail(show('delegate ADD', r));
          return { delegate_add: r };
        },
      ],
      [
        'delegate_del',
        () => {
          const r = timed(delegate.path, [], cniEnv('DEL', { id: 'x'.repeat(64), name: 'p', uid: 'u' }), delegateBytes);
          if (r.status !== 0) fail(show('delegate DEL', r));
          return { delegate_del: r };
        },
      ],
    ];

    say(`kubernetes: ${warmup} warm-up + ${rounds} rounds of ${units.map((u) => u[0]).join(', ')} (rotated)`);
    const tr = performance.now();
    for (let round = -warmup; round < rounds; round++) {
      measuring = round >= 0;
      const k = ((round % units.length) + units.length) % units.length;
      for (const [, fn] of [...units.slice(k), ...units.slice(0, k)]) {
        const got = fn();
        if (measuring) {
          for (const [key, r] of Object.entries(got)) {
            samples[key].push(r.ms);
            ticks[key] += r.ticks;
          }
        }
      }
      if (measuring && ((round + 1) % 10 === 0 || round + 1 === rounds)) {
        const m = (key) => stats(samples[key]).median_ms;
        say(
          `kubernetes round ${round + 1}/${rounds}: medians floor ${m('floor')} ms, ADD ${m('add')} ms, DEL ${m('del')} ms, ` +
            `exec ADD ${m('exec_add')} ms, delegate ${m('delegate_add')} ms (${((performance.now() - tr) / 1000).toFixed(1)} s)`,
        );
      }
    }
    measuring = false;
    const load1 = r2(loadavg()[0]);

    // API requests per call, from the audit log (the multus service account's requests only).
    const { events } = await helper.ask({ cmd: 'audit' });
    const unattributed = attribute(windows, events);
    const perCall = (variant, command) => {
      const ws = windows.filter((w) => w.variant === variant && w.command === command);
      const api = ws.map((w) => w.requests.filter((r) => r.resource !== 'events'));
      const ev = ws.map((w) => w.requests.filter((r) => r.resource === 'events'));
      const patterns = new Map();
      for (const reqs of api) {
        const p = pattern(reqs);
        patterns.set(p, (patterns.get(p) ?? 0) + 1);
      }
      return {
        requests: countStats(
          api.map((x) => x.length),
          r2,
        ),
        events: countStats(
          ev.map((x) => x.length),
          r2,
        ),
        patterns: Object.fromEntries([...patterns].sort((a, b) => b[1] - a[1])),
        event_pattern: pattern(ev[0] ?? []),
        failed_requests: api.flat().filter((r) => !(r.code >= 200 && r.code < 300)).length,
        failed_events: ev.flat().filter((r) => !(r.code >= 200 && r.code < 300)).length,
        events_total: ev.flat().length,
      };
    };
    const api = {
      lean: { ADD: perCall('lean', 'ADD'), DEL: perCall('lean', 'DEL') },
      exec: { ADD: perCall('exec', 'ADD'), DEL: perCall('exec', 'DEL') },
    };
    say(
      `kubernetes: API requests per ADD (lean): ${JSON.stringify(api.lean.ADD.requests)} ${JSON.stringify(api.lean.ADD.patterns)}; ` +
        `events per ADD ${api.lean.ADD.events.median}; per DEL ${api.lean.DEL.requests.median}; unattributed ${unattributed}`,
    );

    // Peak RSS after the timings.
    const meter = rssMeter();
    const rss = { add: 0, del: 0, exec_add: 0, exec_del: 0 };
    for (let i = 0; i < opts.rssSamples; i++) {
      for (const variant of ['lean', 'exec']) {
        const pod = takePod();
        const p = variant === 'lean' ? '' : 'exec_';
        rss[`${p}add`] = Math.max(rss[`${p}add`], await meter.measure(exe, [], cniEnv('ADD', pod), confs[variant]));
        rss[`${p}del`] = Math.max(rss[`${p}del`], await meter.measure(exe, [], cniEnv('DEL', pod), confs[variant]));
      }
    }

    // Overhead: each call minus 3 delegate calls (cluster network + 2 NADs) at the run's median delegate time.
    const calls = { ADD: 1 + N, DEL: 1 + N };
    const dAdd = stats(samples.delegate_add).median_ms;
    const dDel = stats(samples.delegate_del).median_ms;
    const figures = (addKey, delKey) => {
      const ovAdd = samples[addKey].map((t) => t - calls.ADD * dAdd);
      const ovDel = samples[delKey].map((t) => t - calls.DEL * dDel);
      return {
        total: stats([...samples[addKey], ...samples[delKey]]),
        overhead: stats([...ovAdd, ...ovDel]),
        add: stats(samples[addKey]),
        del: stats(samples[delKey]),
        overhead_add: stats(ovAdd),
        overhead_del: stats(ovDel),
        add_del_pair: stats(samples[addKey].map((t, i) => t + samples[delKey][i])),
        cpu_mean_ms: {
          add: r2((ticks[addKey] * 1000) / CLK_TCK / samples[addKey].length),
          del: r2((ticks[delKey] * 1000) / CLK_TCK / samples[delKey].length),
        },
      };
    };
    const floor = stats(samples.floor);
    const lean = figures('add', 'del');
    const exec = figures('exec_add', 'exec_del');
    const reqSummary = (a) => ({
      median: a.requests.median,
      max: a.requests.max,
      min: a.requests.min,
      calls: a.requests.n,
      typical: Object.keys(a.patterns)[0] ?? null,
    });
    return {
      scenario_description: description,
      kube_apiserver: cl.kubeVersion,
      cluster_startup_ms: cl.startupMs,
      audit:
        'kube-apiserver audit log, level Metadata, stage ResponseComplete, user ' +
        cl.multusUser +
        '; a request belongs to the timed multus call whose wall-clock window holds its requestReceivedTimestamp',
      rounds,
      warmup_rounds: warmup,
      machine_load_1m: { start: load0, end: load1 },
      networks_per_pod: N,
      delegate_calls_per_command: calls,
      floor,
      delegate_add: stats(samples.delegate_add),
      delegate_del: stats(samples.delegate_del),
      cpu_mean_ms_floor: r2((ticks.floor * 1000) / CLK_TCK / samples.floor.length),
      cpu_mean_ms_delegate: {
        add: r2((ticks.delegate_add * 1000) / CLK_TCK / samples.delegate_add.length),
        del: r2((ticks.delegate_del * 1000) / CLK_TCK / samples.delegate_del.length),
      },
      // The lean client (kubeconfig with tokenFile): the headline figures.
      ...lean,
      overhead_minus_floor_ms: r2(lean.overhead.median_ms - floor.median_ms),
      api_requests_per_add: { N, ...reqSummary(api.lean.ADD), goal_n_plus_2: N + 2, multus_go_n_plus_4: N + 4 },
      api_requests_per_del: reqSummary(api.lean.DEL),
      events_per_add: {
        median: api.lean.ADD.events.median,
        max: api.lean.ADD.events.max,
        typical: api.lean.ADD.event_pattern,
        failed: api.lean.ADD.failed_events,
        of: api.lean.ADD.events_total,
      },
      api_request_patterns: { add: api.lean.ADD.patterns, del: api.lean.DEL.patterns },
      failed_api_requests: api.lean.ADD.failed_requests + api.lean.DEL.failed_requests,
      unattributed_api_requests: unattributed,
      peak_rss_mib: { add: r2(rss.add), del: r2(rss.del), exec_add: r2(rss.exec_add), exec_del: r2(rss.exec_del) },
      // The same calls with an exec credential kubeconfig: @kubernetes/client-node's KubeConfig (SEA asset).
      kubernetes_exec_auth: {
        ...exec,
        overhead_minus_floor_ms: r2(exec.overhead.median_ms - floor.median_ms),
        api_requests_per_add: reqSummary(api.exec.ADD),
        api_requests_per_del: reqSummary(api.exec.DEL),
        events_per_add: {
          median: api.exec.ADD.events.median,
          max: api.exec.ADD.events.max,
          typical: api.exec.ADD.event_pattern,
          failed: api.exec.ADD.failed_events,
          of: api.exec.ADD.events_total,
        },
        failed_api_requests: api.exec.ADD.failed_requests + api.exec.DEL.failed_requests,
        exec_plugin_runs: execRuns,
        exec_plugin:
          '/bin/sh scripts/bench/exec-credential.sh (ExecCredential with status.token, no expirationTimestamp)',
      },
      goals: {
        api_requests_per_add_at_most_n_plus_2: api.lean.ADD.requests.max <= N + 2,
        overhead_median_under_80ms: lean.overhead.median_ms < 80,
      },
    };
  } finally {
    await helper.stop();
  }
}
