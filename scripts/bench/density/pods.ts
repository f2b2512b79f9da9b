/** What the density bench counts as a pod that got its networks (run.ts after kube-burner, burst.ts after a burst). */

/** The pod's Ready condition is True (and, with `since` in ms, became so at or after that second). */
export function isReady(pod: any, since?: number): boolean {
  const ready = (pod?.status?.conditions ?? []).find((c: any) => c.type === 'Ready');
  if (ready?.status !== 'True') return false;
  return since === undefined || Date.parse(ready.lastTransitionTime) >= Math.floor(since / 1000) * 1000;
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
