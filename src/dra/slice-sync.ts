/**
 * dra/slice-sync.ts: the node's ResourceSlices kept equal to what slices.ts says of the NADs (I/O through
 * `SliceApi`). A sync reads the Node's UID once (the slices' owner), lists this node's slices of the driver, and
 * writes what `planSync` says: creates and updates under a new pool generation, then deletes the extra ones.
 *
 * `startSliceSync` runs a sync at start, after NAD changes (gathered for `debounceMs`), when the kubelet says the
 * plugin registered (`kick`: the kubelet deletes a driver's slices while its plugin is away, and all slices of its
 * node when it starts), and every `resyncMs`; one at a time. A NAD change that leaves the desired slices as they
 * were costs no request. A failed sync is logged and tried again with backoff (1 s doubling to 60 s). The slices
 * are not deleted when the daemon stops (docs/dra-networks.md, "Design: the driver"): `multus install`'s uninstall
 * deletes them (install/uninstall.ts). Tested by test/unit/dra/slice-sync.test.ts, test/k8s/dra-driver.test.ts.
 */
import { createHash } from 'node:crypto';
import { messageOf } from '../base/errors.ts';
import type { Logger } from '../base/log.ts';
import type { KubeClient, Nad, SliceWriter } from '../k8s/types.ts';
import { httpStatusOf } from '../k8s/types.ts';
import type { SliceOptions } from './slices.ts';
import { desiredSlices, planSync } from './slices.ts';

export type SliceApi = Pick<KubeClient, 'listResourceSlices'> & SliceWriter;

export interface SyncResult {
  created: number;
  updated: number;
  deleted: number;
  published: number;
  skipped: { nad: string; why: string }[];
}

/** One sync of this node's slices to `nads`; throws what the API answered. */
export async function syncSlices(api: SliceApi, nads: Iterable<Nad>, o: SliceOptions & { nodeUid: string }) {
  const desired = desiredSlices(nads, o);
  const existing = await api.listResourceSlices(o.nodeName, o.driver);
  const plan = planSync(desired.slices, existing, o);
  for (const s of plan.create) await api.createResourceSlice(s);
  for (const s of plan.update) await api.updateResourceSlice(s);
  for (const name of plan.delete) await deleteIfThere(api, name);
  const counts = { created: plan.create.length, updated: plan.update.length, deleted: plan.delete.length };
  return { ...counts, published: desired.published, skipped: desired.skipped } satisfies SyncResult;
}

async function deleteIfThere(api: SliceWriter, name: string): Promise<void> {
  try {
    await api.deleteResourceSlice(name);
  } catch (e) {
    if (httpStatusOf(e) !== 404) throw e;
  }
}

export interface NadSource {
  list(): Nad[];
  /** Calls `listener` after each NAD change; returns the unsubscribe. */
  onChange(listener: () => void): () => void;
  /** False while the list is not complete yet (an informer before its first list): no sync then, for up to a minute. */
  synced?(): boolean;
}

export interface SliceSyncOptions extends SliceOptions {
  api: SliceApi;
  nads: NadSource;
  log: Logger;
  signal: AbortSignal;
  debounceMs?: number;
  resyncMs?: number;
}

export interface SliceSync {
  /** A sync soon, whatever was written before (the kubelet may have deleted our slices). */
  kick(): void;
  /** Resolves after the next sync that succeeds (tests). */
  synced(): Promise<SyncResult>;
}

const contentOf = (nads: Nad[], o: SliceOptions): string =>
  createHash('sha256')
    .update(JSON.stringify(desiredSlices(nads, o).slices))
    .digest('hex');

/** Keeps the slices in sync until `signal` aborts (see the file comment). */
export function startSliceSync(o: SliceSyncOptions): SliceSync {
  const { api, log, signal } = o;
  let nodeUid: string | undefined;
  let written: string | undefined;
  let timer: NodeJS.Timeout | undefined;
  let running = false;
  let again = false;
  let failures = 0;
  let waited = 0;
  let reportedSkips = '';
  const waiters: ((r: SyncResult) => void)[] = [];
  const schedule = (ms: number, force = false): void => {
    if (signal.aborted) return;
    clearTimeout(timer);
    timer = setTimeout(() => void run(force), ms);
  };
  async function run(force = false): Promise<void> {
    if (running) {
      again = true;
      return;
    }
    if (o.nads.synced?.() === false && waited++ < 120) {
      schedule(500, force); // a slice of half the NADs would be withdrawn again in a moment
      return;
    }
    running = true;
    const nads = o.nads.list();
    const content = contentOf(nads, o);
    try {
      if (force || content !== written) {
        nodeUid ??= await api.getNodeUid(o.nodeName);
        const result = await syncSlices(api, nads, { ...o, nodeUid });
        written = content;
        report(result);
        for (const w of waiters.splice(0)) w(result);
      }
      failures = 0;
      schedule(o.resyncMs ?? 600_000, true);
    } catch (e) {
      failures++;
      const ms = Math.min(60_000, 1000 * 2 ** Math.min(failures - 1, 6));
      log.error(`dra: cannot publish this node's ResourceSlices (${messageOf(e)}): trying again in ${ms / 1000} s`);
      schedule(ms);
    } finally {
      running = false;
      if (again && !signal.aborted) {
        again = false;
        schedule(0);
      }
    }
  }
  function report(r: SyncResult): void {
    if (r.created + r.updated + r.deleted > 0) {
      log.verbose(
        `dra: ${r.published} network device(s) published (${r.created} created, ${r.updated} updated, ${r.deleted} deleted)`,
      );
    }
    const skips = r.skipped.map((s) => `${s.nad}: ${s.why}`).join('; ');
    if (skips !== reportedSkips && skips !== '')
      log.error(`dra: ${r.skipped.length} NAD(s) not published as devices: ${skips}`);
    reportedSkips = skips;
  }
  const off = o.nads.onChange(() => schedule(o.debounceMs ?? 1000));
  signal.addEventListener(
    'abort',
    () => {
      off();
      clearTimeout(timer);
    },
    { once: true },
  );
  void run(true);
  return {
    kick: () => schedule(0, true),
    synced: () => new Promise((resolve) => waiters.push(resolve)),
  };
}
