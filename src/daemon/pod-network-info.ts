/**
 * daemon/pod-network-info.ts: the labels of network-metrics-daemon's `pod_network_name_info` series for one pod
 * (pure; docs/resident.md, "Metrics").
 *
 * network-metrics-daemon (openshift/network-metrics-daemon, pkg/podnetwork and pkg/podmetrics) publishes, for every
 * pod of its node, one gauge series of value 0 per entry of the pod's network-status annotation that names an
 * interface: `pod_network_name_info{pod, namespace, interface, network_name}`, `network_name` being the entry's
 * `name` as written (`<namespace>/<nad>`, or the cluster network's name). Prometheus rules join kubelet's
 * `container_network_*{pod, namespace, interface}` to it to name the NAD of each interface. The daemon keeps the
 * series from its pod informer, so a cluster running multus-ts needs no second DaemonSet for them.
 */
import type { Pod } from '../k8s/types.ts';

export const NETWORK_STATUS_ANNOTATION = 'k8s.v1.cni.cncf.io/network-status';

export interface PodNetworkLabels {
  pod: string;
  namespace: string;
  interface: string;
  network_name: string;
}

/**
 * The pod's series, or undefined when its annotation is not a JSON list (network-metrics-daemon then keeps the
 * series it had and retries). An absent or empty annotation gives none; entries without an interface are skipped.
 */
export function podNetworkLabels(pod: Pod): PodNetworkLabels[] | undefined {
  const { name, namespace } = pod.metadata;
  const text = pod.metadata.annotations?.[NETWORK_STATUS_ANNOTATION];
  if (text === undefined || text === '') return [];
  let entries: unknown;
  try {
    entries = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!Array.isArray(entries)) return undefined;
  const out: PodNetworkLabels[] = [];
  for (const e of entries) {
    if (e === null) continue; // Go decodes it as an empty entry
    if (typeof e !== 'object') return undefined;
    const entry = e as { name?: unknown; interface?: unknown };
    if (typeof entry.interface !== 'string' || entry.interface === '') continue;
    const networkName = typeof entry.name === 'string' ? entry.name : '';
    out.push({ pod: name, namespace, interface: entry.interface, network_name: networkName });
  }
  return out;
}
