/**
 * plugin-output.ts: how build/multus (Bun) collects a plugin's stdout and stderr: two unnamed files (O_TMPFILE |
 * O_EXCL: no name, none can ever be given, gone at the last close) read once the plugin is gone, else two pipes
 * read as web streams while it runs.
 *
 * Pipes read as web streams cost a thin call about a millisecond of CPU and 0.7 MiB more of Bun's code than
 * files read once at the end (docs/archive/performance.md, "A plugin's output in files, and no worker threads"), so the
 * thin plugin uses files (`useOutputFiles`), in the cache dir its call was given: root's alone (host/prepare.ts
 * checks it before any plugin runs), so no other user can fill the file system under them or reach them, and the
 * root fs' reserve is root's. The resident daemon uses them too (daemon/main.ts): in its interpreter the streams cost
 * more CPU than the files' memory (docs/archive/performance.md, "The daemon's CPU per pod, 2026-12-08"). Where that
 * directory takes no O_TMPFILE (a file system without it), and in processes that never chose files (tests), the
 * caller reads pipes (`openOutputFiles` returns undefined). A plugin's output past `limit` is not read
 * (a pipe's was read and dropped); what a background child of the plugin writes after the plugin is gone is not
 * waited for.
 */
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';

/** Linux's O_TMPFILE (__O_TMPFILE | O_DIRECTORY); node:fs has no constant for it. */
const O_TMPFILE = 0o20200000;

/** Whether this process collects plugin output in files (the thin plugin, the daemon) or in pipes (the default). */
let filesWanted = false;

/**
 * From now on a plugin's output goes to unnamed files where the caller gives a directory: the thin plugin's choice
 * (cli.ts) and the daemon's (daemon/main.ts), whose anonymous memory while busy was 1-3 MiB higher with the files
 * on 2026-12-03, a trade made for CPU on 2026-12-08 (docs/archive/performance.md).
 */
export function useOutputFiles(): void {
  filesWanted = true;
}

export interface OutputFiles {
  stdout: number;
  stderr: number;
}

function openUnnamed(dir: string): number {
  return openSync(dir, constants.O_RDWR | constants.O_EXCL | O_TMPFILE, 0o600);
}

/** Two unnamed files in `dir` for a plugin's stdout and stderr, or undefined: pipes (not wanted, or not made). */
export function openOutputFiles(dir: string | undefined): OutputFiles | undefined {
  if (!filesWanted || dir === undefined) return undefined;
  let stdout: number | undefined;
  try {
    stdout = openUnnamed(dir);
    return { stdout, stderr: openUnnamed(dir) };
  } catch {
    if (stdout !== undefined) closeSync(stdout);
    return undefined;
  }
}

/** At most `limit` bytes of what was written to `fd`, from its start. */
export function readOutputFile(fd: number, limit: number): Buffer {
  const buf = Buffer.allocUnsafe(Math.min(fstatSync(fd).size, limit));
  let off = 0;
  while (off < buf.length) {
    const n = readSync(fd, buf, off, buf.length - off, off);
    if (n <= 0) break;
    off += n;
  }
  return buf.subarray(0, off);
}

export function closeOutputFiles(files: OutputFiles): void {
  for (const fd of [files.stdout, files.stderr]) {
    try {
      closeSync(fd);
    } catch {
      // already closed: nothing held
    }
  }
}

/** A pipe read to its end, keeping at most `limit` bytes (the rest is read and dropped, so the plugin never blocks). */
export function readBounded(stream: ReadableStream<Uint8Array>, limit: number) {
  const reader = stream.getReader();
  const chunks: Buffer[] = [];
  let left = limit;
  const done = (async () => {
    for (;;) {
      const { done: end, value } = await reader.read();
      if (end) return;
      if (left <= 0) continue;
      const part = value.length > left ? value.subarray(0, left) : value;
      left -= part.length;
      chunks.push(Buffer.from(part.buffer, part.byteOffset, part.length));
    }
  })().catch(() => undefined);
  return {
    done,
    /** What was read so far; stops reading (a background child may hold the pipe open). */
    take(): Buffer {
      reader.cancel().catch(() => undefined);
      return Buffer.concat(chunks);
    },
  };
}

/** The stream of a piped stdout or stderr (Bun gives the descriptor back for one that was a file). */
export function pipeOf(stream: ReadableStream<Uint8Array> | number): ReadableStream<Uint8Array> {
  if (typeof stream === 'number') throw new Error(`Bun.spawn gave descriptor ${stream}, not a pipe`);
  return stream;
}
