/**
 * k8s/calls.ts: the calls Multus makes, as paths and messages, and the mapping of an HTTP status or a transport
 * failure to a `KubeApiError` with Multus' texts and an RBAC hint (pure).
 * Tested by test/unit/k8s/k8s.test.ts.
 */
import { readFileSync } from 'node:fs';
import { CniCode, CniError, messageOf } from '../base/errors.ts';
import { isDns1123Label, isDns1123Subdomain } from '../base/names.ts';
import type { ClientConfig } from './kubeconfig.ts';
import type { EventInput } from './types.ts';
import { KubeApiError } from './types.ts';

// ---------------------------------------------------------------------------------------------------------------
// Calls: what is asked, for paths and messages (pure)

export interface Call {
  verb: 'get' | 'update' | 'create' | 'list' | 'patch' | 'delete';
  method: 'GET' | 'PUT' | 'POST' | 'PATCH' | 'DELETE';
  group: string;
  resource: string;
  namespace: string;
  name: string;
  path: string;
  body?: unknown;
  /** Default application/json. */
  contentType?: string;
  /** A cluster-scoped object (a Node, a ResourceSlice): no namespace in its path. */
  clusterScoped?: boolean;
}

const seg = encodeURIComponent;

export function podCall(verb: 'get' | 'update', namespace: string, name: string, body?: unknown): Call {
  const status = verb === 'update' ? '/status' : '';
  const path = `/api/v1/namespaces/${seg(namespace)}/pods/${seg(name)}${status}`;
  const resource = verb === 'update' ? 'pods/status' : 'pods';
  return { verb, method: verb === 'get' ? 'GET' : 'PUT', group: '', resource, namespace, name, path, body };
}

export function nadCall(namespace: string, name: string): Call {
  const path = `/apis/k8s.cni.cncf.io/v1/namespaces/${seg(namespace)}/network-attachment-definitions/${seg(name)}`;
  return {
    verb: 'get',
    method: 'GET',
    group: 'k8s.cni.cncf.io',
    resource: 'network-attachment-definitions',
    namespace,
    name,
    path,
  };
}

const DRA_API = '/apis/resource.k8s.io/v1';

/** GET of a ResourceClaim (DRA, resource.k8s.io/v1), as Multus HEAD's draclient reads it. */
export function resourceClaimCall(namespace: string, name: string): Call {
  const path = `${DRA_API}/namespaces/${seg(namespace)}/resourceclaims/${seg(name)}`;
  return { verb: 'get', method: 'GET', group: 'resource.k8s.io', resource: 'resourceclaims', namespace, name, path };
}

/** LIST of the ResourceSlices of one driver (on one node when given), by server-side field selectors. */
export function resourceSliceListCall(nodeName: string, driver: string): Call {
  const parts = [nodeName === '' ? '' : `spec.nodeName=${nodeName}`, driver === '' ? '' : `spec.driver=${driver}`];
  const selector = parts.filter((p) => p !== '').join(',');
  const path = `${DRA_API}/resourceslices?fieldSelector=${seg(selector)}`;
  return {
    verb: 'list',
    method: 'GET',
    group: 'resource.k8s.io',
    resource: 'resourceslices',
    namespace: '',
    name: selector,
    path,
  };
}

/** GET of a Node (the DRA driver's slices name their Node as owner, by its UID). */
export function nodeCall(name: string): Call {
  const path = `/api/v1/nodes/${seg(name)}`;
  return { verb: 'get', method: 'GET', group: '', resource: 'nodes', namespace: '', name, path, clusterScoped: true };
}

/** Create, update (PUT with its resourceVersion) or delete of a ResourceSlice (the DRA driver's, dra/slice-sync.ts). */
export function resourceSliceCall(verb: 'create' | 'update' | 'delete', name: string, body?: unknown): Call {
  const method = verb === 'create' ? 'POST' : verb === 'update' ? 'PUT' : 'DELETE';
  const path = `${DRA_API}/resourceslices${verb === 'create' ? '' : `/${seg(name)}`}`;
  const call: Call = { verb, method, group: 'resource.k8s.io', resource: 'resourceslices', namespace: '', name, path };
  call.clusterScoped = true;
  if (body !== undefined) call.body = body;
  return call;
}

/**
 * Server-side apply of a ResourceClaim's `status.devices` as `fieldManager` (KEP-4817): the entries this manager
 * applied before and does not list now are removed; other managers' entries are not touched.
 */
export function claimDevicesApplyCall(namespace: string, name: string, fieldManager: string, devices: unknown[]): Call {
  const query = `fieldManager=${seg(fieldManager)}&force=true`;
  const path = `${DRA_API}/namespaces/${seg(namespace)}/resourceclaims/${seg(name)}/status?${query}`;
  const body = {
    apiVersion: 'resource.k8s.io/v1',
    kind: 'ResourceClaim',
    metadata: { name, namespace },
    status: { devices },
  };
  return {
    verb: 'patch',
    method: 'PATCH',
    group: 'resource.k8s.io',
    resource: 'resourceclaims/status',
    namespace,
    name,
    path,
    body,
    contentType: 'application/apply-patch+yaml', // JSON is YAML
  };
}

/** An event about a Node, as kubelet records one: in namespace `default`, the node's name as its uid. */
export function nodeEvent(nodeName: string, type: EventInput['type'], reason: string, message: string): EventInput {
  return {
    kind: 'Node',
    pod: { metadata: { namespace: 'default', name: nodeName, uid: nodeName } },
    type,
    reason,
    message,
  };
}

/**
 * client-go's legacy recorder: name `<pod>.<unix nanos in hex>`, source component "multus", count 1. Date
 * has milliseconds only, and ADD posts its events together: the sub-millisecond part is a per-process
 * sequence, so two events of one call never share a name (the API server would refuse the second, 409).
 */
let eventSeq = 0n;

let nodeName: string | undefined;

/** This host's name, read as Go's os.Hostname reads it (node:os is one more built-in for a call to load). */
function hostName(): string {
  if (nodeName === undefined) {
    try {
      nodeName = readFileSync('/proc/sys/kernel/hostname', 'utf8').trim();
    } catch {
      nodeName = '';
    }
    if (!nodeName) nodeName = process.getBuiltinModule('node:os').hostname();
  }
  return nodeName;
}

export function eventBody(e: EventInput, now: Date = new Date()): Record<string, unknown> {
  const m = e.pod.metadata;
  const stamp = now.toISOString().replace(/\.\d{3}Z$/, 'Z');
  const nanos = BigInt(now.getTime()) * 1_000_000n + (eventSeq++ % 1_000_000n);
  const kind = e.kind ?? 'Pod';
  const involvedObject: Record<string, unknown> = {
    kind,
    ...(kind === 'Pod' ? { namespace: m.namespace } : {}), // a Node is cluster-scoped
    name: m.name,
    uid: m.uid,
    apiVersion: 'v1',
  };
  if (m.resourceVersion) involvedObject.resourceVersion = m.resourceVersion;
  return {
    apiVersion: 'v1',
    kind: 'Event',
    metadata: { name: e.name ?? `${m.name}.${nanos.toString(16)}`, namespace: m.namespace },
    involvedObject,
    reason: e.reason,
    message: e.message,
    type: e.type,
    source: { component: 'multus' },
    firstTimestamp: stamp,
    lastTimestamp: stamp,
    count: 1,
    reportingComponent: 'multus',
    reportingInstance: hostName(),
  };
}

export function eventCall(e: EventInput): Call {
  const ns = e.pod.metadata.namespace;
  const path = `/api/v1/namespaces/${seg(ns)}/events`;
  return {
    verb: 'create',
    method: 'POST',
    group: '',
    resource: 'events',
    namespace: ns,
    name: '',
    path,
    body: eventBody(e),
  };
}

const qualified = (c: Call): string =>
  c.group ? `${c.resource.split('/')[0]}.${c.group}` : (c.resource.split('/')[0] ?? c.resource);
export const target = (c: Call): string =>
  c.verb === 'list'
    ? `list ${c.resource} (fieldSelector ${c.name})`
    : c.clusterScoped
      ? `${c.verb} ${c.resource} ${c.name}`
      : `${c.verb} ${c.resource} ${c.name ? `${c.namespace}/${c.name}` : `in namespace ${c.namespace}`}`;

/** Names that cannot exist: the API server would answer NotFound, so no request is sent. */
export function invalidName(c: Call): KubeApiError | undefined {
  if (c.verb === 'list') return undefined; // cluster-wide, selector values are escaped in the query
  const nameOk = c.verb === 'create' || isDns1123Subdomain(c.name);
  if ((c.clusterScoped === true || isDns1123Label(c.namespace)) && nameOk) return undefined;
  const what = c.verb === 'create' ? `namespace "${c.namespace}"` : `${qualified(c)} "${c.name}"`;
  return new KubeApiError(CniCode.Internal, `${what} not found`, 404, 'NotFound');
}

// ---------------------------------------------------------------------------------------------------------------
// Error mapping (pure)

const DEFAULT_REASON: Readonly<Record<number, string>> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  409: 'Conflict',
  410: 'Gone',
  413: 'RequestEntityTooLarge',
  415: 'UnsupportedMediaType',
  422: 'Invalid',
  429: 'TooManyRequests',
  500: 'InternalError',
  503: 'ServiceUnavailable',
  504: 'Timeout',
};

/** The API server's Status object (`{kind: "Status", reason, message}`), when the body is one. */
function statusObjectOf(body: Buffer): { reason?: string; message?: string; retryAfterS?: number } {
  try {
    const s = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
    if (s && typeof s === 'object' && s.kind === 'Status') {
      const after = (s.details as { retryAfterSeconds?: unknown } | undefined)?.retryAfterSeconds;
      return {
        ...(typeof s.reason === 'string' && s.reason ? { reason: s.reason } : {}),
        ...(typeof s.message === 'string' && s.message ? { message: s.message } : {}),
        ...(typeof after === 'number' && Number.isInteger(after) && after > 0 ? { retryAfterS: after } : {}),
      };
    }
  } catch {
    // not JSON (a proxy's page): the status code speaks
  }
  return {};
}

/** Who authenticates, for 401/403 messages. */
export function describeUser(cfg: ClientConfig): string {
  if (cfg.source === 'in-cluster') return `the pod's service account (token ${cfg.path}/token)`;
  if (!cfg.userName) return `the anonymous user of context "${cfg.contextName}" in kubeconfig ${cfg.path}`;
  return `user "${cfg.userName}" of kubeconfig ${cfg.path}`;
}

function rbacHint(c: Call): string {
  const groups = c.resource === 'events' ? '"", "events.k8s.io"' : `"${c.group}"`;
  return `apiGroups: [${groups}], resources: ["${c.resource}"], verbs: ["${c.verb}"]`;
}

function authError(
  status: number,
  reason: string,
  apiMsg: string | undefined,
  c: Call,
  cfg: ClientConfig,
): KubeApiError {
  const who = describeUser(cfg);
  if (status === 403) {
    const msg =
      `${apiMsg ?? 'forbidden'}: ${who} may not ${target(c)}; it needs RBAC permission (a ClusterRole rule ` +
      `${rbacHint(c)} bound to that identity, as in Multus' ClusterRole)`;
    return new KubeApiError(CniCode.Internal, msg, status, reason);
  }
  const msg =
    `${apiMsg ?? 'Unauthorized'}: the API server at ${cfg.server} rejected the credentials of ${who} ` +
    `(${target(c)}): the token or client certificate is invalid or expired; a token copied into a kubeconfig stops ` +
    'working when its service account token is rotated or expires (k8snetworkplumbingwg/multus-cni#852): use tokenFile, which is read on every request';
  return new KubeApiError(CniCode.Internal, msg, status, reason);
}

/** A non-2xx answer as a KubeApiError. */
export function statusError(status: number, body: Buffer, c: Call, cfg: ClientConfig): KubeApiError {
  const s = statusObjectOf(body);
  const reason = s.reason ?? DEFAULT_REASON[status] ?? (status >= 500 ? 'InternalError' : 'Unknown');
  if (status === 401 || status === 403) return authError(status, reason, s.message, c, cfg);
  if (status === 404 || status === 409) {
    const msg =
      s.message ??
      (status === 404 ? `${qualified(c)} "${c.name}" not found` : `conflict on ${qualified(c)} "${c.name}"`);
    return new KubeApiError(CniCode.Internal, msg, status, reason);
  }
  const transient = status === 429 || status >= 500;
  const msg = `${s.message ?? `HTTP ${status}`} (${target(c)}: HTTP ${status} from ${cfg.server})`;
  const err = new KubeApiError(transient ? CniCode.TryAgainLater : CniCode.Internal, msg, status, reason);
  if (s.retryAfterS !== undefined) err.retryAfterS = s.retryAfterS;
  return err;
}

const NET_REASON: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'ConnectionRefused',
  ECONNRESET: 'ConnectionReset',
  EPIPE: 'ConnectionReset',
  ECONNABORTED: 'ConnectionReset',
  ETIMEDOUT: 'Timeout',
  EHOSTUNREACH: 'Unreachable',
  ENETUNREACH: 'Unreachable',
  EHOSTDOWN: 'Unreachable',
  ENETDOWN: 'Unreachable',
  EAI_AGAIN: 'Unreachable',
  ENOTFOUND: 'Unreachable',
  EADDRNOTAVAIL: 'Unreachable',
};

const isTlsCode = (code: string): boolean =>
  /^(?:ERR_TLS_|ERR_SSL_|ERR_OSSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_)/.test(code);

/** An error without a response (connect, TLS, reset, our deadline) as a KubeApiError. */
export function transportError(err: unknown, c: Call, cfg: ClientConfig, timeoutMs: number): KubeApiError {
  if (err instanceof KubeApiError) return err;
  const code = String((err as { code?: unknown }).code ?? '');
  if (err instanceof DeadlineError) {
    const msg = `no answer from the Kubernetes API server at ${cfg.server} within ${timeoutMs} ms (${target(c)})`;
    return new KubeApiError(CniCode.TryAgainLater, msg, 0, 'Timeout', err);
  }
  if (isTlsCode(code)) {
    const ca = cfg.tls.caData
      ? 'certificate-authority-data'
      : cfg.tls.caFile
        ? `CA file ${cfg.tls.caFile}`
        : 'the system CA roots';
    const msg = `TLS with the Kubernetes API server at ${cfg.server} failed (${target(c)}): ${messageOf(err)} (verified with ${ca})`;
    return new KubeApiError(CniCode.Internal, msg, 0, 'TLSError', err);
  }
  const reason = NET_REASON[code];
  const msg = `cannot reach the Kubernetes API server at ${cfg.server} (${target(c)}): ${messageOf(err)}`;
  if (reason) return new KubeApiError(CniCode.TryAgainLater, msg, 0, reason, err);
  if (err instanceof CniError) return new KubeApiError(err.code, err.msg, 0, 'ClientError', err);
  return new KubeApiError(CniCode.Internal, msg, 0, 'ClientError', err);
}

export class DeadlineError extends Error {}
