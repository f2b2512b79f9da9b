/**
 * informers/informer-store.ts: one informer's cache (pure: no I/O). Objects keyed `namespace/name`, as the
 * informer's trim left them; its listeners hear every add/update (deleted false) and delete (deleted true) after
 * the cache holds the change. `replace` swaps in a complete set (an initial list, or a watch's initial events
 * after a 410 Gone): objects missing from it are deleted, new ones added, changed ones (another
 * resourceVersion) updated, unchanged ones left alone and not announced.
 * Tested by test/unit/informers/informer.test.ts.
 */
import { messageOf } from '../base/errors.ts';
import type { Obj } from './informer-types.ts';

export type Listener = (obj: Obj, deleted: boolean) => void;

export const keyOf = (o: Obj): string => `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;
const rvOf = (o: Obj | undefined): string | undefined => o?.metadata?.resourceVersion;

export class Store {
  private readonly objects = new Map<string, Obj>();
  private readonly listeners = new Set<Listener>();

  constructor(private readonly failed: (message: string) => void) {}

  get size(): number {
    return this.objects.size;
  }

  get(namespace: string, name: string): Obj | undefined {
    return this.objects.get(`${namespace}/${name}`);
  }

  /** Every object held now. */
  values(): Obj[] {
    return [...this.objects.values()];
  }

  /** An ADDED or MODIFIED watch event (deleted false) or a DELETED one. */
  apply(obj: Obj, deleted: boolean): void {
    const key = keyOf(obj);
    if (deleted) {
      const had = this.objects.get(key);
      this.objects.delete(key);
      this.tell(had ?? obj, true);
      return;
    }
    this.objects.set(key, obj);
    this.tell(obj, false);
  }

  /** The whole set: what is not in `objs` is deleted; new and changed objects announced. */
  replace(objs: Iterable<Obj>): void {
    const next = new Map<string, Obj>();
    for (const o of objs) next.set(keyOf(o), o);
    for (const [key, old] of [...this.objects]) {
      if (next.has(key)) continue;
      this.objects.delete(key);
      this.tell(old, true);
    }
    for (const [key, o] of next) {
      const old = this.objects.get(key);
      this.objects.set(key, o);
      if (!old || rvOf(old) !== rvOf(o)) this.tell(o, false);
    }
  }

  /** Subscribes `listener`; returns the unsubscribe. A listener's throw is reported, not raised. */
  subscribe(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private tell(obj: Obj, deleted: boolean): void {
    for (const l of [...this.listeners]) {
      try {
        l(obj, deleted);
      } catch (e) {
        this.failed(messageOf(e));
      }
    }
  }
}
