/**
 * The resident bench's per-mode figures (scripts/bench/resident-measure.mjs `modeFigures`): `overhead` pools the
 * ADD and DEL samples, `overhead_pod` sums each round's ADD and DEL of one pod (docs/archive/performance.md, "A pod's ADD
 * and DEL together").
 */
import { describe, expect, it } from 'vitest';
// @ts-expect-error: plain JavaScript with no declaration file (scripts/tsconfig.json checks it)
import { modeFigures } from '../../../scripts/bench/resident-measure.mjs';

const modes = { thin_ts: { what: 'ours' }, go_thin: { what: 'Go' } };
const ticks = { thin_ts_add: 0, thin_ts_del: 0, go_thin_add: 1, go_thin_del: 1 };

describe('modeFigures', () => {
  it("puts a pod's ADD and DEL together, where the pooled median falls between the two", () => {
    // a delegate of 1 ms each way; ADD well above DEL in both modes, as in Kubernetes mode
    const samples = {
      delegate_add: [1, 1, 1],
      delegate_del: [1, 1, 1],
      thin_ts_add: [21, 26, 31], // overheads 20, 25, 30
      thin_ts_del: [11, 6, 9], // 10, 5, 8
      go_thin_add: [30, 29, 28], // 29, 28, 27
      go_thin_del: [15, 16, 14], // 14, 15, 13
    };
    const out = modeFigures(modes, samples, ticks, 1);
    expect(out.thin_ts.overhead_pod.median_ms).toBe(30); // 30, 30, 38
    expect(out.go_thin.overhead_pod.median_ms).toBe(43); // 43, 43, 40
    expect(out.thin_ts.ratios.to_go_thin.overhead_pod).toBe(0.7);
    // the pooled median of six samples is the mean of the slowest DEL and the fastest ADD
    expect(out.thin_ts.overhead.median_ms).toBe(15);
    expect(out.go_thin.overhead.median_ms).toBe(21);
    expect(out.thin_ts.ratios.to_go_thin.overhead_add).toBe(0.89);
  });
});
