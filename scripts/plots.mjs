#!/usr/bin/env node
/**
 * `npm run plots`: draws docs/performance.md's plots (docs/plots/*.svg) from the bench's JSON in
 * docs/archive/bench/, with Vega-Lite compiled to Vega and rendered headless by Vega's SVG renderer (no browser,
 * no canvas). The rows come from scripts/plots/data.mjs; which runs each plot shows is the list below, so a new
 * run is drawn by adding its file here and running `npm run plots` again.
 *
 *   npm run plots                 # writes docs/plots/*.svg
 *   npm run plots -- --out DIR    # somewhere else (test/unit/scripts/plots.test.ts)
 */
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as vega from 'vega';
import * as vl from 'vega-lite';
import { callRows, densityRows, machineRows, parseBench } from './plots/data.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const BENCH = join(ROOT, 'docs/archive/bench');

/** Today's runs: the executable on Bun 1.4.6-canary.1, 2026-12-05 (docs/performance.md). */
const CALL_RUNS = ['bench-resident-2026-12-05-bun-canary.json', 'bench-resident-2026-12-05-bun-canary-2.json'];
const DENSITY_RUNS = [
  'bench-density-2026-12-05-n100-bun-canary.json',
  'bench-density-2026-12-05-n100-bun-canary-resident.json',
  'bench-density-2026-12-05-n100-bun-canary-resident-2.json',
  'bench-density-2026-12-05-n100-bun-canary-resident-3.json',
];

const COLORS = { domain: ['multus-ts', 'Go Multus v4.3.0'], range: ['#1f77b4', '#ff7f0e'] };
const color = { field: 'implementation', type: 'nominal', title: null, scale: COLORS, legend: { orient: 'top' } };

function load(names) {
  return names.flatMap((name) => parseBench(readFileSync(join(BENCH, name), 'utf8')));
}

/** A bar per mode (the mean of the runs) with each run as a dot, one panel per scenario. */
function perCallSpec(rows, field, title, unit) {
  const x = { field: 'mode', type: 'nominal', title: null, sort: null, axis: { labelAngle: -30 } };
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title,
    data: { values: rows },
    facet: { column: { field: 'scenario', type: 'nominal', title: null } },
    spec: {
      width: 220,
      height: 200,
      layer: [
        {
          mark: 'bar',
          encoding: { x, y: { aggregate: 'mean', field, type: 'quantitative', title: unit, stack: null }, color },
        },
        {
          mark: { type: 'point', filled: true, color: 'black', size: 25 },
          encoding: { x, y: { field, type: 'quantitative' } },
        },
      ],
    },
    resolve: { scale: { x: 'independent' } },
  };
}

function densitySpec(rows) {
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: 'Pod-ready p99 at N = 100 pods (each dot a kube-burner run)',
    width: 420,
    height: 220,
    data: { values: rows },
    mark: { type: 'point', filled: true, size: 70 },
    encoding: {
      y: { field: 'mode', type: 'nominal', title: null, sort: null, axis: { labelLimit: 300 } },
      x: { field: 'pod_ready_p99_s', type: 'quantitative', title: 'pod-ready p99 (s)', scale: { zero: true } },
      color,
      tooltip: [{ field: 'date' }, { field: 'pod_ready_p99_s' }],
    },
  };
}

function memorySpec(rows) {
  const daemons = rows.filter((r) => r.cgroup_peak_mib !== undefined);
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: "Daemon container's memory cgroup peak at N = 100 (each dot a run; line: Multus' 50Mi)",
    width: 420,
    height: 160,
    layer: [
      {
        data: { values: daemons },
        mark: { type: 'point', filled: true, size: 70 },
        encoding: {
          y: { field: 'mode', type: 'nominal', title: null, sort: null, axis: { labelLimit: 300 } },
          x: { field: 'cgroup_peak_mib', type: 'quantitative', title: 'MiB', scale: { domain: [0, 60] } },
          color,
        },
      },
      {
        data: { values: [{ limit: 50 }] },
        mark: { type: 'rule', color: 'red', strokeDash: [4, 3] },
        encoding: { x: { field: 'limit', type: 'quantitative' } },
      },
    ],
  };
}

async function render(spec) {
  const view = new vega.View(vega.parse(vl.compile(spec).spec), { renderer: 'none' });
  const svg = await view.toSVG();
  view.finalize();
  return svg;
}

export function plotSpecs() {
  const calls = callRows(load(CALL_RUNS));
  const density = densityRows(load(DENSITY_RUNS));
  return {
    'call-overhead.svg': perCallSpec(
      calls,
      'overhead_pod_ms',
      "A pod's ADD + DEL: the plugin's own time (median of 40 rounds)",
      'ms',
    ),
    'call-peak-rss.svg': perCallSpec(
      calls,
      'peak_rss_mib',
      'Peak RSS of the process a runtime starts (the plugin, or the shim)',
      'MiB',
    ),
    'density-p99.svg': densitySpec(density),
    'daemon-memory.svg': memorySpec(density),
  };
}

async function main() {
  const at = process.argv.indexOf('--out');
  const out = at > 0 ? resolve(process.argv[at + 1]) : join(ROOT, 'docs/plots');
  mkdirSync(out, { recursive: true });
  for (const [name, spec] of Object.entries(plotSpecs())) {
    writeFileSync(join(out, name), (await render(spec)) + '\n');
  }
  console.log(`plots: ${readdirSync(out).filter((n) => n.endsWith('.svg')).length} SVG files in ${out}`);
  // the machine and load of the runs drawn, for docs/performance.md's table "The machine"
  for (const m of machineRows(load([...CALL_RUNS, ...DENSITY_RUNS]))) {
    console.log(
      `plots: ${m.scenario} ${m.date} ${m.git_head}: ${m.cores} cores, ${m.cpu_model}, Linux ${m.kernel}, ` +
        `load ${m.load_start} -> ${m.load_end}`,
    );
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main();
