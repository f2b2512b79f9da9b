/**
 * hotplug/dynamic.ts: dynamic networks, built into the daemon (`dynamicNetworks: true`, docs/hotplug.md).
 *
 * Event-driven when the daemon has informers: the pod informer's updates (informers/informers.ts `onPod`) name the
 * pods of this node whose networks annotation changed, and each is reconciled at once (the pods of one burst in
 * parallel, each in its own queue). Every `dynamicNetworksPollSeconds` a resync pass looks at all the pods whose
 * sandboxes the daemon knows (its caches: hotplug/sandboxes.ts); without informers that pass is the only driver.
 * Pods are read through a `PodSource` (getPod on the daemon's Kubernetes client: the pod informer's cache when
 * the multus config uses the daemon's kubeconfig, else a GET). For a pod whose networks annotation differs from
 * its attachments it unplugs the removed elements and plugs the added ones (hotplug/dynamic-plan.ts), in
 * annotation order, through the same code as `POST /delegate` (so network-status and the AddedInterface /
 * RemovedInterface events follow), inside the pod's per-container queue: a reconcile never runs during that
 * pod's ADD or DEL, and the diff is computed once it holds the queue.
 *
 * Failures: a `NetworkChangeFailed` warning event with the reason. A request the pod cannot have (CNI codes
 * 1-8: bad annotation, missing NAD, isolation, name taken) is reported once per annotation value and not
 * retried; its event is named after the pod, the value and the element (dynamic-plan.ts `reportName`), so a
 * restarted daemon's report of it is refused by the API server while the first one lives. Other failures (a
 * plugin, the API) are retried with backoff (1 s doubling to 60 s, each retry timed for that pod), reported on
 * the first failure. The other elements go on. State is derived from the caches and the annotation, so a
 * restarted daemon neither redoes nor undoes anything.
 */
import { retryDelay } from '../base/backoff.ts';
import { isCallerFault, isCniError, messageOf, toCniError } from '../base/errors.ts';
import type { Logger } from '../base/log.ts';
import type { Host } from '../host/host.ts';
import type { KubeClient, Pod } from '../k8s/types.ts';
import { httpStatusOf as apiStatus } from '../k8s/types.ts';
import type { MultusConf } from '../multus/conf.ts';
import { parseMultusConf } from '../multus/conf.ts';
import type { DynamicChange } from './dynamic-plan.ts';
import { changeKey, planDynamicChanges, reportName } from './dynamic-plan.ts';
import type { SandboxLinks } from '../routes/nsenter.ts';
import { cachedAttachments, clusterIfNameOf } from './hotplug.ts';
import { cachedRoles } from '../multus/attachments.ts';
import { podK8sArgs } from '../cni/cniargs.ts';
import { NETWORKS_ANNOTATION } from '../multus/selection.ts';
import { emitEvents } from '../multus/publish.ts';
import { parseNetworkSelections } from '../multus/selection.ts';
import { readScratchCache } from '../multus/scratch-cache.ts';
import type { DelegateCall } from './delegate.ts';
import { runDelegate } from './delegate.ts';
import type { KnownSandbox } from './sandboxes.ts';
import { listSandboxes } from './sandboxes.ts';
import type { Env } from '../cni/request.ts';

/** The pods to follow: where they come from is this seam's business (the informer's cache or a GET). */
export interface PodSource {
  /** The pod of a known sandbox, or undefined when it is gone. */
  pod(kube: KubeClient, sb: KnownSandbox): Promise<Pod | undefined>;
}

export const getPodSource: PodSource = {
  async pod(kube, sb) {
    try {
      return await kube.getPod(sb.namespace, sb.name);
    } catch (e) {
      if (apiStatus(e) === 404) return undefined;
      throw e;
    }
  },
};

/** Subscribes to the pod informer's changes (WarmKube.onPod); returns the unsubscribe. */
type PodEvents = (listener: (pod: Pod, deleted: boolean) => void) => () => void;

/** The daemon's per-container queue (daemon/queue.ts): a reconcile runs in line with the pod's CNI calls. */
export interface ContainerQueue {
  run<T>(key: string, fn: () => Promise<T>): Promise<T>;
}

export interface DynamicDeps {
  host: Host;
  queue: ContainerQueue;
  log: Logger;
  daemonEnv: Env;
  multusConf(): Buffer;
  /** The resync period: a pass over every known pod (the only driver without `events`). */
  intervalMs: number;
  /** The pod informer's changes: a pod whose networks annotation changed is reconciled at once. */
  events?: PodEvents;
  pods?: PodSource;
  links?: SandboxLinks;
  now?: () => number;
  /** The daemon's stop: every call's cancel signal (cni/exec.ts). */
  signal?: AbortSignal;
}

export interface DynamicNetworks {
  /** One pass over the known pods (the timer calls it; tests may too). */
  tick(): Promise<void>;
  /** Resolves once the reconciles that events and retries started so far have ended (tests). */
  settled(): Promise<void>;
  stop(): Promise<void>;
}

interface Retry {
  attempts: number;
  next: number;
}

interface Context {
  conf: MultusConf;
  kube: KubeClient;
}

const RETRY_BACKOFF = { initialMs: 1000, maxMs: 60_000 };

const annotationOf = (pod: Pod): string => pod.metadata.annotations?.[NETWORKS_ANNOTATION] ?? '';
const podKey = (namespace: string, name: string): string => `${namespace}/${name}`;

export function startDynamicNetworks(d: DynamicDeps): DynamicNetworks {
  return new Dynamic(d);
}

class Dynamic implements DynamicNetworks {
  private readonly pods: PodSource;
  private readonly now: () => number;
  /** Per container: the annotation last brought in line (skip the queue when unchanged and nothing to retry). */
  private readonly synced = new Map<string, string>();
  /** `<container>\0<annotation>\0<change>`: reported and not retried for this annotation value. */
  private readonly givenUp = new Set<string>();
  private readonly retries = new Map<string, Retry>();
  /** Pod UID -> the networks annotation of its last informer event (its other updates cost nothing). */
  private readonly seen = new Map<string, string>();
  /** `<namespace>/<name>` -> the pod's known sandboxes, as of the last listing of the caches. */
  private sandboxes = new Map<string, KnownSandbox[]>();
  /** Pods to reconcile in the next burst: `<namespace>/<name>` -> the UID the event or retry named. */
  private readonly wanted = new Map<string, string>();
  private readonly retryTimers = new Map<string, NodeJS.Timeout>();
  private burst: NodeJS.Immediate | undefined;
  private readonly inFlight = new Set<Promise<void>>();
  private running: Promise<void> | undefined;
  private stopped = false;
  private readonly timer: NodeJS.Timeout;
  private readonly unsubscribe: (() => void) | undefined;

  constructor(private readonly d: DynamicDeps) {
    this.pods = d.pods ?? getPodSource;
    this.now = d.now ?? Date.now;
    this.unsubscribe = d.events?.((pod, deleted) => this.onPod(pod, deleted));
    this.timer = setInterval(() => void this.tick(), d.intervalMs);
    this.timer.unref();
    void this.tick();
  }

  tick(): Promise<void> {
    this.running ??= this.pass().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  async settled(): Promise<void> {
    while (this.burst || this.inFlight.size) {
      if (this.burst) await new Promise((r) => setImmediate(r));
      else await Promise.all(this.inFlight);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    this.unsubscribe?.();
    if (this.burst) clearImmediate(this.burst);
    this.burst = undefined;
    for (const t of this.retryTimers.values()) clearTimeout(t);
    this.retryTimers.clear();
    await this.running;
    await Promise.all(this.inFlight);
  }

  /** An informer event: a pod whose annotation is not the one of its previous event is wanted. */
  private onPod(pod: Pod, deleted: boolean): void {
    const { uid, namespace, name } = pod.metadata;
    if (deleted) {
      this.seen.delete(uid);
      return;
    }
    const annotation = annotationOf(pod);
    if (this.seen.get(uid) === annotation) return;
    this.seen.set(uid, annotation);
    this.want(podKey(namespace, name), uid);
  }

  private want(key: string, uid: string): void {
    if (this.stopped) return;
    this.wanted.set(key, uid);
    // one burst per turn of the event loop: the events a watch chunk delivers share one listing of the caches
    this.burst ??= setImmediate(() => {
      this.burst = undefined;
      const batch = new Map(this.wanted);
      this.wanted.clear();
      const p: Promise<void> = this.reconcilePods(batch)
        .catch((e: unknown) => this.d.log.error(`dynamic networks: ${messageOf(e)}`))
        .finally(() => this.inFlight.delete(p));
      this.inFlight.add(p);
    });
  }

  /** The wanted pods, in parallel (each in its own queue); the caches are listed again for a pod not known. */
  private async reconcilePods(batch: Map<string, string>): Promise<void> {
    const ctx = await this.context();
    if (!ctx) return;
    const known = (key: string, uid: string): boolean =>
      (this.sandboxes.get(key) ?? []).some((sb) => !sb.uid || sb.uid === uid);
    if ([...batch].some(([key, uid]) => !known(key, uid))) this.list(ctx.conf);
    const sbs = [...batch.keys()].flatMap((key) => this.sandboxes.get(key) ?? []);
    await Promise.all(sbs.map((sb) => this.follow(ctx, sb)));
  }

  /** The resync: every known pod, one after another. */
  private async pass(): Promise<void> {
    const ctx = await this.context();
    if (!ctx) return;
    for (const sb of this.list(ctx.conf)) {
      if (this.stopped) return;
      await this.follow(ctx, sb);
    }
  }

  private async context(): Promise<Context | undefined> {
    let conf: MultusConf;
    try {
      conf = parseMultusConf(this.d.multusConf());
    } catch (e) {
      this.d.log.verbose(`dynamic networks: no multus config yet: ${messageOf(e)}`);
      return undefined;
    }
    const kube = await this.d.host.kube(conf, this.d.daemonEnv, this.d.log);
    if (!kube) {
      this.d.log.verbose('dynamic networks: the multus config names no kubeconfig');
      return undefined;
    }
    return { conf, kube };
  }

  /** The sandboxes in the caches now (remembered per pod; state of sandboxes gone is dropped). */
  private list(conf: MultusConf): KnownSandbox[] {
    const all = listSandboxes(conf.cniDir);
    const ids = new Set(all.map((s) => s.containerId));
    for (const id of this.synced.keys()) if (!ids.has(id)) this.synced.delete(id);
    this.sandboxes = new Map();
    for (const sb of all) {
      const key = podKey(sb.namespace, sb.name);
      this.sandboxes.set(key, [...(this.sandboxes.get(key) ?? []), sb]);
    }
    return all;
  }

  /** One sandbox: its pod read, and reconciled in its queue when the annotation is not the one in line. */
  private async follow({ conf, kube }: Context, sb: KnownSandbox): Promise<void> {
    if (this.stopped) return;
    let pod: Pod | undefined;
    try {
      pod = await this.pods.pod(kube, sb);
    } catch (e) {
      this.d.log.error(`dynamic networks: cannot read pod ${sb.namespace}/${sb.name}: ${messageOf(e)}`);
      return;
    }
    if (!pod || (sb.uid && pod.metadata.uid !== sb.uid)) return;
    if ((pod.metadata as { deletionTimestamp?: string }).deletionTimestamp) return;
    if (this.synced.get(sb.containerId) === annotationOf(pod)) return;
    const target = pod;
    await this.d.queue
      .run(sb.containerId, async () => {
        // the pod may have changed while this waited behind its ADD or DEL: read it again inside the queue
        const fresh = (await this.pods.pod(kube, sb).catch(() => undefined)) ?? target;
        if (fresh.metadata.uid !== target.metadata.uid || this.stopped) return;
        await this.reconcile(conf, kube, sb, fresh);
      })
      .catch((e: unknown) =>
        this.d.log.error(`dynamic networks: ${sb.namespace}/${sb.name}: ${isCniError(e) ? e.msg : messageOf(e)}`),
      );
  }

  /** A NetworkChangeFailed event; with `once` (what is given up), named so that it is reported once ever. */
  private warn(kube: KubeClient, pod: Pod, message: string, once?: string): Promise<void> {
    const name = once === undefined ? {} : { name: reportName(pod.metadata, annotationOf(pod), once) };
    return emitEvents(kube, pod, [{ type: 'Warning', reason: 'NetworkChangeFailed', message, ...name }], this.d.log);
  }

  /** One change through hot-plug's front door, as typed data: the sandbox with its pod, the element to plug. */
  private async apply(conf: MultusConf, sb: KnownSandbox, pod: Pod, change: DynamicChange): Promise<void> {
    const [namespace = '', name = ''] = change.network.split('/');
    const call: DelegateCall = {
      input: {
        op: change.kind === 'add' ? 'ADD' : 'DEL',
        sandbox: { containerId: sb.containerId, netns: sb.netns, ifName: change.ifName, pod: podK8sArgs(pod.metadata) },
        conf,
        env: Object.fromEntries(Object.entries(this.d.daemonEnv).filter(([k]) => !k.startsWith('CNI_'))),
      },
      network: change.network,
      config: Buffer.alloc(0),
      selection: change.selection ?? { namespace, name, request: {} },
      source: 'selection',
    };
    const signal = this.d.signal ? { signal: this.d.signal } : {};
    await runDelegate(call, { host: this.d.host, ...signal, ...(this.d.links ? { links: this.d.links } : {}) });
  }

  private async reconcile(conf: MultusConf, kube: KubeClient, sb: KnownSandbox, pod: Pod): Promise<void> {
    const annotation = annotationOf(pod);
    const prefix = `${sb.containerId}\0${annotation}\0`;
    let selections;
    try {
      selections = parseNetworkSelections(annotation, pod.metadata.namespace);
    } catch (e) {
      if (!this.givenUp.has(prefix)) {
        this.givenUp.add(prefix);
        const message = `the ${NETWORKS_ANNOTATION} annotation cannot be applied: ${toCniError(e).msg}`;
        await this.warn(kube, pod, message, 'annotation');
      }
      this.synced.set(sb.containerId, annotation);
      return;
    }
    const scratch = readScratchCache(conf.cniDir, sb.containerId);
    if (scratch.kind !== 'ok') return; // deleted meanwhile (or unreadable: the pod's DEL deals with it)
    const clusterIfName = clusterIfNameOf(conf.cniDir, sb.containerId, scratch.value);
    const current = cachedAttachments(scratch.value, clusterIfName, cachedRoles(conf, pod.metadata.namespace));
    let nextRetry = Infinity;
    for (const change of planDynamicChanges(current, selections)) {
      const key = `${sb.containerId}\0${change.kind}\0${changeKey(change)}`;
      if (this.givenUp.has(prefix + key)) continue;
      const retry = this.retries.get(key);
      if (retry && retry.next > this.now()) {
        nextRetry = Math.min(nextRetry, retry.next);
        continue;
      }
      const next = await this.attempt({ conf, kube }, sb, pod, change, { key, prefix, attempts: retry?.attempts ?? 0 });
      if (next !== undefined) nextRetry = Math.min(nextRetry, next);
    }
    if (nextRetry === Infinity) this.synced.set(sb.containerId, annotation);
    else {
      this.synced.delete(sb.containerId);
      this.retryAt(podKey(pod.metadata.namespace, pod.metadata.name), pod.metadata.uid, nextRetry);
    }
  }

  /** One change; returns when to retry it, or undefined (done, or given up for this annotation value). */
  private async attempt(
    { conf, kube }: Context,
    sb: KnownSandbox,
    pod: Pod,
    change: DynamicChange,
    at: { key: string; prefix: string; attempts: number },
  ): Promise<number | undefined> {
    try {
      await this.apply(conf, sb, pod, change);
      this.retries.delete(at.key);
      const where = `${pod.metadata.namespace}/${pod.metadata.name}`;
      this.d.log.verbose(`dynamic networks: ${change.kind} ${changeKey(change)} in ${where}`);
      return undefined;
    } catch (e) {
      const error = toCniError(e);
      const what = `${change.kind === 'add' ? 'adding' : 'removing'} ${change.ifName} (${change.network})`;
      const message = `${what} failed: ${error.msg}`;
      if (isCallerFault(error.code)) {
        this.givenUp.add(at.prefix + at.key);
        this.retries.delete(at.key);
        const where = `${pod.metadata.namespace}/${pod.metadata.name}`;
        this.d.log.warn(`dynamic networks: ${where}: ${message}; not retried for this annotation value`);
        await this.warn(kube, pod, message, `${change.kind} ${changeKey(change)}`);
        return undefined;
      }
      const attempts = at.attempts + 1;
      const next = this.now() + retryDelay(attempts, RETRY_BACKOFF);
      this.retries.set(at.key, { attempts, next });
      if (attempts === 1) await this.warn(kube, pod, `${message} (will retry)`);
      else this.d.log.error(`dynamic networks: ${message} (attempt ${attempts})`);
      return next;
    }
  }

  /** A timer for a pod's pending retry (one per pod), so it does not wait for the resync. */
  private retryAt(key: string, uid: string, at: number): void {
    if (this.stopped || this.retryTimers.has(key)) return;
    const t = setTimeout(
      () => {
        this.retryTimers.delete(key);
        this.want(key, uid);
      },
      Math.max(0, at - this.now()),
    );
    t.unref();
    this.retryTimers.set(key, t);
  }
}
