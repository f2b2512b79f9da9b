/**
 * daemon/memory.ts: when the daemon collects its garbage (I/O: the runtime's collector).
 *
 * JavaScriptCore collects when its heap has grown by a fraction of itself, and the allocators keep freed pages for
 * reuse: through a stream of calls the daemon's own memory grows by 15-25 MiB, and after a burst it stays at the
 * burst's size until the next one (docs/resident.md, "Memory"). So the daemon asks for one full collection and
 * Bun's shrink when a request ends and the last one was `busyMs` ago or more (about 1-4 ms of CPU with the
 * daemon's heap, once a second at most), and once no request has been pending for `idleMs` after one ended.
 * Under Node (tests) there is no `Bun` and nothing is collected.
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

export interface CollectOptions {
  collect?: () => void;
  /** After a request ends with none pending for this long: one collection. */
  idleMs?: number;
  /** When a request ends and the last collection is this old: one collection now. */
  busyMs?: number;
}

/** The queue, with `collect` called as above; `stop()` clears the idle timer. */
export function collectGarbage(queue: RequestQueue, o: CollectOptions = {}): RequestQueue & { stop(): void } {
  const { collect = runtimeCollect, idleMs = 1000, busyMs = 1000 } = o;
  let timer: NodeJS.Timeout | undefined;
  let last = performance.now();
  const now = (): void => {
    last = performance.now();
    collect();
  };
  const ended = (): void => {
    if (performance.now() - last >= busyMs) now();
    if (timer) clearTimeout(timer);
    timer = setTimeout(() => {
      timer = undefined;
      if (queue.pending() === 0) now();
    }, idleMs);
    timer.unref?.();
  };
  return {
    run<T>(key: string, fn: () => Promise<T>): Promise<T> {
      const result = queue.run(key, fn);
      void result.then(ended, ended);
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
