/**
 * informers/informer.ts: one client-node informer (list + watch of one resource) with its restart and sync state
 * (I/O: HTTPS). Listing is paged (500 at a time); it counts as synced once listed and watching; an error stops
 * the watch, reports "not synced", and restarts it with backoff (1 s doubling to 30 s, jittered). Every list is
 * reported to the metrics. informers.ts builds the pod and NAD informers from it.
 * Tested by test/k8s/warm.test.ts (against a real kube-apiserver: sync, restarts, metrics).
 */
import type { KubeConfig } from '@kubernetes/client-node/dist/config.js';
import type { KubernetesListObject } from '@kubernetes/client-node/dist/types.js';
import type { ListWatch } from '@kubernetes/client-node/dist/cache.js';
import type { Watch } from '@kubernetes/client-node/dist/watch.js';
import { retryDelay } from '../base/backoff.ts';
import { messageOf } from '../base/errors.ts';
import type { Logger } from '../base/log.ts';
import type { ClientNode, InformerMetrics, Obj } from './informer-config.ts';
import { getJson } from './informer-config.ts';

const LIST_PAGE = 500;

export interface InformerOptions {
  log: Logger;
  metrics?: InformerMetrics;
  /** Backoff of an informer restart after an error (tests make it short). */
  backoff?: { initialMs: number; maxMs: number };
}

export interface Informer {
  readonly name: string;
  synced(): boolean;
  get(namespace: string, name: string): Obj | undefined;
  /** Subscribes to adds/updates (deleted false) and deletes (deleted true); returns the unsubscribe. */
  subscribe(listener: (obj: Obj, deleted: boolean) => void): () => void;
  start(): void;
  stop(): void;
}

/** Every object under `path` (paged, LIST_PAGE at a time), as one list with the last page's resourceVersion. */
async function listPaged(kc: KubeConfig, path: string, fieldSelector: string | undefined, trim: Trim) {
  const items: Obj[] = [];
  let cont = '';
  let resourceVersion = '';
  do {
    const q = new URLSearchParams({ limit: String(LIST_PAGE) });
    if (fieldSelector) q.set('fieldSelector', fieldSelector);
    if (cont) q.set('continue', cont);
    const page = await getJson(kc, `${path}?${q}`);
    for (const item of page.items ?? []) items.push(trim(item));
    resourceVersion = page.metadata?.resourceVersion ?? resourceVersion;
    cont = page.metadata?._continue ?? (page.metadata as { continue?: string } | undefined)?.continue ?? '';
  } while (cont);
  const list: KubernetesListObject<Obj> = { apiVersion: 'v1', kind: 'List', metadata: { resourceVersion }, items };
  return list;
}

/** `run`, one API request reported to the metrics (verb, resource, seconds, success). */
export async function timedCall<T>(
  metrics: InformerMetrics | undefined,
  verb: string,
  resource: string,
  run: () => Promise<T>,
): Promise<T> {
  const t0 = performance.now();
  let ok = false;
  try {
    const out = await run();
    ok = true;
    return out;
  } finally {
    metrics?.apiCall(verb, resource, (performance.now() - t0) / 1000, ok);
  }
}

/** What an informer keeps of each object it lists or watches (informer-trim.ts). */
type Trim = (o: Obj) => Obj;
/** Watch events that carry a watched object (not BOOKMARK, nor ERROR's Status). */
const OBJECT_EVENTS = new Set(['ADDED', 'MODIFIED', 'DELETED']);

/**
 * client-node's watch, told apart: `established` once it streams (HTTP 200), `ended` when it stops or fails;
 * each watched object trimmed before the cache keeps it.
 */
function trackedWatch(real: Watch, on: { established(): void; ended(): void }, trim: Trim): Watch {
  type Query = Record<string, string | number | boolean | undefined>;
  type Callback = (phase: string, obj: unknown, w: unknown) => void;
  return {
    watch: async (p: string, q: Query, cb: Callback, done: (err: unknown) => void) => {
      let failed = false;
      const kept: Callback = (phase, obj, w) => cb(phase, OBJECT_EVENTS.has(phase) ? trim(obj as Obj) : obj, w);
      const controller = await real.watch(p, q, kept, (err: unknown) => {
        if (err) failed = true;
        on.ended();
        done(err);
      });
      if (!failed) on.established();
      return controller;
    },
  } as unknown as Watch;
}

/** Subscribes `listener` to an informer's adds/updates and deletes; a listener's throw is reported, not raised. */
function subscribe(
  lw: ListWatch<Obj>,
  listener: (obj: Obj, deleted: boolean) => void,
  failed: (message: string) => void,
): () => void {
  const safe = (deleted: boolean) => (obj: Obj) => {
    try {
      listener(obj, deleted);
    } catch (e) {
      failed(messageOf(e));
    }
  };
  const changed = safe(false);
  const deleted = safe(true);
  lw.on('add', changed);
  lw.on('update', changed);
  lw.on('delete', deleted);
  return () => {
    lw.off('add', changed);
    lw.off('update', changed);
    lw.off('delete', deleted);
  };
}

export function informer(
  name: string,
  path: string,
  fieldSelector: string | undefined,
  kc: KubeConfig,
  o: InformerOptions,
  onChange: () => void,
  cn: ClientNode,
  trim: Trim = (x) => x,
): Informer {
  const backoff = o.backoff ?? { initialMs: 1000, maxMs: 30_000 };
  let listed = false;
  let watching = false;
  let stopped = false;
  /** Errors since the informer last watched: the restart waits retryDelay(failures). */
  let failures = 0;
  let timer: NodeJS.Timeout | undefined;
  let reported: boolean | undefined;
  const report = (): void => {
    const now = listed && watching;
    if (now === reported) return;
    reported = now;
    o.metrics?.informerSynced(name, now);
    o.log.verbose(`informer ${name}: ${now ? 'synced' : 'not synced'}`);
    onChange();
  };
  const begin = (): void => void lw.start().catch((e: unknown) => o.log.warn(`informer ${name}: ${messageOf(e)}`));

  const list = async (): Promise<KubernetesListObject<Obj>> => {
    const all = await timedCall(o.metrics, 'list', name, () => listPaged(kc, path, fieldSelector, trim));
    listed = true;
    return all;
  };
  const watch = trackedWatch(
    new cn.Watch(kc),
    {
      ended: () => (watching = false),
      established: () => {
        if (stopped) return;
        watching = true;
        failures = 0;
        report();
      },
    },
    trim,
  );

  const lw = new cn.ListWatch<Obj>(path, watch, list, false, undefined, fieldSelector);
  lw.on('error', (err: unknown) => {
    watching = false;
    report();
    if (stopped || timer) return;
    failures += 1;
    const wait = Math.round(retryDelay(failures, backoff) * (0.9 + Math.random() * 0.2));
    o.log.warn(`informer ${name}: ${messageOf(err)}; restarting in ${wait} ms`);
    timer = setTimeout(() => {
      timer = undefined;
      if (!stopped) begin();
    }, wait);
    timer.unref?.();
  });

  return {
    name,
    synced: () => listed && watching,
    get: (namespace, n) => lw.get(n, namespace),
    subscribe: (listener) => subscribe(lw, listener, (e) => o.log.error(`informer ${name}: a listener failed: ${e}`)),
    start() {
      report();
      begin();
    },
    stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      timer = undefined;
      void lw.stop();
      watching = false;
    },
  };
}
