/**
 * daemon/dra-part.ts: the kubelet DRA plugin as a component of the daemon (daemon/components.ts), started only with
 * `draNetworks: true` (docs/dra-networks.md, "Design: the driver"): dra/plugin.ts is imported then, and with it
 * the gRPC library (kubelet/load.ts), so a daemon without it keeps its memory. It has a lean client of its own
 * (claims, their status, events, the Node, the slices) and reads NADs from the informers' cache, whose changes its
 * slices follow. Its checkpoints live in `<cniDir>/dra` (cniDir: the 00-multus.conf key, default
 * /var/lib/cni/multus, on the host). Stopped by the daemon's signal: both sockets removed, the slices kept.
 * It never holds the daemon's readiness: CNI calls do not depend on it, and a slice it cannot publish yet (the API
 * away, a missing RBAC rule) is logged and retried, not a reason to refuse pods their networks.
 * Tested by test/unit/daemon/dra-part.test.ts.
 */
import { hostname } from 'node:os';
import { join } from 'node:path';
import type { KubeClient, Nad, SliceWriter } from '../k8s/types.ts';
import type { DraPlugin, DraSettings } from '../dra/plugin.ts';
import type { Component } from './components.ts';
import { StartError } from './components.ts';
import type { Shared } from './parts.ts';

const DEFAULT_CNI_DIR = '/var/lib/cni/multus';

/** The plugin's settings from the daemon config and environment. */
export function draSettings(s: Pick<Shared, 'cfg' | 'io'>): DraSettings {
  const { cfg } = s;
  const cniDir =
    typeof cfg.multusKeys.cniDir === 'string' && cfg.multusKeys.cniDir ? cfg.multusKeys.cniDir : DEFAULT_CNI_DIR;
  return {
    driver: cfg.dra.driverName,
    kubeletDir: cfg.dra.kubeletDir,
    checkpointDir: join(cniDir, 'dra'),
    allowInlineFromClaim: cfg.dra.inlineConfigFromClaims,
    maxDevices: cfg.draMaxNetworkDevices,
    nodeName: s.io.env.MULTUS_NODE_NAME || hostname(),
  };
}

/** The NADs: the informers' cache when there is one (its changes move the slices), else each one asked for. */
function nadsOf(s: Shared, api: KubeClient) {
  const warm = s.warm;
  if (!warm) {
    s.log.error('dra: no NAD informer: only the device "any" is published, no NAD has a device of its own');
    return { list: (): Nad[] => [], onChange: () => () => {}, get: (ns: string, n: string) => api.getNad(ns, n) };
  }
  return { ...warm.nads, get: (ns: string, n: string) => warm.client.getNad(ns, n) };
}

/** The DRA plugin, when `draNetworks` is on. */
export const draPlugin = (s: Shared): Component => {
  let plugin: DraPlugin | undefined;
  let api: (KubeClient & SliceWriter) | undefined;
  return {
    name: 'DRA plugin',
    async start(signal) {
      if (!s.cfg.dra.networks) return;
      const kubeconfig = typeof s.cfg.multusKeys.kubeconfig === 'string' ? s.cfg.multusKeys.kubeconfig : '';
      const { loadKubeClient } = await import('../k8s/client.ts');
      api = await loadKubeClient({ kubeconfig, env: s.io.env, log: s.log });
      if (!api)
        throw new StartError('draNetworks is true but there is no Kubernetes API (set kubeconfig, or run in-cluster)');
      const { startDraPlugin } = await import('../dra/plugin.ts');
      const settings = draSettings(s);
      plugin = await startDraPlugin({ settings, api, nads: nadsOf(s, api), log: s.log, signal });
    },
    async stop() {
      await plugin?.stopped; // the daemon's signal is aborted by now
      api?.close();
    },
  };
};
