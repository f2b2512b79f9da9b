/**
 * base/bun.ts: the few parts of Bun's own API the per-call path uses when it runs on Bun (build/multus,
 * docs/build.md), typed here because the project compiles against Node's types; undefined under Node (the unit
 * tests run the sources there, and every user of this keeps a Node path).
 *
 * Why at all: Bun implements Node's streams in JavaScript, and the first use of one (process.stdin, process.stdout,
 * a child_process pipe, node:https) costs a compiled executable 20-40 million instructions, more than the rest of
 * a delegates-only ADD together; Bun.spawn's pipes and fetch do not use them (docs/archive/performance.md, "Where the
 * thin plugin's time went").
 */

/** A child started by `Bun.spawn`; `stdout` and `stderr` are streams when piped, else the descriptor it was given. */
export interface BunSubprocess {
  readonly pid: number;
  readonly stdout: ReadableStream<Uint8Array> | number;
  readonly stderr: ReadableStream<Uint8Array> | number;
  /** Resolves with the exit code (128 + n after signal n) once the child is reaped. */
  readonly exited: Promise<number>;
  readonly exitCode: number | null;
  readonly signalCode: string | null;
}

export interface BunSpawnOptions {
  /** The program's argv[0]; undefined: cmd[0]. */
  argv0: string | undefined;
  env: Record<string, string>;
  stdin: Uint8Array;
  /** 'pipe', or a file descriptor of ours the child gets as its own. */
  stdout: 'pipe' | number;
  stderr: 'pipe' | number;
  /** A session (and so a process group) of its own. */
  detached: boolean;
}

export interface BunRuntime {
  /** Throws synchronously (with `code`: ENOENT, EACCES, ETXTBSY...) when the program cannot be started. */
  spawn(cmd: string[], options: BunSpawnOptions): BunSubprocess;
  /** `setJITPolicy(n)`: JavaScriptCore's tier-up thresholds times n (1 = normal; Bun 1.4.2 and later). */
  readonly unsafe?: { setJITPolicy?(n: number): void };
  /** A listening unix socket (a name starting with NUL: the abstract namespace); throws (`code` EADDRINUSE...). */
  listen(options: { unix: string; socket: { open(s: { end(): void }): void; data(): void } }): BunListener;
  /** A fast non-cryptographic hash (wyhash) of `data` with `seed`. */
  hash(data: string, seed?: number): number | bigint;
}

export interface BunListener {
  /** Closes the socket (and its connections): its name is free again. */
  stop(closeActiveConnections?: boolean): void;
}

/** Bun's global when this process runs on Bun, else undefined. */
export function bunRuntime(): BunRuntime | undefined {
  return (globalThis as { Bun?: BunRuntime }).Bun;
}

/**
 * Back to JavaScriptCore's normal JIT policy. The executable starts every process with the tier-up thresholds
 * scaled up for the CNI call's short life (scripts/build-steps/compile.mjs); a role that runs for long, the daemon
 * above all, needs its hot paths compiled as usual.
 */
export function normalJitPolicy(): void {
  bunRuntime()?.unsafe?.setJITPolicy?.(1);
}
