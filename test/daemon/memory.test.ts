/** daemon/memory.ts: a collection when the daemon goes idle after requests, and at most once per period while busy. */
import { describe, expect, it } from 'vitest';
import { collectGarbage, runtimeCollect } from '../../src/daemon/memory.ts';
import { createQueue } from '../../src/daemon/queue.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('collectGarbage', () => {
  it('collects once after a busy period ends, not while requests are pending, not again without requests', async () => {
    let collected = 0;
    const q = collectGarbage(createQueue(0), { collect: () => collected++, idleMs: 40, busyMs: 60_000 });
    let finish!: () => void;
    const long = q.run('a', () => new Promise<void>((r) => (finish = r)));
    await q.run('b', async () => 'b');
    await sleep(80);
    expect(collected).toBe(0); // 'a' still pending
    finish();
    await long;
    await sleep(80);
    expect(collected).toBe(1);
    await sleep(80);
    expect(collected).toBe(1);
    await q
      .run('c', async () => {
        throw new Error('a failed request counts too');
      })
      .catch(() => {});
    await sleep(80);
    expect(collected).toBe(2);
    q.stop();
  });

  it('while busy, a request that ends collects when the last collection is busyMs old; stop() cancels the idle one', async () => {
    let collected = 0;
    const q = collectGarbage(createQueue(0), { collect: () => collected++, idleMs: 60_000, busyMs: 50 });
    for (let i = 0; i < 12; i++) {
      await q.run(`k${i}`, async () => i);
      await sleep(10);
    }
    // ~12 requests over ~120 ms or more: one collection each 50 ms at most, at least one
    expect(collected).toBeGreaterThanOrEqual(1);
    expect(collected).toBeLessThanOrEqual(4);
    q.stop();
    const before = collected;
    await sleep(100);
    expect(collected).toBe(before);
    expect(q.pending()).toBe(0);
    expect(q.keys()).toBe(0);
  });

  it('outside Bun the runtime collection does nothing', () => {
    expect('Bun' in globalThis).toBe(false);
    expect(() => runtimeCollect()).not.toThrow();
  });
});
