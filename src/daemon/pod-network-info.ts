/**
 * daemon/pod-network-info.ts: the labels of network-metrics-daemon's `pod_network_name_info` series for one pod,
 * and the node's bounded set of them (pure; docs/resident.md, "Metrics"; docs/reliability.md, "Second probe").
 *
 * network-metrics-daemon (openshift/network-metrics-daemon, pkg/podnetwork and pkg/podmetrics) publishes, for every
 * pod of its node, one gauge series of value 0 per entry of the pod's network-status annotation that names an
 * interface: `pod_network_name_info{pod, namespace, interface, network_name}`, `network_name` being the entry's
 * `name` as written (`<namespace>/<nad>`, or the cluster network's name). Prometheus rules join kubelet's
 * `container_network_*{pod, namespace, interface}` to it to name the NAD of each interface. The daemon keeps the
 * series from its pod informer, so a cluster running multus-ts needs no second DaemonSet for them.
 *
 * A pod's owner may write that annotation too, so what it yields is bounded here: only entries whose interface
 * is a valid interface name and whose name fits a NAD reference, one series per interface, at most
 * MAX_SERIES_PER_POD per pod and MAX_SERIES per node; the rest is counted as dropped.
 */
import { validateIfName } from '../base/names.ts';
import type { Pod } from '../k8s/types.ts';
import { NETWORK_STATUS_ANNOTATION, statusAnnotationList } from '../multus/network-status.ts';

/** Series of one pod at most: more interfaces than any pod is given in practice. */
export const MAX_SERIES_PER_POD = 32;
/** Series of the node at most (kubelet's default 110 pods with about 18 interfaces each). */
export const MAX_SERIES = 2048;
/** `<namespace>/<name>`: a namespace (63), "/" and an object name (253). */
const MAX_NETWORK_NAME = 317;

export interface PodNetworkLabels {
  pod: string;
  namespace: string;
  interface: string;
  network_name: string;
}

/** A pod's series and how many entries were left out by the per-pod bound. */
export interface PodNetworkEntries {
  labels: PodNetworkLabels[];
  dropped: number;
}

function isIfName(name: string): boolean {
  try {
    validateIfName(name);
    return true;
  } catch {
    return false;
  }
}

/**
 * The pod's series, or undefined when its annotation is not a JSON list (network-metrics-daemon then keeps the
 * series it had and retries). An absent or empty annotation gives none; entries without a valid interface name,
 * with an over-long name or repeating an interface are skipped; past MAX_SERIES_PER_POD they are dropped.
 */
export function podNetworkLabels(pod: Pod): PodNetworkEntries | undefined {
  const { name, namespace } = pod.metadata;
  const entries = statusAnnotationList(pod.metadata.annotations?.[NETWORK_STATUS_ANNOTATION]);
  if (entries === undefined) return undefined;
  const labels: PodNetworkLabels[] = [];
  const seen = new Set<string>();
  let dropped = 0;
  for (const e of entries) {
    if (e === null) continue; // Go decodes it as an empty entry
    if (typeof e !== 'object') return undefined;
    const entry = e as { name?: unknown; interface?: unknown };
    if (typeof entry.interface !== 'string' || entry.interface === '') continue;
    const networkName = typeof entry.name === 'string' ? entry.name : '';
    if (!isIfName(entry.interface) || seen.has(entry.interface) || networkName.length > MAX_NETWORK_NAME) {
      dropped++;
      continue;
    }
    seen.add(entry.interface);
    if (labels.length === MAX_SERIES_PER_POD) dropped++;
    else labels.push({ pod: name, namespace, interface: entry.interface, network_name: networkName });
  }
  return { labels, dropped };
}

/** What changes in the gauge for one pod event. */
export interface SeriesChange {
  remove: PodNetworkLabels[];
  add: PodNetworkLabels[];
}

/**
 * The series published for the node's pods, within MAX_SERIES: a pod's event replaces its series; when the node's
 * bound is reached, the pod gets the room left and the rest counts as dropped until its next event.
 */
export class PodNetworkSeries {
  private readonly byPod = new Map<string, PodNetworkEntries>();
  private total = 0;
  private droppedTotal = 0;

  constructor(private readonly max = MAX_SERIES) {}

  /** Entries of the node's pods not published now (invalid, repeated, or past a bound). */
  get dropped(): number {
    return this.droppedTotal;
  }

  /** The change for one pod event, or undefined when the pod's series stay as they are. */
  update(pod: Pod, deleted: boolean): SeriesChange | undefined {
    const key = `${pod.metadata.namespace}/${pod.metadata.name}`;
    const next = deleted ? { labels: [], dropped: 0 } : podNetworkLabels(pod);
    if (next === undefined) return undefined; // not a list: keep what was published, as network-metrics-daemon does
    const old = this.byPod.get(key) ?? { labels: [], dropped: 0 };
    this.total -= old.labels.length;
    this.droppedTotal -= old.dropped;
    const room = Math.max(0, this.max - this.total);
    const add = next.labels.slice(0, room);
    const kept = { labels: add, dropped: next.dropped + next.labels.length - add.length };
    this.total += add.length;
    this.droppedTotal += kept.dropped;
    if (add.length > 0 || kept.dropped > 0) this.byPod.set(key, kept);
    else this.byPod.delete(key);
    return { remove: old.labels, add };
  }
}
