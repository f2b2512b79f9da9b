/**
 * k8s/client.ts: the Kubernetes API client for the calls Multus makes (I/O: HTTPS, files).
 *
 * A lean path of our own, node:https with a keep-alive agent and JSON bodies, serves the kubeconfigs a node
 * has (token, tokenFile, client certificates, basic auth) and the in-cluster service account; tokens from
 * files are read again for every request, so rotated service-account tokens keep working
 * (k8snetworkplumbingwg/multus-cni#852).
 * @kubernetes/client-node is loaded lazily, only for `user.exec`, `user.auth-provider`, `cluster.proxy-url` or
 * YAML the lean reader refuses (see fallback.ts); it never loads for a plain kubeconfig.
 *
 * Every request has one deadline (default 10 s) covering credentials, connect, TLS and the body. Nothing is
 * retried here: `isTransient` lets callers apply Multus' retry policies. Errors are `KubeApiError` (a
 * CniError with the HTTP `status`, 0 without a response, and a `reason`): unreachable, timeout, 429 and 5xx
 * are code 11; 401/403 say who needs which RBAC rule; 404 and 409 carry the API server's message unchanged
 * (callers compose Multus' texts from it). Names are validated before they reach a URL; an invalid name is a
 * NotFound without a request, as the API server would answer. No header, token, key or password is logged.
 * Tested by test/unit/k8s/k8s.test.ts, test/k8s/cluster.test.ts (a real kube-apiserver).
 */
import { readFileSync } from 'node:fs';
import { CniCode, CniError, messageOf } from '../base/errors.ts';
import { inClusterConfig, loadKubeconfigFile } from './kubeconfig-files.ts';
import type { ClientConfig } from './kubeconfig.ts';
import { redactSecrets } from '../base/log.ts';
import type { Logger } from '../base/log.ts';
import type { FallbackSession } from './fallback.ts';
import type { Call } from './calls.ts';
import { loadFallbackModule } from './fallback-loader.ts';
import type { Transport } from './transport.ts';
import { DEFAULT_TIMEOUT_MS, httpStatusOf } from './types.ts';
import { changesDevices, claimDevicesPatchCall } from './claim-devices.ts';
import {
  claimDevicesApplyCall,
  eventCall,
  invalidName,
  nadCall,
  nodeCall,
  podCall,
  resourceClaimCall,
  resourceSliceCall,
  resourceSliceListCall,
  transportError,
} from './calls.ts';
import { Credentials, createTransport, decode, openNode, requestOptions, send, withDeadline } from './transport.ts';
import type { RequestAuth, Wire } from './transport.ts';
import { fitsFetch, openFetch, sendFetch } from './fetch.ts';
import { type OpenStream, type WatchHandlers, drain, pump, streamCall } from './watch.ts';
import { statusError } from './calls.ts';
import { bunRuntime } from '../base/bun.ts';
import { parseServer } from './kubeconfig.ts';
import type { ServerAddress } from './kubeconfig.ts';
import type { CallOptions, ClientInfo, DraObject, EventInput, KubeClient, Nad, Pod } from './types.ts';
import type { SliceWriter, WatchClient } from './types.ts';
import type { FallbackModule } from './fallback-loader.ts';
import type { Env } from '../cni/request.ts';

// ---------------------------------------------------------------------------------------------------------------
// The client

const str = (v: unknown): string => (typeof v === 'string' ? v : '');

function authKind(cfg: ClientConfig): string {
  if (cfg.fallback?.auth) return cfg.fallback.reason;
  const a = cfg.auth;
  if (a.tokenFile) return 'tokenFile';
  if (a.token) return 'token';
  if (a.username !== undefined || a.password !== undefined) return 'basic';
  if (cfg.tls.certData || cfg.tls.certFile) return 'client-certificate';
  return 'anonymous';
}

/** How long one page of an informer's list may take (k8s/watch.ts: the watches have no overall deadline). */
const LIST_TIMEOUT_MS = 60_000;

/** A kubeconfig file's config again when its bytes changed since the last load (undefined: unchanged). */
type Reload = () => Promise<{ cfg: ClientConfig; session: FallbackSession | undefined } | undefined>;

class Client implements KubeClient, WatchClient, SliceWriter {
  #requests = 0;
  #info!: ClientInfo;
  /** Created by the first request that needs node:https (a few ms to load; a DEL may need no request). */
  private transport: Transport | undefined;
  /** On Bun, the server for fetch (k8s/fetch.ts); undefined under Node and for a fallback user's proxy. */
  private fetchAddr: ServerAddress | undefined;
  private creds!: Credentials;
  private cfg!: ClientConfig;
  private session: FallbackSession | undefined;
  readonly reloadKubeconfig: (() => Promise<boolean>) | undefined;

  constructor(
    cfg: ClientConfig,
    session: FallbackSession | undefined,
    private readonly timeoutMs: number,
    private readonly log: Logger,
    reload?: Reload,
  ) {
    this.use(cfg, session);
    if (reload) {
      this.reloadKubeconfig = async () => {
        const next = await reload();
        if (next) this.use(next.cfg, next.session);
        return next !== undefined;
      };
    }
  }

  /** Serves with `cfg` from now on (a request in flight finishes with the one it started with). */
  private use(cfg: ClientConfig, session: FallbackSession | undefined): void {
    this.cfg = cfg;
    this.session = session;
    this.creds = new Credentials(cfg, session, this.log);
    this.fetchAddr = bunRuntime() && !cfg.fallback?.proxy ? parseServer(cfg.server) : undefined;
    this.close();
    this.#info = {
      source: cfg.source,
      path: cfg.path,
      server: cfg.server,
      auth: authKind(cfg),
      fallback: cfg.fallback !== undefined,
    };
    if (cfg.namespace !== undefined) this.#info.namespace = cfg.namespace;
  }

  get info(): ClientInfo {
    return this.#info;
  }

  get requestCount(): number {
    return this.#requests;
  }

  getPod(namespace: string, name: string, opts?: CallOptions): Promise<Pod> {
    return this.run<Pod>(podCall('get', namespace, name), opts);
  }

  getNad(namespace: string, name: string, opts?: CallOptions): Promise<Nad> {
    return this.run<Nad>(nadCall(namespace, name), opts);
  }

  updatePodStatus(pod: Pod, opts?: CallOptions): Promise<Pod> {
    return this.run<Pod>(podCall('update', pod.metadata.namespace, pod.metadata.name, pod), opts);
  }

  async createEvent(event: EventInput, opts?: CallOptions): Promise<void> {
    await this.run<unknown>(eventCall(event), opts);
  }

  getResourceClaim(namespace: string, name: string, opts?: CallOptions): Promise<DraObject> {
    return this.run<DraObject>(resourceClaimCall(namespace, name), opts);
  }

  async applyClaimDevices(
    namespace: string,
    name: string,
    fieldManager: string,
    devices: unknown[],
    opts?: CallOptions,
  ): Promise<void> {
    // a clear goes by the patch: it must also remove what an earlier fallback wrote (an Update, which an apply
    // of the empty list leaves in place)
    const write = { namespace, name, fieldManager, devices };
    if (devices.length === 0) return this.patchClaimDevices(write, opts);
    try {
      await this.run<unknown>(claimDevicesApplyCall(namespace, name, fieldManager, devices), opts);
    } catch (e) {
      if (httpStatusOf(e) !== 422) throw e;
      await this.patchClaimDevices(write, opts); // k8s/claim-devices.ts says why
    }
  }

  /** The apply's fallback: read, merge, JSON patch guarded by the resourceVersion; a write that lost a race is retried. */
  private async patchClaimDevices(
    w: { namespace: string; name: string; fieldManager: string; devices: unknown[] },
    opts?: CallOptions,
  ): Promise<void> {
    const { namespace, name, fieldManager, devices } = w;
    for (let attempt = 1; ; attempt++) {
      const claim = await this.getResourceClaim(namespace, name, opts);
      if (!changesDevices(claim, fieldManager, devices)) return;
      try {
        await this.run<unknown>(claimDevicesPatchCall(claim, fieldManager, devices), opts);
        return;
      } catch (e) {
        const status = httpStatusOf(e);
        if (attempt >= 3 || (status !== 409 && status !== 422)) throw e;
      }
    }
  }

  async listResourceSlices(nodeName: string, driver: string, opts?: CallOptions): Promise<DraObject[]> {
    const call = resourceSliceListCall(nodeName, driver);
    const list = await this.run<{ items?: unknown }>(call, opts);
    if (!Array.isArray(list?.items)) {
      throw new CniError(CniCode.Internal, `the API server answered ${call.path} without an "items" array`);
    }
    return list.items as DraObject[];
  }

  async getNodeUid(name: string, opts?: CallOptions): Promise<string> {
    const node = await this.run<{ metadata?: { uid?: unknown } }>(nodeCall(name), opts);
    const uid = node?.metadata?.uid;
    if (typeof uid !== 'string' || uid === '') throw new CniError(CniCode.Internal, `node ${name} has no uid`);
    return uid;
  }

  createResourceSlice(slice: DraObject, opts?: CallOptions): Promise<DraObject> {
    return this.run<DraObject>(resourceSliceCall('create', str(slice.metadata?.name), slice), opts);
  }

  updateResourceSlice(slice: DraObject, opts?: CallOptions): Promise<DraObject> {
    return this.run<DraObject>(resourceSliceCall('update', str(slice.metadata?.name), slice), opts);
  }

  async deleteResourceSlice(name: string, opts?: CallOptions): Promise<void> {
    await this.run<unknown>(resourceSliceCall('delete', name), opts);
  }

  /** One page of a list (`path` with its query), as raw JSON: an informer's LIST, not counted in requestCount. */
  listPage<T>(resource: string, path: string): Promise<T> {
    return this.run<T>(streamCall(resource, path), { timeoutMs: LIST_TIMEOUT_MS }, false);
  }

  /**
   * A watch (`path` with watch=true in its query; k8s/watch.ts): resolves with its abort once the API server
   * answers 200, then hands `on` its events; rejects as the client's other requests do (KubeApiError: a refusal's
   * status, or 0 without an answer). Not counted in requestCount.
   */
  async watch(resource: string, path: string, on: WatchHandlers): Promise<() => void> {
    const c = streamCall(resource, path);
    try {
      const auth = await withDeadline(this.creds.forRequest(), this.timeoutMs);
      const s = await this.open(c, auth, this.timeoutMs);
      if (s.status !== 200) throw statusError(s.status, await drain(s), c, this.cfg);
      return pump(s, on);
    } catch (err) {
      throw transportError(err, c, this.cfg, this.timeoutMs);
    }
  }

  private open(c: Call, auth: RequestAuth, timeoutMs: number): Promise<OpenStream> {
    if (this.fetchAddr && fitsFetch(auth)) return openFetch(this.fetchAddr, c, auth, timeoutMs);
    this.transport ??= createTransport(this.cfg, this.session);
    return openNode(this.transport, requestOptions(this.transport, c, auth, undefined), timeoutMs);
  }

  close(): void {
    this.transport?.agent.destroy();
    this.transport = undefined;
  }

  /** fetch on Bun when it can carry the request, else node:http(s) with a keep-alive agent. */
  private send(c: Call, auth: RequestAuth, body: Buffer | undefined, timeoutMs: number): Promise<Wire> {
    if (this.fetchAddr && fitsFetch(auth)) return sendFetch(this.fetchAddr, c, auth, body, timeoutMs);
    this.transport ??= createTransport(this.cfg, this.session);
    return send(this.transport, requestOptions(this.transport, c, auth, body), body, timeoutMs);
  }

  private async run<T>(c: Call, opts: CallOptions | undefined, counted = true): Promise<T> {
    const invalid = invalidName(c);
    if (invalid) throw invalid;
    const timeoutMs = opts?.timeoutMs ?? this.timeoutMs;
    const start = performance.now();
    try {
      const auth = await withDeadline(this.creds.forRequest(), timeoutMs);
      const body = c.body === undefined ? undefined : Buffer.from(JSON.stringify(c.body));
      if (counted) this.#requests++;
      const wire = await this.send(c, auth, body, Math.max(1, timeoutMs - (performance.now() - start)));
      this.log.debug(`k8s: ${c.method} ${c.path} -> ${wire.status} (${(performance.now() - start).toFixed(1)} ms)`);
      return decode<T>(wire, c, this.cfg);
    } catch (err) {
      const e = transportError(err, c, this.cfg, timeoutMs);
      if (e.status === 0) this.log.debug(`k8s: ${c.method} ${c.path} failed: ${e.msg}`);
      throw e;
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// loadKubeClient

export interface LoadKubeClientOptions {
  /** The `kubeconfig` key of 00-multus.conf ('' for none). */
  kubeconfig: string;
  /** The kubeconfig's context to use instead of its current-context (`kubectl multus --context`). */
  context?: string;
  /** The process environment (KUBERNETES_SERVICE_HOST / _PORT select the in-cluster config). */
  env: Env;
  timeoutMs?: number;
  log: Logger;
  /** The service-account directory (tests); default /var/run/secrets/kubernetes.io/serviceaccount. */
  serviceAccountDir?: string;
  /** Loads the client-node fallback (tests count or forbid it); default `loadFallbackModule`. */
  loadFallback?: () => Promise<FallbackModule>;
}

/** Multus' text for a kubeconfig it cannot use. */
const contextError = (path: string, err: unknown): CniError =>
  new CniError(
    CniCode.Internal,
    `GetK8sClient: failed to get context for the kubeconfig ${path}: ${redactSecrets(messageOf(err))}`,
    { cause: err },
  );

async function resolveConfig(
  o: LoadKubeClientOptions,
  loadFallback: () => Promise<FallbackModule>,
): Promise<ClientConfig | undefined> {
  if (o.kubeconfig) {
    try {
      return await loadKubeconfigFile(o.kubeconfig, {
        parseYaml: async (text) => (await loadFallback()).parseYaml(text),
        ...(o.context ? { context: o.context } : {}),
      });
    } catch (err) {
      throw contextError(o.kubeconfig, err);
    }
  }
  let found: ReturnType<typeof inClusterConfig>;
  try {
    found = inClusterConfig(o.env, o.serviceAccountDir);
  } catch (err) {
    throw new CniError(CniCode.Internal, `GetK8sClient: failed to get the in-cluster config: ${messageOf(err)}`, {
      cause: err,
    });
  }
  for (const w of found?.warnings ?? []) o.log.warn(`GetK8sClient: ${w}`);
  return found?.config;
}

async function openSession(
  cfg: ClientConfig,
  loadFallback: () => Promise<FallbackModule>,
): Promise<FallbackSession | undefined> {
  if (!cfg.fallback) return undefined;
  try {
    return (await loadFallback()).openKubeconfig(cfg.path, cfg.contextName);
  } catch (err) {
    throw contextError(cfg.path, err);
  }
}

const bytesOf = (path: string): Buffer | undefined => {
  try {
    return readFileSync(path);
  } catch {
    return undefined;
  }
};

/**
 * For a kubeconfig with an inline token: its config again once the file's bytes differ from the last ones used.
 * `bytes` were read before the first load, so a write in between shows as a change. A file that cannot be used
 * yet (missing, half-written by a writer that does not rename) is no change: the next look tries again.
 */
function reloader(o: LoadKubeClientOptions, loadFallback: () => Promise<FallbackModule>, bytes: Buffer | undefined) {
  let last = bytes;
  return async () => {
    const now = bytesOf(o.kubeconfig);
    if (now === undefined || (last !== undefined && now.equals(last))) return undefined;
    try {
      const cfg = await resolveConfig(o, loadFallback);
      if (!cfg) return undefined;
      const session = await openSession(cfg, loadFallback);
      last = now;
      return { cfg, session };
    } catch {
      return undefined;
    }
  };
}

/**
 * Multus' GetK8sClient: a kubeconfig path → that file (a CniError 999 naming it when it cannot be used); else
 * KUBERNETES_SERVICE_HOST and _PORT → the in-cluster config; else undefined (no Kubernetes). client-node is
 * loaded only when the kubeconfig needs it. A kubeconfig with an inline token can be read again
 * (`reloadKubeconfig`: the thin plugin's answer to a token rotated under it, docs/install.md "Upgrade").
 */
export async function loadKubeClient(
  o: LoadKubeClientOptions,
): Promise<(KubeClient & WatchClient & SliceWriter) | undefined> {
  const loadFallback = o.loadFallback ?? loadFallbackModule;
  const bytes = o.kubeconfig ? bytesOf(o.kubeconfig) : undefined;
  const cfg = await resolveConfig(o, loadFallback);
  if (!cfg) return undefined;
  const session = await openSession(cfg, loadFallback);
  const reload = o.kubeconfig && cfg.auth.token !== undefined ? reloader(o, loadFallback, bytes) : undefined;
  const client = new Client(cfg, session, o.timeoutMs ?? DEFAULT_TIMEOUT_MS, o.log, reload);
  o.log.debug(
    `GetK8sClient: ${client.info.source} ${client.info.path}, server ${client.info.server}, auth ${client.info.auth}`,
  );
  return client;
}
