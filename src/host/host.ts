/**
 * host/host.ts: what one process holds for every request it serves (I/O).
 *
 * A `Host` is built once per process: the thin executable builds one and serves a single request, the
 * resident daemon builds one and serves every request with it. It owns the plugin exec seam, the clock, the
 * readiness waiter, a logger factory, and a cache of Kubernetes clients keyed by kubeconfig path (so a daemon
 * keeps one keep-alive connection per API server), closed by `close()`.
 * Tested by test/unit/host/handle.test.ts.
 */
import { sleep } from '../base/sleep.ts';
import type { FileLock } from '../base/file-lock.ts';
import { lockFile } from '../base/file-lock.ts';
import type { Logger } from '../base/log.ts';
import { createLogger } from '../base/log.ts';
import type { Exec } from '../cni/exec.ts';
import { realExec } from '../cni/exec.ts';
import type { KubeClient } from '../k8s/types.ts';
import type { DeviceDeps, Seams } from '../multus/call-context.ts';
import type { MultusConf } from '../multus/conf.ts';
import type { Clock } from '../base/backoff.ts';
import type { ReadinessDeps } from '../multus/readiness.ts';
import { refuseNestedExec } from '../multus/nesting.ts';
import { realReadinessDeps } from '../multus/readiness.ts';
import type { NetnsRouteDeps } from '../routes/netns-routes.ts';
import type { Env } from '../cni/request.ts';
import type { ClaimNetworkSource } from '../multus/claim-attach.ts';

/** The seams of a process (multus/call-context.ts `Seams`, one object for every call) and what it keeps. */
export interface Host extends Seams {
  /** The logger of a multus config (one per parsed config: a call asking again gets the same one). */
  logger(conf: MultusConf): Logger;
  /** A container's lock (base/file-lock.ts), taken by host/prepare.ts for ADD, CHECK and DEL of every door. */
  lock(path: string, waitMs: number): Promise<FileLock | 'timeout'>;
  /** The resident daemon's host: it serves claim networks; the thin plugin's refuses them (docs/behaviour.md#claim-networks). */
  resident: boolean;
  /** Closes kept connections; the host serves no request after it. */
  close(): void;
}

export interface HostOptions {
  writeStderr(s: string): void;
  exec?: Exec;
  clock?: Clock;
  readiness?: ReadinessDeps;
  /** Builds a Kubernetes client (tests inject a fake); default: the lean client, imported on first use. */
  connectKube?: (conf: MultusConf, env: Env, log: Logger) => Promise<KubeClient | undefined>;
  routes?: NetnsRouteDeps;
  devices?: DeviceDeps;
  /** The container lock (tests inject an in-process one: the real one needs Bun). */
  lock?: Host['lock'];
  /** The resident daemon's host (Host.resident). */
  resident?: boolean;
}

export function createHost(o: HostOptions): Host {
  const clients = new Map<string, Promise<KubeClient | undefined>>();
  const connect = o.connectKube ?? connectKube;
  const loggers = new WeakMap<MultusConf, Logger>();
  return {
    // the meta-plugin is never a delegate (multus/nesting.ts); a host given its exec (the daemon) wraps its own
    exec: o.exec ?? refuseNestedExec(realExec),
    clock: o.clock ?? { now: () => Date.now(), sleep: (ms) => sleep(ms) },
    readiness: o.readiness ?? realReadinessDeps,
    lock: o.lock ?? lockFile,
    ...(o.routes ? { routes: o.routes } : {}),
    ...(o.devices ? { devices: o.devices } : {}),
    resident: o.resident === true,
    claimNetworks: o.resident === true ? serveClaimNetworks : refuseClaimNetworks,
    logger(conf) {
      let log = loggers.get(conf);
      if (!log) {
        const { logLevel: level, logToStderr, logOptions } = conf;
        log = createLogger(
          { level, logFile: conf.logFile || undefined, logToStderr, logOptions },
          { writeStderr: o.writeStderr },
        );
        loggers.set(conf, log);
      }
      return log;
    },
    kube(conf, env, log) {
      const key = `${conf.kubeconfig}\0${env.KUBERNETES_SERVICE_HOST ?? ''}\0${env.KUBERNETES_SERVICE_PORT ?? ''}`;
      let client = clients.get(key);
      if (!client) {
        client = connect(conf, env, log);
        clients.set(key, client);
        // A failed connection is not kept: the next request tries again (the kubeconfig may appear later).
        client.catch(() => clients.delete(key));
      }
      return client;
    },
    close() {
      for (const client of clients.values())
        client.then(
          (c) => c?.close(),
          () => undefined,
        );
      clients.clear();
    },
  };
}

/**
 * dra/claim-delegates.ts, loaded only when a call with `draNetworks` meets a pod with DRA claims: the thin plugin
 * never parses it otherwise.
 */
const serveClaimNetworks: ClaimNetworkSource = async (pod, conf, deps) =>
  (await import('../dra/claim-delegates.ts')).serveClaimNetworks(pod, conf, deps);
const refuseClaimNetworks: ClaimNetworkSource = async (pod, conf, deps) =>
  (await import('../dra/claim-delegates.ts')).refuseClaimNetworks(pod, conf, deps);

/**
 * The Kubernetes client, only when the config names a kubeconfig or the in-cluster service environment is
 * set (docs/kubernetes.md, "Kubeconfig"). The client module is imported on demand, so delegates-only
 * calls never load it.
 */
async function connectKube(conf: MultusConf, env: Env, log: Logger): Promise<KubeClient | undefined> {
  if (!conf.kubeconfig && !(env.KUBERNETES_SERVICE_HOST && env.KUBERNETES_SERVICE_PORT)) return undefined;
  const { loadKubeClient } = await import('../k8s/client.ts');
  return loadKubeClient({ kubeconfig: conf.kubeconfig, env, log });
}
