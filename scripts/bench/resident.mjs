/**
 * Scenario `resident` of scripts/bench.mjs: four ways of serving the same CNI calls, side by side in one run,
 * interleaved round by round (docs/archive/performance.md, "Resident mode"):
 *
 *   thin_ts      build/multus, exec'd per call (the thin plugin)
 *   resident_ts  build/multus-shim, exec'd per call, talking to `build/multus daemon --config <tmp>` on a socket
 *   go_thin      Go Multus v4.3.0 cmd/multus          (.cache/gomultus, test/peers/build-gomultus.sh)
 *   go_thick     Go Multus v4.3.0 cmd/multus-shim + cmd/multus-daemon (Kubernetes only: it needs an API server)
 *
 * Every delegate is the trivial one (test/data/bench). Two configurations: delegates-only (one inline
 * delegate, no Kubernetes) and, when test/k8s/build.sh's binaries exist, Kubernetes (a pod annotated with two
 * NADs on the real kube-apiserver of test/k8s/cluster.ts, run in the helper process of k8s-helper.mjs). Per
 * mode: ADD and DEL wall times, overhead = wall time minus the delegate calls at this run's median delegate
 * time, medians and p95, ratios to each Go mode, API requests per ADD/DEL from the audit log. Then the resident
 * daemons' RSS after N1 and N2 back-to-back ADD/DEL pairs (--rss-pairs, default 1000,10000), and C concurrent
 * ADDs of different containers (--concurrency, default 100) with host-local IPAM: all must succeed with
 * distinct addresses; p50/p99 of the calls (resident-measure.mjs). A resident mode that cannot start (no
 * build/multus-shim, no `daemon` role in build/multus, no Go peer) is reported as unavailable with the reason,
 * never measured as something else.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { launcherPayload } from './artifacts.mjs';
import { cniEnv, evictPageCache, fail, r2, rewriteAsInstalled, say } from './common.mjs';
import { startGoDaemon, startTsDaemon } from './daemons.mjs';
import { startHelper } from './k8s-helper.mjs';
import { throughLatency } from './api-latency.mjs';
import { concurrency, measureConfig, rssPairs } from './resident-measure.mjs';

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

/**
 * Every executable of every mode in one state (`--page-cache`): ours was just built, Go's were built long before.
 * cold: dropped from the page cache, read from disk as after a reboot; installed: as each one's installer leaves
 * it on a node (ours: written in 64 KiB pieces, the shim kept, the Bun executable and the launcher's file dropped.
 * Go's: copied and kept; the delegate too).
 */
function pageCacheState(ctx, rc) {
  const exeDir = dirname(ctx.exe);
  const payloads = readdirSync(exeDir)
    .filter((f) => f.startsWith('.multus-bun-') && !f.includes('.tmp-'))
    .map((f) => join(exeDir, f));
  const { bins } = rc;
  const present = (fs) => fs.filter((f) => f && existsSync(f));
  if (ctx.opts.pageCache === 'installed') {
    return {
      state: 'installed',
      ...rewriteAsInstalled({
        pieces: present([bins.shim_ts]),
        piecesDropped: present([...payloads, bins.thin_ts]),
        copied: present([bins.go_thin, bins.go_shim, bins.go_daemon, ctx.delegate.path]),
      }),
      why: 'as each installer leaves its files: a fault maps the folios a file was written in, and small ones cost more per fault than folios of 64 KiB',
    };
  }
  return {
    state: 'cold',
    dropped_before_start: evictPageCache(present([...Object.values(bins), ...payloads, ctx.delegate.path])),
    why: 'a file just written sits in the page cache in large folios and a fault maps the whole folio; every mode starts from disk',
  };
}

/** The binaries of every mode, and why a mode cannot run here. */
function availability({ exe, root, opts, k8sPresent }) {
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
  if (spawnSync('unshare', ['--version']).status !== 0)
    unavailable.go_thick ??= 'unshare (util-linux) is missing: Go thick needs a private mount namespace here';
  for (const m of ['thin_ts', 'resident_ts', 'go_thin', 'go_thick'])
    if (!opts.modes.includes(m)) unavailable[m] = `not selected (--modes ${opts.modes.join(',')})`;
  for (const [m, why] of Object.entries(unavailable)) say(`resident: ${m} unavailable: ${why}`);
  return { go, bins, unavailable };
}

/**
 * The run's context: a real (empty) network namespace (Go Multus checks that CNI_NETNS is one; bound on a file
 * in the temp dir so Go thick's private mount namespace sees it too), one plugin dir for every mode (the trivial
 * delegate and host-local: Go thick's daemon looks in binDir only), the environment of a call, the configs, every
 * one of `cniVersion` (scenario status: 1.1.0, the first version with STATUS).
 */
export function prepare(ctx, cniVersion = '1.0.0') {
  const { tmp, delegate } = ctx;
  const av = availability(ctx);
  const netns = join(tmp, 'netns-resident');
  writeFileSync(netns, '');
  const ns = spawnSync('unshare', [`--net=${netns}`, 'true'], { encoding: 'utf8' });
  if (ns.status !== 0) fail(`cannot create a network namespace on ${netns} (root needed): ${ns.stderr}`);
  const binDir = join(tmp, 'bin-resident');
  mkdirSync(binDir, { recursive: true });
  symlinkSync(delegate.path, join(binDir, delegate.type));
  if (existsSync(join(PLUGIN_DIR, 'host-local')))
    symlinkSync(join(PLUGIN_DIR, 'host-local'), join(binDir, 'host-local'));
  else
    say(
      `resident: ${PLUGIN_DIR}/host-local is missing (apt-get install containernetworking-plugins): concurrency will fail`,
    );
  const delegateConf = { cniVersion, name: 'bench-net', type: delegate.type };
  /** A multus config for a mode: thin (type multus) or shim (type multus-shim + daemonSocketDir). */
  const confFor = (mode, extra, sockDir) => ({
    cniVersion,
    name: 'multus-bench',
    type: mode === 'resident_ts' || mode === 'go_thick' ? 'multus-shim' : 'multus',
    ...(sockDir ? { daemonSocketDir: sockDir } : {}),
    cniDir: join(tmp, `cni-${mode}`),
    binDir,
    ...extra,
  });
  return {
    ...ctx,
    ...av,
    cniVersion,
    netns,
    daemons: [],
    stops: [],
    delegateConf,
    delegateBytes: JSON.stringify(delegateConf),
    confFor,
    env: (command, pod) => cniEnv({ command, ...pod, netns, cniPath: binDir }),
  };
}

/** thin_ts, resident_ts (with a daemon of `daemonKeys`) and go_thin for multus configs of `extra`. */
export async function tsAndGoThin(rc, tag, extra, daemonKeys) {
  const conf = (m, sock) => JSON.stringify(rc.confFor(m, extra, sock));
  const modes = {};
  if (!rc.unavailable.thin_ts) modes.thin_ts = { file: rc.bins.thin_ts, conf: conf('thin_ts'), what: 'build/multus' };
  let ts;
  if (!rc.unavailable.resident_ts) {
    const keys = { conf: JSON.parse(conf('thin_ts')), daemon: daemonKeys };
    ts = await startTsDaemon(rc, tag, keys, { MULTUS_NODE_NAME: NODE_NAME });
    if (ts.error) rc.unavailable.resident_ts = ts.error;
    else
      modes.resident_ts = {
        file: rc.bins.shim_ts,
        conf: conf('resident_ts', ts.sock),
        what: 'build/multus-shim + build/multus daemon',
      };
  }
  if (!rc.unavailable.go_thin)
    modes.go_thin = { file: rc.bins.go_thin, conf: conf('go_thin'), what: 'Go Multus v4.3.0 multus' };
  if (rc.opts.modes.includes('thin_ts_direct')) {
    const direct = directMode(rc.bins.thin_ts, conf('thin_ts'));
    if (typeof direct === 'string') say(`resident: thin_ts_direct unavailable: ${direct}`);
    else modes.thin_ts_direct = direct;
  }
  return { modes, ts };
}

/**
 * thin_ts_direct (only when named in --modes): the Bun executable that build/multus (the launcher) starts, exec'd
 * directly with the environment the launcher gives it (launcher/main.go: every caller variable held as
 * MULTUS_TS_HELD_<name>, MULTUS_TS_LAUNCHER, and the plugin role's runtime settings), so that thin_ts minus this
 * mode is what the launcher's own exec costs a call (docs/build.md, "The launcher"). A reason string when build/multus
 * carries no launcher.
 */
export function directMode(exe, conf) {
  const payload = launcherPayload(exe);
  if (!payload) return `${exe} is not the launcher with its Bun executable beside it`;
  const env = (e) => ({
    ...Object.fromEntries(Object.entries(e).map(([k, v]) => [`MULTUS_TS_HELD_${k}`, v])),
    MULTUS_TS_LAUNCHER: exe,
    BUN_JSC_useJIT: '0', // launcher/main.go pluginJSC and pluginMalloc
    MIMALLOC_PURGE_DELAY: '-1',
  });
  return {
    file: payload,
    conf,
    env,
    what: `${basename(payload)} exec'd directly (no launcher), the launcher's environment`,
  };
}

/** What the launcher's exec adds to a thin call: thin_ts less thin_ts_direct (medians, CPU means; ms). */
function launcherCost(thin, direct) {
  const d = (k) => r2(thin[k].median_ms - direct[k].median_ms);
  return {
    overhead_add_ms: d('overhead_add'),
    overhead_del_ms: d('overhead_del'),
    cpu_add_ms: r2(thin.cpu_add_ms - direct.cpu_add_ms),
    cpu_del_ms: r2(thin.cpu_del_ms - direct.cpu_del_ms),
  };
}

/** thin_ts' `launcher` figures, when thin_ts_direct ran beside it. */
function addLauncherCost(figures) {
  if (figures.thin_ts && figures.thin_ts_direct)
    figures.thin_ts.launcher = launcherCost(figures.thin_ts, figures.thin_ts_direct);
}

/** The modes a concurrency test runs: not thin_ts_direct (the launcher's cost is a per-call figure). */
const concurrent = (modes) => Object.fromEntries(Object.entries(modes).filter(([m]) => m !== 'thin_ts_direct'));

/** delegates-only: thin_ts, resident_ts, go_thin (Go thick has no mode without Kubernetes). */
async function delegatesOnly(rc, out) {
  let seq = 0;
  const takePod = () => ({ namespace: 'bench', name: `pod-${++seq}`, uid: 'u', id: randomBytes(32).toString('hex') });
  const { modes, ts } = await tsAndGoThin(rc, 'plain', { delegates: [rc.delegateConf] }, {});
  out.delegates_only = await measureConfig(rc, 'delegates-only', { modes, takePod, delegateCalls: 1 });
  addLauncherCost(out.delegates_only.modes);
  if (!rc.k8sPresent) {
    out.delegates_only.concurrency = await concurrency(rc, 'plain', concurrent(modes), takePod, () => ({}), {
      resident_ts: ts?.daemon,
    });
    if (modes.resident_ts)
      out.daemon_rss = {
        resident_ts: await rssPairs(rc, modes.resident_ts, ts.daemon, takePod),
        config: 'delegates-only',
      };
  }
  if (ts?.daemon) await ts.daemon.stop();
}

/** The cluster with the NADs, and a pool of pods of this node reused round-robin. */
async function startCluster(rc, helper) {
  say(`resident/kubernetes: starting etcd + kube-apiserver (helper pid ${helper.pid})`);
  const cl = await helper.ask({
    cmd: 'setup',
    namespace: NAMESPACE,
    nads: NADS.map((n) => ({
      name: n,
      config: JSON.stringify({ cniVersion: '1.0.0', name: `bench-${n}`, type: rc.delegate.type }),
    })),
    networks: NADS.join(','),
    execScript: join(rc.root, 'scripts/bench/exec-credential.sh'),
  });
  // A pod's ADD writes its status; the next use of the same pod is far later.
  const count = Math.max(rc.opts.concurrency, 120);
  const { pods } = await helper.ask({ cmd: 'pods', namespace: NAMESPACE, prefix: 'pod', count, nodeName: NODE_NAME });
  let next = 0;
  const takePod = () => ({ ...pods[next++ % pods.length], namespace: NAMESPACE, id: randomBytes(32).toString('hex') });
  return { cl, takePod };
}

/** go_thick: Go thick's daemon talks to the API server with its own in-cluster client, not the conf's kubeconfig. */
export async function addGoThick(rc, modes, cl) {
  if (rc.unavailable.go_thick) return undefined;
  const gd = await startGoDaemon(rc, {
    goDaemon: rc.bins.go_daemon,
    delegateBytes: rc.delegateBytes,
    cl,
    nodeName: NODE_NAME,
    cniVersion: rc.cniVersion,
  });
  if (gd.error) {
    rc.unavailable.go_thick = gd.error;
    return undefined;
  }
  modes.go_thick = {
    file: rc.bins.go_shim,
    conf: JSON.stringify(rc.confFor('go_thick', { delegates: [rc.delegateConf] }, gd.sock)),
    what: 'Go Multus v4.3.0 multus-shim + multus-daemon',
  };
  return gd;
}

/** Kubernetes: all four modes (through the latency proxy with --api-latency-ms). */
async function kubernetes(rc, helper, out) {
  const started = await startCluster(rc, helper);
  const { takePod } = started;
  out.kube_apiserver = started.cl.kubeVersion;
  let cl = started.cl;
  if (rc.opts.apiLatencyMs > 0) {
    const proxy = await throughLatency(rc.node, cl, rc.opts.apiLatencyMs, join(rc.tmp, 'latency.kubeconfig'));
    rc.stops.push(proxy.stop);
    cl = proxy.cl;
    out.api_latency = {
      ms_each_way: rc.opts.apiLatencyMs,
      how: 'every mode reaches the API server through a TCP proxy that holds each chunk this long in each direction (scripts/bench/api-latency.mjs)',
    };
  }
  const extra = { kubeconfig: cl.kubeconfig, delegates: [rc.delegateConf] };
  const { modes, ts } = await tsAndGoThin(rc, 'k8s', extra, { kubeconfig: cl.kubeconfig });
  const gd = await addGoThick(rc, modes, cl);
  const audit = async () => (await helper.ask({ cmd: 'audit' })).events;
  out.kubernetes = await measureConfig(rc, 'kubernetes', { modes, takePod, delegateCalls: 1 + NADS.length, audit });
  addLauncherCost(out.kubernetes.modes);
  out.kubernetes.concurrency = await concurrency(
    rc,
    'k8s',
    concurrent(modes),
    takePod,
    (m) => (m === 'go_thick' ? {} : { kubeconfig: cl.kubeconfig }),
    { resident_ts: ts?.daemon, go_thick: gd?.daemon },
  );
  out.daemon_rss = { config: `kubernetes (pod with ${NADS.length} NADs)` };
  if (modes.resident_ts) out.daemon_rss.resident_ts = await rssPairs(rc, modes.resident_ts, ts.daemon, takePod);
  if (modes.go_thick && rc.opts.rssGo) out.daemon_rss.go_thick = await rssPairs(rc, modes.go_thick, gd.daemon, takePod);
}

/**
 * Runs the scenario (`ctx` = {opts, exe, node, delegate (with its type), tmp, root, k8sPresent}); returns the
 * object printed under the `resident` key.
 */
export async function runResident(ctx) {
  const load0 = r2(loadavg()[0]);
  const rc = prepare(ctx);
  const { opts } = ctx;
  const out = {
    scenario_description: description,
    gomultus: rc.go,
    unavailable: rc.unavailable,
    rounds: opts.residentRounds,
    warmup_rounds: opts.warmup,
  };
  out.page_cache = pageCacheState(ctx, rc);
  out.writeback =
    opts.writeback === 'before-del'
      ? {
          before_del: true,
          why: 'sync between each timed ADD and its DEL (untimed): on a node a pod outlives the 30 s writeback, so every file an ADD wrote has blocks on disk by its DEL',
        }
      : {
          before_del: false,
          why: 'each DEL right after its ADD, its files still dirty (--writeback before-del: as on a node)',
        };
  let helper;
  try {
    await delegatesOnly(rc, out);
    if (rc.k8sPresent) {
      helper = startHelper(ctx.node, say);
      await kubernetes(rc, helper, out);
    }
  } finally {
    for (const d of rc.daemons) await d.stop().catch(() => {});
    for (const stop of rc.stops) stop();
    await helper?.stop();
    spawnSync('umount', [rc.netns]);
  }
  out.machine_load_1m = { start: load0, end: r2(loadavg()[0]) };
  return out;
}
