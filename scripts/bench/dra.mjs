/**
 * Scenario `dra` of scripts/bench.mjs (only when asked for: `--scenario dra [--dra-pods N] [--dra-rss-rounds R]`; root,
 * the Kubernetes binaries, the kubelet node's peers for pod_ready): networks as DRA devices (docs/dra-networks.md).
 * The resident daemon's RSS with the DRA plugin loaded and without, and pod-ready of a claim network against an
 * annotation network on a kubelet node; scripts/bench/dra/run.ts measures, this side names the build.
 */
import { join } from 'node:path';
import { ROOT, runTs, say } from './common.mjs';

const RUNNER = join(ROOT, 'scripts/bench/dra/run.ts');

export const description =
  "build/multus daemon's VmRSS with draNetworks off and on (idle, and on after 100 prepare/unprepare pairs), " +
  'alternated R times; pod-ready (POST to Ready in the API, 100 ms polls) of N pods with a macvlan + host-local ' +
  'network from a ResourceClaim against N with it from the networks annotation, interleaved, on a kubelet + ' +
  'containerd node with the resident DaemonSet';

/** Runs the dra scenario (`ctx` = {opts, node, exe, tmp}); the object under the `dra` key. */
export async function runDra({ opts, node, exe, tmp }) {
  const pods = opts.draPods;
  const rssRounds = opts.draRssRounds;
  say(`dra: ${pods} pods of each kind, ${rssRounds} RSS rounds`);
  const out = await runTs(node, RUNNER, { pods, rssRounds, exe, dir: join(tmp, 'dra') }, 'dra/run.ts');
  return { scenario_description: description, ...out };
}
