/**
 * publish.ts: telling Kubernetes what ADD attached (I/O through the KubeClient seam).
 *
 * `publishNetworkStatus` writes `k8s.v1.cni.cncf.io/network-status` through the pods/status subresource,
 * starting from the pod the ADD already fetched (its resourceVersion), so a quiet pod costs exactly one
 * request; a 409 Conflict re-reads the pod (checking its UID) and retries, up to 5 times (client-go
 * DefaultRetry). A pod deleted meanwhile is tolerated by status code, not message text (PR #1407).
 * `emitEvents` posts the AddedInterface / NoNetworkFound events: best effort, errors only logged.
 */
import { CniCode, CniError, messageOf, wrapError } from '../base/errors.ts';
import type { KubeClient, Pod } from '../k8s/types.ts';
import type { Logger } from '../base/log.ts';
import type { NetworkStatus } from './network-status.ts';
import { formatNetworkStatus } from './network-status.ts';
import { httpStatusOf } from '../k8s/types.ts';

const NETWORK_STATUS_ANNOTATION = 'k8s.v1.cni.cncf.io/network-status';
const CONFLICT_ATTEMPTS = 5;

export async function publishNetworkStatus(
  kube: KubeClient,
  pod: Pod,
  statuses: NetworkStatus[],
  log: Logger,
): Promise<void> {
  if (statuses.length === 0) return;
  const value = formatNetworkStatus(statuses);
  let current = pod;
  for (let attempt = 1; ; attempt++) {
    const updated: Pod = {
      ...current,
      metadata: {
        ...current.metadata,
        annotations: { ...current.metadata.annotations, [NETWORK_STATUS_ANNOTATION]: value },
      },
    };
    try {
      await kube.updatePodStatus(updated);
      return;
    } catch (e) {
      const status = httpStatusOf(e);
      if (status === 404) {
        log.verbose(
          `pod ${pod.metadata.namespace}/${pod.metadata.name} was deleted before its network-status was written`,
        );
        return;
      }
      if (status !== 409 || attempt >= CONFLICT_ATTEMPTS) throw wrapError(e, 'error setting the networks status');
      const fresh = await rereadPod(kube, pod);
      if (!fresh)
        return log.verbose(
          `pod ${pod.metadata.namespace}/${pod.metadata.name} was deleted while its network-status was written`,
        );
      current = fresh;
    }
  }
}

/** The pod again after a conflict; undefined when it was deleted meanwhile. */
async function rereadPod(kube: KubeClient, pod: Pod): Promise<Pod | undefined> {
  let fresh: Pod;
  try {
    fresh = await kube.getPod(pod.metadata.namespace, pod.metadata.name);
  } catch (e) {
    if (httpStatusOf(e) === 404) return undefined;
    throw wrapError(e, 'error setting the networks status');
  }
  if (fresh.metadata.uid !== pod.metadata.uid) {
    throw new CniError(
      CniCode.InvalidConfig,
      `error setting the networks status: expected pod ${pod.metadata.namespace}/${pod.metadata.name} UID "${pod.metadata.uid}" but got "${fresh.metadata.uid}" from Kube API`,
    );
  }
  return fresh;
}

export interface PodEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

/**
 * Posts the events one after another on the client's kept-alive connection (concurrent posts each opened a
 * TLS connection of their own: more CPU than they saved); never throws.
 */
export async function emitEvents(kube: KubeClient, pod: Pod, events: PodEvent[], log: Logger): Promise<void> {
  for (const event of events) {
    try {
      await kube.createEvent({ pod, ...event });
    } catch (e) {
      log.verbose(
        `event ${event.reason} for ${pod.metadata.namespace}/${pod.metadata.name} not recorded: ${messageOf(e)}`,
      );
    }
  }
}

/** `Add <ifname> [<ip/prefix> ...] from <network>` (Multus' AddedInterface message). */
export function addedInterfaceEvent(ifName: string, addresses: string[], displayName: string): PodEvent {
  const from = displayName ? ` from ${displayName}` : '';
  return { type: 'Normal', reason: 'AddedInterface', message: `Add ${ifName} [${addresses.join(' ')}]${from}` };
}
