/**
 * The NAD informer's JS heap per NAD (the cluster bench, docs/archive/performance.md "A cluster"), run with Bun (the
 * daemon's runtime) on the host against the bench's API server as Multus' service account:
 *
 *   bun scripts/bench/cluster/nad-heap.ts <kubeconfig> <expected NADs> [trimmed|whole]
 *
 * The daemon's NAD informer (src/informers/informer.ts with trimNad), or one that keeps each NAD whole (what the
 * API server sends: `whole`, as the informers did before any trim): after a warm-up informer that selects no NAD
 * (modules loaded, code compiled, a connection made), the heap after full collections; the informer of every NAD
 * started and synced (each NAD through its watch); the heap again. The growth per NAD held: one JSON line.
 */
import { silentLogger } from '../../../src/base/log.ts';
import type { Obj } from '../../../src/informers/informer-types.ts';
import { loadKubeClient } from '../../../src/k8s/client.ts';
import type { WatchClient } from '../../../src/k8s/types.ts';
import { type Informer, informer } from '../../../src/informers/informer.ts';
import { trimNad } from '../../../src/informers/informer-trim.ts';

declare const Bun: { gc(force: boolean): void };
const NAD_PATH = '/apis/k8s.cni.cncf.io/v1/network-attachment-definitions';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const jsc = 'bun:jsc'; // Bun's own module (no type declarations here)
const { heapStats } = (await import(jsc)) as { heapStats(): { heapSize: number; extraMemorySize: number } };

/** JavaScriptCore's heap after full collections: its cells, and what they hold outside it (string buffers). */
function heap(): number {
  for (let i = 0; i < 3; i++) Bun.gc(true);
  const h = heapStats();
  return h.heapSize + h.extraMemorySize;
}

/** An informer of every NAD (or of those `selector` picks), synced with `expected` NADs; returns it. */
async function synced(api: WatchClient, expected: number, trim: (o: Obj) => Obj, selector?: string) {
  let held = 0;
  const inf: Informer = informer('nads', NAD_PATH, selector, api, { log: silentLogger }, () => {}, trim);
  inf.subscribe((_o, deleted) => (held += deleted ? -1 : 1));
  inf.start();
  const deadline = Date.now() + 300_000;
  while (!(inf.synced() && held >= expected)) {
    if (Date.now() > deadline) throw new Error(`${held} of ${expected} NADs after 300 s`);
    await sleep(50);
  }
  await sleep(500);
  return { inf, held };
}

const [kubeconfig, expected, kind] = [process.argv[2]!, Number(process.argv[3]), process.argv[4]];
const api = (await loadKubeClient({ kubeconfig, env: {}, log: silentLogger }))!;
// warm-up: the modules loaded, the code compiled, a watch opened and its connection made, with no NAD in it
const warm = await synced(api, 0, trimNad, 'metadata.name=no-such-nad');
const before = heap();
const { inf, held } = await synced(api, expected, kind === 'whole' ? (o) => o : trimNad);
const after = heap();
process.stdout.write(JSON.stringify({ nads: held, bytes_per_nad: Math.round((after - before) / held) }) + '\n');
inf.stop();
warm.inf.stop();
process.exit(0);
