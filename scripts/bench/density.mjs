/**
 * Scenario `density` of scripts/bench.mjs (only when asked for: `--scenario density [--pods N]`): pod-ready
 * latency on the runtime tier's kubelet node with Multus installed by its DaemonSet, side by side for thin_ts,
 * resident_ts, go_thin and go_thick, N pods with two NADs each created by kube-burner (docs/archive/performance.md,
 * "Density"). This side builds the two images offline (scripts/image.sh for ours, density/go-image.sh for Go
 * Multus v4.3.0) and runs scripts/bench/density/run.ts, which prints the `density` object.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, fail, runTs, say } from './common.mjs';
import { gomultusDir } from './resident.mjs';

const RUNNER = join(ROOT, 'scripts/bench/density/run.ts');
const VERSION = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version;

export const description =
  'pod-ready latency (kube-burner v2.7.3 podLatency, node-density-cni-like job) of N pods with two macvlan + ' +
  'host-local NADs each on a kubelet + containerd node, Multus installed by its DaemonSet: thin_ts, resident_ts ' +
  "(resident_ts_multus_limits: with Multus' 100m / 50Mi on the daemon), go_thin, go_thick (Go Multus v4.3.0; " +
  "go_thick_300mi: with our daemon's resources), interleaved A B C ... C B A";

/** Builds the two images into `dir`; their tarballs (ours, Go Multus'). */
export function images(dir, go) {
  const ours = join(dir, 'image-ts');
  const r = spawnSync('bash', [join(ROOT, 'scripts/image.sh')], {
    // the tag deployments/ names (package.json's version), since the bench applies those manifests as they are
    env: {
      ...process.env,
      MULTUS_TS_IMAGE_DIR: ours,
      MULTUS_TS_IMAGE_TAG: VERSION,
      MULTUS_TS_IMAGE_PLATFORMS: 'amd64',
    },
    stdio: ['ignore', 2, 2],
  });
  if (r.status !== 0) fail(`scripts/image.sh failed (exit ${r.status})`);
  const tar = readdirSync(ours).find((f) => f.endsWith('.tar'));
  const g = spawnSync('bash', [join(ROOT, 'scripts/bench/density/go-image.sh'), join(dir, 'image-go'), go], {
    stdio: ['ignore', 'pipe', 2],
    encoding: 'utf8',
  });
  if (g.status !== 0) fail(`density/go-image.sh failed (exit ${g.status})`);
  return [join(ours, tar), g.stdout.trim()];
}

/** Runs the density scenario (`ctx` = {opts, node, tmp}); the object under the `density` key. */
export async function runDensity({ opts, node, tmp }) {
  const go = gomultusDir(ROOT, opts.gomultus);
  for (const b of ['multus', 'multus-shim', 'multus-daemon', 'thin_entrypoint'])
    if (!existsSync(join(go, b))) fail(`${join(go, b)} is missing (bash test/peers/build-gomultus.sh)`);
  // kube-burner only drives this bench, so scripts/setup.sh does not build it: built (or its cache checked) here
  const kb = spawnSync('bash', [join(ROOT, 'test/peers/build-kube-burner.sh')], { stdio: ['ignore', 'ignore', 2] });
  if (kb.status !== 0) fail(`test/peers/build-kube-burner.sh failed (exit ${kb.status})`);
  const dir = join(tmp, 'density');
  const args = {
    pods: opts.pods,
    modes: opts.densityModes,
    images: images(dir, go),
    dir,
    burst: opts.burst,
    faults: opts.faults,
    faultModes: opts.faultModes,
  };
  say(`density: ${opts.pods} pods per run, modes ${opts.densityModes.join(' ')}`);
  const out = await runTs(node, RUNNER, args, 'density/run.ts');
  return { scenario_description: description, ...out };
}
