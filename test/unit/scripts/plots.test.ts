/**
 * scripts/plots/data.mjs takes docs/performance.md's plot rows from the bench's JSON, and scripts/plots.mjs draws
 * them with Vega-Lite: a bench file of one object or of one object per line, a mode a run did not have left out
 * (never drawn as zero), one density row per kube-burner run, and every plot's spec compiling to Vega and
 * rendering to SVG from the JSON kept in docs/archive/bench/.
 */
import { describe, expect, it } from 'vitest';
import * as vega from 'vega';
import * as vl from 'vega-lite';
// @ts-expect-error: plain JavaScript with no declaration file (scripts/tsconfig.json checks it)
import { callRows, densityRows, parseBench } from '../../../scripts/plots/data.mjs';
// @ts-expect-error: plain JavaScript with no declaration file (scripts/tsconfig.json checks it)
import { plotSpecs } from '../../../scripts/plots.mjs';

const mode = (ms: number, rss: number) => ({
  overhead_pod: { median_ms: ms },
  cpu_add_ms: 1,
  peak_rss_mib: { median: rss },
});

describe('plots: rows from the bench JSON', () => {
  it('reads a file of one object and a file of one object per line', () => {
    expect(parseBench('{"a": 1}\n')).toEqual([{ a: 1 }]);
    expect(parseBench('{"a": 1}\n{"a": 2}\n')).toEqual([{ a: 1 }, { a: 2 }]);
    expect(parseBench('  \n')).toEqual([]);
  });

  it('per-call rows: each run, scenario and mode present; a missing mode is left out', () => {
    const run = {
      date: 'd',
      resident: {
        delegates_only: { modes: { thin_ts: mode(9.3, 20.4), go_thin: mode(10.6, 26.3) } },
        kubernetes: { modes: { go_thick: mode(31.2, 23.8), unknown_mode: mode(1, 1) } },
      },
    };
    const rows = callRows([run]);
    expect(rows.map((r: { mode: string }) => r.mode)).toEqual(['multus-ts thin', 'Go Multus thin', 'Go Multus thick']);
    expect(rows[2]).toMatchObject({ scenario: 'Kubernetes (2 NADs)', implementation: 'Go Multus v4.3.0' });
    expect(rows[0]).toMatchObject({ overhead_pod_ms: 9.3, peak_rss_mib: 20.4, implementation: 'multus-ts' });
  });

  it('density rows: one per kube-burner run, p99 in seconds, the daemon limit of its mode', () => {
    const runs = [
      { pod_ready_ms: { p99: 52000 }, daemon_cgroup_peak_mib: 38.2, daemon_cgroup_oom_kills: 0, failed_pods: 0 },
      { pod_ready_ms: { p99: 52500 }, daemon_cgroup_peak_mib: 42.6, daemon_cgroup_oom_kills: 0, failed_pods: 0 },
    ];
    const bench = {
      date: '2026-12-05T06:53:52Z',
      density: {
        modes: { resident_ts_multus_limits: { runs }, thin_ts: { runs: [{}] } },
        daemon_peak_rss_mib: { resident_ts_multus_limits: { limit: 50 } },
      },
    };
    const rows = densityRows([bench]);
    expect(rows).toHaveLength(2);
    expect(rows[1]).toMatchObject({
      mode: 'multus-ts resident, 100m / 50Mi',
      pod_ready_p99_s: 52.5,
      cgroup_peak_mib: 42.6,
      memory_limit_mib: 50,
      day: '2026-12-05',
    });
  });
});

describe('plots: the specs drawn from docs/archive/bench/', () => {
  it('each plot has rows, compiles to Vega and renders to SVG headless', async () => {
    const specs = Object.entries(plotSpecs() as Record<string, Record<string, unknown>>);
    expect(specs.length).toBeGreaterThanOrEqual(3);
    for (const [name, spec] of specs) {
      const values = JSON.stringify(spec).match(/"mode":/g) ?? [];
      expect(values.length, name).toBeGreaterThan(3);
      const view = new vega.View(vega.parse(vl.compile(spec as unknown as vl.TopLevelSpec).spec), { renderer: 'none' });
      const svg = await view.toSVG();
      view.finalize();
      expect(svg, name).toMatch(/^<svg[\s\S]*multus-ts[\s\S]*<\/svg>$/);
    }
  });
});
