/**
 * host/stdio.ts: the plugin process's stdin, stdout and stderr as file descriptors (I/O).
 *
 * The thin plugin reads its config and writes its answer and log lines with plain read(2)/write(2) calls instead
 * of process.stdin/stdout/stderr: on Bun those are Node streams implemented in JavaScript, and touching the first
 * one costs a call ~35 million instructions, more than the rest of a delegates-only ADD
 * (docs/archive/performance.md, "Where the thin plugin's time went"). A descriptor another process left non-blocking
 * answers EAGAIN: reads then wait a millisecond and try again, writes too (synchronously: a log line must be out
 * before the next step), so nothing is lost or reordered.
 */
import { readSync, writeSync } from 'node:fs';

const CHUNK = 64 * 1024;

const codeOf = (e: unknown): string | undefined => (e as NodeJS.ErrnoException | undefined)?.code;

/** Everything readable from `fd` until end of file; undefined, the rest unread, once more than `max` bytes came. */
export async function readAll(fd: number, max = Infinity): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for (;;) {
    const buf = Buffer.allocUnsafe(CHUNK);
    let n: number;
    try {
      n = readSync(fd, buf, 0, CHUNK, null);
    } catch (e) {
      if (codeOf(e) !== 'EAGAIN') throw e;
      await new Promise((resolve) => setTimeout(resolve, 1));
      continue;
    }
    if (n === 0) return Buffer.concat(chunks);
    size += n;
    if (size > max) return undefined; // issue 28: an endless stdin must not grow to the OOM killer
    chunks.push(buf.subarray(0, n));
  }
}

const pause = new Int32Array(new SharedArrayBuffer(4));

/**
 * Writes all of `data` to `fd`. A reader that went away (EPIPE: the runtime gave up on us) is not an error there
 * is anyone left to tell about, unless `quietEpipe` is false (the answer on stdout: issue 28, one line on stderr);
 * other errors are thrown.
 */
export function writeAll(fd: number, data: string | Buffer, { quietEpipe = true } = {}): void {
  const buf = typeof data === 'string' ? Buffer.from(data) : data;
  for (let off = 0; off < buf.length;) {
    try {
      off += writeSync(fd, buf, off, buf.length - off);
    } catch (e) {
      const code = codeOf(e);
      if (code === 'EPIPE' && quietEpipe) return;
      if (code !== 'EAGAIN') throw e;
      Atomics.wait(pause, 0, 0, 1);
    }
  }
}
