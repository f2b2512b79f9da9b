/**
 * daemon/caller-http.ts: the wire of `"delegateExec": "caller"` (docs/archive/resident-protocol.md, "Delegates run by the
 * shim"): the streamed answer of a `/cni` call whose shim runs its delegates, and `POST /cni/exec`, where the shim
 * posts what each one did. The channel behind both is daemon/caller-exec.ts.
 *
 * A streamed answer is `200` with `X-Multus-Exec: 1` and one JSON object per line: `{"exec": {...}}` for each
 * delegate to run, then `{"status": <the HTTP status the call would have had>, "answer": <its body>}`. It starts
 * with the first exec: a call that runs no delegate is answered as any other.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { CniCode, CniError } from '../base/errors.ts';
import { isObject } from '../base/json.ts';
import type { Env } from '../cni/request.ts';
import type { CallerChannel, ExecReply } from './caller-exec.ts';
import { EXEC_HEADER } from './caller-exec.ts';
import { decodeBodyObject, errorBody, readRequest, send } from './wire.ts';

/** `POST /cni/exec`'s body limit: the shim sends at most 2 MiB of stdout and 256 KiB of stderr, in base64. */
const MAX_REPLY_BYTES = 4 * 1024 * 1024;

/** The answer of a call that may stream: lines once `send` was called, else one body as before. */
export interface StreamedAnswer {
  send(line: string): boolean;
  /** Ends the answer: `body` with `status`, or as the last line of the stream once it started. */
  finish(status: number, body: string): void;
}

export function streamedAnswer(res: ServerResponse): StreamedAnswer {
  let started = false;
  return {
    send(line) {
      if (res.destroyed || res.writableEnded) return false;
      if (!started) {
        started = true;
        res.writeHead(200, { 'Content-Type': 'application/x-ndjson', [EXEC_HEADER]: '1', Connection: 'close' });
      }
      res.write(line);
      return true;
    },
    finish(status, body) {
      if (!started) return send(res, status, body);
      if (res.destroyed || res.writableEnded) return;
      res.end(`{"status":${status},"answer":${body === '' ? 'null' : body}}\n`);
    },
  };
}

/** The environment a shim's request carries (its whole own): strings only, the rest dropped. */
export function shimEnvOf(value: Record<string, unknown>): Env {
  const env: Env = {};
  if (!isObject(value.env)) return env;
  for (const [k, v] of Object.entries(value.env)) if (typeof v === 'string') env[k] = v;
  return env;
}

function replyOf(body: Buffer): ExecReply {
  const value = decodeBodyObject(body);
  if (typeof value.call !== 'string' || typeof value.id !== 'number') {
    throw new CniError(CniCode.DecodingFailure, 'an exec reply needs "call" (a string) and "id" (a number)');
  }
  return value as unknown as ExecReply;
}

/** `POST /cni/exec`: the shim's answer to one exec of a call still running (404 when none waits for it). */
export async function serveExecReply(
  req: IncomingMessage,
  res: ServerResponse,
  channels: ReadonlyMap<string, CallerChannel>,
): Promise<void> {
  const reply = await readRequest(req, res, MAX_REPLY_BYTES, replyOf);
  if (!reply) return;
  if (channels.get(reply.call)?.deliver(reply)) return send(res, 200, '');
  const error = new CniError(CniCode.InvalidConfig, `no call waits for exec ${reply.id} of "${reply.call}"`, {
    details: 'the call ended (or the daemon gave up on the exec) before its answer came',
  });
  send(res, 404, errorBody(error));
}
