/**
 * daemon/queue.ts: the order requests run in (no I/O).
 *
 * Requests with the same key (the CNI_CONTAINERID) run one after another in arrival order; different keys run
 * in parallel, at most `limit` at once (0 = no limit), the rest wait first-come first-served. A request waiting
 * behind its own container's earlier request holds no slot, so one slow container never blocks the others.
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

export function createQueue(limit: number): RequestQueue {
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
        try {
          return await fn();
        } finally {
          release();
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
