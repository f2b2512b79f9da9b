/**
 * k8s/watch.ts: a watch through the lean client (I/O: Bun's fetch, or node:http(s) under Node): one long-lived GET
 * whose body is a stream of JSON lines `{"type": ..., "object": ...}`. The same credentials, TLS rules and
 * transport choice as the client's other requests (transport.ts, fetch.ts); the deadline covers the answer's
 * headers only, then an idle limit: a watch with bookmarks hears from the API server about once a minute, so a
 * stream silent for WATCH_IDLE_MS is taken as a dead connection and ended with an error. A line longer than
 * MAX_BODY_BYTES ends it too. The daemon's informers use it (src/informers/informer.ts); the thin plugin never
 * watches.
 * Tested by test/unit/informers/informer.test.ts (through a fake) and test/k8s/warm.test.ts (a real API server).
 */
import type { IncomingMessage } from 'node:http';
import type { Call } from './calls.ts';
import { DeadlineError } from './calls.ts';
import { MAX_BODY_BYTES } from './types.ts';

/** No byte for this long on a watch (bookmarks come about once a minute): the connection is taken as dead. */
export const WATCH_IDLE_MS = 5 * 60_000;

/** A response whose body is read as it comes. */
export interface OpenStream {
  status: number;
  /** The next chunk; undefined at the end. */
  read(): Promise<Uint8Array | undefined>;
  cancel(): void;
}

/** Handlers of one watch: each event, then `done` once (no error: the API server ended the watch). */
export interface WatchHandlers {
  event(type: string, object: unknown): void;
  done(err?: unknown): void;
}

/** node:http(s)'s response as an OpenStream. */
export function nodeStream(res: IncomingMessage, destroy: () => void): OpenStream {
  const it = res[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  return {
    status: res.statusCode ?? 0,
    read: async () => {
      const r = await it.next();
      return r.done ? undefined : r.value;
    },
    cancel: destroy,
  };
}

/** fetch's response as an OpenStream. */
export function fetchStream(res: Response, abort: () => void): OpenStream {
  const reader = res.body?.getReader();
  return {
    status: res.status,
    read: async () => {
      if (!reader) return undefined;
      const r = await reader.read();
      return r.done ? undefined : r.value;
    },
    cancel: () => {
      abort();
      void reader?.cancel().catch(() => undefined);
    },
  };
}

/** Whole lines of `chunk` after `carry` (what the last chunk left); returns the new carry. */
function lines(carry: string, chunk: string, each: (line: string) => void): string {
  let text = carry + chunk;
  for (let nl = text.indexOf('\n'); nl >= 0; nl = text.indexOf('\n')) {
    const line = text.slice(0, nl);
    text = text.slice(nl + 1);
    if (line.trim()) each(line);
  }
  if (text.length > MAX_BODY_BYTES) throw new Error(`a watch event larger than ${MAX_BODY_BYTES} bytes`);
  return text;
}

/**
 * Reads a 200 watch response to its end: each line parsed and handed to `on.event`, `on.done()` at the end,
 * `on.done(err)` on a failure (a broken or idle connection, a line that is not JSON). Returns the abort (after
 * which `done` is not called).
 */
export function pump(s: OpenStream, on: WatchHandlers, idleMs = WATCH_IDLE_MS): () => void {
  let over = false;
  let timer: NodeJS.Timeout | undefined;
  const finish = (err?: unknown): void => {
    if (over) return;
    over = true;
    clearTimeout(timer);
    s.cancel();
    on.done(err);
  };
  const idle = (): void => {
    clearTimeout(timer);
    timer = setTimeout(() => finish(new DeadlineError(`the watch was silent for ${idleMs / 1000} s`)), idleMs);
    timer.unref?.();
  };
  const decoder = new TextDecoder();
  const each = (line: string): void => {
    const e = JSON.parse(line) as { type?: unknown; object?: unknown };
    if (!over) on.event(String(e.type), e.object);
  };
  void (async () => {
    let carry = '';
    idle();
    for (let chunk = await s.read(); chunk !== undefined && !over; chunk = await s.read()) {
      idle();
      carry = lines(carry, decoder.decode(chunk, { stream: true }), each);
    }
    finish();
  })().catch(finish);
  return () => {
    over = true;
    clearTimeout(timer);
    s.cancel();
  };
}

/** The Call of a watch or list on `path` (for the client's error texts). */
export function streamCall(resource: string, path: string): Call {
  const selector = new URLSearchParams(path.split('?')[1] ?? '').get('fieldSelector') ?? '';
  return { verb: 'list', method: 'GET', group: '', resource, namespace: '', name: selector, path };
}

/** The body of a refused watch (its Status), at most 64 KiB. */
export async function drain(s: OpenStream): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (let c = await s.read(); c !== undefined && size < 65536; c = await s.read()) {
    chunks.push(c);
    size += c.length;
  }
  s.cancel();
  return Buffer.concat(chunks);
}
