/**
 * Latency figures for tests that print measurements (never assert on them): when each of several objects
 * reached a state, polled through one LIST per round, and the summary printed.
 */

export interface Summary {
  n: number;
  p50: number;
  p90: number;
  max: number;
}

/** Nearest-rank percentiles of `ms`, rounded to the millisecond. */
export function summarize(ms: number[]): Summary {
  const sorted = [...ms].sort((a, b) => a - b);
  const rank = (p: number) => sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
  return { n: sorted.length, p50: Math.round(rank(50)), p90: Math.round(rank(90)), max: Math.round(rank(100)) };
}

/**
 * Polls `list` (one request answering all the objects) every `everyMs` until `reached(name, object)` holds for
 * every name in `since`; returns, per name, the milliseconds from `since.get(name)` (a performance.now()) to
 * the first round that saw it. Throws after `timeoutMs`, naming the ones that did not get there.
 */
export async function timesToReach<T extends { metadata: { name: string } }>(
  since: Map<string, number>,
  list: () => Promise<T[]>,
  reached: (o: T) => boolean,
  timeoutMs: number,
  everyMs = 50,
): Promise<Map<string, number>> {
  const times = new Map<string, number>();
  const deadline = performance.now() + timeoutMs;
  while (times.size < since.size) {
    const items = await list().catch(() => [] as T[]);
    const now = performance.now();
    for (const o of items) {
      const t0 = since.get(o.metadata.name);
      if (t0 !== undefined && !times.has(o.metadata.name) && reached(o)) times.set(o.metadata.name, now - t0);
    }
    if (times.size === since.size) break;
    if (now > deadline) {
      const missing = [...since.keys()].filter((n) => !times.has(n));
      throw new Error(`not within ${timeoutMs} ms: ${missing.join(', ')}`);
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
  return times;
}
