/**
 * hotplug/sandboxes.ts: the pod sandboxes multus knows of on this node, from its caches (I/O, read-only).
 *
 * The libcni result caches record each attachment's container ID, netns path and CNI_ARGS (pod namespace,
 * name, UID); a sandbox counts while its container still has a scratch cache. Used by `multus hotplug` to find
 * a pod's sandbox and by dynamic networks to know which pods to follow.
 * Tested by test/unit/hotplug/dynamic.test.ts, test/e2e-k8s/hotplug.test.ts.
 */
import { listResultCaches } from '../cni/result-cache.ts';
import { readScratchCache } from '../multus/scratch-cache.ts';

export interface KnownSandbox {
  containerId: string;
  netns: string;
  namespace: string;
  name: string;
  /** The pod UID the runtime gave (K8S_POD_UID), '' when it gave none. */
  uid: string;
}

const argOf = (pairs: [string, string][], key: string): string => pairs.find(([k]) => k === key)?.[1] ?? '';

export function listSandboxes(cniDir: string): KnownSandbox[] {
  const found = new Map<string, KnownSandbox>();
  for (const { outcome } of listResultCaches(cniDir)) {
    if (outcome.kind !== 'ok') continue;
    const e = outcome.value;
    if (!e.containerId || !e.netns || found.has(e.containerId)) continue;
    const namespace = argOf(e.cniArgs, 'K8S_POD_NAMESPACE');
    const name = argOf(e.cniArgs, 'K8S_POD_NAME');
    if (!namespace || !name) continue;
    try {
      if (readScratchCache(cniDir, e.containerId).kind !== 'ok') continue;
    } catch {
      continue; // a container ID that is no safe file name
    }
    found.set(e.containerId, {
      containerId: e.containerId,
      netns: e.netns,
      namespace,
      name,
      uid: argOf(e.cniArgs, 'K8S_POD_UID'),
    });
  }
  return [...found.values()];
}
