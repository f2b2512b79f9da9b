/**
 * daemon/dynamic.ts: dynamic networks, built into the daemon (`dynamicNetworks: true`, docs/hotplug.md).
 *
 * Every `dynamicNetworksPollSeconds` the daemon looks at the pods whose sandboxes it knows (its caches:
 * daemon/sandboxes.ts) through a `PodSource` (getPod on the daemon's Kubernetes client: the pod informer's cache
 * when the multus config uses the daemon's kubeconfig, else a GET). For a pod whose networks annotation differs from
 * its attachments it unplugs the removed elements and plugs the added ones (multus/dynamic-plan.ts), in
 * annotation order, through the same code as `POST /delegate` (so network-status and the AddedInterface /
 * RemovedInterface events follow), inside the pod's per-container queue: a reconcile never runs during that
 * pod's ADD or DEL, and the diff is computed once it holds the queue.
 *
 * Failures: a `NetworkChangeFailed` warning event with the reason. A request the pod cannot have (CNI codes
 * 1-8: bad annotation, missing NAD, isolation, name taken) is reported once per annotation value and not
 * retried; other failures (a plugin, the API) are retried with backoff (1 s doubling to 60 s), reported on the
 * first failure. The other elements go on. State is derived from the caches and the annotation, so a restarted
 * daemon neither redoes nor undoes anything.
 */
import { retryDelay } from '../base/backoff.ts';
import { isCallerFault, isCniError, messageOf, toCniError } from '../base/errors.ts';
import type { Logger } from '../base/log.ts';
import type { Host } from '../host/host.ts';
import type { KubeClient, Pod } from '../k8s/types.ts';
import { httpStatusOf as apiStatus } from '../k8s/types.ts';
import type { MultusConf } from '../multus/conf.ts';
import { parseMultusConf } from '../multus/conf.ts';
import type { DynamicChange } from '../multus/dynamic-plan.ts';
import { changeKey, planDynamicChanges } from '../multus/dynamic-plan.ts';
import type { SandboxLinks } from '../multus/hotplug.ts';
import { cachedAttachments, clusterIfNameOf } from '../multus/hotplug.ts';
import { NETWORKS_ANNOTATION } from '../multus/podnetworks.ts';
import { emitEvents } from '../multus/publish.ts';
import { parseNetworkSelections } from '../multus/selection.ts';
import { readScratchCache } from '../store/scratch-cache.ts';
import type { DelegateRequest } from './hotplug-api.ts';
import { runDelegate } from './hotplug-api.ts';
import type { RequestQueue } from './queue.ts';
import type { KnownSandbox } from './sandboxes.ts';
import { listSandboxes } from './sandboxes.ts';
import type { Env } from '../cni/request.ts';

/** The pods to follow: where they come from is this seam's business (GETs today, an informer later). */
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

export interface DynamicDeps {
  host: Host;
  queue: RequestQueue;
  log: Logger;
  daemonEnv: Env;
  multusConf(): Buffer;
  intervalMs: number;
  pods?: PodSource;
  links?: SandboxLinks;
  now?: () => number;
}

export interface DynamicNetworks {
  /** One pass over the known pods (the timer calls it; tests may too). */
  tick(): Promise<void>;
  stop(): Promise<void>;
}

interface Retry {
  attempts: number;
  next: number;
}

const RETRY_BACKOFF = { initialMs: 1000, maxMs: 60_000 };

export function startDynamicNetworks(d: DynamicDeps): DynamicNetworks {
  const pods = d.pods ?? getPodSource;
  const now = d.now ?? Date.now;
  /** Per container: the annotation last brought in line (skip the queue when unchanged and nothing to retry). */
  const synced = new Map<string, string>();
  /** `<container>\0<annotation>\0<change>`: reported and not retried for this annotation value. */
  const givenUp = new Set<string>();
  const retries = new Map<string, Retry>();
  let running: Promise<void> | undefined;
  let stopped = false;

  const warn = (kube: KubeClient, pod: Pod, message: string): Promise<void> =>
    emitEvents(kube, pod, [{ type: 'Warning', reason: 'NetworkChangeFailed', message }], d.log);

  async function apply(sb: KnownSandbox, pod: Pod, change: DynamicChange): Promise<void> {
    const req: DelegateRequest = {
      command: change.kind === 'add' ? 'ADD' : 'DEL',
      env: Object.fromEntries(Object.entries(d.daemonEnv).filter(([k]) => !k.startsWith('CNI_'))),
      containerId: sb.containerId,
      netns: sb.netns,
      ifName: change.ifName,
      args: [
        `K8S_POD_NAMESPACE=${pod.metadata.namespace}`,
        `K8S_POD_NAME=${pod.metadata.name}`,
        `K8S_POD_UID=${pod.metadata.uid}`,
      ].join(';'),
      path: [],
      netnsOverride: false,
      config: Buffer.alloc(0),
      network: change.network,
      attributes: {},
    };
    await runDelegate(
      req,
      { host: d.host, multusConf: d.multusConf, ...(d.links ? { links: d.links } : {}) },
      change.selection,
    );
  }

  async function reconcile(conf: MultusConf, kube: KubeClient, sb: KnownSandbox, pod: Pod): Promise<void> {
    const annotation = pod.metadata.annotations?.[NETWORKS_ANNOTATION] ?? '';
    const prefix = `${sb.containerId}\0${annotation}\0`;
    let selections;
    try {
      selections = parseNetworkSelections(annotation, pod.metadata.namespace);
    } catch (e) {
      if (!givenUp.has(prefix)) {
        givenUp.add(prefix);
        await warn(kube, pod, `the ${NETWORKS_ANNOTATION} annotation cannot be applied: ${toCniError(e).msg}`);
      }
      synced.set(sb.containerId, annotation);
      return;
    }
    const scratch = readScratchCache(conf.cniDir, sb.containerId);
    if (scratch.kind !== 'ok') return; // deleted meanwhile (or unreadable: the pod's DEL deals with it)
    const current = cachedAttachments(scratch.value, clusterIfNameOf(conf.cniDir, sb.containerId, scratch.value));
    const statics = 1 + (conf.systemNamespaces.includes(pod.metadata.namespace) ? 0 : conf.defaultNetworks.length);
    const changes = planDynamicChanges(current, statics, selections);
    let pending = false;
    for (const change of changes) {
      const key = `${sb.containerId}\0${change.kind}\0${changeKey(change)}`;
      if (givenUp.has(prefix + key)) continue;
      const retry = retries.get(key);
      if (retry && retry.next > now()) {
        pending = true;
        continue;
      }
      try {
        await apply(sb, pod, change);
        retries.delete(key);
        d.log.verbose(
          `dynamic networks: ${change.kind} ${changeKey(change)} in ${pod.metadata.namespace}/${pod.metadata.name}`,
        );
      } catch (e) {
        const error = toCniError(e);
        const what = `${change.kind === 'add' ? 'adding' : 'removing'} ${change.ifName} (${change.network})`;
        const message = `${what} failed: ${error.msg}`;
        if (isCallerFault(error.code)) {
          givenUp.add(prefix + key);
          retries.delete(key);
          await warn(kube, pod, message);
        } else {
          const attempts = (retry?.attempts ?? 0) + 1;
          retries.set(key, { attempts, next: now() + retryDelay(attempts, RETRY_BACKOFF) });
          pending = true;
          if (attempts === 1) await warn(kube, pod, `${message} (will retry)`);
          else d.log.error(`dynamic networks: ${message} (attempt ${attempts})`);
        }
      }
    }
    if (pending) synced.delete(sb.containerId);
    else synced.set(sb.containerId, annotation);
  }

  async function pass(): Promise<void> {
    let conf: MultusConf;
    try {
      conf = parseMultusConf(d.multusConf());
    } catch (e) {
      return d.log.verbose(`dynamic networks: no multus config yet: ${messageOf(e)}`);
    }
    const kube = await d.host.kube(conf, d.daemonEnv, d.log);
    if (!kube) return d.log.verbose('dynamic networks: the multus config names no kubeconfig');
    const sandboxes = listSandboxes(conf.cniDir);
    const known = new Set(sandboxes.map((s) => s.containerId));
    for (const id of synced.keys()) if (!known.has(id)) synced.delete(id);
    for (const sb of sandboxes) {
      if (stopped) return;
      let pod: Pod | undefined;
      try {
        pod = await pods.pod(kube, sb);
      } catch (e) {
        d.log.error(`dynamic networks: cannot read pod ${sb.namespace}/${sb.name}: ${messageOf(e)}`);
        continue;
      }
      if (
        !pod ||
        (sb.uid && pod.metadata.uid !== sb.uid) ||
        (pod.metadata as { deletionTimestamp?: string }).deletionTimestamp
      )
        continue;
      const annotation = pod.metadata.annotations?.[NETWORKS_ANNOTATION] ?? '';
      if (synced.get(sb.containerId) === annotation) continue;
      const target = pod;
      await d.queue
        .run(sb.containerId, async () => {
          // the pod may have changed while this waited behind its ADD or DEL: read it again inside the queue
          const fresh = (await pods.pod(kube, sb).catch(() => undefined)) ?? target;
          if (fresh.metadata.uid !== target.metadata.uid) return;
          await reconcile(conf, kube, sb, fresh);
        })
        .catch((e: unknown) =>
          d.log.error(`dynamic networks: ${sb.namespace}/${sb.name}: ${isCniError(e) ? e.msg : messageOf(e)}`),
        );
    }
  }

  const tick = (): Promise<void> => {
    running ??= pass().finally(() => {
      running = undefined;
    });
    return running;
  };
  const timer = setInterval(() => void tick(), d.intervalMs);
  timer.unref();
  void tick();
  return {
    tick,
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
