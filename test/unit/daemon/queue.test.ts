/** daemon/queue.ts: a finished container leaves nothing behind (the daemon serves millions of container IDs). */
import { describe, expect, it } from 'vitest';
import { createQueue } from '../../../src/daemon/queue.ts';

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
