/**
 * base/files.ts: path components that are safe to join, and atomic writes (modes, temp file then rename, errors
 * that name the path) in fresh temp directories.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { assertSafeComponent, backgroundSyncs, writeFileAtomic } from '../../../src/base/files.ts';
import { thrown } from '../../helpers/errors.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'multus-ts-cache-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

const modeOf = (path: string): number => statSync(path).mode & 0o777;

// ---------------------------------------------------------------------------------------------------------------

describe('assertSafeComponent', () => {
  it.each(['abc', 'eth0', 'a.b', '...', 'net-1_x', '3f2a9c0d'])('accepts %j', (value) => {
    expect(() => assertSafeComponent(value, 'container ID')).not.toThrow();
  });

  it.each([
    ['', 'container ID "" cannot be used in a cache file name'],
    ['.', 'container ID "." cannot be used'],
    ['..', 'container ID ".." cannot be used'],
    ['/', 'container ID "/" cannot be used'],
    ['a/b', 'container ID "a/b" cannot be used'],
    ['../etc', 'container ID "../etc" cannot be used'],
    ['a\0b', 'container ID "a\\u0000b" cannot be used'],
  ])('rejects %j with code 4', (value, message) => {
    const err = thrown(() => assertSafeComponent(value, 'container ID'));
    expect(err.code).toBe(4);
    expect(err.msg).toContain(message);
    expect(err.msg).toContain('must not be empty, "." or "..", or contain "/" or NUL');
  });
});

describe('writeFileAtomic', () => {
  it('creates parent directories 0700 and the file 0600 by default', () => {
    const path = join(dir, 'a', 'b', 'file');
    writeFileAtomic(path, 'hello');
    expect(readFileSync(path, 'utf8')).toBe('hello');
    expect(modeOf(path)).toBe(0o600);
    expect(modeOf(join(dir, 'a'))).toBe(0o700);
    expect(modeOf(join(dir, 'a', 'b'))).toBe(0o700);
  });

  it('applies an explicit mode exactly and replaces an existing file', () => {
    const path = join(dir, 'file');
    writeFileSync(path, 'old content that is longer', { mode: 0o644 });
    writeFileAtomic(path, Buffer.from([1, 2, 3]), 0o640);
    expect(readFileSync(path)).toEqual(Buffer.from([1, 2, 3]));
    expect(modeOf(path)).toBe(0o640);
  });

  it('sets the mode exactly even under a restrictive umask', () => {
    const old = process.umask(0o077);
    try {
      writeFileAtomic(join(dir, 'shared'), 'x', 0o644);
    } finally {
      process.umask(old);
    }
    expect(modeOf(join(dir, 'shared'))).toBe(0o644);
  });

  it("'background': the complete file is in place at once, its fsync runs on and backgroundSyncs waits for it", async () => {
    const fds = () => readdirSync('/proc/self/fd').length;
    const before = fds();
    const path = join(dir, 'bg');
    writeFileAtomic(path, 'contents', 0o600, { durable: 'background' });
    expect(readFileSync(path, 'utf8')).toBe('contents');
    expect(readdirSync(dir)).toEqual(['bg']);
    expect(fds(), 'the file stays open until its fsync ends').toBe(before + 1);
    await backgroundSyncs(dir);
    expect(fds(), 'closed once the fsync ended').toBe(before);
    await backgroundSyncs(join(dir, 'elsewhere')); // nothing pending there
  });

  it("'none' and 'fsync' close the file before they return", () => {
    const before = readdirSync('/proc/self/fd').length;
    writeFileAtomic(join(dir, 'n'), 'x', 0o600, { durable: 'none' });
    writeFileAtomic(join(dir, 'f'), 'y');
    expect(readdirSync('/proc/self/fd').length).toBe(before);
    expect(readFileSync(join(dir, 'n'), 'utf8') + readFileSync(join(dir, 'f'), 'utf8')).toBe('xy');
  });

  it('leaves no temp file behind after many writes', () => {
    for (let i = 0; i < 5; i++) writeFileAtomic(join(dir, `f${i % 2}`), `v${i}`);
    expect(readdirSync(dir).sort()).toEqual(['f0', 'f1']);
    expect(readFileSync(join(dir, 'f0'), 'utf8')).toBe('v4');
  });

  it('fails with code 5 naming the path and removes its temp file when the rename fails', () => {
    const target = join(dir, 'target');
    mkdirSync(target); // renaming a file onto a directory fails
    const err = thrown(() => writeFileAtomic(target, 'x'));
    expect(err.code).toBe(5);
    expect(err.msg).toContain(`cannot write ${target}: `);
    expect(err.msg).toContain('check that its directory is writable');
    expect(readdirSync(dir)).toEqual(['target']);
  });

  it('fails with code 5 when the parent is a regular file', () => {
    writeFileSync(join(dir, 'plain'), '');
    const err = thrown(() => writeFileAtomic(join(dir, 'plain', 'x'), 'x'));
    expect(err.code).toBe(5);
    expect(err.msg).toContain(`cannot write ${join(dir, 'plain', 'x')}`);
  });
});
