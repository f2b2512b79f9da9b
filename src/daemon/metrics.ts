// placeholder until branch warm lands: the interface only; the daemon treats metrics as not available.
export interface Metrics {
  requestStarted(command: string): () => void; // returns done(); tracks in-flight
  requestFinished(command: string, outcome: 'success' | 'error', seconds: number): void;
  delegateCall(pluginType: string, command: string, seconds: number, ok: boolean): void;
  apiCall(verb: string, resource: string, seconds: number, ok: boolean): void;
  informerSynced(name: string, synced: boolean): void;
  render(): Promise<{ contentType: string; body: string }>;
}

export function createMetrics(): Metrics {
  throw new Error('metrics are not available in this build (metricsPort needs the prom-client registry)');
}
