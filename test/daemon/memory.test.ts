/** daemon/memory.ts: one collection once the daemon has been idle for a while after requests, not during them. */
import { describe, expect, it } from 'vitest';
import { collectWhenIdle, runtimeCollect } from '../../src/daemon/memory.ts';
import { createQueue } from '../../src/daemon/queue.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('collectWhenIdle', () => {
  it('collects once after a busy period ends, not while requests are pending, not again without requests', async () => {
    let collected = 0;
    const q = collectWhenIdle(createQueue(0), () => collected++, 40);
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
    await q.run('c', async () => {
      throw new Error('a failed request counts too');
    }).catch(() => {});
    await sleep(80);
    expect(collected).toBe(2);
    q.stop();
  });

  it('a busy period keeps pushing the collection back; stop() cancels it', async () => {
    let collected = 0;
    const q = collectWhenIdle(createQueue(0), () => collected++, 60);
    for (let i = 0; i < 5; i++) {
      await q.run(`k${i}`, async () => i);
      await sleep(20);
    }
    expect(collected).toBe(0);
    q.stop();
    await sleep(100);
    expect(collected).toBe(0);
    expect(q.pending()).toBe(0);
    expect(q.keys()).toBe(0);
  });

  it('outside Bun the runtime collection does nothing', () => {
    expect('Bun' in globalThis).toBe(false);
    expect(() => runtimeCollect()).not.toThrow();
  });
});
