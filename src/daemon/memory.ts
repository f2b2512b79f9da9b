/**
 * daemon/memory.ts: garbage collected when a busy period ends (I/O: the runtime's collector).
 *
 * JavaScriptCore collects when its heap has grown by a fraction of itself, and the allocator keeps freed pages for
 * reuse: after a burst of calls the daemon would sit at the burst's memory until the next burst. Once no request
 * has been pending for `idleMs`, one full collection and Bun's shrink return that memory (docs/resident.md,
 * "Memory"); a daemon that is never idle for that long is left to the collector's own pace. Under Node (tests)
 * there is no `Bun` and nothing is collected.
 */
import type { RequestQueue } from './queue.ts';

interface BunMemory {
  gc(force: boolean): void;
  shrink?(): void;
}

/** The runtime's full collection and shrink, or nothing outside Bun. */
export function runtimeCollect(): void {
  const bun = (globalThis as { Bun?: BunMemory }).Bun;
  if (!bun) return;
  bun.gc(true);
  bun.shrink?.();
}

/**
 * The queue, with `collect` called once no request has been pending for `idleMs` after one ended (not again
 * until another request ends). `stop()` clears the timer.
 */
export function collectWhenIdle(
  queue: RequestQueue,
  collect: () => void = runtimeCollect,
  idleMs = 1000,
): RequestQueue & { stop(): void } {
  let timer: NodeJS.Timeout | undefined;
  const arm = (): void => {
    if (timer) clearTimeout(timer);
    timer = setTimeout(() => {
      timer = undefined;
      if (queue.pending() === 0) collect();
    }, idleMs);
    timer.unref?.();
  };
  return {
    run<T>(key: string, fn: () => Promise<T>): Promise<T> {
      const result = queue.run(key, fn);
      void result.then(arm, arm);
      return result;
    },
    pending: () => queue.pending(),
    idle: () => queue.idle(),
    keys: () => queue.keys(),
    stop() {
      if (timer) clearTimeout(timer);
      timer = undefined;
    },
  };
}
