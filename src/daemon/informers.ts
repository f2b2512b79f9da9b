// placeholder until branch warm lands: the interface only; the daemon falls back to the per-request client.
import type { Logger } from '../base/log.ts';
import type { KubeClient } from '../k8s/types.ts';
import type { Metrics } from './metrics.ts';

export interface WarmKube {
  client: KubeClient;
  synced(): boolean;
  close(): void;
}

export function startWarmKube(_o: {
  kubeconfig: string;
  env: Record<string, string | undefined>;
  nodeName: string;
  log: Logger;
  metrics?: Metrics;
}): Promise<WarmKube> {
  return Promise.reject(new Error('informers are not available in this build'));
}
