/**
 * k8s/transport.ts: credentials per request (token files re-read so rotated tokens keep working, client
 * certificates, impersonation, the client-node fallback's credentials) and the HTTP(S) transport with one
 * deadline per request (I/O: node:http / node:https, loaded on the first request).
 * Tested by test/unit/k8s/k8s.test.ts, test/k8s/cluster.test.ts.
 */
import type * as http from 'node:http';
import type * as https from 'node:https';
import type { Agent, IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import { readFileSync, statSync } from 'node:fs';
import { CniCode, CniError, messageOf } from '../base/errors.ts';
import { parseServer } from './kubeconfig.ts';
import { readTokenFile } from './kubeconfig-files.ts';
import type { ClientConfig, ServerAddress } from './kubeconfig.ts';
import { redactSecrets } from '../base/log.ts';
import type { Logger } from '../base/log.ts';
import type { FallbackCredentials, FallbackSession } from './fallback.ts';
import type { Call } from './calls.ts';
import { DeadlineError, describeUser, statusError, target } from './calls.ts';
import { KubeApiError, MAX_BODY_BYTES } from './types.ts';
import { type OpenStream, nodeStream } from './watch.ts';

// ---------------------------------------------------------------------------------------------------------------
// Credentials per request (I/O: token and TLS files)

interface TlsOptions {
  ca?: string | Buffer;
  cert?: string | Buffer;
  key?: string | Buffer;
  rejectUnauthorized: boolean;
  servername?: string;
}

export interface RequestAuth {
  headers: Record<string, string | string[]>;
  tls: TlsOptions;
}

/**
 * File contents, read again when the file's inode, size or mtime changed (rotated certificates). A file that is
 * missing or empty for a moment (a certificate rotation swaps a symlink or truncates first:
 * k8snetworkplumbingwg/multus-cni#1483) keeps
 * the last good contents; with none yet it is code 11, so the runtime retries instead of failing for good.
 */
class FileCache {
  private readonly entries = new Map<string, { stamp: string; data: Buffer }>();

  constructor(private readonly log: Logger) {}

  read(path: string): Buffer {
    const hit = this.entries.get(path);
    let data: Buffer;
    let stamp: string;
    try {
      const st = statSync(path);
      stamp = `${st.ino}:${st.size}:${st.mtimeMs}`;
      if (hit?.stamp === stamp) return hit.data;
      data = readFileSync(path);
      if (data.length === 0) throw new Error('the file is empty');
    } catch (err) {
      if (hit) {
        this.log.warn(`k8s: cannot read ${path} (${messageOf(err)}); using its previous contents`);
        return hit.data;
      }
      const msg = `cannot read ${path} (${messageOf(err)}): if it is being rotated, a retry will find it`;
      throw new KubeApiError(CniCode.TryAgainLater, msg, 0, 'ClientError', err);
    }
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

export class Credentials {
  private readonly files: FileCache;
  private lastToken: string | undefined;

  constructor(
    private readonly cfg: ClientConfig,
    private readonly session: FallbackSession | undefined,
    private readonly log: Logger,
  ) {
    this.files = new FileCache(log);
  }

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

export interface Wire {
  status: number;
  body: Buffer;
}

type HttpModule = typeof http | typeof https;

/** Connections to the API server at once (per client); the rest wait for one. */
const MAX_SOCKETS = 8;

export interface Transport {
  module: HttpModule;
  agent: Agent;
  addr: ServerAddress;
}

export function createTransport(cfg: ClientConfig, session: FallbackSession | undefined): Transport {
  const addr = parseServer(cfg.server);
  if (!addr)
    throw new CniError(CniCode.Internal, `server "${cfg.server}" is not a URL of the form https://host[:port][/path]`);
  const module: HttpModule =
    addr.protocol === 'http:' ? process.getBuiltinModule('node:http') : process.getBuiltinModule('node:https');
  // At most MAX_SOCKETS connections: a resident daemon's burst of status writes then reuses a few kept-alive
  // connections instead of opening (and keeping) one TLS connection per call (docs/resident.md, "Memory").
  const agent =
    (cfg.fallback?.proxy ? session?.agent() : undefined) ??
    new module.Agent({ keepAlive: true, maxSockets: MAX_SOCKETS });
  return { module, agent, addr };
}

export function requestOptions(
  t: Transport,
  c: Call,
  auth: RequestAuth,
  body: Buffer | undefined,
): Record<string, unknown> {
  const headers: OutgoingHttpHeaders = { ...auth.headers, Accept: 'application/json', 'User-Agent': 'multus-ts' };
  if (body) {
    headers['Content-Type'] = c.contentType ?? 'application/json';
    headers['Content-Length'] = body.length;
  }
  const { protocol, hostname, port, pathPrefix } = t.addr;
  const opts: Record<string, unknown> = {
    protocol,
    hostname,
    port,
    path: `${pathPrefix}${c.path}`,
    method: c.method,
    headers,
    agent: t.agent,
  };
  if (protocol === 'https:') Object.assign(opts, auth.tls);
  return opts;
}

/** A response body of at most `max` bytes; a larger one destroys the response with an error naming `what`. */
export function onBoundedBody(res: IncomingMessage, max: number, what: string, end: (body: Buffer) => void): void {
  const chunks: Buffer[] = [];
  let size = 0;
  res.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size > max) res.destroy(new Error(`${what} larger than ${max} bytes`));
    else chunks.push(chunk);
  });
  res.on('end', () => end(Buffer.concat(chunks)));
}

function collect(res: IncomingMessage, settle: (err: Error | undefined, wire?: Wire) => void): void {
  onBoundedBody(res, MAX_BODY_BYTES, 'response', (body) => settle(undefined, { status: res.statusCode ?? 0, body }));
  res.on('error', (err) => settle(err));
  res.on('close', () => {
    if (!res.complete)
      settle(Object.assign(new Error('connection closed before the response was complete'), { code: 'ECONNRESET' }));
  });
}

/** One request; rejects with DeadlineError (after destroying the socket) when `timeoutMs` passes. */
export function send(
  t: Transport,
  opts: Record<string, unknown>,
  body: Buffer | undefined,
  timeoutMs: number,
): Promise<Wire> {
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

/** A GET whose body is read as it comes (a watch); `timeoutMs` bounds the wait for the answer's headers. */
export function openNode(t: Transport, opts: Record<string, unknown>, timeoutMs: number): Promise<OpenStream> {
  return new Promise((resolve, reject) => {
    const req = t.module.request(opts, (res) => {
      clearTimeout(timer);
      resolve(nodeStream(res, () => req.destroy()));
    });
    const timer = setTimeout(() => {
      const err = new DeadlineError('deadline');
      req.destroy(err);
      reject(err);
    }, timeoutMs);
    req.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.end();
  });
}

/** `p`, or DeadlineError after `ms` (the exec plugin of a fallback user may hang). */
export async function withDeadline<T>(p: Promise<T>, ms: number): Promise<T> {
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

export function decode<T>(wire: Wire, c: Call, cfg: ClientConfig): T {
  if (wire.status < 200 || wire.status > 299) throw statusError(wire.status, wire.body, c, cfg);
  if (wire.body.length === 0) return undefined as T;
  try {
    return JSON.parse(wire.body.toString('utf8')) as T;
  } catch (err) {
    const msg = `the API server at ${cfg.server} answered ${target(c)} with invalid JSON (HTTP ${wire.status})`;
    throw new KubeApiError(CniCode.Internal, msg, wire.status, 'InvalidResponse', err);
  }
}
