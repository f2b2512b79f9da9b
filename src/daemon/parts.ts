/**
 * daemon/parts.ts: the resident daemon's components (daemon/components.ts), in the order daemon/main.ts starts
 * them: the informers, the Host, the config writer, `/metrics`, the CNI socket, dynamic networks. Each stops in
 * reverse order; the socket's stop is the shutdown of docs/resident.md ("Signals"): the drain (`/readyz` answers
 * 500), the close, the grace for in-flight calls, then the abort of every call's signal, which kills the
 * delegates still running and starts no other (docs/reliability.md, "Signals end the delegates too").
 * Tested through the daemon: test/daemon/signals.test.ts, drain.test.ts, process.test.ts.
 */
import type { Server } from 'node:http';
import { createServer } from 'node:http';
import { mkdirSync, statSync } from 'node:fs';
import { hostname } from 'node:os';
import { messageOf } from '../base/errors.ts';
import type { Logger } from '../base/log.ts';
import type { Exec } from '../cni/exec.ts';
import type { Env } from '../cni/request.ts';
import type { Host } from '../host/host.ts';
import { createHost } from '../host/host.ts';
import type { DynamicNetworks } from '../hotplug/dynamic.ts';
import type { WarmKube } from '../informers/informers.ts';
import { startWarmKube } from '../informers/informers.ts';
import { nodeEvent } from '../k8s/calls.ts';
import type { KubeClient } from '../k8s/types.ts';
import type { MultusConf } from '../multus/conf.ts';
import type { ConfigWriter } from './autoconf.ts';
import { shimSocketDir, startConfigWriter } from './autoconf.ts';
import type { Component, Stopping } from './components.ts';
import { StartError } from './components.ts';
import type { DaemonConfig } from './config.ts';
import type { CountedExec } from './exec.ts';
import type { CallerChannel } from './caller-exec.ts';
import type { Metrics } from './metrics.ts';
import type { CollectingQueue } from './memory.ts';
import type { RequestQueue } from './queue.ts';
import { createCniServer } from './server.ts';
import { listenUnix, removeSocket } from './socket.ts';

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

/** `/metrics` on metricsPort (not listening: logged, served on, as Multus); `served()` after each scrape (memory.ts). */
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
  // 127.0.0.1 unless the config names another address; `0.0.0.0`/`::` is Multus' ":<metricsPort>"
  // (docs/reliability.md, "Second probe").
  const host = cfg.metricsBindAddress;
  const where = `${host} port ${cfg.metricsPort}`;
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

/** Warning events about this node (MultusConfigRenamed, docs/install.md), when there is a Kubernetes client. */
function nodeWarnings(warm: WarmKube | undefined, env: Env): { warnNode?: (reason: string, msg: string) => void } {
  const kube = warm?.client;
  if (!kube) return {};
  const node = env.MULTUS_NODE_NAME || hostname();
  return { warnNode: (reason, msg) => void kube.createEvent(nodeEvent(node, 'Warning', reason, msg)) };
}

/** What the daemon's components share: the parts built before them, and what each one started. */
export interface Shared {
  cfg: DaemonConfig;
  /** The daemon's environment and stderr (main.ts' DaemonIo). */
  io: { env: Env; writeStderr(s: string): void };
  log: Logger;
  queue: CollectingQueue;
  exec: Exec;
  /** The delegates running now (`exec` within its bound on delegates at once). */
  delegates: CountedExec;
  metrics: Metrics | undefined;
  /** Every call's cancel signal (cni/exec.ts): aborted once the shutdown's grace is over. */
  calls: AbortController;
  warm?: WarmKube;
  host?: Host;
  writer?: ConfigWriter;
  multusConf(): Buffer;
  stopping(): boolean;
  /** Why the daemon is not ready (`/healthz`, `/readyz`), or undefined. */
  notReady(): string | undefined;
}

/** The informers (when there is a Kubernetes API); ready once synced. */
export const warmKube = (s: Shared): Component => ({
  name: 'informers',
  async start() {
    s.warm = await startWarm(s.cfg, s.io.env, s.log, s.metrics);
    if (s.warm && s.metrics) s.warm.onPod(s.metrics.podNetworks); // pod_network_name_info (docs/resident.md#metrics)
  },
  notReady: () => (s.warm && !s.warm.synced() ? 'the Kubernetes informers have not synced yet' : undefined),
  stop: () => s.warm?.close(),
});

export const hostPart = (s: Shared): Component => ({
  name: 'host',
  start() {
    const warmKubeconfig = typeof s.cfg.multusKeys.kubeconfig === 'string' ? s.cfg.multusKeys.kubeconfig : '';
    const connectKube = kubeConnector(s.warm, warmKubeconfig);
    s.host = createHost({ writeStderr: s.io.writeStderr, exec: s.exec, connectKube, resident: true });
  },
  stop: () => s.host?.close(),
});

/** 00-multus.conf kept written; frozen as the stop begins (an uninstall's cleanup is not undone: docs/install.md). */
export const configWriter = (s: Shared): Component => ({
  name: 'config writer',
  start(signal) {
    // the socket's directory, made now (listenUnix makes it too) to compare it with the host's paths
    mkdirSync(s.cfg.socketDir, { recursive: true, mode: 0o700 });
    const shim = shimSocketDir(s.cfg, sameDirectory);
    if (shim.warning) s.log.error(shim.warning);
    const cfg = { ...s.cfg, daemonSocketDir: shim.dir };
    const writer = (s.writer = startConfigWriter({ cfg, log: s.log, ...nodeWarnings(s.warm, s.io.env) }));
    signal.addEventListener('abort', () => writer.stop({ remove: false }), { once: true });
  },
  stop: () => s.writer?.stop({ remove: s.cfg.cleanupConfigOnExit }),
});

/** `/metrics`, when metricsPort is set; it serves on until the socket server has stopped. */
export const metricsServer = (s: Shared): Component => {
  let server: Server | undefined;
  return {
    name: '/metrics',
    async start() {
      if (!s.metrics) return;
      server = await serveMetrics(s.metrics, s.cfg, s.log, () => s.stopping() || s.queue.restSoon()).catch(
        (e: unknown) => void s.log.error(`${messageOf(e)}: the daemon goes on without /metrics`),
      );
    },
    stop: () => void server?.close(),
  };
};

/** The CNI socket; its stop is the drain, the grace for in-flight calls, and the abort of the calls' signal. */
export const socketServer = (s: Shared): Component => {
  let http: Server | undefined;
  let socket: string | undefined;
  const callers = new Map<string, CallerChannel>(); // the calls whose shim runs their delegates (caller-exec.ts)
  return {
    name: 'socket',
    async start() {
      const { cfg, log, queue, host, writer, metrics } = s;
      // `/readyz?config`, the DaemonSet's probe through multus-shim --ready (docs/resident.md, "Readiness")
      const notServing = () =>
        writer?.current() ? undefined : 'no multus config is served yet (no master network config)';
      const { multusConf, stopping } = s;
      const signal = s.calls.signal;
      const served = { host: host!, daemonEnv: s.io.env, log, queue, notServing, stopping, multusConf, signal };
      const { delegateExec } = cfg; // "caller": a shim that offers it runs its call's delegates (caller-exec.ts)
      const caller = { delegateExec, callers };
      http = createCniServer({ ...served, ...caller, notReady: s.notReady, ...(metrics ? { metrics } : {}) });
      socket = await listenUnix(http, cfg.socketDir);
      log.verbose(`multus daemon serving ${socket}`);
    },
    async stop(how) {
      if (how) await shutDown({ ...s, http: http!, callers, ...how });
      else http?.close();
      s.calls.abort(new Error('the multus daemon stopped'));
      if (socket) removeSocket(socket);
    },
  };
};

/** Dynamic networks (docs/hotplug.md), when enabled: stopped first. */
export const dynamicNetworks = (s: Shared): Component => {
  let dynamic: DynamicNetworks | undefined;
  return {
    name: 'dynamic networks',
    async start() {
      if (!s.cfg.dynamicNetworks) return;
      // with informers, the pod informer's updates drive it and the poll is a resync
      const events = s.warm ? { events: s.warm.onPod } : {};
      const { host, queue, log, multusConf } = s;
      const intervalMs = s.cfg.dynamicNetworksPollMs;
      const { startDynamicNetworks } = await import('../hotplug/dynamic.ts');
      const deps = { host: host!, queue, log, daemonEnv: s.io.env, multusConf, intervalMs, signal: s.calls.signal };
      dynamic = startDynamicNetworks({ ...deps, ...events });
    },
    stop: () => dynamic?.stop(),
  };
};

interface Shutdown extends Stopping {
  cfg: DaemonConfig;
  log: Logger;
  queue: RequestQueue;
  http: Server;
  calls: AbortController;
  delegates: CountedExec;
  /** The calls whose shim runs their delegates (`delegateExec: "caller"`): they need the socket to the end. */
  callers?: ReadonlyMap<string, unknown>;
}

/**
 * Until no call's shim runs its delegates any more (their outcomes come on new connections, POST /cni/exec, so the
 * socket must stay open for them), `deadline` or a second signal; meanwhile new calls are still served, as in the
 * drain (docs/archive/resident-protocol.md, "Delegates run by the shim").
 */
async function callersDone(
  callers: ReadonlyMap<string, unknown> | undefined,
  deadline: number,
  again: Promise<string>,
) {
  let interrupted = false;
  void again.then(() => (interrupted = true));
  while (callers && callers.size > 0 && Date.now() < deadline && !interrupted) {
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The drain, the close of the socket, the grace for in-flight calls, and the kill of delegates left running. */
export async function shutDown(how: Shutdown): Promise<void> {
  const { cfg, log, queue, http, reason, again, calls, delegates } = how;
  if (cfg.shutdownDrainMs > 0) {
    log.verbose(`caught ${reason}: /readyz answers 500, serving ${cfg.shutdownDrainMs / 1000} s more before closing`);
    // a second signal cuts the drain short as it does the grace below
    await Promise.race([new Promise((r) => setTimeout(r, cfg.shutdownDrainMs)), again]);
  }
  const graceEnd = Date.now() + cfg.shutdownGraceMs;
  await callersDone(how.callers, graceEnd, again);
  log.verbose(`caught ${reason}, stopping: ${queue.pending()} request(s) in flight`);
  const closed = new Promise<void>((resolve) => http.close(() => resolve()));
  http.closeIdleConnections();
  let timer: NodeJS.Timeout | undefined;
  const grace = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), Math.max(0, graceEnd - Date.now()));
  });
  const interrupted = again.then((s) => `caught ${s} again`);
  const waited = await Promise.race([queue.idle().then(() => 'idle' as const), grace, interrupted]);
  if (waited !== 'idle') {
    const why = waited === 'timeout' ? `after ${cfg.shutdownGraceMs / 1000} s` : `(${waited})`;
    log.error(`${queue.pending()} request(s) still running ${why}: stopping anyway`);
    http.closeAllConnections();
  }
  clearTimeout(timer);
  // every call's signal: its running delegate's group is killed, and it starts no other (its rollback DEL)
  const killed = delegates.running();
  calls.abort(new Error("the shutdown's grace is over"));
  if (killed > 0) log.error(`killed the process groups of ${killed} delegate(s) still running`);
  await Promise.race([closed, new Promise((r) => setTimeout(r, 1000))]);
}
