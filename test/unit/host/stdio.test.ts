/**
 * host/stdio.ts: the thin plugin's stdin/stdout by read(2)/write(2). A runtime (or a shell before it) may hand the
 * plugin a non-blocking descriptor: reads and writes then answer EAGAIN, and nothing may be lost or cut short.
 * Named pipes stand in for the runtime's pipes (same kernel object; O_NONBLOCK set on our end).
 */
import { spawn } from 'node:child_process';
import { closeSync, constants, mkdtempSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readAll, writeAll } from '../../../src/host/stdio.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mts-stdio-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const made = (path: string) =>
  new Promise<void>((resolve, reject) => {
    const p = spawn('mkfifo', ['-m', '600', path]);
    p.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`mkfifo exited ${code}`))));
  });

describe('host/stdio.ts on non-blocking descriptors', () => {
  it('readAll waits out EAGAIN and returns every byte up to end of file', async () => {
    const path = join(dir, 'in');
    await made(path);
    const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK); // no writer yet: never blocks
    const w = openSync(path, constants.O_WRONLY); // a writer: reads now answer EAGAIN until data comes
    setTimeout(() => writeSync(w, '{"cniVersion":'), 5);
    setTimeout(() => {
      writeSync(w, '"1.0.0"}');
      closeSync(w);
    }, 15);
    try {
      expect((await readAll(fd))?.toString()).toBe('{"cniVersion":"1.0.0"}');
    } finally {
      closeSync(fd);
    }
  });

  it('writeAll writes more than a pipe holds to a slow reader, whole and in order', async () => {
    const path = join(dir, 'out');
    await made(path);
    const out = join(dir, 'copy');
    // The reader starts late, so the pipe fills and our writes answer EAGAIN first.
    const reader = spawn('sh', ['-c', `sleep 0.2; exec cat "$0" > "$1"`, path, out]);
    const ended = new Promise<number | null>((resolve) => reader.on('exit', resolve));
    const fd = openSync(path, constants.O_RDWR | constants.O_NONBLOCK);
    const data = Buffer.alloc(1024 * 1024);
    for (let i = 0; i < data.length; i++) data[i] = (i * 7 + (i >> 12)) & 0xff;
    try {
      writeAll(fd, data);
    } finally {
      closeSync(fd);
    }
    expect(await ended).toBe(0);
    expect(readFileSync(out).equals(data)).toBe(true);
  });

  it('writeAll returns quietly when the reader is gone (EPIPE)', async () => {
    const path = join(dir, 'gone');
    await made(path);
    const r = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
    const fd = openSync(path, constants.O_WRONLY | constants.O_NONBLOCK);
    closeSync(r);
    try {
      expect(() => writeAll(fd, 'answer\n')).not.toThrow();
    } finally {
      closeSync(fd);
    }
  });
});
