/**
 * dra/plugin.ts: the kubelet DRA plugin of the resident daemon (I/O), started only with `draNetworks: true`
 * (daemon/dra-part.ts), so a daemon without it never loads the gRPC library (kubelet/load.ts).
 *
 * It serves `DRAPlugin` v1 and v1beta1 (prepare.ts answers both) on `<kubeletDir>/plugins/<driver>/dra.sock`, then
 * registers on the kubelet's plugin watcher with `<kubeletDir>/plugins_registry/<driver>-reg.sock` (GetInfo: type
 * `DRAPlugin`, the driver's name, that socket, versions `v1.DRAPlugin` and `v1beta1.DRAPlugin`), and keeps the
 * node's ResourceSlices (slice-sync.ts), synced again each time the kubelet says the plugin registered (the kubelet
 * deletes a driver's slices while its plugin is away). Both sockets go when the daemon's signal aborts; the slices
 * stay (docs/dra-networks.md, "Design: the driver"). Tested by test/unit/dra/plugin.test.ts (over the sockets).
 */
import { join } from 'node:path';
import { messageOf } from '../base/errors.ts';
import type { Logger } from '../base/log.ts';
import type { KubeClient, Nad } from '../k8s/types.ts';
import { loadKubelet } from '../kubelet/load.ts';
import type { CheckpointStore } from './checkpoint.ts';
import { fileCheckpoints } from './checkpoint.ts';
import { networkDeviceName } from './device-names.ts';
import type { ClaimRef, Preparer } from './prepare.ts';
import { preparer } from './prepare.ts';
import type { NadSource, SliceApi, SliceSync } from './slice-sync.ts';
import { startSliceSync } from './slice-sync.ts';
import { optsIn } from './slices.ts';

export interface DraSettings {
  /** `draDriverName`. */
  driver: string;
  /** `kubeletDir` (default /var/lib/kubelet). */
  kubeletDir: string;
  /** Where the checkpoints are kept: `<cniDir>/dra`. */
  checkpointDir: string;
  /** `draInlineConfigFromClaims`. */
  allowInlineFromClaim: boolean;
  /** `draMaxNetworkDevices`. */
  maxDevices: number;
  nodeName: string;
}

export interface DraPluginOptions {
  settings: DraSettings;
  /** The lean client: claims, status, events, slices, the Node. */
  api: SliceApi & Pick<KubeClient, 'getResourceClaim' | 'getNad' | 'applyClaimDevices' | 'createEvent'>;
  /** NAD lookups (the informers' cache when there is one) and the NADs the slices follow. */
  nads: NadSource & { get(namespace: string, name: string): Promise<Nad> };
  log: Logger;
  signal: AbortSignal;
  /** Tests: another store than the files under checkpointDir. */
  checkpoints?: CheckpointStore;
  /** Tests: no slice sync. */
  slices?: boolean;
}

export interface DraPlugin {
  socket: string;
  registrationSocket: string;
  /** Undefined until the sync starts (never with `slices: false`). */
  sliceSync: SliceSync | undefined;
  /** Settles once both sockets are gone (after the signal). */
  stopped: Promise<void>;
}

export const pluginSocket = (s: DraSettings): string => join(s.kubeletDir, 'plugins', s.driver, 'dra.sock');
export const registrationSocket = (s: DraSettings): string =>
  join(s.kubeletDir, 'plugins_registry', `${s.driver}-reg.sock`);

/** The NAD a per-NAD device of this node's pool stands for. */
function deviceNetworks(nads: NadSource, pool: string) {
  return (p: string, device: string): { namespace: string; name: string } | undefined => {
    if (p !== pool) return undefined;
    const nad = nads
      .list()
      .find((n) => optsIn(n) && networkDeviceName(n.metadata.namespace, n.metadata.name) === device);
    return nad ? { namespace: nad.metadata.namespace, name: nad.metadata.name } : undefined;
  };
}

type Callback = (err: Error | null, value?: object) => void;

/** The DRAPlugin service's handlers (v1 and v1beta1 share them). */
function handlers(p: Preparer) {
  const reply = (work: Promise<object>, cb: Callback): void =>
    void work.then(
      (claims) => cb(null, { claims }),
      (e: unknown) => cb(new Error(messageOf(e))),
    );
  return {
    NodePrepareResources: (call: { request: { claims: ClaimRef[] } }, cb: Callback) =>
      reply(p.prepare(call.request.claims), cb),
    NodeUnprepareResources: (call: { request: { claims: ClaimRef[] } }, cb: Callback) =>
      reply(p.unprepare(call.request.claims), cb),
  };
}

/** Serves the plugin and registers it (see the file comment); throws when a socket cannot be served. */
export async function startDraPlugin(o: DraPluginOptions): Promise<DraPlugin> {
  const { settings: s, log, signal } = o;
  const kubelet = await loadKubelet();
  const p = preparer({
    // the client's methods, not a spread of it (they live on its class)
    kube: {
      getResourceClaim: (ns, name, opts) => o.api.getResourceClaim(ns, name, opts),
      applyClaimDevices: (ns, name, manager, devices) => o.api.applyClaimDevices(ns, name, manager, devices),
      createEvent: (event, opts) => o.api.createEvent(event, opts),
      getNad: (ns, name) => o.nads.get(ns, name),
    },
    checkpoints: o.checkpoints ?? fileCheckpoints(s.checkpointDir),
    driver: s.driver,
    allowInlineFromClaim: s.allowInlineFromClaim,
    deviceNetwork: deviceNetworks(o.nads, s.nodeName),
    log,
  });
  const h = handlers(p);
  const socket = pluginSocket(s);
  const services = [kubelet.SERVICES.draV1, kubelet.SERVICES.draV1beta1].map((ref) => ({
    service: kubelet.serviceDefinition(ref),
    handlers: h,
  }));
  const serving = await kubelet.serveUnix({ socketPath: socket, services, signal });
  let sliceSync: SliceSync | undefined;
  const regSocket = registrationSocket(s);
  // a failure leaves the service socket to the signal, which the daemon aborts when a start fails
  const registration = await kubelet.serveRegistration({
    socketPath: regSocket,
    signal,
    info: {
      type: 'DRAPlugin',
      name: s.driver,
      endpoint: socket,
      supportedVersions: ['v1.DRAPlugin', 'v1beta1.DRAPlugin'],
    },
    onStatus: (st) => {
      if (!st.pluginRegistered) log.error(`dra: the kubelet refused plugin ${s.driver}: ${st.error}`);
      else {
        log.verbose(`dra: registered with the kubelet as DRA driver ${s.driver}`);
        sliceSync?.kick();
      }
    },
  });
  if (o.slices !== false) {
    const { nodeName, driver, maxDevices } = s;
    sliceSync = startSliceSync({ api: o.api, nads: o.nads, log, signal, nodeName, driver, maxDevices });
  }
  log.verbose(`dra: DRA driver ${s.driver} serving ${socket}, registration ${regSocket}`);
  const stopped = Promise.all([serving.stopped, registration.stopped]).then(() => undefined);
  return { socket, registrationSocket: regSocket, sliceSync, stopped };
}
