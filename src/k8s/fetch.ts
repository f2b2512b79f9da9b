/**
 * k8s/fetch.ts: the API requests of the lean client through Bun's native `fetch` (I/O), used when the process
 * runs on Bun (build/multus) and the request needs nothing only node:https can do (a proxy agent of the client-node
 * fallback, a header with several values: fetch would join them into one line).
 *
 * Why: Bun's node:https is built on Node streams written in JavaScript; loading it and running four requests cost
 * a thin ADD ~45 million instructions and ~7 MiB, its fetch ~10 million (docs/archive/performance.md, "Where the thin
 * plugin's time went"). The rules stay those of transport.ts: the same credentials per request (tokens and
 * rotated certificate files re-read by `Credentials`), TLS verified against the kubeconfig's CA (or the system
 * roots) unless insecure-skip-tls-verify, tls-server-name as SNI and verified name, one deadline covering
 * connect, TLS and the whole body, a bounded body, no redirect followed. Bun pools the connection, so a call's
 * requests share one TLS session.
 *
 * Bun's fetch would also route requests through a proxy named by HTTP_PROXY / HTTPS_PROXY in the environment
 * (node:https never did): nothing but the CNI contract may change what the plugin does, so those variables are
 * hidden from it for the instant fetch() reads them, and put back before anything else runs.
 */
import { MAX_BODY_BYTES } from './types.ts';
import type { Call } from './calls.ts';
import { DeadlineError } from './calls.ts';
import type { ServerAddress } from './kubeconfig.ts';
import type { RequestAuth, Wire } from './transport.ts';
import { type OpenStream, fetchStream } from './watch.ts';

const PROXY_VARIABLES = ['HTTPS_PROXY', 'https_proxy', 'HTTP_PROXY', 'http_proxy', 'NO_PROXY', 'no_proxy'];

/** Whether `auth` can go through fetch: every header has one value (fetch joins repeated ones with ", "). */
export function fitsFetch(auth: RequestAuth): boolean {
  return Object.values(auth.headers).every((v) => !Array.isArray(v));
}

/** fetch() with the environment's proxy variables out of its sight (Bun reads them when fetch() is called). */
function directFetch(url: string, init: RequestInit): Promise<Response> {
  const env = process.env;
  const hidden: Record<string, string> = {};
  for (const k of PROXY_VARIABLES) {
    const v = env[k];
    if (v === undefined) continue;
    hidden[k] = v;
    delete env[k];
  }
  try {
    return fetch(url, init);
  } finally {
    Object.assign(env, hidden);
  }
}

/**
 * The body, at most `max` bytes (a larger one is an error, as in transport.ts). A body of a declared length within
 * `max` is read whole by the runtime (HTTP framing holds it to that length), without the web stream's reads in
 * JavaScript, which the interpreter-only daemon pays for on every request (docs/archive/performance.md, "The
 * daemon's CPU per pod, 2026-12-08"); a chunked one is read chunk by chunk to the bound.
 */
async function boundedBody(res: Response, max: number): Promise<Buffer> {
  const declared = Number(res.headers.get('content-length') ?? NaN);
  if (declared > max) throw new Error(`response larger than ${max} bytes`);
  if (declared >= 0) return Buffer.from(await res.arrayBuffer());
  if (!res.body) return Buffer.alloc(0);
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return Buffer.concat(chunks);
    size += value.length;
    if (size > max) {
      await reader.cancel().catch(() => undefined);
      throw new Error(`response larger than ${max} bytes`);
    }
    chunks.push(value);
  }
}

function urlOf(addr: ServerAddress, c: Call): string {
  const host = addr.hostname.includes(':') ? `[${addr.hostname}]` : addr.hostname;
  return `${addr.protocol}//${host}:${addr.port}${addr.pathPrefix}${c.path}`;
}

function tlsOf(auth: RequestAuth): Record<string, unknown> {
  const t = auth.tls;
  const out: Record<string, unknown> = { rejectUnauthorized: t.rejectUnauthorized };
  if (t.ca) out.ca = t.ca;
  if (t.cert) out.cert = t.cert;
  if (t.key) out.key = t.key;
  if (t.servername) out.serverName = t.servername;
  return out;
}

function initOf(addr: ServerAddress, c: Call, auth: RequestAuth, body: Buffer | undefined, signal: AbortSignal) {
  const headers: Record<string, string> = {
    ...(auth.headers as Record<string, string>),
    Accept: 'application/json',
    'User-Agent': 'multus-ts',
  };
  if (body) headers['Content-Type'] = c.contentType ?? 'application/json';
  const init = { method: c.method, headers, body, signal, redirect: 'manual' as const };
  const tls = addr.protocol === 'https:' ? { tls: tlsOf(auth) } : {};
  return { ...init, ...tls } as RequestInit;
}

/** `run` with a signal that aborts it after `timeoutMs` (a DeadlineError); the timer ends when `run` settles. */
async function deadlined<T>(timeoutMs: number, run: (ctl: AbortController) => Promise<T>): Promise<T> {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(new DeadlineError('deadline')), timeoutMs);
  try {
    return await run(ctl);
  } catch (err) {
    throw ctl.signal.aborted ? new DeadlineError('deadline') : err;
  } finally {
    clearTimeout(timer);
  }
}

/** One request; rejects with DeadlineError when `timeoutMs` passes before the whole body is in. */
export function sendFetch(
  addr: ServerAddress,
  c: Call,
  auth: RequestAuth,
  body: Buffer | undefined,
  timeoutMs: number,
): Promise<Wire> {
  return deadlined(timeoutMs, async (ctl) => {
    const res = await directFetch(urlOf(addr, c), initOf(addr, c, auth, body, ctl.signal));
    return { status: res.status, body: await boundedBody(res, MAX_BODY_BYTES) };
  });
}

/** A GET whose body is read as it comes (a watch); `timeoutMs` bounds the wait for the answer's headers. */
export function openFetch(addr: ServerAddress, c: Call, auth: RequestAuth, timeoutMs: number): Promise<OpenStream> {
  return deadlined(timeoutMs, async (ctl) => {
    const res = await directFetch(urlOf(addr, c), initOf(addr, c, auth, undefined, ctl.signal));
    return fetchStream(res, () => ctl.abort());
  });
}
