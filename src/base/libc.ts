/**
 * base/libc.ts: the libc call Node's API lacks, through Bun's FFI (`bun:ffi`), loaded once per process on first
 * use (about 1 ms: Bun compiles the call stubs). Bun's FFI needs the JIT: the thin plugin runs without it (the
 * launcher's roleEnv, docs/archive/performance.md), and there, as under Node (the sources under vitest), there is none:
 * callers fall back as their comments say. Used for a namespace's type (cni/netns.ts) and to drop an installed
 * executable's pages from the page cache (install/files.ts).
 */
import { createRequire } from 'node:module';

export interface Libc {
  ioctl(fd: number, request: number, arg: number): number;
  /** posix_fadvise(2): 0 or the error number (it does not set errno) */
  fadvise(fd: number, offset: number, len: number, advice: number): number;
}

/** posix_fadvise's advice: the file's clean pages may leave the page cache. */
export const POSIX_FADV_DONTNEED = 4;

/** The part of Bun's `bun:ffi` used here. */
interface BunFfi {
  dlopen(
    path: string,
    symbols: Record<string, { args: string[]; returns: string }>,
  ): { symbols: { ioctl: Libc['ioctl']; posix_fadvise: Libc['fadvise'] } };
}

let loaded: Libc | null | undefined;

export function libc(): Libc | null {
  if (loaded !== undefined) return loaded;
  loaded = null;
  // without the JIT (the launcher's setting for the thin plugin) loading it would fail after ~0.4 ms
  if (!process.versions.bun || process.env.BUN_JSC_useJIT === '0') return loaded;
  try {
    const ffi = createRequire(__filename)('bun:ffi') as BunFfi;
    const { symbols } = ffi.dlopen('libc.so.6', {
      ioctl: { args: ['i32', 'u64', 'u64'], returns: 'i32' },
      posix_fadvise: { args: ['i32', 'i64', 'i64', 'i32'], returns: 'i32' },
    });
    loaded = {
      ioctl: (fd, req, arg) => symbols.ioctl(fd, req, arg),
      fadvise: (fd, off, len, advice) => symbols.posix_fadvise(fd, off, len, advice),
    };
  } catch {
    // no FFI
  }
  return loaded;
}
