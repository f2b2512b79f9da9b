/**
 * informers/informer-types.ts: what the informers share (types only): the objects they keep, what they report to
 * the daemon's metrics, where their credentials come from (the lean client's: src/k8s/client.ts, so a
 * kubeconfig's token file is re-read and a rotated certificate picked up as for every other request).
 */
import type { Env } from '../cni/request.ts';

/** What the informers report to the daemon's metrics (daemon/metrics.ts). */
export interface InformerMetrics {
  apiCall(verb: string, resource: string, seconds: number, ok: boolean): void;
  informerSynced(name: string, synced: boolean): void;
}

/** An object as the API server sends it (raw JSON), or as an informer's trim left it. */
export type Obj = {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string; [k: string]: unknown };
  [k: string]: unknown;
};

/** Where the informers' credentials come from. */
export interface InformerSource {
  /** The `kubeconfig` key of the daemon's config ('' for the in-cluster service account). */
  kubeconfig: string;
  env: Env;
}
