/** The command line of scripts/bench.mjs: its options, their defaults, and the usage text. */
import { resolve } from 'node:path';

/** The scenarios `--scenario` names (`all` runs delegates-only and kubernetes). */
export const SCENARIO_NAMES = [
  'delegates-only',
  'kubernetes',
  'resident',
  'density',
  'shim-wait',
  'cluster',
  'status',
  'parallel',
  'dra',
];
/** The modes of scenario resident (`--modes`). */
export const RESIDENT_MODES = ['thin_ts', 'resident_ts', 'go_thin', 'go_thick'];
/** Modes of scenario resident run only when named: the launcher's cost (resident.mjs, thin_ts_direct). */
const RESIDENT_MODES_NAMED = [...RESIDENT_MODES, 'thin_ts_direct'];
const DENSITY_MODES = ['thin_ts', 'resident_ts', 'resident_ts_multus_limits', 'go_thin', 'go_thick', 'go_thick_300mi'];
/** Modes only run when named: the delegates-at-once lever under Multus' limits (density/modes.ts). */
const DENSITY_MODES_NAMED = [
  ...DENSITY_MODES,
  'resident_ts_multus_limits_d2',
  'resident_ts_multus_limits_d4',
  'resident_ts_multus_limits_daemon_exec',
  'resident_ts_no_bound',
];
const FAULTS = ['api', 'daemon-kill', 'containerd', 'kubelet', 'cache-full'];

export function usage(code) {
  process.stderr.write(
    'usage: node scripts/bench.mjs [--rounds N] [--k8s-rounds N] [--warmup N] [--rss-samples N] [--scenario NAME] [--exe FILE]\n' +
      '       [--before FILE]\n' +
      `  --rounds N        measured rounds of delegates-only, default 60 (the figures need at least 50)\n` +
      `  --k8s-rounds N    measured rounds of kubernetes, default 40 (the figures need at least 30)\n` +
      `  --warmup N        rounds run first and discarded (each scenario), default 5\n` +
      `  --rss-samples N   runs of each command in the peak-RSS phase, default 5\n` +
      `  --scenario NAME   delegates-only, kubernetes or all (default all when test/k8s/build.sh's binaries\n` +
      `                    exist, else delegates-only)\n` +
      `  --exe FILE        the executable to measure, default build/multus (built first if missing)\n` +
      `  --before FILE     another build (e.g. an earlier commit's build/multus) timed in the same rounds:\n` +
      `                    VERSION and ADD/DEL (delegates-only), lean ADD/DEL (kubernetes), under "before"\n` +
      `scenario resident (only when asked for: --scenario resident):\n` +
      `  --resident-rounds N  measured rounds, default 40\n` +
      `  --rss-pairs A,B      ADD/DEL pairs after which the daemons' RSS is read, default 1000,10000\n` +
      `  --concurrency N      concurrent ADDs of different containers, default 100 (0: none)\n` +
      `  --modes A,B          the modes to run, default ${RESIDENT_MODES.join(',')}; e.g. thin_ts,go_thin for the\n` +
      `                       thin plugin beside Go thin alone (no daemon, no RSS pairs); also thin_ts_direct: the\n` +
      `                       Bun executable build/multus starts, exec'd directly (the launcher's cost)\n` +
      `  --gomultus DIR       Go Multus v4.3.0 binaries, default .cache/gomultus (test/peers/build-gomultus.sh)\n` +
      `  --rss-go             also run the RSS pairs through Go Multus thick's daemon\n` +
      `  --api-latency-ms D   the Kubernetes modes reach the API server through a proxy that holds each chunk D ms\n` +
      `                       each way (a round trip 2D ms longer, as across a network), default 0 (none)\n` +
      `  --page-cache S       every mode's executables as after a reboot (cold, the default: dropped from the page\n` +
      `                       cache, read from disk) or as each one's installer leaves them (installed)\n` +
      `  --writeback S        none (the default): each DEL right after its ADD, the ADD's files still dirty;\n` +
      `                       before-del: every dirty page written back (sync, untimed) between an ADD and its\n` +
      `                       DEL, as on a node, where a pod outlives the kernel's 30 s writeback\n` +
      `scenario density (only when asked for: --scenario density; root, the kubelet node's peers, kube-burner):\n` +
      `  --pods N             pods per run, default 100\n` +
      `  --density-modes A,B  modes, in this order (then reversed), default ${DENSITY_MODES.join(',')};\n` +
      `                       also resident_ts_multus_limits_d2 / _d4 (delegateConcurrency 2 / 4 pinned),\n` +
      `                       resident_ts_multus_limits_daemon_exec (delegateExec "daemon": delegates in the daemon)\n` +
      `  --no-burst           no reboot burst (and no faults) in each mode's second run\n` +
      `  --faults A,B|none    faults, each in a burst of its own, default ${FAULTS.join(',')}\n` +
      `  --fault-modes A,B    the modes that get the faults, default thin_ts,resident_ts (the modes we ship)\n` +
      `scenario shim-wait (only when asked for: --scenario shim-wait; root):\n` +
      `  --shim-calls N       ADDs at once through the shim while the daemon is not there, default 50\n` +
      `  --shim-daemon-delay S  seconds until the daemon starts in the slow-start case, default 3\n` +
      `scenario cluster (only when asked for: --scenario cluster; root, the kubelet node's peers, Go; builds kwok):\n` +
      `  --nodes N            nodes, N-1 of them simulated by kwok, default 1000\n` +
      `  --pods-per-node M    pods per node, default 30\n` +
      `  --nads K             NetworkAttachmentDefinitions across the namespaces, default 1000\n` +
      `  --rest-seconds S     the window at rest, default 120\n` +
      `  --restarts R         daemon restarts timed per mode (ready_ms: their median), default 3\n` +
      `  --start-repeats R    kill and start each daemon R times, the start's bytes of each (their noise), default 1\n` +
      `  --apiserver-restart  restart the API server at each mode's end: the daemon's resync time, requests, bytes\n` +
      `  --apiserver-restarts R  the same R times per mode, 130 s apart (more samples of the backoffs' phase)\n` +
      `  --node-lock FILE     hold FILE (flock) while the real node runs (a shared machine's kubelet lock)\n` +
      `scenario status (only when asked for: --scenario status; root; Go thick needs the Kubernetes binaries):\n` +
      `  --status-rounds N    measured rounds of STATUS through every mode, default 100\n` +
      `scenario parallel (only when asked for: --scenario parallel; root):\n` +
      `  --parallel-rounds N  ADD/DEL pairs of a pod with four 1 s attachments, serial and parallel, default 3\n` +
      `scenario dra (only when asked for: --scenario dra; root, the kubelet node's peers):\n` +
      `  --dra-pods N         pods with a claim network and as many with an annotation network, default 10 (0: no node)\n` +
      `  --dra-rss-rounds R   daemons started with draNetworks off and on, alternated, default 3\n`,
  );
  process.exit(code);
}

function defaults() {
  return {
    rounds: 60,
    k8sRounds: 40,
    warmup: 5,
    rssSamples: 5,
    scenario: null,
    exe: null,
    before: null,
    residentRounds: 40,
    rssPairs: [1000, 10000],
    concurrency: 100,
    gomultus: null,
    rssGo: false,
    apiLatencyMs: 0,
    pageCache: 'cold',
    writeback: 'none',
    modes: RESIDENT_MODES,
    pods: 100,
    draPods: 10,
    draRssRounds: 3,
    densityModes: DENSITY_MODES,
    burst: true,
    faults: FAULTS,
    faultModes: ['thin_ts', 'resident_ts'],
    shimCalls: 50,
    shimDaemonDelay: 3,
    nodes: 1000,
    podsPerNode: 30,
    nads: 1000,
    restSeconds: 120,
    restarts: 3,
    startRepeats: 1,
    apiserverRestart: 0,
    nodeLock: null,
    statusRounds: 100,
    parallelRounds: 3,
  };
}

export function parseArgs(argv) {
  const o = defaults();
  for (let i = 0; i < argv.length; i++) {
    let [k, v] = argv[i].split(/=(.*)/s);
    const next = () => v ?? argv[++i] ?? usage(2);
    const int = () => {
      const n = Number(next());
      if (!Number.isInteger(n) || n < 0) usage(2);
      return n;
    };
    if (k === '--rounds') o.rounds = int();
    else if (k === '--k8s-rounds') o.k8sRounds = int();
    else if (k === '--warmup') o.warmup = int();
    else if (k === '--rss-samples') o.rssSamples = int();
    else if (k === '--scenario') o.scenario = next();
    else if (k === '--exe') o.exe = resolve(next());
    else if (k === '--before') o.before = resolve(next());
    else if (k === '--resident-rounds') o.residentRounds = int();
    else if (k === '--concurrency') o.concurrency = int();
    else if (k === '--gomultus') o.gomultus = resolve(next());
    else if (k === '--rss-go') o.rssGo = true;
    else if (k === '--api-latency-ms') o.apiLatencyMs = int();
    else if (k === '--page-cache') {
      o.pageCache = next();
      if (!['cold', 'installed'].includes(o.pageCache)) usage(2);
    } else if (k === '--writeback') {
      o.writeback = next();
      if (!['before-del', 'none'].includes(o.writeback)) usage(2);
    } else if (k === '--pods') o.pods = int();
    else if (k === '--no-burst') o.burst = false;
    else if (k === '--shim-calls') o.shimCalls = int();
    else if (k === '--shim-daemon-delay') o.shimDaemonDelay = int();
    else if (k === '--nodes') o.nodes = int();
    else if (k === '--pods-per-node') o.podsPerNode = int();
    else if (k === '--nads') o.nads = int();
    else if (k === '--rest-seconds') o.restSeconds = int();
    else if (k === '--restarts') o.restarts = int();
    else if (k === '--start-repeats') o.startRepeats = int();
    else if (k === '--apiserver-restart') o.apiserverRestart = 1;
    else if (k === '--apiserver-restarts') o.apiserverRestart = int();
    else if (k === '--node-lock') o.nodeLock = resolve(next());
    else if (k === '--status-rounds') o.statusRounds = int();
    else if (k === '--parallel-rounds') o.parallelRounds = int();
    else if (k === '--dra-pods') o.draPods = int();
    else if (k === '--dra-rss-rounds') o.draRssRounds = int();
    else if (k === '--faults') {
      const v = next();
      o.faults = v === 'none' ? [] : v.split(',');
      if (!o.faults.every((f) => FAULTS.includes(f))) usage(2);
    } else if (k === '--fault-modes') {
      o.faultModes = next().split(',');
      if (!o.faultModes.every((m) => DENSITY_MODES_NAMED.includes(m))) usage(2);
    } else if (k === '--modes') {
      o.modes = next().split(',');
      if (!o.modes.every((m) => RESIDENT_MODES_NAMED.includes(m))) usage(2);
    } else if (k === '--density-modes') {
      o.densityModes = next().split(',');
      if (!o.densityModes.every((m) => DENSITY_MODES_NAMED.includes(m))) usage(2);
    } else if (k === '--rss-pairs') {
      o.rssPairs = next().split(',').map(Number);
      if (!o.rssPairs.every((n) => Number.isInteger(n) && n > 0)) usage(2);
    } else if (k === '-h' || k === '--help') usage(0);
    else {
      process.stderr.write(`bench: unknown argument ${argv[i]}\n`);
      usage(2);
    }
  }
  if (o.rounds < 1 || o.k8sRounds < 1 || o.nodes < 1 || o.podsPerNode < 1 || o.nads < 2) usage(2);
  if (o.scenario !== null && !['all', ...SCENARIO_NAMES].includes(o.scenario)) {
    process.stderr.write(`bench: unknown scenario ${o.scenario}\n`);
    usage(2);
  }
  return o;
}
