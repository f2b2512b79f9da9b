/**
 * base/libc.ts: the libc call Node's API lacks, through Bun's FFI (`bun:ffi`), loaded once per process on first
 * use (about 1 ms: Bun compiles the call stubs). Bun's FFI needs the JIT: the thin plugin runs without it (the
 * launcher's roleEnv, docs/performance.md), and there, as under Node (the sources under vitest), there is none:
 * callers fall back as their comments say. Used for a namespace's type (cni/netns.ts).
 */
import { createRequire } from 'node:module';

export interface Libc {
  ioctl(fd: number, request: number, arg: number): number;
}

/** The part of Bun's `bun:ffi` used here. */
interface BunFfi {
  dlopen(
    path: string,
    symbols: Record<string, { args: string[]; returns: string }>,
  ): { symbols: { ioctl: Libc['ioctl'] } };
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
    });
    loaded = { ioctl: (fd, req, arg) => symbols.ioctl(fd, req, arg) };
  } catch {
    // no FFI
  }
  return loaded;
}
