/**
 * Scenario `cluster` of scripts/bench.mjs (only when asked for: `--scenario cluster [--nodes N]
 * [--pods-per-node M] [--nads K]`): what every node's Multus daemon costs the API server and itself as the cluster
 * grows (docs/archive/performance.md, "A cluster"). kwok v0.8.0 (test/peers/build-kwok.sh, built here on demand: no CI
 * test uses it) simulates N-1 nodes and their pods beside one real kubelet node; K NADs across namespaces; then
 * resident_ts and go_thick in turn on the real node. This side builds kwok and the two images (density.mjs) and
 * runs scripts/bench/cluster/run.ts, which prints the `cluster` object.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, fail, runTs, say } from './common.mjs';
import { images } from './density.mjs';
import { gomultusDir } from './resident.mjs';

const RUNNER = join(ROOT, 'scripts/bench/cluster/run.ts');

export const description =
  "each node's Multus daemon in a cluster of N nodes (N-1 simulated by kwok v0.8.0, M pods each, every pod " +
  'with two NADs; K NADs across the namespaces), resident_ts then go_thick (Go Multus v4.3.0 thick with our ' +
  "daemon's resources) on the real kubelet node: memory, start to ready, API requests and bytes at rest and " +
  "in a churn of 10% of the cluster's pods (audit log and a relay of Multus' own), requests per ADD";

/** kwok's binary and stages (test/peers/build-kwok.sh: cached, stamped); its dir. */
function kwokDir() {
  const r = spawnSync('bash', [join(ROOT, 'test/peers/build-kwok.sh')], {
    stdio: ['ignore', 'pipe', 2],
    encoding: 'utf8',
  });
  if (r.status !== 0) fail(`test/peers/build-kwok.sh failed (exit ${r.status})`);
  return r.stdout.trim().split('\n').pop();
}

/** Runs the cluster scenario (`ctx` = {opts, node, tmp}); the object under the `cluster` key. */
export async function runCluster({ opts, node, tmp }) {
  const go = gomultusDir(ROOT, opts.gomultus);
  for (const b of ['multus-shim', 'multus-daemon'])
    if (!existsSync(join(go, b))) fail(`${join(go, b)} is missing (bash test/peers/build-gomultus.sh)`);
  const dir = join(tmp, 'cluster');
  const args = {
    nodes: opts.nodes,
    podsPerNode: opts.podsPerNode,
    nads: opts.nads,
    restSeconds: opts.restSeconds,
    restarts: opts.restarts,
    startRepeats: opts.startRepeats,
    apiserverRestart: opts.apiserverRestart,
    modes: ['resident_ts', 'go_thick'],
    kwok: kwokDir(),
    images: images(dir, go),
    dir,
    ...(opts.nodeLock ? { nodeLock: opts.nodeLock } : {}),
  };
  say(`cluster: N=${opts.nodes} M=${opts.podsPerNode} K=${opts.nads}`);
  const out = await runTs(node, RUNNER, args, 'cluster/run.ts');
  return { scenario_description: description, ...out };
}
