/**
 * Scenario `resident` of scripts/bench.mjs: four ways of serving the same CNI calls, side by side in one run,
 * interleaved round by round (docs/performance.md, "Resident mode"):
 *
 *   thin_ts      build/multus, exec'd per call (the thin plugin)
 *   resident_ts  build/multus-shim, exec'd per call, talking to `build/multus daemon --config <tmp>` on a socket
 *   go_thin      Go Multus v4.3.0 cmd/multus          (.cache/gomultus, test/peers/build-gomultus.sh)
 *   go_thick     Go Multus v4.3.0 cmd/multus-shim + cmd/multus-daemon (Kubernetes only: it needs an API server)
 *
 * Every delegate is the trivial one (test/data/bench). Two configurations: delegates-only (one inline
 * delegate, no Kubernetes) and, when test/k8s/build.sh's binaries exist, Kubernetes (a pod annotated with two
 * NADs on the real kube-apiserver of test/k8s/cluster.ts, run in the helper process of kubernetes.mjs). Per
 * mode: ADD and DEL wall times, overhead = wall time minus the delegate calls at this run's median delegate
 * time, medians and p95, ratios to each Go mode, API requests per ADD/DEL from the audit log. Then the resident
 * daemons' RSS after N1 and N2 back-to-back ADD/DEL pairs (--rss-pairs, default 1000,10000), and C concurrent
 * ADDs of different containers (--concurrency, default 100) with host-local IPAM: all must succeed with
 * distinct addresses; p50/p99 of the calls.
 *
 * Go Multus thick's daemon only talks to Kubernetes with the in-cluster configuration (its token and CA at the
 * fixed path /var/run/secrets/kubernetes.io/serviceaccount): it runs in a private mount namespace
 * (`unshare --mount`) with a tmpfs on /run holding the multus service account's token and the test CA, so
 * nothing of the host changes. A resident mode that cannot start (no build/multus-shim, no `daemon` role in
 * build/multus, no Go peer) is reported as unavailable with the reason, never measured as something else.
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { createServer } from 'node:net';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { attribute, countStats, pattern, startHelper } from './kubernetes.mjs';

const NAMESPACE = 'multus-bench-resident';
const NODE_NAME = 'bench-node';
const NADS = ['nad-a', 'nad-b'];
const PLUGIN_DIR = '/usr/lib/cni';

export const description =
  'the same ADD/DEL calls through multus-ts thin, multus-ts resident (shim + daemon), Go Multus v4.3.0 thin and ' +
  'Go Multus v4.3.0 thick (shim + daemon, Kubernetes only), interleaved; trivial delegate; delegates-only and ' +
  `Kubernetes (pod with ${NADS.length} NADs, real kube-apiserver)`;

/** Where build-gomultus.sh puts Go Multus (MULTUS_TS_CACHE_DIR or <root>/.cache), or --gomultus DIR. */
export function gomultusDir(root, opt) {
  return opt || join(process.env.MULTUS_TS_CACHE_DIR || join(root, '.cache'), 'gomultus');
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** GET /healthz over the unix socket: the status code, or 0 when nothing answers. */
function healthz(sock) {
  return new Promise((resolve) => {
    const req = request({ socketPath: sock, path: '/healthz', method: 'GET', timeout: 2000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(0));
    req.end();
  });
}

/** A free TCP port on 127.0.0.1 (for the daemon's /metrics). */
function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/** The daemon's V8 heap and RSS from its /metrics (prom-client's default metrics), in MiB. */
function heapOf(port) {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path: '/metrics', timeout: 5000 }, (res) => {
      let text = '';
      res.on('data', (b) => (text += b));
      res.on('end', () => {
        const v = (name) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
        const mib = (x) => Math.round((x / 1048576) * 100) / 100;
        resolve({
          heap_used_mib: mib(v('nodejs_heap_size_used_bytes')),
          heap_total_mib: mib(v('nodejs_heap_size_total_bytes')),
          external_mib: mib(v('nodejs_external_memory_bytes')),
        });
      });
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve({}));
    req.end();
  });
}

/** A daemon child process, output to a log file (never a pipe: the bench's sync loop would not drain it). */
function startDaemon(name, file, args, env, logFile) {
  const fd = openSync(logFile, 'a');
  const child = spawn(file, args, { env, stdio: ['ignore', fd, fd], detached: false });
  closeSync(fd);
  let exit = null;
  child.on('exit', (code, signal) => (exit = signal ?? `code ${code}`));
  child.on('error', (e) => (exit = `not started: ${e.message}`));
  return {
    name,
    child,
    logFile,
    exited: () => exit,
    async ready(sock, timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        if (exit !== null) return `exited (${exit}) before answering /healthz`;
        if ((await healthz(sock)) === 200) return null;
        if (Date.now() > deadline) return `/healthz not 200 within ${timeoutMs} ms`;
        await sleep(100);
      }
    },
    async stop() {
      if (exit !== null) return;
      const done = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await done;
      clearTimeout(t);
    },
    rss() {
      try {
        const s = readFileSync(`/proc/${child.pid}/status`, 'utf8');
        const kib = (k) => Number(new RegExp(`${k}:\\s+(\\d+)`).exec(s)?.[1] ?? NaN);
        return {
          rss_mib: Math.round((kib('VmRSS') / 1024) * 100) / 100,
          hwm_mib: Math.round((kib('VmHWM') / 1024) * 100) / 100,
        };
      } catch {
        return null;
      }
    },
  };
}

function tail(file, n = 15) {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-n).join('\n');
  } catch {
    return '(no log)';
  }
}

/**
 * Runs the scenario; returns the object printed under the `resident` key.
 * `lib`: the bench's timed/stats/r2/fail/say/parseJson/RUNTIME_PATH/CLK_TCK.
 */
export async function runResident({ opts, exe, node, delegate, tmp, lib, root, k8sPresent }) {
  const { timed, stats, r2, fail, say, parseJson, RUNTIME_PATH } = lib;
  const rounds = opts.residentRounds;
  const warmup = opts.warmup;
  const load0 = r2(loadavg()[0]);
  const now = () => performance.timeOrigin + performance.now();
  const go = gomultusDir(root, opts.gomultus);
  const bins = {
    thin_ts: exe,
    shim_ts: join(dirname(exe), 'multus-shim'),
    go_thin: join(go, 'multus'),
    go_shim: join(go, 'multus-shim'),
    go_daemon: join(go, 'multus-daemon'),
  };
  const unavailable = {};
  if (!existsSync(bins.shim_ts))
    unavailable.resident_ts = `daemon unavailable: ${bins.shim_ts} is missing (npm run build with Go installed)`;
  if (!existsSync(bins.go_thin)) unavailable.go_thin = `${bins.go_thin} is missing (bash test/peers/build-gomultus.sh)`;
  if (!existsSync(bins.go_shim) || !existsSync(bins.go_daemon)) {
    unavailable.go_thick = `${bins.go_shim} or ${bins.go_daemon} is missing (bash test/peers/build-gomultus.sh)`;
  }
  if (!k8sPresent)
    unavailable.go_thick ??= 'Go Multus thick needs Kubernetes: no kube-apiserver/etcd (bash test/k8s/build.sh)';
  const hasUnshare = spawnSync('unshare', ['--version']).status === 0;
  if (!hasUnshare)
    unavailable.go_thick ??= 'unshare (util-linux) is missing: Go thick needs a private mount namespace here';
  for (const [m, why] of Object.entries(unavailable)) say(`resident: ${m} unavailable: ${why}`);

  // A real (empty) network namespace: Go Multus checks that CNI_NETNS is one. Bound on a file in the temp dir
  // so Go thick's private mount namespace sees it too; unmounted at the end.
  const netns = join(tmp, 'netns-resident');
  writeFileSync(netns, '');
  const ns = spawnSync('unshare', [`--net=${netns}`, 'true'], { encoding: 'utf8' });
  if (ns.status !== 0) fail(`cannot create a network namespace on ${netns} (root needed): ${ns.stderr}`);
  // One plugin dir for every mode: the trivial delegate and host-local (Go thick's daemon looks in binDir only).
  const binDir = join(tmp, 'bin-resident');
  mkdirSync(binDir, { recursive: true });
  symlinkSync(delegate.path, join(binDir, delegate.type));
  if (existsSync(join(PLUGIN_DIR, 'host-local')))
    symlinkSync(join(PLUGIN_DIR, 'host-local'), join(binDir, 'host-local'));
  else
    say(
      `resident: ${PLUGIN_DIR}/host-local is missing (apt-get install containernetworking-plugins): concurrency will fail`,
    );
  const cniPath = binDir;
  const baseEnv = { PATH: RUNTIME_PATH };
  const cniEnv = (command, pod) => ({
    ...baseEnv,
    CNI_COMMAND: command,
    CNI_CONTAINERID: pod.id,
    CNI_NETNS: netns,
    CNI_IFNAME: 'eth0',
    CNI_PATH: cniPath,
    CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${pod.namespace};K8S_POD_NAME=${pod.name};K8S_POD_INFRA_CONTAINER_ID=${pod.id};K8S_POD_UID=${pod.uid}`,
  });
  const show = (what, r) =>
    `${what} exited ${r.status}${r.signal ? ` (signal ${r.signal})` : ''}\n  stdout: ${String(r.stdout).trim().slice(0, 2000)}\n  stderr: ${String(r.stderr).trim().slice(0, 2000)}`;
  const checkAdd = (what, r) => {
    const j = parseJson(r.stdout);
    if (r.status !== 0 || !j || j.code !== undefined || typeof j.cniVersion !== 'string')
      fail(`${what} ADD: ${show('ADD', r)}`);
    return j;
  };
  const checkDel = (what, r) => {
    const j = String(r.stdout).trim() ? parseJson(r.stdout) : null;
    if (r.status !== 0 || (j && j.code !== undefined)) fail(`${what} DEL: ${show('DEL', r)}`);
  };

  const delegateConf = { cniVersion: '1.0.0', name: 'bench-net', type: delegate.type };
  const delegateBytes = JSON.stringify(delegateConf);
  const daemons = [];
  let helper;
  const out = {
    scenario_description: description,
    gomultus: go,
    unavailable,
    rounds,
    warmup_rounds: warmup,
  };

  /** A multus config for a mode: thin (type multus) or shim (type multus-shim + daemonSocketDir). */
  const confFor = (mode, extra, sockDir) => ({
    cniVersion: '1.0.0',
    name: 'multus-bench',
    type: mode === 'resident_ts' || mode === 'go_thick' ? 'multus-shim' : 'multus',
    ...(sockDir ? { daemonSocketDir: sockDir } : {}),
    cniDir: join(tmp, `cni-${mode}`),
    binDir,
    ...extra,
  });

  /** Starts multus-ts' daemon with a daemon-config of `keys`; the reason when it cannot start. */
  async function startTsDaemon(tag, keys, env) {
    const sock = join(tmp, `sock-ts-${tag}`);
    const metricsPort = await freePort();
    const cfgDir = join(tmp, `daemon-ts-${tag}`);
    mkdirSync(cfgDir, { recursive: true, mode: 0o700 });
    const confFile = join(cfgDir, 'multus.conf');
    writeFileSync(confFile, JSON.stringify(keys.conf), { mode: 0o600 });
    const cfg = {
      socketDir: sock,
      cniConfigDir: join(cfgDir, 'net.d'),
      multusConfigFile: confFile,
      logLevel: 'error',
      logToStderr: true,
      metricsPort,
      ...keys.daemon,
    };
    mkdirSync(cfg.cniConfigDir, { recursive: true });
    const cfgFile = join(cfgDir, 'daemon-config.json');
    writeFileSync(cfgFile, JSON.stringify(cfg), { mode: 0o600 });
    const d = startDaemon(
      `ts-${tag}`,
      exe,
      ['daemon', '--config', cfgFile],
      { ...baseEnv, ...env },
      join(tmp, `daemon-ts-${tag}.log`),
    );
    daemons.push(d);
    const why = await d.ready(join(sock, 'multus.sock'), 60_000);
    if (why) {
      await d.stop();
      return { error: `daemon unavailable: build/multus daemon ${why}; log:\n${tail(d.logFile)}` };
    }
    d.metricsPort = metricsPort;
    return { daemon: d, sock };
  }

  /** Go Multus thick's daemon in a private mount namespace with the service account at the in-cluster path. */
  async function startGoDaemon(cl) {
    const sock = join(tmp, 'sock-go');
    const dir = join(tmp, 'daemon-go');
    mkdirSync(join(dir, 'auto'), { recursive: true, mode: 0o700 });
    mkdirSync(join(dir, 'net.d'), { recursive: true });
    writeFileSync(join(dir, 'auto', '10-bench.conf'), delegateBytes);
    const cfg = {
      cniVersion: '1.0.0',
      socketDir: sock,
      cniConfigDir: join(dir, 'net.d'),
      multusConfigFile: 'auto',
      multusAutoconfigDir: join(dir, 'auto'),
      logLevel: 'error',
      logToStderr: true,
    };
    const cfgFile = join(dir, 'daemon-config.json');
    writeFileSync(cfgFile, JSON.stringify(cfg), { mode: 0o600 });
    const script =
      'set -e; mount -t tmpfs -o mode=0755 tmpfs /run; d=/run/secrets/kubernetes.io/serviceaccount; mkdir -p "$d"; ' +
      'cp "$1" "$d/token"; cp "$2" "$d/ca.crt"; echo "$3" > "$d/namespace"; exec "$4" -config "$5"';
    const port = new URL(cl.server).port;
    const env = {
      ...baseEnv,
      KUBERNETES_SERVICE_HOST: '127.0.0.1',
      KUBERNETES_SERVICE_PORT: port,
      MULTUS_NODE_NAME: NODE_NAME,
    };
    const d = startDaemon(
      'go-thick',
      'unshare',
      [
        '--mount',
        '--propagation',
        'private',
        '--',
        '/bin/sh',
        '-c',
        script,
        'sh',
        cl.tokenFile,
        cl.caFile,
        'kube-system',
        bins.go_daemon,
        cfgFile,
      ],
      env,
      join(tmp, 'daemon-go.log'),
    );
    daemons.push(d);
    const why = await d.ready(join(sock, 'multus.sock'), 60_000);
    if (why) {
      await d.stop();
      return { error: `Go Multus thick daemon ${why}; log:\n${tail(d.logFile)}` };
    }
    return { daemon: d, sock };
  }

  /** The timed rounds of one configuration; returns its figures. */
  async function measureConfig(tag, setup) {
    const { modes, takePod, delegateCalls, audit } = setup;
    const names = Object.keys(modes);
    say(`resident/${tag}: correctness check of ${names.join(', ')}`);
    for (const m of names) {
      const pod = takePod();
      const a = timed(modes[m].file, [], cniEnv('ADD', pod), modes[m].conf);
      const ip = checkAdd(`${tag} ${m}`, a).ips?.[0]?.address;
      if (ip !== '10.88.0.5/16')
        fail(`${tag} ${m}: the ADD result is not the delegate's (ips[0].address ${ip}): ${a.stdout}`);
      checkDel(`${tag} ${m}`, timed(modes[m].file, [], cniEnv('DEL', pod), modes[m].conf));
    }
    const samples = { delegate_add: [], delegate_del: [] };
    for (const m of names) Object.assign(samples, { [`${m}_add`]: [], [`${m}_del`]: [] });
    const windows = [];
    let measuring = false;
    const units = [
      ...names.map((m) => ({
        name: m,
        fn: () => {
          const pod = takePod();
          const s1 = now();
          const a = timed(modes[m].file, [], cniEnv('ADD', pod), modes[m].conf);
          const e1 = now();
          checkAdd(`${tag} ${m}`, a);
          const s2 = now();
          const d = timed(modes[m].file, [], cniEnv('DEL', pod), modes[m].conf);
          const e2 = now();
          checkDel(`${tag} ${m}`, d);
          if (measuring)
            windows.push(
              { mode: m, command: 'ADD', start: s1, end: e1 },
              { mode: m, command: 'DEL', start: s2, end: e2 },
            );
          return { [`${m}_add`]: a, [`${m}_del`]: d };
        },
      })),
      {
        name: 'delegate',
        fn: () => {
          const pod = takePod();
          const a = timed(delegate.path, [], cniEnv('ADD', pod), delegateBytes);
          const d = timed(delegate.path, [], cniEnv('DEL', pod), delegateBytes);
          if (a.status !== 0 || d.status !== 0) fail(`delegate: ${show('delegate', a.status ? a : d)}`);
          return { delegate_add: a, delegate_del: d };
        },
      },
    ];
    say(`resident/${tag}: ${warmup} warm-up + ${rounds} rounds of ${units.map((u) => u.name).join(', ')} (rotated)`);
    const t0 = performance.now();
    for (let round = -warmup; round < rounds; round++) {
      measuring = round >= 0;
      const k = ((round % units.length) + units.length) % units.length;
      for (const { fn } of [...units.slice(k), ...units.slice(0, k)]) {
        const got = fn();
        if (measuring) for (const [key, r] of Object.entries(got)) samples[key].push(r.ms);
      }
      if (measuring && ((round + 1) % 10 === 0 || round + 1 === rounds)) {
        const med = names
          .map((m) => `${m} ${stats(samples[`${m}_add`]).median_ms}/${stats(samples[`${m}_del`]).median_ms}`)
          .join(', ');
        say(
          `resident/${tag} round ${round + 1}/${rounds}: ADD/DEL medians ${med} ms (${((performance.now() - t0) / 1000).toFixed(1)} s)`,
        );
      }
    }
    const dAdd = stats(samples.delegate_add).median_ms;
    const dDel = stats(samples.delegate_del).median_ms;
    const res = {
      delegate_calls_per_command: delegateCalls,
      delegate_add: stats(samples.delegate_add),
      delegate_del: stats(samples.delegate_del),
      modes: {},
    };
    for (const m of names) {
      const ovAdd = samples[`${m}_add`].map((t) => t - delegateCalls * dAdd);
      const ovDel = samples[`${m}_del`].map((t) => t - delegateCalls * dDel);
      res.modes[m] = {
        what: modes[m].what,
        add: stats(samples[`${m}_add`]),
        del: stats(samples[`${m}_del`]),
        overhead: stats([...ovAdd, ...ovDel]),
        overhead_add: stats(ovAdd),
        overhead_del: stats(ovDel),
      };
    }
    // Ratios of medians (overhead) to each Go mode: < 1 is faster than Go.
    for (const m of names) {
      const ratios = {};
      for (const g of ['go_thin', 'go_thick']) {
        if (!res.modes[g] || g === m) continue;
        const r = (k) => r2(res.modes[m][k].median_ms / res.modes[g][k].median_ms);
        ratios[`to_${g}`] = {
          overhead: r('overhead'),
          overhead_add: r('overhead_add'),
          overhead_del: r('overhead_del'),
        };
      }
      res.modes[m].ratios = ratios;
    }
    if (audit) {
      const events = (await audit()).filter((e) => e.verb !== 'list' && e.verb !== 'watch');
      const unattributed = attribute(windows, events);
      for (const m of names) {
        for (const command of ['ADD', 'DEL']) {
          const ws = windows.filter((w) => w.mode === m && w.command === command);
          const api = ws.map((w) => w.requests.filter((r) => r.resource !== 'events'));
          const ev = ws.map((w) => w.requests.filter((r) => r.resource === 'events'));
          const patterns = new Map();
          for (const reqs of api) patterns.set(pattern(reqs), (patterns.get(pattern(reqs)) ?? 0) + 1);
          res.modes[m][`api_requests_per_${command.toLowerCase()}`] = {
            ...countStats(
              api.map((x) => x.length),
              r2,
            ),
            events:
              countStats(
                ev.map((x) => x.length),
                r2,
              ).median ?? 0,
            patterns: Object.fromEntries([...patterns].sort((a, b) => b[1] - a[1])),
          };
        }
      }
      res.unattributed_api_requests = unattributed;
    }
    return res;
  }

  /** C concurrent ADDs (then DELs) of different containers per mode, host-local IPAM. */
  async function concurrency(tag, modes, takePod, extra) {
    const n = opts.concurrency;
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
          dataDir: join(tmp, `hl-${tag}-${m}`),
        },
      };
      const conf = JSON.stringify({ ...JSON.parse(mode.conf), delegates: [hl], ...extra(m) });
      const pods = Array.from({ length: n }, () => takePod());
      const run = (command, pod) =>
        new Promise((resolve) => {
          const t = performance.now();
          const c = spawn(mode.file, [], { env: cniEnv(command, pod), stdio: ['pipe', 'pipe', 'pipe'] });
          let stdout = '';
          let stderr = '';
          c.stdout.on('data', (b) => (stdout += b));
          c.stderr.on('data', (b) => (stderr += b));
          c.on('error', (e) => resolve({ ms: performance.now() - t, status: -1, stdout, stderr: e.message }));
          c.on('close', (status, signal) => resolve({ ms: performance.now() - t, status, signal, stdout, stderr }));
          c.stdin.end(conf);
        });
      say(`resident/${tag}: ${n} concurrent ADDs through ${m}`);
      const adds = await Promise.all(pods.map((p) => run('ADD', p)));
      const failed = adds.filter((r) => r.status !== 0 || parseJson(r.stdout)?.code !== undefined);
      const ips = adds.map((r) => parseJson(r.stdout)?.ips?.[0]?.address).filter(Boolean);
      const dels = await Promise.all(pods.map((p) => run('DEL', p)));
      const delFailed = dels.filter(
        (r) => r.status !== 0 || (r.stdout.trim() && parseJson(r.stdout)?.code !== undefined),
      );
      const q = (xs, p) => {
        const s = [...xs].sort((a, b) => a - b);
        return r2(s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))]);
      };
      result[m] = {
        adds: n,
        failed_adds: failed.length,
        distinct_ips: new Set(ips).size,
        all_succeeded_distinct: failed.length === 0 && new Set(ips).size === n,
        add_p50_ms: q(
          adds.map((r) => r.ms),
          0.5,
        ),
        add_p99_ms: q(
          adds.map((r) => r.ms),
          0.99,
        ),
        failed_dels: delFailed.length,
        del_p50_ms: q(
          dels.map((r) => r.ms),
          0.5,
        ),
        del_p99_ms: q(
          dels.map((r) => r.ms),
          0.99,
        ),
        ...(failed[0] ? { first_failure: show('ADD', failed[0]).slice(0, 1500) } : {}),
      };
      say(
        `resident/${tag}: ${m}: ${n - failed.length}/${n} ADDs, ${new Set(ips).size} distinct IPs, ` +
          `p50 ${result[m].add_p50_ms} ms, p99 ${result[m].add_p99_ms} ms`,
      );
    }
    return result;
  }

  /** Back-to-back ADD/DEL pairs through a resident mode; the daemon's RSS after each checkpoint. */
  async function rssPairs(mode, daemon, takePod) {
    const checkpoints = [...opts.rssPairs].sort((a, b) => a - b);
    // multus-ts' daemon: also its V8 heap from /metrics (a growing heap is a leak; RSS alone may be the allocator)
    const sample = async () => ({ ...daemon.rss(), ...(daemon.metricsPort ? await heapOf(daemon.metricsPort) : {}) });
    const res = { start: await sample(), after: {} };
    const times = [];
    let done = 0;
    const t0 = performance.now();
    for (const target of checkpoints) {
      for (; done < target; done++) {
        const pod = takePod();
        const a = timed(mode.file, [], cniEnv('ADD', pod), mode.conf);
        checkAdd(`rss ${daemon.name}`, a);
        const d = timed(mode.file, [], cniEnv('DEL', pod), mode.conf);
        checkDel(`rss ${daemon.name}`, d);
        times.push(a.ms);
        if ((done + 1) % 1000 === 0)
          say(`resident: ${daemon.name}: ${done + 1} pairs (${((performance.now() - t0) / 1000).toFixed(0)} s)`);
      }
      res.after[target] = await sample();
    }
    const [lo, hi] = [checkpoints[0], checkpoints[checkpoints.length - 1]];
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

  try {
    // ---- delegates-only: thin_ts, resident_ts, go_thin (Go thick has no mode without Kubernetes)
    {
      let seq = 0;
      const takePod = () => ({
        namespace: 'bench',
        name: `pod-${++seq}`,
        uid: 'u',
        id: randomBytes(32).toString('hex'),
      });
      const conf = (m, sock) => JSON.stringify(confFor(m, { delegates: [delegateConf] }, sock));
      const modes = { thin_ts: { file: bins.thin_ts, conf: conf('thin_ts'), what: 'build/multus' } };
      let ts;
      if (!unavailable.resident_ts) {
        ts = await startTsDaemon(
          'plain',
          { conf: JSON.parse(conf('thin_ts')), daemon: {} },
          { MULTUS_NODE_NAME: NODE_NAME },
        );
        if (ts.error) unavailable.resident_ts = ts.error;
        else
          modes.resident_ts = {
            file: bins.shim_ts,
            conf: conf('resident_ts', ts.sock),
            what: 'build/multus-shim + build/multus daemon',
          };
      }
      if (!unavailable.go_thin)
        modes.go_thin = { file: bins.go_thin, conf: conf('go_thin'), what: 'Go Multus v4.3.0 multus' };
      out.delegates_only = await measureConfig('delegates-only', { modes, takePod, delegateCalls: 1 });
      if (!k8sPresent) {
        out.delegates_only.concurrency = await concurrency('plain', modes, takePod, () => ({}));
        if (modes.resident_ts)
          out.daemon_rss = {
            resident_ts: await rssPairs(modes.resident_ts, ts.daemon, takePod),
            config: 'delegates-only',
          };
      }
      if (ts?.daemon) await ts.daemon.stop();
    }

    // ---- Kubernetes: all four modes
    if (k8sPresent) {
      helper = startHelper(node, say);
      say(`resident/kubernetes: starting etcd + kube-apiserver (helper pid ${helper.pid})`);
      const cl = await helper.ask({
        cmd: 'setup',
        namespace: NAMESPACE,
        nads: NADS.map((n) => ({
          name: n,
          config: JSON.stringify({ cniVersion: '1.0.0', name: `bench-${n}`, type: delegate.type }),
        })),
        networks: NADS.join(','),
        execScript: join(root, 'scripts/bench/exec-credential.sh'),
      });
      out.kube_apiserver = cl.kubeVersion;
      // A pool of pods of this node, reused round-robin (a pod's ADD writes its status; the next use is far later).
      const { pods } = await helper.ask({
        cmd: 'pods',
        namespace: NAMESPACE,
        prefix: 'pod',
        count: Math.max(opts.concurrency, 120),
        nodeName: NODE_NAME,
      });
      let next = 0;
      const takePod = () => ({
        ...pods[next++ % pods.length],
        namespace: NAMESPACE,
        id: randomBytes(32).toString('hex'),
      });
      const extra = { kubeconfig: cl.kubeconfig, delegates: [delegateConf] };
      const conf = (m, sock) => JSON.stringify(confFor(m, extra, sock));
      const modes = { thin_ts: { file: bins.thin_ts, conf: conf('thin_ts'), what: 'build/multus' } };
      let ts;
      let gd;
      if (!unavailable.resident_ts) {
        ts = await startTsDaemon(
          'k8s',
          { conf: JSON.parse(conf('thin_ts')), daemon: { kubeconfig: cl.kubeconfig } },
          { MULTUS_NODE_NAME: NODE_NAME },
        );
        if (ts.error) unavailable.resident_ts = ts.error;
        else
          modes.resident_ts = {
            file: bins.shim_ts,
            conf: conf('resident_ts', ts.sock),
            what: 'build/multus-shim + build/multus daemon',
          };
      }
      if (!unavailable.go_thin)
        modes.go_thin = { file: bins.go_thin, conf: conf('go_thin'), what: 'Go Multus v4.3.0 multus' };
      if (!unavailable.go_thick) {
        gd = await startGoDaemon(cl);
        if (gd.error) unavailable.go_thick = gd.error;
        else {
          // Go thick's daemon talks to the API server with its own in-cluster client, not the conf's kubeconfig.
          modes.go_thick = {
            file: bins.go_shim,
            conf: JSON.stringify(confFor('go_thick', { delegates: [delegateConf] }, gd.sock)),
            what: 'Go Multus v4.3.0 multus-shim + multus-daemon',
          };
        }
      }
      const audit = async () => (await helper.ask({ cmd: 'audit' })).events;
      out.kubernetes = await measureConfig('kubernetes', { modes, takePod, delegateCalls: 1 + NADS.length, audit });
      out.kubernetes.concurrency = await concurrency('k8s', modes, takePod, (m) =>
        m === 'go_thick' ? {} : { kubeconfig: cl.kubeconfig },
      );
      out.daemon_rss = { config: `kubernetes (pod with ${NADS.length} NADs)` };
      if (modes.resident_ts) out.daemon_rss.resident_ts = await rssPairs(modes.resident_ts, ts.daemon, takePod);
      if (modes.go_thick && opts.rssGo) out.daemon_rss.go_thick = await rssPairs(modes.go_thick, gd.daemon, takePod);
    }
  } finally {
    for (const d of daemons) await d.stop().catch(() => {});
    await helper?.stop();
    spawnSync('umount', [netns]);
  }
  out.machine_load_1m = { start: load0, end: r2(loadavg()[0]) };
  return out;
}
