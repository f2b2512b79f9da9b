/** daemon/queue.ts: a finished container leaves nothing behind (the daemon serves millions of container IDs). */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createQueue, requestQueue } from '../../../src/daemon/queue.ts';

describe('request queue memory', () => {
  it('drops a container once its requests have finished, ok or failed', async () => {
    const q = createQueue(2);
    const runs: Promise<unknown>[] = [];
    for (let i = 0; i < 1000; i++) {
      runs.push(q.run(`c${i}`, async () => i));
      runs.push(q.run(`c${i}`, () => Promise.reject(new Error('delegate failed'))).catch(() => 'failed'));
    }
    expect(q.keys()).toBeGreaterThan(0);
    await Promise.all(runs);
    await q.idle();
    expect(q.pending()).toBe(0);
    expect(q.keys()).toBe(0);
  });
});

/** `n` requests of different containers, each running until `open()`; `started()` counts those that began. */
function gated(q: ReturnType<typeof createQueue>, n: number) {
  let started = 0;
  const gates: (() => void)[] = [];
  const runs = Array.from({ length: n }, (_, i) =>
    q.run(`c${i}`, () => {
      started++;
      return new Promise<void>((resolve) => gates.push(resolve));
    }),
  );
  return { started: () => started, open: () => gates.splice(0).forEach((f) => f()), all: () => Promise.all(runs) };
}

describe('requests at once', () => {
  afterEach(() => vi.useRealTimers());

  it('without a connectionLimit: 8 at once in a burst, each counted for its first 2 s only', async () => {
    vi.useFakeTimers();
    const g = gated(requestQueue(0), 20);
    await vi.advanceTimersByTimeAsync(0);
    expect(g.started()).toBe(8);
    await vi.advanceTimersByTimeAsync(1999);
    expect(g.started()).toBe(8); // the first 8 still hold their slots
    await vi.advanceTimersByTimeAsync(1);
    expect(g.started()).toBe(16); // they still run, but no longer hold the next 8 back
    await vi.advanceTimersByTimeAsync(2000);
    expect(g.started()).toBe(20);
    g.open();
    await g.all();
  });

  it('a request that ends frees its slot at once', async () => {
    vi.useFakeTimers();
    const q = requestQueue(0);
    const g = gated(q, 8);
    await vi.advanceTimersByTimeAsync(0);
    let ran = false;
    const next = q.run('next', async () => void (ran = true));
    await vi.advanceTimersByTimeAsync(100);
    expect(ran).toBe(false);
    g.open();
    await g.all();
    await next;
    expect(ran).toBe(true);
  });

  it('a connectionLimit is a hard cap: a long request keeps its slot', async () => {
    vi.useFakeTimers();
    const g = gated(requestQueue(3), 4);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(g.started()).toBe(3);
    g.open();
    await vi.advanceTimersByTimeAsync(0);
    expect(g.started()).toBe(4);
    g.open();
    await g.all();
  });
});
