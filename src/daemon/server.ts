/**
 * daemon/server.ts: the resident daemon's HTTP API on a unix socket (I/O at the edge, handle() inside).
 *
 * Multus thick's wire format (docs/resident.md): `POST /cni` with `{"env": {...}, "config": <base64>}` runs one
 * CNI call through `handle()` and answers 200 `{"Result": <result or null>}`, or a non-200 status with the CNI
 * error JSON (its code kept): 400 when the request itself is at fault (codes 1-8: version, env, decoding,
 * config, netns), 500 otherwise. `GET`/`POST /healthz` answer 200 when the daemon is ready, else 503.
 * `GET`/`POST /readyz` (Multus HEAD #1525; its shim polls it before ADD, CHECK, GC and STATUS, and /healthz
 * before DEL) answers as /healthz while serving and 500 once the daemon is stopping; /healthz stays 200 while it
 * drains, so DELs still come in. Both Multus' shims and ours only look at "200 or not" and at the body, so the
 * split 400/500 is for people and logs.
 *
 * The request's CNI_* variables are layered over the daemon's own environment (what delegates inherit), as
 * Multus thick builds the call from the request's CNI_* values and runs delegates with its own environment.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer } from 'node:http';
import { CniCode, CniError, messageOf } from '../base/errors.ts';
import type { Logger } from '../base/log.ts';
import { CURRENT_VERSION } from '../base/versions.ts';
import type { CniAnswer } from '../host/handle.ts';
import { handle } from '../host/handle.ts';
import type { Host } from '../host/host.ts';
import { serveDelegate } from './delegate-http.ts';
import type { Metrics } from './metrics.ts';
import type { RequestQueue } from './queue.ts';

type Env = Record<string, string | undefined>;

export const MAX_BODY_BYTES = 1024 * 1024;

export interface ServerDeps {
  host: Host;
  /** The daemon's own environment: what delegates inherit besides the request's CNI_* variables. */
  daemonEnv: Env;
  log: Logger;
  queue: RequestQueue;
  /** Undefined when ready to serve, else why not (healthz answers 503 with it). */
  notReady(): string | undefined;
  /** True once SIGTERM came: the daemon drains (still serving) and /readyz answers 500. */
  stopping?(): boolean;
  metrics?: Metrics;
  maxBodyBytes?: number;
  /** The multus config the daemon serves; when set, `/delegate` (hot-plug, docs/hotplug.md) is served. */
  multusConf?: () => Buffer;
}

/** A decoded `/cni` request. */
export interface CniRequestBody {
  env: Env;
  stdin: Buffer;
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Decodes and checks a `/cni` body (pure); a CniError says what is wrong. */
export function decodeCniBody(body: Buffer, daemonEnv: Env): CniRequestBody {
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch (e) {
    throw new CniError(CniCode.DecodingFailure, `the request body is not valid JSON: ${messageOf(e)}`, {
      details: 'send {"env": {"CNI_COMMAND": ...}, "config": "<the network config, base64>"}',
    });
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new CniError(CniCode.DecodingFailure, 'the request body must be a JSON object with "env" and "config"');
  }
  const { env, config } = value as Record<string, unknown>;
  if (typeof env !== 'object' || env === null || Array.isArray(env)) {
    throw new CniError(CniCode.InvalidEnv, 'the request\'s "env" must be an object of strings (the CNI_* variables)');
  }
  const merged: Env = {};
  for (const [k, v] of Object.entries(daemonEnv)) if (!k.startsWith('CNI_')) merged[k] = v;
  for (const [k, v] of Object.entries(env as Record<string, unknown>)) {
    if (!k.startsWith('CNI_')) continue; // the shim sends its whole environment; only the call's variables count
    if (typeof v !== 'string') throw new CniError(CniCode.InvalidEnv, `the request's env "${k}" must be a string`);
    merged[k] = v;
  }
  let stdin = Buffer.alloc(0);
  if (config !== undefined && config !== null) {
    if (typeof config !== 'string' || !BASE64.test(config)) {
      throw new CniError(CniCode.DecodingFailure, 'the request\'s "config" must be the network config bytes in base64');
    }
    stdin = Buffer.from(config, 'base64');
  }
  return { env: merged, stdin };
}

/** 400 when the caller's request or config is at fault, 500 for failures while running it. */
export function statusOf(code: number): number {
  return code >= 1 && code <= 8 ? 400 : 500;
}

export function errorBody(error: CniError): string {
  return JSON.stringify(error.toJSON(CURRENT_VERSION));
}

export function send(res: ServerResponse, status: number, body: string): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(body),
    Connection: 'close', // one request per connection, as Multus' daemon
  });
  res.end(body);
}

export function readBody(req: IncomingMessage, limit: number): Promise<Buffer | 'too-large'> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > limit) {
      req.resume();
      resolve('too-large');
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    req.on('data', (c: Buffer) => {
      if (over) return;
      size += c.length;
      if (size > limit) {
        over = true;
        chunks.length = 0;
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(over ? 'too-large' : Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/** A distinct queue key for calls without a container (STATUS, GC, bad requests): they run in parallel. */
let anonymous = 0;

export function createCniServer(deps: ServerDeps): Server {
  const limit = deps.maxBodyBytes ?? MAX_BODY_BYTES;

  async function serveCni(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = performance.now();
    const body = await readBody(req, limit);
    if (body === 'too-large') {
      const error = new CniError(CniCode.InvalidConfig, `the request body is larger than ${limit} bytes`, {
        details: 'a network config this large is not accepted; check what the runtime sends',
      });
      send(res, 413, errorBody(error));
      return;
    }
    let call: CniRequestBody;
    try {
      call = decodeCniBody(body, deps.daemonEnv);
    } catch (e) {
      const error = e instanceof CniError ? e : new CniError(CniCode.Internal, messageOf(e));
      send(res, statusOf(error.code), errorBody(error));
      return;
    }
    const command = call.env.CNI_COMMAND ?? '';
    const containerId = call.env.CNI_CONTAINERID ?? '';
    const key = containerId === '' ? `\0${anonymous++}` : containerId;
    const done = deps.metrics?.requestStarted(command);
    let answer: CniAnswer;
    try {
      answer = await deps.queue.run(key, () => handle(deps.host, call));
    } finally {
      done?.();
    }
    const seconds = (performance.now() - started) / 1000;
    deps.metrics?.requestFinished(command, answer.exitCode === 0 ? 'success' : 'error', seconds);
    if (answer.exitCode === 0) {
      let result: unknown;
      try {
        result = answer.stdout.trim() === '' ? null : JSON.parse(answer.stdout);
      } catch {
        result = null;
      }
      deps.log.verbose(`${command} ${containerId}: 200 in ${(seconds * 1000).toFixed(1)} ms`);
      send(res, 200, JSON.stringify({ Result: result }));
      return;
    }
    const error = answer.error ?? new CniError(CniCode.Internal, 'the call failed');
    const status = statusOf(error.code);
    deps.log.verbose(`${command} ${containerId}: ${status} code ${error.code} in ${(seconds * 1000).toFixed(1)} ms`);
    let text = errorBody(error);
    try {
      text = JSON.stringify(JSON.parse(answer.stdout)); // handle()'s error JSON (the request's cniVersion), compact
    } catch {
      // keep the rebuilt one
    }
    send(res, status, text);
  }

  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    if (deps.metrics) {
      const metrics = deps.metrics;
      res.once('finish', () => metrics.serverRequest(path, res.statusCode, req.method ?? ''));
    }
    const fail = (status: number, code: number, msg: string): void => {
      req.resume();
      send(res, status, errorBody(new CniError(code, msg)));
    };
    if (path === '/healthz' || path === '/readyz') {
      if (req.method !== 'GET' && req.method !== 'POST') {
        return fail(405, CniCode.InvalidEnv, `use GET or POST on ${path}`);
      }
      req.resume();
      if (path === '/readyz' && deps.stopping?.()) {
        const msg = 'the multus daemon is stopping: it serves the calls it is sent until its socket closes';
        send(res, 500, errorBody(new CniError(CniCode.TryAgainLater, msg)));
        return;
      }
      const why = deps.notReady();
      if (why === undefined) send(res, 200, '');
      else send(res, 503, errorBody(new CniError(CniCode.TryAgainLater, `the multus daemon is not ready: ${why}`)));
      return;
    }
    if (path === '/cni') {
      if (req.method !== 'POST') return fail(405, CniCode.InvalidEnv, 'use POST on /cni');
      serveCni(req, res).catch((e: unknown) => {
        deps.log.error(`/cni: ${messageOf(e)}`);
        send(res, 500, errorBody(new CniError(CniCode.Internal, `the multus daemon failed: ${messageOf(e)}`)));
      });
      return;
    }
    if (path === '/delegate' && deps.multusConf) {
      if (req.method !== 'POST') return fail(405, CniCode.InvalidEnv, 'use POST on /delegate');
      serveDelegate(req, res, { ...deps, multusConf: deps.multusConf, limit }).catch((e: unknown) => {
        deps.log.error(`/delegate: ${messageOf(e)}`);
        send(res, 500, errorBody(new CniError(CniCode.Internal, `the multus daemon failed: ${messageOf(e)}`)));
      });
      return;
    }
    if (path === '/delegate') {
      return fail(404, CniCode.InvalidConfig, 'the multus-ts daemon does not serve /delegate (dynamic networks)');
    }
    fail(404, CniCode.InvalidConfig, `no such path "${path}": the daemon serves /cni, /healthz and /readyz`);
  });
  server.on('clientError', (_e, socket) => socket.destroy());
  return server;
}
