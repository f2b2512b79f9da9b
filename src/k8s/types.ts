/**
 * k8s/types.ts: what the Kubernetes client deals in (the objects it reads and writes, the client interface) and
 * its error, `KubeApiError`: a CniError with the HTTP status (0 without a response) and the API's reason.
 * `isTransient` is the one rule for what a caller may retry.
 * Tested by test/unit/k8s/k8s.test.ts (isTransient, httpStatusOf).
 */
import { CniCode, CniError } from '../base/errors.ts';
import type { CniCodeValue } from '../base/errors.ts';
import type { ClientConfig } from './kubeconfig.ts';

// ---------------------------------------------------------------------------------------------------------------
// Types

export interface Pod {
  metadata: {
    name: string;
    namespace: string;
    uid: string;
    resourceVersion?: string;
    annotations?: Record<string, string>;
  };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
  [k: string]: unknown;
}

export interface Nad {
  metadata: { name: string; namespace: string; annotations?: Record<string, string> };
  spec?: { config?: string };
}

/** A DRA object (resource.k8s.io/v1 ResourceClaim or ResourceSlice) as the API sends it; read by devices/dra.ts. */
export interface DraObject {
  metadata?: { name?: string; namespace?: string; [k: string]: unknown };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
  [k: string]: unknown;
}

export interface EventInput {
  /**
   * The involved object: a Pod, or just its metadata; with `kind: 'Node'`, a node (metadata: namespace `default`,
   * where kubelet records node events, the node's name, and its name again as uid, as kubelet does).
   */
  pod: { metadata: { namespace: string; name: string; uid: string; resourceVersion?: string } };
  kind?: 'Pod' | 'Node';
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
  /**
   * The event's name (default `<pod>.<unix nanos in hex>`, as client-go names it). A name derived from what is
   * reported makes the report once only: the API server refuses a second create of it (409) while the first lives.
   */
  name?: string;
}

export interface CallOptions {
  /** This call's deadline instead of the client's (e.g. 250 ms per GetPod attempt, docs/behaviour.md#pod-lookup). */
  timeoutMs?: number;
  /** getPod: the UID the caller expects; a cache (the daemon's informer) answers only a pod with it. */
  uid?: string;
  /** getPod: ask the API server, not a cache (the caller knows the cached copy is older than it needs). */
  fresh?: boolean;
  /**
   * getPod through a cache (the daemon's pod informer), once it is synced, when it does not hold the pod (with
   * `uid`): 'wait' gives its watch a moment to deliver it before asking the API server (ADD: the pod may be
   * seconds old); 'only' takes the miss as NotFound (DEL: a pod of this node the watch no longer has is gone).
   * Go Multus' GetPod does the same with its informer (docs/resident.md, "Informers"). The lean client ignores it.
   */
  cacheMiss?: 'wait' | 'only';
}

/** What the daemon's informers ask of the lean client besides a KubeClient's calls (k8s/watch.ts). */
export interface WatchClient {
  /** One page of a list (`path` with its query), as raw JSON. */
  listPage<T>(resource: string, path: string): Promise<T>;
  /** A watch of `path`: its abort once the API server answered 200 (a refusal rejects with its status). */
  watch(
    resource: string,
    path: string,
    on: { event(type: string, object: unknown): void; done(err?: unknown): void },
  ): Promise<() => void>;
}

export interface KubeClient {
  getPod(namespace: string, name: string, opts?: CallOptions): Promise<Pod>;
  getNad(namespace: string, name: string, opts?: CallOptions): Promise<Nad>;
  /** PUT .../pods/<name>/status with the pod (its resourceVersion); a stale one is a 409 KubeApiError. */
  updatePodStatus(pod: Pod, opts?: CallOptions): Promise<Pod>;
  /** GET of a ResourceClaim (resource.k8s.io/v1). */
  getResourceClaim(namespace: string, name: string, opts?: CallOptions): Promise<DraObject>;
  /** LIST of ResourceSlices with `spec.nodeName` and `spec.driver` field selectors (each unless ''). */
  listResourceSlices(nodeName: string, driver: string, opts?: CallOptions): Promise<DraObject[]>;
  /** Server-side apply of a ResourceClaim's status.devices as `fieldManager` (KEP-4817 network data). */
  applyClaimDevices(
    namespace: string,
    name: string,
    fieldManager: string,
    devices: unknown[],
    opts?: CallOptions,
  ): Promise<void>;
  /** POST .../events, source component "multus"; best effort: callers ignore its errors. */
  createEvent(event: EventInput, opts?: CallOptions): Promise<void>;
  /** HTTP requests sent so far (a NotFound for an invalid name sends none). */
  readonly requestCount: number;
  /** Where the client talks to and how it authenticates; no secrets. */
  readonly info: ClientInfo;
  /** Closes idle keep-alive connections (a resident daemon calls it; a CLI process need not). */
  close(): void;
  /**
   * A client of a kubeconfig file with an inline token: reads the file again and, when its bytes changed since it
   * was loaded (an upgrade's new DaemonSet pod wrote a new token), uses it from now on; true then. Absent on other
   * clients (a token file is read for every request anyway).
   */
  reloadKubeconfig?(): Promise<boolean>;
}

/**
 * What the DRA driver asks besides a KubeClient's calls (dra/slice-sync.ts): its Node's UID (the slices' owner) and
 * its ResourceSlices written. The lean client has them; the informers' client does not.
 */
export interface SliceWriter {
  /** GET of a Node: its UID. */
  getNodeUid(name: string, opts?: CallOptions): Promise<string>;
  createResourceSlice(slice: DraObject, opts?: CallOptions): Promise<DraObject>;
  /** PUT with the slice's metadata.resourceVersion; a stale one is a 409 KubeApiError. */
  updateResourceSlice(slice: DraObject, opts?: CallOptions): Promise<DraObject>;
  /** DELETE; a slice already gone is a 404 KubeApiError. */
  deleteResourceSlice(name: string, opts?: CallOptions): Promise<void>;
}

export interface ClientInfo {
  source: ClientConfig['source'];
  path: string;
  server: string;
  namespace?: string;
  /** `token`, `tokenFile`, `client-certificate`, `basic`, `anonymous`, or the fallback reason. */
  auth: string;
  /** True when credentials or the agent come from @kubernetes/client-node. */
  fallback: boolean;
}

/** Thrown by every client call; `status` is the HTTP status (0 when no response came). */
export class KubeApiError extends CniError {
  readonly status: number;
  readonly reason: string;
  /** A 429's or 503's Status `details.retryAfterSeconds` (what the Retry-After header says): when to ask again. */
  retryAfterS?: number;

  constructor(code: CniCodeValue, msg: string, status: number, reason: string, cause?: unknown) {
    super(code, msg, cause === undefined ? {} : { cause });
    this.status = status;
    this.reason = reason;
  }
}
Object.defineProperty(KubeApiError.prototype, 'name', { value: 'KubeApiError', enumerable: false });

/** The HTTP status an API error carries (KubeApiError, or a fake with `status`), or undefined for other failures. */
export function httpStatusOf(err: unknown): number | undefined {
  const status = (err as { status?: unknown } | null)?.status;
  return typeof status === 'number' ? status : undefined;
}

/**
 * The one retry rule: an API answer of 429 or 5xx, or a request that got no answer (status 0: timeout,
 * connection refused or reset, unreachable) which the client marked code 11. A TLS or client error (status 0,
 * another code) and anything that is not an API error are final.
 */
export function isTransient(err: unknown): boolean {
  const status = httpStatusOf(err);
  if (status === undefined) return false;
  if (status === 0) return (err as { code?: unknown }).code === CniCode.TryAgainLater;
  return status === 429 || status >= 500;
}

export const DEFAULT_TIMEOUT_MS = 10_000;
export const MAX_BODY_BYTES = 32 << 20;
