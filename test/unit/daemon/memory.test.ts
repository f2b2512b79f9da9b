/** daemon/memory.ts: a collection when the daemon goes idle after requests, and while busy only when its anon grew. */
import { describe, expect, it } from 'vitest';
import {
  anonBytes,
  collectGarbage,
  fileBytes,
  defaultDelegateConcurrency,
  memoryLimitMib,
  runtimeCollect,
} from '../../../src/daemon/memory.ts';
import { createQueue } from '../../../src/daemon/queue.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('collectGarbage', () => {
  it('collects once after a busy period ends, not while requests are pending, not again without requests', async () => {
    let collected = 0;
    const q = collectGarbage(createQueue(0), { collect: () => collected++, idleMs: 40, anon: () => 0 });
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

  /** A queue whose anon starts at `start` MiB and returns there on each collection; `endAt` ends one request. */
  function growing(start: number, o: { growth?: number; minGrowthBytes?: number } = {}) {
    const s = { anon: start << 20, collected: 0 };
    const collect = () => {
      s.collected++;
      s.anon = start << 20; // the shrink gives the pages back
    };
    const q = collectGarbage(createQueue(0), { collect, anon: () => s.anon, idleMs: 60_000, ...o });
    let n = 0;
    /** Anon at `bytes` when a request ends: the collections so far. */
    const endAt = async (bytes: number): Promise<number> => {
      s.anon = bytes;
      await q.run(`k${n++}`, async () => n);
      return s.collected;
    };
    return { q, endAt };
  }

  it('while busy, a request that ends collects only when anon grew by `growth` of the last base and minGrowthBytes', async () => {
    const { q, endAt } = growing(10, { growth: 0.5, minGrowthBytes: 6 << 20 });
    // any number of requests that do not grow the daemon: no collection, whatever the time they take
    for (let i = 0; i < 50; i++) expect(await endAt(10 << 20)).toBe(0);
    expect(await endAt((16 << 20) - 1)).toBe(0); // more than half of 10 MiB, but under 6 MiB more
    expect(await endAt(16 << 20)).toBe(1); // 6 MiB over the base: this end collects
    // the base follows the allocators down: from 4 MiB, 6 MiB more is enough (half of 4 is less)
    expect(await endAt(4 << 20)).toBe(1);
    expect(await endAt((10 << 20) - 1)).toBe(1);
    expect(await endAt(10 << 20)).toBe(2);
    q.stop();
    await sleep(10);
    expect(q.pending()).toBe(0);
    expect(q.keys()).toBe(0);
  });

  it('by default, half again over a big base (20 MiB over 40)', async () => {
    const { q, endAt } = growing(40);
    expect(await endAt((60 << 20) - 1)).toBe(0);
    expect(await endAt(60 << 20)).toBe(1);
    q.stop();
  });

  it('stop() cancels the idle collection', async () => {
    let collected = 0;
    const q = collectGarbage(createQueue(0), { collect: () => collected++, anon: () => 0, idleMs: 40 });
    await q.run('a', async () => 'a');
    q.stop();
    await sleep(80);
    expect(collected).toBe(0);
  });

  it.each([
    ["anonBytes: statm's resident less its file-backed pages", anonBytes, 1500 * 4096],
    ["fileBytes: statm's file-backed pages", fileBytes, 1000 * 4096],
  ])('%s, 0 when unreadable', (_, bytes, expected) => {
    expect(bytes(() => '30000 2500 1000 27000 0 3000 0\n')).toBe(expected);
    expect(
      bytes(() => {
        throw new Error('ENOENT');
      }),
    ).toBe(0);
    expect(bytes(() => 'garbage')).toBe(0);
    expect(bytes()).toBeGreaterThan(0); // this process
  });

  it('atRest runs after the idle collection and on restSoon(), never on the busy one', async () => {
    const calls: string[] = [];
    const q = collectGarbage(createQueue(0), {
      collect: () => calls.push('collect'),
      atRest: () => calls.push('rest'),
      idleMs: 40,
      anon: () => 0,
      minGrowthBytes: 0, // every request that ends collects on the busy path too
    });
    q.restSoon(); // the daemon is ready: at rest without a request
    await sleep(80);
    expect(calls).toEqual(['collect', 'rest']);
    calls.length = 0;
    await q.run('a', async () => 'a');
    expect(calls).toEqual(['collect']); // the busy path: no page drop while requests come
    await sleep(80);
    expect(calls).toEqual(['collect', 'collect', 'rest']);
    calls.length = 0;
    let finish!: () => void;
    const long = q.run('b', () => new Promise<void>((r) => (finish = r)));
    q.restSoon();
    await sleep(80);
    expect(calls).toEqual([]); // a request pending: not at rest
    finish();
    await long;
    q.stop();
  });

  /**
   * A queue whose drop at rest sets the file pages to 10 MiB (and `mapBack` MiB just after it, as the loop runs on);
   * `calls` records the collections and the drops, `s.reads` the checks' reads.
   */
  const atRestQueue = (timing: { idleMs: number; settleMs: number; recheckMs: number }, mapBack?: number) => {
    const calls: string[] = [];
    const s = { file: 10 << 20, reads: 0 };
    const q = collectGarbage(createQueue(0), {
      collect: () => calls.push('collect'),
      atRest: () => {
        calls.push('rest');
        s.file = 10 << 20; // the drop gives the pages back
        if (mapBack !== undefined) setTimeout(() => (s.file = mapBack << 20), 0);
      },
      file: () => (s.reads++, s.file),
      regrowBytes: 1 << 20,
      anon: () => 0,
      ...timing,
    });
    return { q, calls, s };
  };

  it('at rest, atRest again (no collection) once the file pages grew back by regrowBytes; a request stops that', async () => {
    const { q, calls, s } = atRestQueue({ idleMs: 20, settleMs: 10, recheckMs: 10 });
    /** Until the checks have read the file pages `n` more times (timers run late on a loaded machine). */
    const checks = async (n: number) => {
      const target = s.reads + n;
      for (let i = 0; i < 500 && s.reads < target; i++) await sleep(10);
      expect(s.reads).toBeGreaterThanOrEqual(target);
    };
    q.restSoon();
    await checks(2);
    expect(calls).toEqual(['collect', 'rest']);
    s.file += (1 << 20) - 4096; // a bookmark's code: under the bound
    await checks(2);
    expect(calls).toEqual(['collect', 'rest']);
    s.file += 4096; // now 1 MiB over what the drop left
    await checks(2);
    expect(calls).toEqual(['collect', 'rest', 'rest']);
    // the bound counts from the lowest seen since the last drop
    s.file = 9 << 20;
    await checks(2);
    s.file = (10 << 20) - 4096;
    await checks(2);
    expect(calls).toEqual(['collect', 'rest', 'rest']);
    s.file = 10 << 20;
    await checks(2);
    expect(calls).toEqual(['collect', 'rest', 'rest', 'rest']);
    // a request pending: no check and no drop while it runs; after it, the idle collection, the drop, the checks
    let finish!: () => void;
    const long = q.run('a', () => new Promise<void>((r) => (finish = r)));
    calls.length = 0;
    s.file = 20 << 20;
    const readsBefore = s.reads;
    await sleep(80);
    expect(s.reads).toBe(readsBefore);
    expect(calls).toEqual([]);
    finish();
    await long;
    await checks(2);
    expect(calls).toEqual(['collect', 'rest']);
    // stop() ends the checks
    q.stop();
    const readsAtStop = s.reads;
    await sleep(60);
    expect(s.reads).toBe(readsAtStop);
  });

  it('the first check comes settleMs after the drop that follows the collection, the next ones every recheckMs', async () => {
    // the collector's threads map 4 MiB of code back after the drop
    const { q, calls, s } = atRestQueue({ idleMs: 10, settleMs: 30, recheckMs: 60_000 }, 14);
    q.restSoon();
    for (let i = 0; i < 500 && calls.length < 3; i++) await sleep(10);
    expect(calls).toEqual(['collect', 'rest', 'rest']); // dropped again at the first check
    const reads = s.reads;
    await sleep(150);
    expect(s.reads).toBe(reads); // the next check is a recheckMs away
    q.stop();
  });

  it('without atRest (no page drop), no check at rest', async () => {
    let reads = 0;
    const q = collectGarbage(createQueue(0), {
      collect: () => {},
      file: () => ++reads,
      idleMs: 10,
      recheckMs: 10,
      anon: () => 0,
    });
    q.restSoon();
    await sleep(60);
    expect(reads).toBe(0);
    q.stop();
  });

  it('outside Bun the runtime collection does nothing', () => {
    expect('Bun' in globalThis).toBe(false);
    expect(() => runtimeCollect()).not.toThrow();
  });
});

describe('memoryLimitMib and the delegates at once it allows', () => {
  const files = (m: Record<string, string>) => (p: string) => {
    if (p in m) return m[p]!;
    throw new Error(`ENOENT ${p}`);
  };
  it("cgroup v1: the memory controller's path, or the root inside a container", () => {
    const cgroup = '12:memory:/kubepods/pod1/abc\n11:pids:/kubepods/pod1/abc\n';
    expect(
      memoryLimitMib(
        files({
          '/proc/self/cgroup': cgroup,
          '/sys/fs/cgroup/memory/kubepods/pod1/abc/memory.limit_in_bytes': String(50 * 1048576),
        }),
      ),
    ).toBe(50);
    expect(
      memoryLimitMib(
        files({
          '/proc/self/cgroup': '5:cpu,memory:/\n',
          '/sys/fs/cgroup/memory/memory.limit_in_bytes': '9223372036854771712\n',
        }),
      ),
    ).toBeUndefined();
  });
  it('cgroup v2: memory.max, "max" is no limit; nothing readable is no limit', () => {
    expect(
      memoryLimitMib(files({ '/proc/self/cgroup': '0::/a/b\n', '/sys/fs/cgroup/a/b/memory.max': '314572800\n' })),
    ).toBe(300);
    expect(
      memoryLimitMib(files({ '/proc/self/cgroup': '0::/\n', '/sys/fs/cgroup/memory.max': 'max\n' })),
    ).toBeUndefined();
    expect(memoryLimitMib(files({}))).toBeUndefined();
  });
  it('below 256 MiB, what the limit leaves above 40 MiB at 5 MiB a delegate, 1 to 4; else no limit', () => {
    expect(defaultDelegateConcurrency(50)).toBe(2); // Multus' own 50Mi
    expect(defaultDelegateConcurrency(54)).toBe(2);
    expect(defaultDelegateConcurrency(55)).toBe(3);
    expect(defaultDelegateConcurrency(60)).toBe(4);
    expect(defaultDelegateConcurrency(255)).toBe(4);
    expect(defaultDelegateConcurrency(30)).toBe(1); // never none under a limit
    expect(defaultDelegateConcurrency(256)).toBe(0);
    expect(defaultDelegateConcurrency(undefined)).toBe(0);
  });
});
