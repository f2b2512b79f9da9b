/**
 * publish.ts: telling Kubernetes what ADD attached (I/O through the KubeClient seam).
 *
 * `editNetworkStatus` is the one writer of the network-status annotation (ADD's and hot-plug's): through the
 * pods/status subresource, starting from the pod the call already fetched (its resourceVersion), so a quiet pod
 * costs exactly one request; a 409 Conflict re-reads the pod (checking its UID) and edits again, up to 5 times
 * (client-go DefaultRetry). A pod deleted meanwhile is tolerated by status code, not message text
 * (k8snetworkplumbingwg/multus-cni#1407).
 * `emitEvents` posts the AddedInterface / NoNetworkFound events: best effort, errors only logged.
 * Tested by test/unit/multus/kube-commands.test.ts (409s, deleted pods), test/unit/hotplug/delegate.test.ts.
 */
import { CniCode, CniError, messageOf, wrapError } from '../base/errors.ts';
import type { KubeClient, Pod } from '../k8s/types.ts';
import type { Logger } from '../base/log.ts';
import type { PluginResult } from '../cni/result.ts';
import type { NetworkStatus } from './network-status.ts';
import { NETWORK_STATUS_ANNOTATION, formatNetworkStatus, parseStatusEntries } from './network-status.ts';
import { httpStatusOf } from '../k8s/types.ts';

const CONFLICT_ATTEMPTS = 5;

/**
 * The one writer of the network-status annotation: `edit` turns the entries the pod has into the entries it
 * gets (ADD: all of them replaced; hot-plug: one interface's entries replaced or removed), written through
 * pods/status from the pod in hand. A 409 re-reads the pod (same UID, else the write fails) and edits again.
 */
export async function editNetworkStatus(
  kube: KubeClient,
  pod: Pod,
  edit: (current: NetworkStatus[]) => NetworkStatus[],
  log: Logger,
): Promise<void> {
  const where = `pod ${pod.metadata.namespace}/${pod.metadata.name}`;
  let current = pod;
  for (let attempt = 1; ; attempt++) {
    const entries = edit(parseStatusEntries(current.metadata.annotations?.[NETWORK_STATUS_ANNOTATION]));
    const annotations = { ...current.metadata.annotations, [NETWORK_STATUS_ANNOTATION]: formatNetworkStatus(entries) };
    try {
      await kube.updatePodStatus({ ...current, metadata: { ...current.metadata, annotations } });
      return;
    } catch (e) {
      const status = httpStatusOf(e);
      if (status === 404) return log.verbose(`${where} was deleted before its network-status was written`);
      if (status !== 409 || attempt >= CONFLICT_ATTEMPTS) throw wrapError(e, 'error setting the networks status');
      const fresh = await rereadPod(kube, pod);
      if (!fresh) return log.verbose(`${where} was deleted while its network-status was written`);
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
  /** A fixed name: reported once while the event lives (k8s/types.ts EventInput). */
  name?: string;
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

/**
 * `Add <ifname> [<ip/prefix> ...] from <network>` (Multus' AddedInterface message), for an attachment whose result
 * names an IP or an interface; none otherwise.
 */
export function addedInterfaceEvents(
  attachment: { ifName: string; displayName: string },
  result: PluginResult,
): PodEvent[] {
  const addresses = result.ips().map((ip) => ip.address);
  if (addresses.length === 0 && result.interfaces().length === 0) return [];
  const from = attachment.displayName ? ` from ${attachment.displayName}` : '';
  const message = `Add ${attachment.ifName} [${addresses.join(' ')}]${from}`;
  return [{ type: 'Normal', reason: 'AddedInterface', message }];
}

export function removedInterfaceEvent(ifName: string, displayName: string): PodEvent {
  return { type: 'Normal', reason: 'RemovedInterface', message: `Removed ${ifName} from ${displayName}` };
}
