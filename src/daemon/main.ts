/**
 * daemon/main.ts: `multus daemon [--config PATH]`, the resident daemon (docs/resident.md).
 *
 * Start-up: read and check daemon-config.json (a bad value is one line on stderr and exit 2), build one Host
 * (plugin exec wrapped for chrootDir and metrics; the warm Kubernetes client when available), keep
 * 00-multus.conf written, listen on <socketDir>/multus.sock, serve /metrics when asked. SIGTERM/SIGINT/SIGHUP:
 * /readyz turns 500 while the daemon serves on for shutdownDrainSeconds, then it stops accepting, lets in-flight
 * requests finish (bounded by shutdownGraceSeconds; a second signal ends the wait), kills the process groups of
 * delegates still running, removes the socket (and the generated config with cleanupConfigOnExit), closes the
 * Host, exit 0.
 *
 * This module is its own bundle (an embedded file of the executable, scripts/build-daemon.mjs): the thin plugin
 * never loads it.
 * Tested by test/daemon/process.test.ts, test/daemon/signals.test.ts, test/daemon/drain.test.ts (the daemon as
 * a process).
 */
import { setMaxListeners } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import { messageOf } from '../base/errors.ts';
import type { Logger } from '../base/log.ts';
import { createLogger } from '../base/log.ts';
import type { Exec } from '../cni/exec.ts';
import { callerEnv, launcherPath } from '../base/caller-env.ts';
import { STOP_SIGNALS, realExec } from '../cni/exec.ts';
import { useOutputFiles } from '../cni/plugin-output.ts';
import type { Env } from '../cni/request.ts';
import { refuseNestedExec } from '../multus/nesting.ts';
import { StartError, notReadyOf, startComponents } from './components.ts';
import type { DaemonConfig } from './config.ts';
import { DEFAULT_DAEMON_CONFIG, DaemonConfigError, parseDaemonConfig } from './config.ts';
import { boundedExec, chrootExec, chrootWrapper, countedExec, timedExec } from './exec.ts';
import type { Metrics } from './metrics.ts';
import { collectGarbage, defaultDelegateConcurrency, memoryLimitMib } from './memory.ts';
import { dropFilePages } from './pages.ts';
import type { Shared } from './parts.ts';
import { configWriter, dynamicNetworks, hostPart, metricsServer, socketServer, warmKube } from './parts.ts';
import { draPlugin } from './dra-part.ts';
import { requestQueue } from './queue.ts';
import { socketPath } from './socket.ts';

export interface DaemonIo {
  env: Env;
  writeStderr(s: string): void;
  /** Where --help prints (process.stdout when absent). */
  writeStdout?: (s: string) => void;
  /** Resolves on the first SIGTERM/SIGINT/SIGHUP (tests pass their own). */
  stopSignal?: Promise<string>;
  /** Resolves on the next stop signal after the first: the shutdown stops waiting for in-flight calls. */
  againSignal?: () => Promise<string>;
  isRoot?: () => boolean;
}

const USAGE =
  'usage: multus daemon [--config PATH]\n' +
  `  --config PATH   the daemon's configuration (Multus thick's daemon-config.json), default ${DEFAULT_DAEMON_CONFIG}\n` +
  'The resident daemon: serves CNI calls from multus-shim on <socketDir>/multus.sock (docs/resident.md).\n';

/** The config path, or undefined for --help. */
function parseArgs(argv: string[]): string | undefined {
  let config = DEFAULT_DAEMON_CONFIG;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--help' || a === '-help' || a === '-h') return undefined;
    if (a === '--config' || a === '-config') {
      const v = argv[++i];
      if (!v) throw new StartError(`${a} needs a path: multus daemon --config ${DEFAULT_DAEMON_CONFIG}`);
      config = v;
    } else if (a.startsWith('--config=')) config = a.slice('--config='.length);
    else throw new StartError(`unknown argument "${a}": usage: multus daemon [--config PATH]`);
  }
  return config;
}

function readConfig(path: string): DaemonConfig {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (e) {
    throw new StartError(`cannot read the daemon config ${path}: ${messageOf(e)} (pass --config PATH)`);
  }
  try {
    return parseDaemonConfig(bytes);
  } catch (e) {
    if (e instanceof DaemonConfigError) throw new StartError(`${path}: ${e.message}`);
    throw e;
  }
}

/** The next SIGTERM, SIGINT or SIGHUP; while waiting, none of them ends the process by its default action. */
function signalPromise(): Promise<string> {
  return new Promise((resolve) => {
    const on = (sig: NodeJS.Signals) => {
      for (const s of STOP_SIGNALS) process.removeListener(s, on);
      resolve(sig);
    };
    for (const s of STOP_SIGNALS) process.on(s, on);
  });
}

const processIo: DaemonIo = { env: callerEnv(process.env), writeStderr: (s) => process.stderr.write(s) };

/** A started daemon: its socket, and `stop()`, the shutdown a stop signal runs (drain, grace, kill, close). */
export interface DaemonHandle {
  socket: string;
  /**
   * Stops serving: dynamic networks first, then `/readyz` answers 500 for shutdownDrainSeconds while calls are
   * still served, then the socket closes and in-flight calls get shutdownGraceSeconds; `again` (a second signal)
   * cuts both waits short. The delegates still running are killed, everything started is closed.
   */
  stop(reason: string, again?: Promise<string>): Promise<void>;
}

/** What a daemon is started with (runDaemon reads it from argv and the config file). */
interface DaemonSetup {
  cfg: DaemonConfig;
  exec: Exec;
}

/** The config and exec of the config file at `path`; a StartError says what is wrong. */
function setUp(path: string, io: DaemonIo): DaemonSetup {
  const cfg = readConfig(path);
  const isRoot = io.isRoot ?? (() => process.getuid?.() === 0);
  if (!isRoot()) throw new StartError('the multus daemon must run as root (it runs CNI plugins)');
  // the meta-plugin is never a delegate (multus/nesting.ts): checked on the files as the host has them
  const ownExec = refuseNestedExec(realExec);
  if (!cfg.chrootDir) return { cfg, exec: ownExec };
  const wrapper = chrootWrapper(launcherPath(process.env));
  if (!wrapper)
    throw new StartError('chrootDir is set but neither the launcher nor a chroot program (/usr/sbin/chroot) was found');
  if (!existsSync(cfg.chrootDir)) throw new StartError(`chrootDir ${cfg.chrootDir} does not exist`);
  return { cfg, exec: chrootExec(ownExec, cfg.chrootDir, wrapper) };
}

async function createMetricsFor(cfg: DaemonConfig): Promise<Metrics | undefined> {
  if (cfg.metricsPort === undefined) return undefined;
  try {
    // prom-client is loaded only when metrics are configured (docs/resident.md, "Memory")
    return (await import('./metrics.ts')).createMetrics();
  } catch (e) {
    throw new StartError(`metricsPort is set but ${messageOf(e)}`);
  }
}

/** `exec` with at most delegateConcurrency plugins at once (default: 1-4 under a memory limit below 256 MiB). */
function boundDelegates(exec: Exec, cfg: DaemonConfig, log: Logger): Exec {
  const limitMib = memoryLimitMib();
  const delegates = cfg.delegateConcurrency ?? defaultDelegateConcurrency(limitMib);
  log.verbose(`delegates at once: ${delegates || 'no limit'} (memory limit: ${limitMib ? `${limitMib} MiB` : 'none'})`);
  return boundedExec(exec, delegates);
}

/**
 * Starts the daemon of `setup`: its components in order (the warm Kubernetes cache, the Host, the generated
 * config, `/metrics`, the socket server, the DRA plugin with `draNetworks`, dynamic networks). A failure stops what was started and throws (a
 * StartError for a bad setting).
 */
export async function startDaemon(setup: DaemonSetup, io: DaemonIo, log: Logger): Promise<DaemonHandle> {
  const { cfg } = setup;
  // a collection when idle, and while busy when the daemon's anonymous memory grew (never on a clock); at rest,
  // the start-up's file pages given back (memory.ts, pages.ts)
  const atRest = cfg.dropIdleFilePages ? () => void dropFilePages() : undefined;
  const queue = collectGarbage(requestQueue(cfg.connectionLimit), atRest ? { atRest } : {});
  const daemon = new AbortController(); // the one cancel signal: aborted when the stop begins
  const calls = new AbortController();
  setMaxListeners(0, calls.signal); // one listener per running delegate
  try {
    const metrics = await createMetricsFor(cfg);
    // counted inside the bound: the calls waiting for a slot run no delegate yet
    const counted = countedExec(metrics ? timedExec(setup.exec, metrics) : setup.exec);
    const exec = boundDelegates(counted, cfg, log);
    const stopping = () => daemon.signal.aborted;
    const s: Shared = { cfg, io, log, queue, exec, delegates: counted, metrics, calls, stopping, multusConf, notReady };
    function multusConf(): Buffer {
      const path = s.writer?.current();
      if (!path) throw new Error('no multus config is served yet (waiting for the master network config)');
      return readFileSync(path);
    }
    const parts = [warmKube, hostPart, configWriter, metricsServer, socketServer, draPlugin, dynamicNetworks];
    const list = parts.map((c) => c(s));
    function notReady(): string | undefined {
      const indicator = cfg.readinessIndicatorFile;
      if (indicator && !existsSync(indicator)) return `waiting for ${indicator}`;
      return notReadyOf(list);
    }
    const running = await startComponents(list, daemon);
    // at rest once ready (the informers synced), and after the node's pod events too (they run code, not requests):
    // a collection and page drop 1 s after the last (memory.ts)
    const { warm } = s;
    void (warm ? warm.waitForSync(60_000) : Promise.resolve()).then(() => s.stopping() || queue.restSoon());
    warm?.onPod(() => s.stopping() || queue.restSoon());
    const stop = async (reason: string, again: Promise<string> = new Promise(() => {})) => {
      await running.stop({ reason, again });
      queue.stop();
      log.verbose('multus daemon stopped');
    };
    return { socket: socketPath(cfg.socketDir), stop };
  } catch (e) {
    queue.stop();
    throw e;
  }
}

/** `multus daemon [--config PATH]`: starts the daemon, serves until a stop signal, stops; the exit code. */
export async function runDaemon(argv: string[], io: DaemonIo = processIo): Promise<number> {
  const stop = io.stopSignal ?? signalPromise();
  const again = io.againSignal ?? (io.stopSignal ? () => new Promise<string>(() => {}) : signalPromise);
  let setup: DaemonSetup;
  try {
    const path = parseArgs(argv);
    if (path === undefined) {
      (io.writeStdout ?? ((s: string) => process.stdout.write(s)))(USAGE);
      return 0;
    }
    setup = setUp(path, io);
  } catch (e) {
    io.writeStderr(`multus daemon: ${messageOf(e)}\n`);
    return 2;
  }
  const { cfg } = setup;
  // a delegate's stdout and stderr in two unnamed files read once it is gone, not pipes read as web streams: in the
  // interpreter the streams cost the daemon more CPU than the files' memory (docs/archive/performance.md,
  // "The daemon's CPU per pod, 2026-12-08")
  useOutputFiles();
  const logOptions = { level: cfg.logLevel, logFile: cfg.logFile || undefined, logToStderr: cfg.logToStderr };
  const log = createLogger(logOptions, { writeStderr: io.writeStderr });
  for (const w of cfg.warnings) io.writeStderr(`${w}\n`); // as Multus prints them, whatever the level
  let daemon: DaemonHandle;
  try {
    daemon = await startDaemon(setup, io, log);
  } catch (e) {
    io.writeStderr(`multus daemon: ${messageOf(e)}\n`);
    return e instanceof StartError ? 2 : 1;
  }
  const sig = await stop;
  // Listening at once: a second signal during the shutdown must not end the process with its delegates running.
  await daemon.stop(sig, again());
  return 0;
}
