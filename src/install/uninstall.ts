/**
 * uninstall.ts: `multus install --cleanup-when-deleted=<namespace>/<daemonset>` (docs/install.md, "Helm"): when the
 * installer is stopped because its DaemonSet was deleted (`helm uninstall`, `kubectl delete ds`), it removes what
 * makes the runtime call multus on this node, 00-multus.conf(list) and the kubeconfig, so new pods get the primary
 * network instead of failing (Multus #592). Stopped for any other reason (an upgrade's rolling restart, a pod
 * deleted by hand, a node drain), it leaves them, so there is no gap in which new pods get the primary network
 * alone (Multus' `--cleanup-config-on-exit` removes them on every exit).
 *
 * `deletionState` is the one API call (GET the DaemonSet with the pod's service account token): 404 or a
 * deletionTimestamp is deleted. `helm uninstall` deletes the DaemonSet, its role and its service account together,
 * so by the time the pod is stopped the question itself is refused (401 or 403): that counts as deleted when the
 * same question was answered when the installer started (its identity and role worked then, the uninstall took
 * them). An error or no answer is unknown, and unknown keeps the files (the safe side).
 *
 * With `--dra-driver-name`, the uninstall also deletes this node's ResourceSlices of that DRA driver (one
 * DELETE of the collection, `spec.nodeName` and `spec.driver` field selectors, as the kubelet deletes a driver's
 * slices): best effort, since `helm uninstall` may have taken the role already; the kubelet then deletes them
 * itself once the plugin's registration socket has been gone 30 s (docs/dra-networks.md, "Design: the driver").
 */
import type { Call } from '../k8s/calls.ts';
import { callAsPod, type PodCredentials } from './node-token.ts';

/** `revoked`: 401 or 403, the account or its role gone (helm deletes them with the DaemonSet, all at once). */
export type DeletionState = 'deleted' | 'present' | 'revoked' | { unknown: string };

export async function deletionState(r: PodCredentials & { namespace: string; name: string }): Promise<DeletionState> {
  const call: Call = {
    verb: 'get',
    method: 'GET',
    group: 'apps',
    resource: 'daemonsets',
    namespace: r.namespace,
    name: r.name,
    path: `/apis/apps/v1/namespaces/${encodeURIComponent(r.namespace)}/daemonsets/${encodeURIComponent(r.name)}`,
  };
  const what = `GET daemonset ${r.namespace}/${r.name}`;
  let wire;
  try {
    wire = await callAsPod(r, call, undefined, what);
  } catch (e) {
    return { unknown: (e as Error).message };
  }
  if (wire.status === 404) return 'deleted';
  if (wire.status === 401 || wire.status === 403) return 'revoked';
  if (wire.status !== 200) return { unknown: `${what}: HTTP ${wire.status}` };
  try {
    const ds = JSON.parse(wire.body.toString('utf8')) as { metadata?: { deletionTimestamp?: unknown } };
    return ds.metadata?.deletionTimestamp ? 'deleted' : 'present';
  } catch {
    return { unknown: `${what}: the answer is not JSON` };
  }
}

/** DELETE of this node's ResourceSlices of `driver` (the DRA driver's, dra/slice-sync.ts); a one-line outcome. */
export async function deleteDraSlices(r: PodCredentials & { nodeName: string; driver: string }): Promise<string> {
  const selector = encodeURIComponent(`spec.nodeName=${r.nodeName},spec.driver=${r.driver}`);
  const call: Call = {
    verb: 'delete',
    method: 'DELETE',
    group: 'resource.k8s.io',
    resource: 'resourceslices',
    namespace: '',
    name: '',
    path: `/apis/resource.k8s.io/v1/resourceslices?fieldSelector=${selector}`,
    clusterScoped: true,
  };
  const what = `DELETE the ResourceSlices of driver ${r.driver} on node ${r.nodeName}`;
  try {
    const wire = await callAsPod(r, call, undefined, what);
    if (wire.status >= 200 && wire.status < 300)
      return `deleted the ResourceSlices of driver ${r.driver} on node ${r.nodeName}`;
    return `${what}: HTTP ${wire.status} (the kubelet deletes them once the driver has been gone 30 s)`;
  } catch (e) {
    return `${(e as Error).message} (the kubelet deletes them once the driver has been gone 30 s)`;
  }
}
