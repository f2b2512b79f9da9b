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
import { existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import type { Server } from 'node:http';
import { createServer } from 'node:http';
import { hostname } from 'node:os';
import { messageOf } from '../base/errors.ts';
import type { Logger } from '../base/log.ts';
import { createLogger } from '../base/log.ts';
import type { Exec } from '../cni/exec.ts';
import { callerEnv, launcherPath } from '../base/caller-env.ts';
import { STOP_SIGNALS, killRunningDelegates, realExec, stopStartingDelegates } from '../cni/exec.ts';
import { refuseNestedExec } from '../multus/nesting.ts';
import { createHost } from '../host/host.ts';
import { nodeEvent } from '../k8s/calls.ts';
import type { KubeClient } from '../k8s/types.ts';
import type { MultusConf } from '../multus/conf.ts';
import type { ConfigWriter } from './autoconf.ts';
import { shimSocketDir, startConfigWriter } from './autoconf.ts';
import type { DaemonConfig } from './config.ts';
import { DEFAULT_DAEMON_CONFIG, DaemonConfigError, parseDaemonConfig } from './config.ts';
import { boundedExec, chrootExec, chrootWrapper, timedExec } from './exec.ts';
import type { WarmKube } from '../informers/informers.ts';
import { startWarmKube } from '../informers/informers.ts';
import type { Metrics } from './metrics.ts';
import type { DynamicNetworks } from '../hotplug/dynamic.ts';
import { collectGarbage, defaultDelegateConcurrency, memoryLimitMib } from './memory.ts';
import { dropFilePages } from './pages.ts';
import type { RequestQueue } from './queue.ts';
import { requestQueue } from './queue.ts';
import { createCniServer } from './server.ts';
import { listenUnix, removeSocket } from './socket.ts';
import type { Env } from '../cni/request.ts';

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

class StartError extends Error {}

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

/** The kube client for a request's config: the warm one when the request uses the daemon's kubeconfig. */
function kubeConnector(warm: WarmKube | undefined, warmKubeconfig: string) {
  return async (conf: MultusConf, env: Env, log: Logger): Promise<KubeClient | undefined> => {
    if (!conf.kubeconfig && !(env.KUBERNETES_SERVICE_HOST && env.KUBERNETES_SERVICE_PORT)) return undefined;
    if (warm && conf.kubeconfig === warmKubeconfig) return warm.client;
    const { loadKubeClient } = await import('../k8s/client.ts');
    return loadKubeClient({ kubeconfig: conf.kubeconfig, env, log });
  };
}

async function startWarm(
  cfg: DaemonConfig,
  env: Env,
  log: Logger,
  metrics: Metrics | undefined,
): Promise<WarmKube | undefined> {
  const kubeconfig = typeof cfg.multusKeys.kubeconfig === 'string' ? cfg.multusKeys.kubeconfig : '';
  if (!kubeconfig && !(env.KUBERNETES_SERVICE_HOST && env.KUBERNETES_SERVICE_PORT)) return undefined;
  try {
    const nodeName = env.MULTUS_NODE_NAME || hostname();
    return await startWarmKube({ kubeconfig, env, nodeName, log, ...(metrics ? { metrics } : {}) });
  } catch (e) {
    log.verbose(`no informers (${messageOf(e)}): each request uses the per-request Kubernetes client`);
    return undefined;
  }
}

/** `/metrics` on metricsPort; `served()` after each scrape (a scrape runs code: the rest after it, memory.ts). */
function serveMetrics(metrics: Metrics, cfg: DaemonConfig, log: Logger, served: () => void): Promise<Server> {
  const server = createServer((req, res) => {
    if ((req.url ?? '').split('?')[0] !== '/metrics' || req.method !== 'GET') {
      res.writeHead(404).end();
      return;
    }
    metrics
      .render()
      .then(
        ({ contentType, body }) => res.writeHead(200, { 'Content-Type': contentType }).end(body),
        (e: unknown) => res.writeHead(500).end(messageOf(e)),
      )
      .finally(served);
  });
  // No address: every address of the node, as Multus' ":<metricsPort>" (docs/resident.md#metrics).
  const host = cfg.metricsBindAddress || undefined;
  const where = host === undefined ? `every address, port ${cfg.metricsPort}` : `${host} port ${cfg.metricsPort}`;
  return new Promise((resolve, reject) => {
    server.once('error', (e) => reject(new StartError(`cannot serve /metrics on ${where}: ${messageOf(e)}`)));
    server.listen(cfg.metricsPort, host, () => {
      log.verbose(`metrics on ${where}: /metrics`);
      resolve(server);
    });
  });
}

/** True when both paths name one directory (same device and inode). */
function sameDirectory(a: string, b: string): boolean {
  try {
    const [x, y] = [statSync(a), statSync(b)];
    return x.isDirectory() && x.dev === y.dev && x.ino === y.ino;
  } catch {
    return false;
  }
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

/** What a started daemon holds, so the start can undo itself and stop() can close it. */
interface Parts {
  http?: Server;
  socket?: string;
  writer?: ConfigWriter;
  warm?: WarmKube;
  metricsServer?: Server;
  dynamic?: DynamicNetworks;
  host?: { close(): void };
}

function closeParts(p: Parts, cfg: DaemonConfig): void {
  p.http?.close();
  if (p.socket) removeSocket(p.socket);
  p.writer?.stop({ remove: cfg.cleanupConfigOnExit });
  p.metricsServer?.close();
  p.warm?.close();
  p.host?.close();
}

/** Warning events about this node (MultusConfigRenamed, docs/install.md), when there is a Kubernetes client. */
function nodeWarnings(warm: WarmKube | undefined, env: Env): { warnNode?: (reason: string, msg: string) => void } {
  const kube = warm?.client;
  if (!kube) return {};
  const node = env.MULTUS_NODE_NAME || hostname();
  return { warnNode: (reason, msg) => void kube.createEvent(nodeEvent(node, 'Warning', reason, msg)) };
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
 * Starts the daemon of `setup`: metrics, the warm Kubernetes cache, the Host, the generated config, the socket
 * server, `/metrics`, dynamic networks. A failure closes what was started and throws (a StartError for a bad
 * setting).
 */
export async function startDaemon(setup: DaemonSetup, io: DaemonIo, log: Logger): Promise<DaemonHandle> {
  const { cfg } = setup;
  const parts: Parts = {};
  // a collection when idle, and while busy when the daemon's anonymous memory grew (never on a clock); at rest,
  // the start-up's file pages given back (memory.ts, pages.ts)
  const atRest = cfg.dropIdleFilePages ? () => void dropFilePages() : undefined;
  const queue = collectGarbage(requestQueue(cfg.connectionLimit), atRest ? { atRest } : {});
  let stopping = false;
  try {
    const metrics = await createMetricsFor(cfg);
    const exec = boundDelegates(metrics ? timedExec(setup.exec, metrics) : setup.exec, cfg, log);
    const warm = (parts.warm = await startWarm(cfg, io.env, log, metrics));
    if (warm && metrics) warm.onPod(metrics.podNetworks); // pod_network_name_info (docs/resident.md#metrics)
    const warmKubeconfig = typeof cfg.multusKeys.kubeconfig === 'string' ? cfg.multusKeys.kubeconfig : '';
    const host = createHost({ writeStderr: io.writeStderr, exec, connectKube: kubeConnector(warm, warmKubeconfig) });
    parts.host = host;
    // the socket's directory, made now (listenUnix makes it too) to compare it with the host's paths
    mkdirSync(cfg.socketDir, { recursive: true, mode: 0o700 });
    const shim = shimSocketDir(cfg, sameDirectory);
    if (shim.warning) log.error(shim.warning);
    const writerCfg = { ...cfg, daemonSocketDir: shim.dir };
    const writer = (parts.writer = startConfigWriter({ cfg: writerCfg, log, ...nodeWarnings(warm, io.env) }));
    const multusConf = (): Buffer => {
      const path = writer.current();
      if (!path) throw new Error('no multus config is served yet (waiting for the master network config)');
      return readFileSync(path);
    };
    const notReady = (): string | undefined => {
      const indicator = cfg.readinessIndicatorFile;
      if (indicator && !existsSync(indicator)) return `waiting for ${indicator}`;
      if (warm && !warm.synced()) return 'the Kubernetes informers have not synced yet';
      return undefined;
    };
    // `/readyz?config`, the DaemonSet's probe through multus-shim --ready (docs/resident.md, "Readiness")
    const notServing = () =>
      writer.current() ? undefined : 'no multus config is served yet (no master network config)';
    const served = { host, daemonEnv: io.env, log, queue, notReady, notServing, stopping: () => stopping, multusConf };
    parts.http = createCniServer({ ...served, ...(metrics ? { metrics } : {}) });
    const socket = (parts.socket = await listenUnix(parts.http, cfg.socketDir));
    if (metrics) parts.metricsServer = await serveMetrics(metrics, cfg, log, () => stopping || queue.restSoon());
    if (cfg.dynamicNetworks) {
      // with informers, the pod informer's updates drive it and the poll is a resync
      const events = warm ? { events: warm.onPod } : {};
      const intervalMs = cfg.dynamicNetworksPollMs;
      const { startDynamicNetworks } = await import('../hotplug/dynamic.ts');
      parts.dynamic = startDynamicNetworks({ host, queue, log, daemonEnv: io.env, multusConf, intervalMs, ...events });
    }
    log.verbose(`multus daemon serving ${socket}`);
    // at rest once ready (the informers synced), and after the node's pod events too (they run code, not requests):
    // a collection and page drop 1 s after the last (memory.ts)
    void (warm ? warm.waitForSync(60_000) : Promise.resolve()).then(() => stopping || queue.restSoon());
    warm?.onPod(() => stopping || queue.restSoon());
    const stop = async (reason: string, again: Promise<string> = new Promise(() => {})) => {
      stopping = true;
      writer.stop({ remove: false }); // frozen: an uninstall's cleanup (docs/install.md, "Helm") is not undone
      await parts.dynamic?.stop();
      await shutDown({ cfg, log, queue, http: parts.http!, reason, again });
      closeParts({ ...parts, http: undefined }, cfg);
      queue.stop();
      log.verbose('multus daemon stopped');
    };
    return { socket, stop };
  } catch (e) {
    closeParts(parts, cfg);
    queue.stop();
    throw e;
  }
}

interface Shutdown {
  cfg: DaemonConfig;
  log: Logger;
  queue: RequestQueue;
  http: Server;
  reason: string;
  again: Promise<string>;
}

/** The drain, the close of the socket, the grace for in-flight calls, and the kill of delegates left running. */
async function shutDown({ cfg, log, queue, http, reason, again }: Shutdown): Promise<void> {
  if (cfg.shutdownDrainMs > 0) {
    log.verbose(`caught ${reason}: /readyz answers 500, serving ${cfg.shutdownDrainMs / 1000} s more before closing`);
    // a second signal cuts the drain short as it does the grace below
    await Promise.race([new Promise((r) => setTimeout(r, cfg.shutdownDrainMs)), again]);
  }
  log.verbose(`caught ${reason}, stopping: ${queue.pending()} request(s) in flight`);
  const closed = new Promise<void>((resolve) => http.close(() => resolve()));
  http.closeIdleConnections();
  let timer: NodeJS.Timeout | undefined;
  const grace = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), cfg.shutdownGraceMs);
  });
  const interrupted = again.then((s) => `caught ${s} again`);
  const waited = await Promise.race([queue.idle().then(() => 'idle' as const), grace, interrupted]);
  if (waited !== 'idle') {
    const why = waited === 'timeout' ? `after ${cfg.shutdownGraceMs / 1000} s` : `(${waited})`;
    log.error(`${queue.pending()} request(s) still running ${why}: stopping anyway`);
    http.closeAllConnections();
  }
  clearTimeout(timer);
  stopStartingDelegates(); // a call whose delegate is killed now must not start another (its rollback DEL)
  const killed = killRunningDelegates();
  if (killed > 0) log.error(`killed the process groups of ${killed} delegate(s) still running`);
  await Promise.race([closed, new Promise((r) => setTimeout(r, 1000))]);
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
  const logOptions = { level: cfg.logLevel, logFile: cfg.logFile || undefined, logToStderr: cfg.logToStderr };
  const log = createLogger(logOptions, { writeStderr: io.writeStderr });
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
