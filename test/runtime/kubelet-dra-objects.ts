/** The DaemonSet objects of the DRA networks suite (kubelet-dra-networks.ts) and bench (scripts/bench/dra/run.ts). */
import { type Obj, docs, withApiServer } from '../helpers/manifests.ts';

/**
 * The resident manifest with the API server's address (no kube-proxy here) and DRA networks on, beside the DRA
 * piece: the daemon's config says `draNetworks` (and the opt-in for claims' inline configs); the shim waits 20 s for
 * a daemon being restarted (the kill cases) before its thin fallback.
 */
export function draDaemonSetObjects(apiPort: string): Obj[] {
  const objs = [...docs('multus-ts-resident.yml'), ...docs('multus-ts-dra-networks.yml')];
  for (const o of objs) {
    if (o.kind !== 'ConfigMap') continue;
    const data = o.data as Record<string, string>;
    const conf = JSON.parse(data['daemon-config.json']!) as Record<string, unknown>;
    const dra = { draNetworks: true, draInlineConfigFromClaims: true, shimWaitSeconds: 20 };
    data['daemon-config.json'] = JSON.stringify({ ...conf, ...dra });
  }
  return withApiServer(objs, apiPort);
}
