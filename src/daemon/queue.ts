/**
 * daemon/queue.ts: the order requests run in (no I/O but a timer).
 *
 * Requests with the same key (the CNI_CONTAINERID) run one after another in arrival order; different keys run
 * in parallel, at most `limit` at once (0 = no limit), the rest wait first-come first-served. A request waiting
 * behind its own container's earlier request holds no slot, so one slow container never blocks the others.
 * With `holdMs`, a request gives its slot back after that long even while it still runs: the bound then shapes
 * a burst of quick requests, and a slow request (a hung delegate) holds a slot for `holdMs` at most.
 */
export interface RequestQueue {
  run<T>(key: string, fn: () => Promise<T>): Promise<T>;
  /** Requests accepted and not finished (running or waiting). */
  pending(): number;
  /** Resolves when nothing is pending. */
  idle(): Promise<void>;
  /** Containers with requests still queued (a container's entry is dropped once its last request ends). */
  keys(): number;
}

const BURST_REQUESTS = 8;
const BURST_HOLD_MS = 2000;

/**
 * The daemon's queue: `connectionLimit` when the config sets one (Multus' hard cap on requests at once); else at
 * most BURST_REQUESTS at once, each counted for its first BURST_HOLD_MS only. A burst of 100 ADDs then peaks at
 * 59-60 MiB of the daemon's RSS instead of 73-81 (its anonymous memory at 24-26 MiB instead of 38-46) and takes
 * 0.9-1.6 s instead of 0.7-0.9 (docs/resident.md, "Memory").
 */
export function requestQueue(connectionLimit: number): RequestQueue {
  return connectionLimit > 0 ? createQueue(connectionLimit) : createQueue(BURST_REQUESTS, BURST_HOLD_MS);
}

export function createQueue(limit: number, holdMs = 0): RequestQueue {
  const tails = new Map<string, Promise<void>>();
  const waiting: (() => void)[] = [];
  let running = 0;
  let pending = 0;
  let idleWaiters: (() => void)[] = [];

  const acquire = (): Promise<void> => {
    if (limit <= 0 || running < limit) {
      running++;
      return Promise.resolve();
    }
    return new Promise((resolve) => waiting.push(resolve));
  };
  const release = (): void => {
    const next = waiting.shift();
    if (next)
      next(); // the slot passes to the next waiter
    else running--;
  };

  return {
    run<T>(key: string, fn: () => Promise<T>): Promise<T> {
      pending++;
      const before = tails.get(key) ?? Promise.resolve();
      const result = before.then(async () => {
        await acquire();
        let held = true;
        const giveBack = (): void => {
          if (!held) return;
          held = false;
          release();
        };
        const timer = holdMs > 0 && limit > 0 ? setTimeout(giveBack, holdMs) : undefined;
        timer?.unref?.();
        try {
          return await fn();
        } finally {
          clearTimeout(timer);
          giveBack();
        }
      });
      const tail = result.then(
        () => undefined,
        () => undefined,
      );
      tails.set(key, tail);
      void tail.then(() => {
        if (tails.get(key) === tail) tails.delete(key);
        pending--;
        if (pending === 0) {
          const w = idleWaiters;
          idleWaiters = [];
          for (const f of w) f();
        }
      });
      return result;
    },
    pending: () => pending,
    keys: () => tails.size,
    idle: () => (pending === 0 ? Promise.resolve() : new Promise((resolve) => idleWaiters.push(resolve))),
  };
}
