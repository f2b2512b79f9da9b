/** What the density bench counts as a pod that got its networks (run.ts after kube-burner, burst.ts after a burst). */

/**
 * The pod's Ready condition is True; with `since` (ms), also its containers are new since that second: the
 * condition became True then, or every container (re)started then. The second test is for a pod whose sandbox
 * came back before kubelet's first status update after a restart: the API never saw it NotReady, so its Ready
 * condition kept the old lastTransitionTime (one pod in 100 in a cache-full burst, 2026-12-01).
 */
export function isReady(pod: any, since?: number): boolean {
  const ready = (pod?.status?.conditions ?? []).find((c: any) => c.type === 'Ready');
  if (ready?.status !== 'True') return false;
  if (since === undefined) return true;
  const second = Math.floor(since / 1000) * 1000;
  if (Date.parse(ready.lastTransitionTime) >= second) return true;
  const cs = (pod?.status?.containerStatuses ?? []) as any[];
  return cs.length > 0 && cs.every((c) => Date.parse(c?.state?.running?.startedAt ?? '') >= second);
}

/**
 * The pod's network-status names exactly its three networks with addresses: the cluster network and each of
 * `nads` of its namespace (`<namespace>/<name>`).
 */
export function hasAllNetworks(pod: any, nads: string[]): boolean {
  let st: any[];
  try {
    st = JSON.parse(pod?.metadata?.annotations?.['k8s.v1.cni.cncf.io/network-status'] ?? '[]') as any[];
  } catch {
    return false;
  }
  if (!Array.isArray(st)) return false;
  const names = st.filter((e) => (e?.ips ?? []).length > 0).map((e) => e.name);
  const ns = pod?.metadata?.namespace;
  return names.length === 1 + nads.length && nads.every((n) => names.includes(`${ns}/${n}`));
}
