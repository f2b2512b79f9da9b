/**
 * informers/informers.ts: the resident daemon's warm Kubernetes state (I/O: HTTPS, list + watch).
 *
 * Two informers (informer.ts: each one watch through the lean client, its initial objects included, as client-go's
 * WatchListClient does; no @kubernetes/client-node, whose modules cost the daemon ~5 MiB of heap): the pods of
 * this node that have a network namespace of their own (all namespaces, fieldSelector
 * `spec.nodeName=<node>,spec.hostNetwork=false`: no runtime calls CNI for a hostNetwork pod, so the daemon never
 * needs one; the node's DaemonSets, ours included, are mostly such pods, and their status writes are events no
 * one reads; docs/compatibility.md) and every NetworkAttachmentDefinition. The `client` they back is a
 * `KubeClient` (src/k8s/types.ts):
 *
 *   - getPod / getNad answer from the informer's cache once that informer is synced, when the object is there
 *     (and, for a pod, has the UID the caller expects); otherwise one GET through the lean client: a pod of
 *     another node or a hostNetwork one, an informer that is not synced or is reconnecting. A pod the cache does not hold: ADD's
 *     lookup (`cacheMiss: 'wait'`) waits up to CACHE_WAIT_MS for the watch to deliver it, then GETs; DEL's
 *     (`cacheMiss: 'only'`) takes it as NotFound, as Go Multus' informer lookups do. Other misses GET.
 *   - updatePodStatus and createEvent go through ONE kept-alive lean client (loadKubeClient), so its error
 *     shapes (404 NotFound, 409 Conflict, 401/403 texts, transient codes) and Multus' retry rules stay as in
 *     the thin plugin. A stale cached pod costs a 409 and one re-read, exactly as a thin call's race would.
 *
 * `requestCount` is the lean client's (the GETs, status writes and events of requests); list/watch traffic is
 * not part of any request. Every request of ours is reported to `metrics.apiCall` (verb, resource, seconds,
 * ok), and each informer's initial objects (verb watch, or list without watch-list). An informer error (watch
 * refused or broken) marks it unsynced (`metrics.informerSynced(name, false)`) and restarts it after a wait
 * (retry.ts: client-go's backoff, Retry-After, one informer probing a server that refuses both); a watch that
 * ends normally (the API server's timeout) resumes at once from its resourceVersion, and a 410 Gone starts over
 * (informer.ts).
 *
 * `onPod` hands the pod informer's adds, updates and deletes to a listener (dynamic networks react to a changed
 * networks annotation with it: hotplug/dynamic.ts).
 *
 * With a warm cache an ADD makes one request (the network-status write) plus its events, a DEL none.
 * Tested by test/k8s/warm.test.ts (against a real kube-apiserver), test/k8s/dra.test.ts.
 */
import { CniCode, CniError, messageOf } from '../base/errors.ts';
import type { Logger } from '../base/log.ts';
import { isDns1123Subdomain } from '../base/names.ts';
import { loadKubeClient } from '../k8s/client.ts';
import type { CallOptions, ClientInfo, DraObject, EventInput, KubeClient, Nad, Pod } from '../k8s/types.ts';
import { KubeApiError } from '../k8s/types.ts';
import type { InformerMetrics, InformerSource } from './informer-types.ts';
import type { Informer, InformerOptions } from './informer.ts';
import { informer, timedCall } from './informer.ts';
import { trimNad, trimPod } from './informer-trim.ts';
import { ServerGate } from './retry.ts';

export interface WarmKube {
  client: KubeClient;
  /** Both informers have listed once and are watching. */
  synced(): boolean;
  /** Resolves true once synced, false when `timeoutMs` passes first (or the informers are closed). */
  waitForSync(timeoutMs: number): Promise<boolean>;
  /**
   * Calls `listener` for each pod of this node the pod informer adds, updates or deletes, after its cache holds
   * the change (a re-list after 410 Gone replays adds and updates too). Returns the unsubscribe. A listener's
   * exception is logged and does not stop the informer.
   */
  onPod(listener: PodListener): () => void;
  /**
   * The NAD informer's cache as it is now (trimmed: informer-trim.ts), and its changes: the DRA driver's slices
   * follow them (dra/slice-sync.ts). `onChange` is called after each add, update or delete; returns the unsubscribe.
   */
  nads: { synced(): boolean; list(): Nad[]; onChange(listener: () => void): () => void };
  /** Stops the informers and closes the lean client's connections. */
  close(): void;
}

/** A pod change seen by the pod informer (`deleted`: the pod left the node or the API). */
export type PodListener = (pod: Pod, deleted: boolean) => void;

export interface WarmKubeOptions extends InformerSource, InformerOptions {
  /** This node's name (MULTUS_NODE_NAME or the hostname): the pod informer's field selector. */
  nodeName: string;
}

export const POD_INFORMER = 'pods';
export const NAD_INFORMER = 'network-attachment-definitions';
const NAD_PATH = '/apis/k8s.cni.cncf.io/v1/network-attachment-definitions';

// ---------------------------------------------------------------------------------------------------------------
// The client: cache first, the lean client for everything else

/** The lean client with every request reported to `metrics.apiCall`. */
function measured(lean: KubeClient, metrics: InformerMetrics | undefined): KubeClient {
  const timed = <T>(verb: string, resource: string, call: () => Promise<T>): Promise<T> =>
    timedCall(metrics, verb, resource, call);
  return {
    getPod: (ns, name, opts) => timed('get', 'pods', () => lean.getPod(ns, name, opts)),
    getNad: (ns, name, opts) => timed('get', NAD_INFORMER, () => lean.getNad(ns, name, opts)),
    updatePodStatus: (pod, opts) => timed('update', 'pods/status', () => lean.updatePodStatus(pod, opts)),
    createEvent: (e, opts) => timed('create', 'events', () => lean.createEvent(e, opts)),
    getResourceClaim: (ns, name, opts) => timed('get', 'resourceclaims', () => lean.getResourceClaim(ns, name, opts)),
    listResourceSlices: (node, driver, opts) =>
      timed('list', 'resourceslices', () => lean.listResourceSlices(node, driver, opts)),
    applyClaimDevices: (ns, name, manager, devices, opts) =>
      timed('patch', 'resourceclaims/status', () => lean.applyClaimDevices(ns, name, manager, devices, opts)),
    get requestCount() {
      return lean.requestCount;
    },
    info: lean.info,
    close: () => lean.close(),
  };
}

const MAX_PENDING_EVENTS = 1000;
/** How long an ADD's lookup waits for the pod informer to deliver a pod it does not hold yet (CallOptions). */
const CACHE_WAIT_MS = 1000;

class WarmClient implements KubeClient {
  private events: Promise<void> = Promise.resolve();
  private pendingEvents = 0;

  constructor(
    private readonly api: KubeClient,
    private readonly pods: Informer,
    private readonly nads: Informer,
    private readonly log: Logger,
  ) {}

  get requestCount(): number {
    return this.api.requestCount;
  }

  get info(): ClientInfo {
    return this.api.info;
  }

  async getPod(namespace: string, name: string, opts?: CallOptions): Promise<Pod> {
    if (this.pods.synced() && !opts?.fresh) {
      const want = (p: Pod | undefined): p is Pod => !!p && (!opts?.uid || p.metadata.uid === opts.uid);
      let hit = this.pods.get(namespace, name) as Pod | undefined;
      // A pod created (or re-created under the same name) a moment ago: its watch event may be on the way.
      if (!want(hit) && opts?.cacheMiss === 'wait') hit = await this.podFromWatch(namespace, name, want);
      if (want(hit)) return structuredClone(hit);
      if (opts?.cacheMiss === 'only') {
        if (hit) return structuredClone(hit); // another UID: the caller tells a re-created pod apart
        throw new KubeApiError(
          CniCode.Internal,
          `pods "${name}" not found (not in the informer's cache)`,
          404,
          'NotFound',
        );
      }
    }
    return this.api.getPod(namespace, name, opts);
  }

  /** The pod as the pod informer's watch delivers it within CACHE_WAIT_MS, if it does; the cached one otherwise. */
  private podFromWatch(namespace: string, name: string, want: (p: Pod | undefined) => p is Pod) {
    return new Promise<Pod | undefined>((resolve) => {
      const finish = (): void => {
        clearTimeout(timer);
        off();
        resolve(this.pods.get(namespace, name) as Pod | undefined);
      };
      const off = this.pods.subscribe((obj, deleted) => {
        if (!deleted && want(obj as unknown as Pod)) finish();
      });
      const timer = setTimeout(finish, CACHE_WAIT_MS);
    });
  }

  async getNad(namespace: string, name: string, opts?: CallOptions): Promise<Nad> {
    if (this.nads.synced()) {
      const hit = this.nads.get(namespace, name) as Nad | undefined;
      if (hit) return structuredClone(hit);
    }
    return this.api.getNad(namespace, name, opts);
  }

  updatePodStatus(pod: Pod, opts?: CallOptions): Promise<Pod> {
    return this.api.updatePodStatus(pod, opts);
  }

  /** DRA objects are read per call (devices/dra.ts caches within one call): no informer (docs/resident.md). */
  getResourceClaim(namespace: string, name: string, opts?: CallOptions): Promise<DraObject> {
    return this.api.getResourceClaim(namespace, name, opts);
  }

  listResourceSlices(nodeName: string, driver: string, opts?: CallOptions): Promise<DraObject[]> {
    return this.api.listResourceSlices(nodeName, driver, opts);
  }

  applyClaimDevices(ns: string, name: string, manager: string, devices: unknown[], opts?: CallOptions): Promise<void> {
    return this.api.applyClaimDevices(ns, name, manager, devices, opts);
  }

  /**
   * Events are best effort (the interface says callers ignore their errors), and a daemon outlives the call: they
   * are posted in order in the background, so an ADD does not wait for its AddedInterface round trips (client-go's
   * event recorder does the same). At most MAX_PENDING_EVENTS wait; beyond that an event is dropped and logged.
   */
  createEvent(event: EventInput, opts?: CallOptions): Promise<void> {
    if (this.pendingEvents >= MAX_PENDING_EVENTS) {
      this.log.verbose(`event ${event.reason} dropped: ${MAX_PENDING_EVENTS} events are still being posted`);
      return Promise.resolve();
    }
    this.pendingEvents++;
    this.events = this.events
      .then(() => this.api.createEvent(event, opts))
      .catch((e: unknown) => this.log.verbose(`event ${event.reason} not recorded: ${messageOf(e)}`))
      .finally(() => this.pendingEvents--);
    return Promise.resolve();
  }

  /** Resolves once every event queued so far has been posted (or failed). */
  flushEvents(): Promise<void> {
    return this.events;
  }

  /** Idle keep-alive connections only; the informers run until WarmKube.close(). */
  close(): void {
    this.api.close();
  }
}

/**
 * Starts both informers and returns at once (they sync in the background: see `synced()`/`waitForSync`).
 * Throws a CniError when there is no Kubernetes configuration, the kubeconfig cannot be used, or the node name
 * is not a valid name.
 */
/** The pod informer's field selector: this node's pods that get CNI calls (not the hostNetwork ones). */
const podSelector = (nodeName: string): string => `spec.nodeName=${nodeName},spec.hostNetwork=false`;

export async function startWarmKube(o: WarmKubeOptions): Promise<WarmKube> {
  if (!isDns1123Subdomain(o.nodeName)) {
    const msg = `informers: node name "${o.nodeName}" is not a valid Kubernetes node name (set MULTUS_NODE_NAME)`;
    throw new CniError(CniCode.InvalidConfig, msg);
  }
  const lean = await loadKubeClient({ kubeconfig: o.kubeconfig, env: o.env, log: o.log });
  if (!lean) {
    throw new CniError(CniCode.InvalidConfig, 'informers: no kubeconfig and no in-cluster service environment');
  }
  const waiters = new Set<() => void>();
  let closed = false;
  const changed = (): void => {
    for (const w of [...waiters]) w();
  };
  const io = { ...o, gate: new ServerGate() }; // one prober while the server refuses both (retry.ts)
  const pods = informer(POD_INFORMER, '/api/v1/pods', podSelector(o.nodeName), lean, io, changed, trimPod);
  const nads = informer(NAD_INFORMER, NAD_PATH, undefined, lean, io, changed, trimNad);
  const api = measured(lean, o.metrics);
  const client = new WarmClient(api, pods, nads, o.log);
  const synced = (): boolean => !closed && pods.synced() && nads.synced();
  pods.start();
  nads.start();
  o.log.verbose(`informers: pods of node ${o.nodeName} and NADs from ${lean.info.server}`);
  return {
    client,
    synced,
    waitForSync(timeoutMs) {
      if (synced()) return Promise.resolve(true);
      return new Promise((resolve) => {
        const finish = (v: boolean): void => {
          clearTimeout(timer);
          waiters.delete(check);
          resolve(v);
        };
        const check = (): void => {
          if (synced()) finish(true);
          else if (closed) finish(false);
        };
        const timer = setTimeout(() => finish(false), timeoutMs);
        waiters.add(check);
      });
    },
    onPod: (listener) => pods.subscribe((obj, deleted) => listener(obj as unknown as Pod, deleted)),
    nads: {
      synced: () => nads.synced(),
      list: () => nads.list() as unknown as Nad[],
      onChange: (listener) => nads.subscribe(() => listener()),
    },
    close() {
      if (closed) return;
      closed = true;
      pods.stop();
      nads.stop();
      lean.close();
      changed();
    },
  };
}
