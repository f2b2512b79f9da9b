/**
 * base/libc.ts: the few libc calls Node's API lacks, through Bun's FFI (`bun:ffi`), loaded once per process on first
 * use (about 1 ms: Bun compiles the call stubs). Under Node (the sources under vitest) there is none: callers fall
 * back as their comments say. Used for a namespace's type (cni/netns.ts) and file locks (base/file-lock.ts).
 */
import { createRequire } from 'node:module';

export interface Libc {
  ioctl(fd: number, request: number, arg: number): number;
  flock(fd: number, operation: number): number;
}

/** The part of Bun's `bun:ffi` used here. */
interface BunFfi {
  dlopen(
    path: string,
    symbols: Record<string, { args: string[]; returns: string }>,
  ): { symbols: { ioctl: Libc['ioctl']; flock: Libc['flock'] } };
}

let loaded: Libc | null | undefined;

export function libc(): Libc | null {
  if (loaded !== undefined) return loaded;
  loaded = null;
  if (!process.versions.bun) return loaded;
  try {
    const ffi = createRequire(__filename)('bun:ffi') as BunFfi;
    const { symbols } = ffi.dlopen('libc.so.6', {
      ioctl: { args: ['i32', 'u64', 'u64'], returns: 'i32' },
      flock: { args: ['i32', 'i32'], returns: 'i32' },
    });
    loaded = { ioctl: (fd, req, arg) => symbols.ioctl(fd, req, arg), flock: (fd, op) => symbols.flock(fd, op) };
  } catch {
    // no FFI
  }
  return loaded;
}
