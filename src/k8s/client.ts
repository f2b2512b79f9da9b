/**
 * k8s.ts: the Kubernetes API client for the calls Multus makes (I/O: HTTPS, files).
 *
 * A lean path of our own, node:https with a keep-alive agent and JSON bodies, serves the kubeconfigs a node
 * has (token, tokenFile, client certificates, basic auth) and the in-cluster service account; tokens from
 * files are read again for every request, so rotated service-account tokens keep working (Multus #852).
 * @kubernetes/client-node is loaded lazily, only for `user.exec`, `user.auth-provider`, `cluster.proxy-url` or
 * YAML the lean reader refuses (see k8s-fallback.ts); it never loads for a plain kubeconfig.
 *
 * Every request has one deadline (default 10 s) covering credentials, connect, TLS and the body. Nothing is
 * retried here: `isTransient` lets callers apply Multus' retry policies. Errors are `KubeApiError` (a
 * CniError with the HTTP `status`, 0 without a response, and a `reason`): unreachable, timeout, 429 and 5xx
 * are code 11; 401/403 say who needs which RBAC rule; 404 and 409 carry the API server's message unchanged
 * (callers compose Multus' texts from it). Names are validated before they reach a URL; an invalid name is a
 * NotFound without a request, as the API server would answer. No header, token, key or password is logged.
 */
import type { Agent, IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import { readFileSync, statSync } from 'node:fs';
import { CniCode, CniError, messageOf } from '../base/errors.ts';
import type { CniCodeValue } from '../base/errors.ts';
import { inClusterConfig, isDns1123Label, isDns1123Subdomain, loadKubeconfigFile, parseServer, readTokenFile } from './kubeconfig.ts';
import type { ClientConfig, ServerAddress } from './kubeconfig.ts';
import { redactSecrets } from '../base/log.ts';
import type { Logger } from '../base/log.ts';
import type { FallbackCredentials, FallbackSession } from './fallback.ts';

export { isDns1123Label, isDns1123Subdomain } from './kubeconfig.ts';
export type { ClientConfig } from './kubeconfig.ts';

// ---------------------------------------------------------------------------------------------------------------
// Types

export interface Pod {
  metadata: { name: string; namespace: string; uid: string; resourceVersion?: string; annotations?: Record<string, string> };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
  [k: string]: unknown;
}

export interface Nad {
  metadata: { name: string; namespace: string; annotations?: Record<string, string> };
  spec?: { config?: string };
}

export interface EventInput {
  /** The involved object: a Pod, or just its metadata. */
  pod: { metadata: { namespace: string; name: string; uid: string; resourceVersion?: string } };
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

export interface CallOptions {
  /** This call's deadline instead of the client's (e.g. 250 ms per GetPod attempt, §9.1). */
  timeoutMs?: number;
}

export interface KubeClient {
  getPod(namespace: string, name: string, opts?: CallOptions): Promise<Pod>;
  getNad(namespace: string, name: string, opts?: CallOptions): Promise<Nad>;
  /** PUT .../pods/<name>/status with the pod (its resourceVersion); a stale one is a 409 KubeApiError. */
  updatePodStatus(pod: Pod, opts?: CallOptions): Promise<Pod>;
  /** POST .../events, source component "multus"; best effort: callers ignore its errors. */
  createEvent(event: EventInput, opts?: CallOptions): Promise<void>;
  /** HTTP requests sent so far (a NotFound for an invalid name sends none). */
  readonly requestCount: number;
  /** Where the client talks to and how it authenticates; no secrets. */
  readonly info: ClientInfo;
  /** Closes idle keep-alive connections (a resident daemon calls it; a CLI process need not). */
  close(): void;
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

  constructor(code: CniCodeValue, msg: string, status: number, reason: string, cause?: unknown) {
    super(code, msg, cause === undefined ? {} : { cause });
    this.status = status;
    this.reason = reason;
  }
}
Object.defineProperty(KubeApiError.prototype, 'name', { value: 'KubeApiError', enumerable: false });

export function isKubeApiError(err: unknown): err is KubeApiError {
  return err instanceof KubeApiError;
}

const TRANSIENT_STATUS: ReadonlySet<number> = new Set([429, 500, 502, 503, 504]);
const TRANSIENT_REASONS: ReadonlySet<string> = new Set(['Timeout', 'ConnectionRefused', 'ConnectionReset', 'Unreachable']);

/** Worth retrying: connection refused/reset, unreachable, timeout, 429, 500, 502, 503, 504. */
export function isTransient(err: unknown): boolean {
  if (!(err instanceof KubeApiError)) return false;
  return err.status === 0 ? TRANSIENT_REASONS.has(err.reason) : TRANSIENT_STATUS.has(err.status);
}

export const DEFAULT_TIMEOUT_MS = 10_000;
const MAX_BODY_BYTES = 32 << 20;

// ---------------------------------------------------------------------------------------------------------------
// Calls: what is asked, for paths and messages (pure)

interface Call {
  verb: 'get' | 'update' | 'create';
  method: 'GET' | 'PUT' | 'POST';
  group: string;
  resource: string;
  namespace: string;
  name: string;
  path: string;
  body?: unknown;
}

const seg = encodeURIComponent;

function podCall(verb: 'get' | 'update', namespace: string, name: string, body?: unknown): Call {
  const status = verb === 'update' ? '/status' : '';
  const path = `/api/v1/namespaces/${seg(namespace)}/pods/${seg(name)}${status}`;
  const resource = verb === 'update' ? 'pods/status' : 'pods';
  return { verb, method: verb === 'get' ? 'GET' : 'PUT', group: '', resource, namespace, name, path, body };
}

function nadCall(namespace: string, name: string): Call {
  const path = `/apis/k8s.cni.cncf.io/v1/namespaces/${seg(namespace)}/network-attachment-definitions/${seg(name)}`;
  return { verb: 'get', method: 'GET', group: 'k8s.cni.cncf.io', resource: 'network-attachment-definitions', namespace, name, path };
}

let eventSeq = 0n;

/**
 * client-go's legacy recorder: name `<pod>.<unix nanos in hex>`, source component "multus", count 1. Date
 * has milliseconds only, and ADD posts its events together: the sub-millisecond part is a per-process
 * sequence, so two events of one call never share a name (the API server would refuse the second, 409).
 */
export function eventBody(e: EventInput, now: Date = new Date()): Record<string, unknown> {
  const m = e.pod.metadata;
  const stamp = now.toISOString().replace(/\.\d{3}Z$/, 'Z');
  const nanos = BigInt(now.getTime()) * 1_000_000n + (eventSeq++ % 1_000_000n);
  const involvedObject: Record<string, unknown> = { kind: 'Pod', namespace: m.namespace, name: m.name, uid: m.uid, apiVersion: 'v1' };
  if (m.resourceVersion) involvedObject.resourceVersion = m.resourceVersion;
  return {
    apiVersion: 'v1',
    kind: 'Event',
    metadata: { name: `${m.name}.${nanos.toString(16)}`, namespace: m.namespace },
    involvedObject,
    reason: e.reason,
    message: e.message,
    type: e.type,
    source: { component: 'multus' },
    firstTimestamp: stamp,
    lastTimestamp: stamp,
    count: 1,
    reportingComponent: 'multus',
    reportingInstance: process.getBuiltinModule('node:os').hostname(),
  };
}

function eventCall(e: EventInput): Call {
  const ns = e.pod.metadata.namespace;
  const path = `/api/v1/namespaces/${seg(ns)}/events`;
  return { verb: 'create', method: 'POST', group: '', resource: 'events', namespace: ns, name: '', path, body: eventBody(e) };
}

const qualified = (c: Call): string => (c.group ? `${c.resource.split('/')[0]}.${c.group}` : (c.resource.split('/')[0] ?? c.resource));
const target = (c: Call): string => `${c.verb} ${c.resource} ${c.name ? `${c.namespace}/${c.name}` : `in namespace ${c.namespace}`}`;

/** Names that cannot exist: the API server would answer NotFound, so no request is sent. */
function invalidName(c: Call): KubeApiError | undefined {
  const nameOk = c.verb === 'create' || isDns1123Subdomain(c.name);
  if (isDns1123Label(c.namespace) && nameOk) return undefined;
  const what = c.verb === 'create' ? `namespace "${c.namespace}"` : `${qualified(c)} "${c.name}"`;
  return new KubeApiError(CniCode.Internal, `${what} not found`, 404, 'NotFound');
}

// ---------------------------------------------------------------------------------------------------------------
// Error mapping (pure)

const DEFAULT_REASON: Readonly<Record<number, string>> = {
  400: 'BadRequest', 401: 'Unauthorized', 403: 'Forbidden', 404: 'NotFound', 405: 'MethodNotAllowed',
  409: 'Conflict', 410: 'Gone', 413: 'RequestEntityTooLarge', 415: 'UnsupportedMediaType', 422: 'Invalid',
  429: 'TooManyRequests', 500: 'InternalError', 503: 'ServiceUnavailable', 504: 'Timeout',
};

/** The API server's Status object (`{kind: "Status", reason, message}`), when the body is one. */
function apiStatus(body: Buffer): { reason?: string; message?: string } {
  try {
    const s = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
    if (s && typeof s === 'object' && s.kind === 'Status') {
      return {
        ...(typeof s.reason === 'string' && s.reason ? { reason: s.reason } : {}),
        ...(typeof s.message === 'string' && s.message ? { message: s.message } : {}),
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

function authError(status: number, reason: string, apiMsg: string | undefined, c: Call, cfg: ClientConfig): KubeApiError {
  const who = describeUser(cfg);
  if (status === 403) {
    const msg = `${apiMsg ?? 'forbidden'}: ${who} may not ${target(c)}; it needs RBAC permission (a ClusterRole rule ` +
      `${rbacHint(c)} bound to that identity, as in Multus' ClusterRole)`;
    return new KubeApiError(CniCode.Internal, msg, status, reason);
  }
  const msg = `${apiMsg ?? 'Unauthorized'}: the API server at ${cfg.server} rejected the credentials of ${who} ` +
    `(${target(c)}): the token or client certificate is invalid or expired; a token copied into a kubeconfig stops ` +
    'working when its service account token is rotated or expires (Multus #852): use tokenFile, which is read on every request';
  return new KubeApiError(CniCode.Internal, msg, status, reason);
}

/** A non-2xx answer as a KubeApiError. */
export function statusError(status: number, body: Buffer, c: Call, cfg: ClientConfig): KubeApiError {
  const s = apiStatus(body);
  const reason = s.reason ?? DEFAULT_REASON[status] ?? (status >= 500 ? 'InternalError' : 'Unknown');
  if (status === 401 || status === 403) return authError(status, reason, s.message, c, cfg);
  if (status === 404 || status === 409) {
    const msg = s.message ?? (status === 404 ? `${qualified(c)} "${c.name}" not found` : `conflict on ${qualified(c)} "${c.name}"`);
    return new KubeApiError(CniCode.Internal, msg, status, reason);
  }
  const transient = status === 429 || status >= 500;
  const msg = `${s.message ?? `HTTP ${status}`} (${target(c)}: HTTP ${status} from ${cfg.server})`;
  return new KubeApiError(transient ? CniCode.TryAgainLater : CniCode.Internal, msg, status, reason);
}

const NET_REASON: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'ConnectionRefused', ECONNRESET: 'ConnectionReset', EPIPE: 'ConnectionReset', ECONNABORTED: 'ConnectionReset',
  ETIMEDOUT: 'Timeout', EHOSTUNREACH: 'Unreachable', ENETUNREACH: 'Unreachable', EHOSTDOWN: 'Unreachable',
  ENETDOWN: 'Unreachable', EAI_AGAIN: 'Unreachable', ENOTFOUND: 'Unreachable', EADDRNOTAVAIL: 'Unreachable',
};

const isTlsCode = (code: string): boolean => /^(?:ERR_TLS_|ERR_SSL_|ERR_OSSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_)/.test(code);

/** An error without a response (connect, TLS, reset, our deadline) as a KubeApiError. */
export function transportError(err: unknown, c: Call, cfg: ClientConfig, timeoutMs: number): KubeApiError {
  if (err instanceof KubeApiError) return err;
  const code = String((err as { code?: unknown }).code ?? '');
  if (err instanceof DeadlineError) {
    const msg = `no answer from the Kubernetes API server at ${cfg.server} within ${timeoutMs} ms (${target(c)})`;
    return new KubeApiError(CniCode.TryAgainLater, msg, 0, 'Timeout', err);
  }
  if (isTlsCode(code)) {
    const ca = cfg.tls.caData ? 'certificate-authority-data' : cfg.tls.caFile ? `CA file ${cfg.tls.caFile}` : 'the system CA roots';
    const msg = `TLS with the Kubernetes API server at ${cfg.server} failed (${target(c)}): ${messageOf(err)} (verified with ${ca})`;
    return new KubeApiError(CniCode.Internal, msg, 0, 'TLSError', err);
  }
  const reason = NET_REASON[code];
  const msg = `cannot reach the Kubernetes API server at ${cfg.server} (${target(c)}): ${messageOf(err)}`;
  if (reason) return new KubeApiError(CniCode.TryAgainLater, msg, 0, reason, err);
  if (err instanceof CniError) return new KubeApiError(err.code, err.msg, 0, 'ClientError', err);
  return new KubeApiError(CniCode.Internal, msg, 0, 'ClientError', err);
}

class DeadlineError extends Error {}

// ---------------------------------------------------------------------------------------------------------------
// Credentials per request (I/O: token and TLS files)

interface TlsOptions {
  ca?: string | Buffer;
  cert?: string | Buffer;
  key?: string | Buffer;
  rejectUnauthorized: boolean;
  servername?: string;
}

interface RequestAuth {
  headers: Record<string, string | string[]>;
  tls: TlsOptions;
}

/** File contents, read again when the file's inode, size or mtime changed (rotated certificates). */
class FileCache {
  private readonly entries = new Map<string, { stamp: string; data: Buffer }>();

  read(path: string): Buffer {
    const st = statSync(path);
    const stamp = `${st.ino}:${st.size}:${st.mtimeMs}`;
    const hit = this.entries.get(path);
    if (hit?.stamp === stamp) return hit.data;
    const data = readFileSync(path);
    this.entries.set(path, { stamp, data });
    return data;
  }
}

function impersonationHeaders(cfg: ClientConfig, headers: Record<string, string | string[]>): void {
  const imp = cfg.impersonate;
  if (!imp) return;
  headers['Impersonate-User'] = imp.user;
  if (imp.uid !== undefined) headers['Impersonate-Uid'] = imp.uid;
  if (imp.groups.length > 0) headers['Impersonate-Group'] = imp.groups;
  for (const [k, v] of Object.entries(imp.extra)) headers[`Impersonate-Extra-${encodeURIComponent(k)}`] = v;
}

class Credentials {
  private readonly files = new FileCache();
  private lastToken: string | undefined;

  constructor(
    private readonly cfg: ClientConfig,
    private readonly session: FallbackSession | undefined,
    private readonly log: Logger,
  ) {}

  async forRequest(): Promise<RequestAuth> {
    const auth: RequestAuth = { headers: {}, tls: this.tls() };
    const bearer = this.bearer();
    if (bearer) auth.headers.Authorization = `Bearer ${bearer}`;
    const { username, password } = this.cfg.auth;
    if (username !== undefined || password !== undefined) {
      auth.headers.Authorization = `Basic ${Buffer.from(`${username ?? ''}:${password ?? ''}`).toString('base64')}`;
    }
    impersonationHeaders(this.cfg, auth.headers);
    if (this.session && this.cfg.fallback?.auth) mergeFallback(auth, await this.fromFallback(this.session));
    return auth;
  }

  private async fromFallback(session: FallbackSession): Promise<FallbackCredentials> {
    try {
      return await session.credentials();
    } catch (err) {
      const msg = `cannot get credentials for ${describeUser(this.cfg)} from ${this.cfg.fallback?.reason}: ${messageOf(err)}`;
      throw new KubeApiError(CniCode.Internal, redactSecrets(msg), 0, 'ClientError', err);
    }
  }

  private tls(): TlsOptions {
    const t = this.cfg.tls;
    const out: TlsOptions = { rejectUnauthorized: !t.insecureSkipTlsVerify };
    const ca = t.caData ?? (t.caFile === undefined ? undefined : this.files.read(t.caFile));
    const cert = t.certData ?? (t.certFile === undefined ? undefined : this.files.read(t.certFile));
    const key = t.keyData ?? (t.keyFile === undefined ? undefined : this.files.read(t.keyFile));
    if (ca) out.ca = ca;
    if (cert) out.cert = cert;
    if (key) out.key = key;
    if (t.serverName) out.servername = t.serverName;
    return out;
  }

  /** tokenFile (read now; on failure the last good token, then `token`), else `token` (client-go's order). */
  private bearer(): string | undefined {
    const { token, tokenFile } = this.cfg.auth;
    if (tokenFile === undefined) return token;
    try {
      const t = readTokenFile(tokenFile);
      if (!t) throw new Error(`read empty token from file ${tokenFile}`);
      this.lastToken = t;
      return t;
    } catch (err) {
      const kept = this.lastToken ?? token;
      if (kept === undefined) {
        const msg = `cannot read the token of ${describeUser(this.cfg)} from ${tokenFile}: ${messageOf(err)}`;
        throw new KubeApiError(CniCode.Internal, msg, 0, 'ClientError', err);
      }
      this.log.warn(`k8s: cannot read token file ${tokenFile} (${messageOf(err)}); using the previous token`);
      return kept;
    }
  }
}

function mergeFallback(auth: RequestAuth, f: FallbackCredentials): void {
  Object.assign(auth.headers, f.headers);
  if (f.ca) auth.tls.ca = f.ca;
  if (f.cert) auth.tls.cert = f.cert;
  if (f.key) auth.tls.key = f.key;
  if (f.rejectUnauthorized !== undefined) auth.tls.rejectUnauthorized = f.rejectUnauthorized;
  if (f.servername) auth.tls.servername = f.servername;
}

// ---------------------------------------------------------------------------------------------------------------
// Transport (I/O: node:http / node:https, loaded on the first request)

interface Wire {
  status: number;
  body: Buffer;
}

type HttpModule = typeof import('node:http') | typeof import('node:https');

interface Transport {
  module: HttpModule;
  agent: Agent;
  addr: ServerAddress;
}

function createTransport(cfg: ClientConfig, session: FallbackSession | undefined): Transport {
  const addr = parseServer(cfg.server);
  if (!addr) throw new CniError(CniCode.Internal, `server "${cfg.server}" is not a URL of the form https://host[:port][/path]`);
  const module: HttpModule = addr.protocol === 'http:' ? process.getBuiltinModule('node:http') : process.getBuiltinModule('node:https');
  const agent = (cfg.fallback?.proxy ? session?.agent() : undefined) ?? new module.Agent({ keepAlive: true });
  return { module, agent, addr };
}

function requestOptions(t: Transport, c: Call, auth: RequestAuth, body: Buffer | undefined): Record<string, unknown> {
  const headers: OutgoingHttpHeaders = { ...auth.headers, Accept: 'application/json', 'User-Agent': 'multus-ts' };
  if (body) {
    headers['Content-Type'] = 'application/json';
    headers['Content-Length'] = body.length;
  }
  const { protocol, hostname, port, pathPrefix } = t.addr;
  const opts: Record<string, unknown> = { protocol, hostname, port, path: `${pathPrefix}${c.path}`, method: c.method, headers, agent: t.agent };
  if (protocol === 'https:') Object.assign(opts, auth.tls);
  return opts;
}

function collect(res: IncomingMessage, settle: (err: Error | undefined, wire?: Wire) => void): void {
  const chunks: Buffer[] = [];
  let size = 0;
  res.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) res.destroy(new Error(`response larger than ${MAX_BODY_BYTES} bytes`));
    else chunks.push(chunk);
  });
  res.on('end', () => settle(undefined, { status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
  res.on('error', (err) => settle(err));
  res.on('close', () => {
    if (!res.complete) settle(Object.assign(new Error('connection closed before the response was complete'), { code: 'ECONNRESET' }));
  });
}

/** One request; rejects with DeadlineError (after destroying the socket) when `timeoutMs` passes. */
function send(t: Transport, opts: Record<string, unknown>, body: Buffer | undefined, timeoutMs: number): Promise<Wire> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const settle = (err: Error | undefined, wire?: Wire): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (err) reject(err);
      else resolve(wire as Wire);
    };
    const req = t.module.request(opts, (res) => collect(res, settle));
    const timer = setTimeout(() => {
      const err = new DeadlineError('deadline');
      req.destroy(err);
      settle(err);
    }, timeoutMs);
    req.on('error', (err) => settle(err));
    req.end(body);
  });
}

/** `p`, or DeadlineError after `ms` (the exec plugin of a fallback user may hang). */
async function withDeadline<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DeadlineError('deadline')), ms);
  });
  try {
    return await Promise.race([p, expired]);
  } finally {
    clearTimeout(timer);
  }
}

function decode<T>(wire: Wire, c: Call, cfg: ClientConfig): T {
  if (wire.status < 200 || wire.status > 299) throw statusError(wire.status, wire.body, c, cfg);
  if (wire.body.length === 0) return undefined as T;
  try {
    return JSON.parse(wire.body.toString('utf8')) as T;
  } catch (err) {
    const msg = `the API server at ${cfg.server} answered ${target(c)} with invalid JSON (HTTP ${wire.status})`;
    throw new KubeApiError(CniCode.Internal, msg, wire.status, 'InvalidResponse', err);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The client

function authKind(cfg: ClientConfig): string {
  if (cfg.fallback?.auth) return cfg.fallback.reason;
  const a = cfg.auth;
  if (a.tokenFile) return 'tokenFile';
  if (a.token) return 'token';
  if (a.username !== undefined || a.password !== undefined) return 'basic';
  if (cfg.tls.certData || cfg.tls.certFile) return 'client-certificate';
  return 'anonymous';
}

class Client implements KubeClient {
  #requests = 0;
  readonly info: ClientInfo;
  /** Created by the first request: node:https costs a few ms to load, and a DEL may need no request. */
  private transport: Transport | undefined;
  private readonly creds: Credentials;

  constructor(
    private readonly cfg: ClientConfig,
    private readonly session: FallbackSession | undefined,
    private readonly timeoutMs: number,
    private readonly log: Logger,
  ) {
    this.creds = new Credentials(cfg, session, log);
    this.info = { source: cfg.source, path: cfg.path, server: cfg.server, auth: authKind(cfg), fallback: cfg.fallback !== undefined };
    if (cfg.namespace !== undefined) this.info.namespace = cfg.namespace;
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

  close(): void {
    this.transport?.agent.destroy();
    this.transport = undefined;
  }

  private async run<T>(c: Call, opts: CallOptions | undefined): Promise<T> {
    const invalid = invalidName(c);
    if (invalid) throw invalid;
    const timeoutMs = opts?.timeoutMs ?? this.timeoutMs;
    const start = performance.now();
    try {
      const auth = await withDeadline(this.creds.forRequest(), timeoutMs);
      const body = c.body === undefined ? undefined : Buffer.from(JSON.stringify(c.body));
      this.transport ??= createTransport(this.cfg, this.session);
      const options = requestOptions(this.transport, c, auth, body);
      this.#requests++;
      const wire = await send(this.transport, options, body, Math.max(1, timeoutMs - (performance.now() - start)));
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
// The fallback module, loaded on demand

export interface FallbackModule {
  parseYaml(text: string): unknown;
  openKubeconfig(path: string): FallbackSession;
}

/** SEA asset names (scripts/build-k8s-fallback.mjs writes both; the code cache is optional). */
export const FALLBACK_ASSET = 'k8s-fallback.cjs';
export const FALLBACK_CACHE_ASSET = 'k8s-fallback.cache';
/** Must equal the wrapper in scripts/build-k8s-fallback.mjs, or V8 rejects the code cache. */
export const wrapCommonJs = (source: string): string => `(function (exports, require, module, __filename, __dirname) {${source}\n})`;

type SeaModule = typeof import('node:sea');

/** Inside the single executable: evaluate the embedded bundle (never a file: a SEA resolves those from the cwd). */
function fallbackFromSea(sea: SeaModule): FallbackModule {
  let source: string;
  try {
    source = sea.getAsset(FALLBACK_ASSET, 'utf8');
  } catch {
    throw new Error(`this executable was built without the ${FALLBACK_ASSET} asset (see docs/kubernetes.md)`);
  }
  let cachedData: Buffer | undefined;
  try {
    cachedData = Buffer.from(sea.getRawAsset(FALLBACK_CACHE_ASSET));
  } catch {
    cachedData = undefined;
  }
  const vm = process.getBuiltinModule('node:vm');
  const { createRequire } = process.getBuiltinModule('node:module');
  const script = new vm.Script(wrapCommonJs(source), { filename: FALLBACK_ASSET, ...(cachedData ? { cachedData } : {}) });
  const mod = { exports: {} as Record<string, unknown> };
  (script.runInThisContext() as (...a: unknown[]) => void)(mod.exports, createRequire(process.execPath), mod, FALLBACK_ASSET, '.');
  return mod.exports as unknown as FallbackModule;
}

/** Outside a SEA: the built bundle beside multus.cjs, else this source tree's module (vitest, node src/...). */
const FALLBACK_SPECIFIERS = ['./k8s-fallback.cjs', './fallback.ts'];

async function importFallback(): Promise<FallbackModule> {
  const sea = process.getBuiltinModule('node:sea');
  if (sea.isSea()) return fallbackFromSea(sea);
  const errors: string[] = [];
  for (const spec of FALLBACK_SPECIFIERS) {
    try {
      const m = (await import(/* @vite-ignore */ spec)) as Partial<FallbackModule> & { default?: FallbackModule };
      return typeof m.openKubeconfig === 'function' ? (m as FallbackModule) : (m.default as FallbackModule);
    } catch (err) {
      errors.push(`${spec}: ${messageOf(err)}`);
    }
  }
  throw new Error(`cannot load the @kubernetes/client-node fallback (${errors.join('; ')})`);
}

let fallbackPromise: Promise<FallbackModule> | undefined;

/** The fallback module, loaded once per process. */
export function loadFallbackModule(): Promise<FallbackModule> {
  fallbackPromise ??= importFallback().catch((err: unknown) => {
    fallbackPromise = undefined;
    throw err;
  });
  return fallbackPromise;
}

// ---------------------------------------------------------------------------------------------------------------
// loadKubeClient

export interface LoadKubeClientOptions {
  /** The `kubeconfig` key of 00-multus.conf ('' for none). */
  kubeconfig: string;
  /** The process environment (KUBERNETES_SERVICE_HOST / _PORT select the in-cluster config). */
  env: Record<string, string | undefined>;
  timeoutMs?: number;
  log: Logger;
  /** The service-account directory (tests); default /var/run/secrets/kubernetes.io/serviceaccount. */
  serviceAccountDir?: string;
  /** Loads the client-node fallback (tests count or forbid it); default `loadFallbackModule`. */
  loadFallback?: () => Promise<FallbackModule>;
}

/** Multus' text for a kubeconfig it cannot use. */
const contextError = (path: string, err: unknown): CniError =>
  new CniError(CniCode.Internal, `GetK8sClient: failed to get context for the kubeconfig ${path}: ${redactSecrets(messageOf(err))}`, { cause: err });

async function resolveConfig(o: LoadKubeClientOptions, loadFallback: () => Promise<FallbackModule>): Promise<ClientConfig | undefined> {
  if (o.kubeconfig) {
    try {
      return await loadKubeconfigFile(o.kubeconfig, { parseYaml: async (text) => (await loadFallback()).parseYaml(text) });
    } catch (err) {
      throw contextError(o.kubeconfig, err);
    }
  }
  let found: ReturnType<typeof inClusterConfig>;
  try {
    found = inClusterConfig(o.env, o.serviceAccountDir);
  } catch (err) {
    throw new CniError(CniCode.Internal, `GetK8sClient: failed to get the in-cluster config: ${messageOf(err)}`, { cause: err });
  }
  for (const w of found?.warnings ?? []) o.log.warn(`GetK8sClient: ${w}`);
  return found?.config;
}

/**
 * Multus' GetK8sClient: a kubeconfig path → that file (a CniError 999 naming it when it cannot be used); else
 * KUBERNETES_SERVICE_HOST and _PORT → the in-cluster config; else undefined (no Kubernetes). client-node is
 * loaded only when the kubeconfig needs it.
 */
export async function loadKubeClient(o: LoadKubeClientOptions): Promise<KubeClient | undefined> {
  const loadFallback = o.loadFallback ?? loadFallbackModule;
  const cfg = await resolveConfig(o, loadFallback);
  if (!cfg) return undefined;
  let session: FallbackSession | undefined;
  if (cfg.fallback) {
    try {
      session = (await loadFallback()).openKubeconfig(cfg.path);
    } catch (err) {
      throw contextError(cfg.path, err);
    }
  }
  const client = new Client(cfg, session, o.timeoutMs ?? DEFAULT_TIMEOUT_MS, o.log);
  o.log.debug(`GetK8sClient: ${client.info.source} ${client.info.path}, server ${client.info.server}, auth ${client.info.auth}`);
  return client;
}
