/**
 * informers/informer.ts: one informer (the objects of one resource, kept current by a watch) with its restart and
 * sync state (I/O: HTTPS through the lean client's watch and list, src/k8s/watch.ts). As client-go's reflector does with WatchListClient
 * (client-go v0.35, Go Multus v4.3.0): the first watch asks for the initial objects itself
 * (`sendInitialEvents=true`, `resourceVersionMatch=NotOlderThan`, bookmarks on) and the informer is synced at the
 * bookmark annotated `k8s.io/initial-events-end`, on the same stream that then carries the changes: one request
 * per informer and no LIST response to hold whole (docs/resident.md, "Informers"). An API server that refuses
 * the parameter (the WatchList feature off: 4xx) gets the old way for the informer's life: a LIST in pages of
 * 500, then a watch from its resourceVersion. A watch the server ends resumes at once from the last
 * resourceVersion seen (events and bookmarks); 410 Gone starts over (the initial events again, not older than that
 * resourceVersion: from the API server's watch cache; the cache replaced, changes announced); any
 * other error stops the watch, reports "not synced", and starts again after a wait (retry.ts: client-go's
 * backoff, 0.8 s doubling to 30 s, jittered up to +100%; Retry-After when a 429 or 503 carries one; while the
 * server refuses everyone, one informer of the gate probes it and the others wait for its answer; after a 429
 * "storage is (re)initializing", the initial events, not a resume). The initial objects' arrival (watch or list)
 * is reported to the metrics. informers.ts builds the pod and NAD informers from it.
 * Tested by test/unit/informers/informer.test.ts (a fake WatchClient: watch-list, fallback, 410, resume),
 * test/unit/informers/retry.test.ts (the waits and the gate) and test/k8s/warm.test.ts (against a real kube-apiserver: sync without a LIST, restarts, metrics).
 */
import { messageOf } from '../base/errors.ts';
import type { Logger } from '../base/log.ts';
import { httpStatusOf } from '../k8s/types.ts';
import type { WatchClient } from '../k8s/types.ts';
import type { InformerMetrics, Obj } from './informer-types.ts';
import { Store, keyOf } from './informer-store.ts';
import { INFORMER_BACKOFF, type ServerGate, newWatchCache, nextWaitMs, serverWide } from './retry.ts';

const LIST_PAGE = 500;
const INITIAL_EVENTS_END = 'k8s.io/initial-events-end';

export interface InformerOptions {
  log: Logger;
  metrics?: InformerMetrics;
  /** Backoff of an informer restart after an error (tests make it short). */
  backoff?: { initialMs: number; maxMs: number };
  /** Shared by the informers of one API server: one of them probes a server that refuses everyone (retry.ts). */
  gate?: ServerGate;
}

export interface Informer {
  readonly name: string;
  synced(): boolean;
  get(namespace: string, name: string): Obj | undefined;
  /** Every object the cache holds now. */
  list(): Obj[];
  /** Subscribes to adds/updates (deleted false) and deletes (deleted true); returns the unsubscribe. */
  subscribe(listener: (obj: Obj, deleted: boolean) => void): () => void;
  start(): void;
  stop(): void;
}

/** What an informer keeps of each object it lists or watches (informer-trim.ts). */
type Trim = (o: Obj) => Obj;

/** Every object under `path` (paged, LIST_PAGE at a time), trimmed, with the last page's resourceVersion. */
async function listPaged(api: WatchClient, name: string, path: string, fieldSelector: string | undefined, trim: Trim) {
  const items: Obj[] = [];
  let cont = '';
  let resourceVersion = '';
  do {
    const q = new URLSearchParams({ limit: String(LIST_PAGE) });
    if (fieldSelector) q.set('fieldSelector', fieldSelector);
    if (cont) q.set('continue', cont);
    type Page = { items?: Obj[]; metadata?: { resourceVersion?: string; continue?: string } };
    const page = await api.listPage<Page>(name, `${path}?${q}`);
    for (const item of page.items ?? []) items.push(trim(item));
    resourceVersion = page.metadata?.resourceVersion ?? resourceVersion;
    cont = page.metadata?.continue ?? '';
  } while (cont);
  return { items, resourceVersion };
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

/** Watch events that carry a watched object (not BOOKMARK, nor ERROR's Status). */
const OBJECT_EVENTS = new Set(['ADDED', 'MODIFIED', 'DELETED']);
/**
 * Refusals that are not about the watch-list parameters: retried as they are, never a reason to LIST. 404 among
 * them: an API server that has just started may answer 404 on a CRD's path until it has loaded its CRDs (a NAD
 * watch in the first seconds after a restart), and a LIST would find nothing there either.
 */
const NOT_A_REFUSAL = new Set([401, 403, 404, 410, 429]);
/** A watch that ends normally sooner than this after it began is retried with backoff, not at once. */
const SHORT_WATCH_MS = 1000;

type Meta = { resourceVersion?: string; annotations?: Record<string, string> };

/** The informer's state: what the cache holds and how the next watch starts. */
interface State {
  /** The last resourceVersion seen: a list's, an event's or a bookmark's. */
  rv: string;
  /** The cache holds a complete set (its initial objects arrived), current as of `rv`. */
  complete: boolean;
  /** A watch streams from `rv`. */
  watching: boolean;
  /** The initial objects come through the watch; false once the API server refused that. */
  watchList: boolean;
  stopped: boolean;
  /** Errors since the informer last watched: the restart waits nextWaitMs (retry.ts). */
  failures: number;
}

/** How one watch ended, as its done callback sees it. */
interface Ended {
  err: unknown;
  /** An ERROR event's Status code (410 Gone: start over). */
  code?: number;
  /** The watch still waited for its initial objects. */
  initial: boolean;
  ms: number;
}

/** One watch's own state: its initial objects while they come, an ERROR event's code, whether it ended. */
class Stream {
  initial: Map<string, Obj> | undefined;
  code: number | undefined;
  done = false;
  abort: (() => void) | undefined;
  readonly t0 = performance.now();

  constructor(
    private readonly inf: WatchInformer,
    withInitial: boolean,
  ) {
    if (withInitial) this.initial = new Map();
  }

  onEvent(type: string, obj: unknown): void {
    const inf = this.inf;
    if (this.done || inf.s.stopped) return;
    const meta = (obj as { metadata?: Meta } | undefined)?.metadata;
    if (type === 'ERROR') {
      this.code = (obj as { code?: number } | undefined)?.code ?? 0;
      if (this.abort) this.end(); // the watch's abort calls no done: this watch ends here
      return;
    }
    if (type === 'BOOKMARK') {
      if (meta?.resourceVersion) inf.s.rv = meta.resourceVersion;
      if (this.initial && meta?.annotations?.[INITIAL_EVENTS_END] === 'true') {
        inf.store.replace(this.initial.values());
        this.initial = undefined;
        inf.s.complete = true;
        inf.o.metrics?.apiCall('watch', inf.name, (performance.now() - this.t0) / 1000, true);
        inf.markWatching();
      }
      return;
    }
    if (!OBJECT_EVENTS.has(type)) return;
    const t = inf.trim(obj as Obj);
    if (t.metadata?.resourceVersion) inf.s.rv = t.metadata.resourceVersion;
    if (!this.initial) inf.store.apply(t, type === 'DELETED');
    else if (type === 'DELETED') this.initial.delete(keyOf(t));
    else this.initial.set(keyOf(t), t);
  }

  /** An ERROR event (its code kept) once the watch is running: aborted, and ended as if it failed. */
  end(): void {
    this.abort?.();
    this.onDone(undefined);
  }

  onDone(err: unknown): void {
    if (this.done) return;
    this.done = true;
    const ms = performance.now() - this.t0;
    if (this.initial) this.inf.o.metrics?.apiCall('watch', this.inf.name, ms / 1000, false);
    const e = this.code === undefined ? err : undefined;
    this.inf.ended({ err: e, code: this.code, initial: !!this.initial, ms });
  }
}

class WatchInformer implements Informer {
  readonly store: Store;
  readonly s: State = { rv: '', complete: false, watching: false, watchList: true, stopped: false, failures: 0 };
  private readonly backoff: { initialMs: number; maxMs: number };
  private timer: NodeJS.Timeout | undefined;
  /** The running watch's abort. */
  private controller: (() => void) | undefined;
  private reported: boolean | undefined;

  constructor(
    readonly name: string,
    private readonly path: string,
    private readonly fieldSelector: string | undefined,
    private readonly api: WatchClient,
    readonly o: InformerOptions,
    private readonly onChange: () => void,
    readonly trim: Trim,
  ) {
    this.backoff = o.backoff ?? INFORMER_BACKOFF;
    this.store = new Store((e) => o.log.error(`informer ${name}: a listener failed: ${e}`));
  }

  synced(): boolean {
    return this.s.complete && this.s.watching;
  }

  get(namespace: string, n: string): Obj | undefined {
    return this.store.get(namespace, n);
  }

  list(): Obj[] {
    return this.store.values();
  }

  subscribe(listener: (obj: Obj, deleted: boolean) => void): () => void {
    return this.store.subscribe(listener);
  }

  /** The first watch (or list) is requested now, not on a timer: it travels while the daemon's start goes on. */
  start(): void {
    this.report();
    if (!this.s.stopped) this.runNow();
  }

  stop(): void {
    this.s.stopped = true;
    this.o.gate?.leave(this);
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.controller?.();
    this.controller = undefined;
    this.s.watching = false;
  }

  private report(): void {
    const now = this.synced();
    if (now === this.reported) return;
    this.reported = now;
    this.o.metrics?.informerSynced(this.name, now);
    this.o.log.verbose(`informer ${this.name}: ${now ? 'synced' : 'not synced'}`);
    this.onChange();
  }

  /** The next watch after `ms` (0: at once); one at a time. */
  private schedule(ms: number): void {
    if (this.s.stopped || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (!this.s.stopped) this.runNow();
    }, ms);
    this.timer.unref?.();
  }

  private runNow(): void {
    this.o.gate?.forget(this);
    void this.run().catch((e: unknown) => this.failed(e));
  }

  /** The next watch at once, in place of a waiting one (the gate opened). */
  private goNow(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.schedule(0);
  }

  private failed(err: unknown): void {
    this.s.watching = false;
    this.report();
    if (this.s.stopped) return;
    const gate = this.o.gate;
    if (gate && serverWide(err) && gate.refused(this)) {
      // another informer probes the server: wait for its answer (or, at the latest, the longest backoff step)
      const wait = nextWaitMs(undefined, Infinity, this.backoff);
      this.o.log.warn(`informer ${this.name}: waiting for the API server (at most ${wait} ms): ${messageOf(err)}`);
      gate.wait(this, () => this.goNow());
      return this.schedule(wait);
    }
    if (!serverWide(err)) gate?.answered();
    if (newWatchCache(err) && this.s.watchList) this.s.complete = false; // no resume the new cache cannot serve
    this.s.failures += 1;
    const wait = nextWaitMs(err, this.s.failures, this.backoff);
    this.o.log.warn(`informer ${this.name}: restarting in ${wait} ms: ${messageOf(err)}`); // the decision first
    this.schedule(wait);
  }

  /** A watch streams over a complete cache. */
  markWatching(): void {
    this.s.watching = true;
    this.s.failures = 0;
    this.report();
  }

  ended(e: Ended): void {
    this.controller = undefined;
    const s = this.s;
    if (s.stopped) return;
    const status = e.code ?? httpStatusOf(e.err);
    if (status === 410) {
      this.o.gate?.answered();
      // the initial events again, not older than s.rv: the API server serves them from its watch cache without
      // asking etcd first, as client-go's relist does (docs/resident.md, "Informers")
      this.o.log.verbose(`informer ${this.name}: resourceVersion ${s.rv} is gone; starting over from the watch cache`);
      Object.assign(s, { complete: false, watching: false });
      this.report();
      return this.schedule(0);
    }
    if (e.initial && s.watchList && status && status >= 400 && status < 500 && !NOT_A_REFUSAL.has(status)) {
      this.o.log.warn(`informer ${this.name}: the API server refused a watch-list (HTTP ${status}); listing instead`);
      s.watchList = false;
      return this.schedule(0);
    }
    if (e.err || e.code !== undefined) {
      return this.failed(e.err ?? Object.assign(new Error(`the watch sent an error (${e.code})`), { status: e.code }));
    }
    if (e.initial) return this.failed(new Error('the watch ended before its initial objects did'));
    if (e.ms < SHORT_WATCH_MS) return this.failed(new Error(`the watch ended after ${Math.round(e.ms)} ms`));
    this.schedule(0); // the API server's watch timeout: resume from s.rv, still synced
  }

  /** One watch: its initial objects first when the cache has none (or a LIST before it, without watch-list). */
  private async run(): Promise<void> {
    const s = this.s;
    const q = new URLSearchParams({ watch: 'true', allowWatchBookmarks: 'true' });
    if (this.fieldSelector) q.set('fieldSelector', this.fieldSelector);
    const withInitial = !s.complete && s.watchList;
    if (withInitial) {
      q.set('sendInitialEvents', 'true');
      q.set('resourceVersionMatch', 'NotOlderThan');
      if (s.rv) q.set('resourceVersion', s.rv);
    } else {
      if (!s.complete) {
        const list = await timedCall(this.o.metrics, 'list', this.name, () =>
          listPaged(this.api, this.name, this.path, this.fieldSelector, this.trim),
        );
        this.store.replace(list.items);
        Object.assign(s, { rv: list.resourceVersion, complete: true });
      }
      q.set('resourceVersion', s.rv);
    }
    const w = new Stream(this, withInitial);
    let abort: () => void;
    try {
      abort = await this.api.watch(this.name, `${this.path}?${q}`, {
        event: (type, obj) => w.onEvent(type, obj),
        done: (err) => w.onDone(err),
      });
    } catch (err) {
      return w.onDone(err);
    }
    this.o.gate?.answered(); // the server serves this resource: an informer waiting for it goes now
    w.abort = abort;
    if (w.done) return abort();
    this.controller = abort;
    if (s.stopped) abort();
    else if (w.code !== undefined) w.end();
    else if (!withInitial) this.markWatching();
  }
}

export function informer(
  name: string,
  path: string,
  fieldSelector: string | undefined,
  api: WatchClient,
  o: InformerOptions,
  onChange: () => void,
  trim: Trim = (x) => x,
): Informer {
  return new WatchInformer(name, path, fieldSelector, api, o, onChange, trim);
}
