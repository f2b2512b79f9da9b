/**
 * daemon/wire.ts: the HTTP wire the daemon's endpoints share (`/cni`, `/delegate`): reading a body under a
 * limit, decoding Multus thick's `{"env": {...}, "config": <base64>}`, and answering JSON with one request
 * per connection. An error answers with its CNI error JSON: 400 when the caller is at fault (codes 1-8 but 5,
 * base/errors.ts `isCallerFault`), 500 otherwise.
 * Tested by test/unit/daemon/server.test.ts (bodies, limits, statuses).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { CniCode, CniError, isCallerFault, messageOf, toCniError } from '../base/errors.ts';
import { isObject } from '../base/json.ts';
import { CURRENT_VERSION } from '../base/versions.ts';
import type { Env } from '../cni/request.ts';
import type { CniCall } from '../host/handle.ts';

export const MAX_BODY_BYTES = 1024 * 1024;

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** A request body as the JSON object it must be; a CniError (6) says what is wrong. */
export function decodeBodyObject(body: Buffer): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch (e) {
    throw new CniError(CniCode.DecodingFailure, `the request body is not valid JSON: ${messageOf(e)}`, {
      details: 'send {"env": {"CNI_COMMAND": ...}, "config": "<the network config, base64>"}',
    });
  }
  if (!isObject(value)) {
    throw new CniError(CniCode.DecodingFailure, 'the request body must be a JSON object with "env" and "config"');
  }
  return value;
}

/**
 * The CNI call a decoded body asks for (pure): the request's CNI_* variables layered over the daemon's own
 * environment (what delegates inherit; the shim sends its whole environment, only the call's variables
 * count), and the config bytes.
 */
export function cniCallOf(value: Record<string, unknown>, daemonEnv: Env): CniCall {
  const { env, config } = value;
  if (!isObject(env)) {
    throw new CniError(CniCode.InvalidEnv, 'the request\'s "env" must be an object of strings (the CNI_* variables)');
  }
  const merged: Env = {};
  for (const [k, v] of Object.entries(daemonEnv)) if (!k.startsWith('CNI_')) merged[k] = v;
  for (const [k, v] of Object.entries(env)) {
    if (!k.startsWith('CNI_')) continue;
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
  return isCallerFault(code) ? 400 : 500;
}

export function errorBody(error: CniError): string {
  return JSON.stringify(error.toJSON(CURRENT_VERSION));
}

/** Answers an error: its CNI error JSON with the status its code calls for. */
export function sendError(res: ServerResponse, error: CniError): void {
  send(res, statusOf(error.code), errorBody(error));
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

function readBody(req: IncomingMessage, limit: number): Promise<Buffer | 'too-large'> {
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

/**
 * Reads a request's body under `limit` and decodes it; undefined when it was refused, the answer sent: 413 for
 * a body too large, else the decoding's CNI error.
 */
export async function readRequest<T>(
  req: IncomingMessage,
  res: ServerResponse,
  limit: number,
  decode: (body: Buffer) => T,
): Promise<T | undefined> {
  const body = await readBody(req, limit);
  if (body === 'too-large') {
    const error = new CniError(CniCode.InvalidConfig, `the request body is larger than ${limit} bytes`, {
      details: 'a network config this large is not accepted; check what the runtime sends',
    });
    send(res, 413, errorBody(error));
    return undefined;
  }
  try {
    return decode(body);
  } catch (e) {
    sendError(res, toCniError(e));
    return undefined;
  }
}
