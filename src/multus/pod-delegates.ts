/**
 * pod-delegates.ts: the ordered delegate list of a pod (docs/behaviour.md#ordering) from what was read for the call
 * (podnetworks.ts `gatherPodInputs`), pure: no I/O, no events posted. The one resolution of ADD, DEL and
 * `multus plan`: cluster network (a NAD in multusNamespace, a config name or a path), the default networks, the
 * per-pod default-network override (docs/behaviour.md#default-network-annotation), then one delegate per selection
 * element in annotation order (docs/behaviour.md#networks-annotation, docs/behaviour.md#nad), then each attachment's
 * device (docs/behaviour.md#device-ids, devices/attachment-devices.ts `assignDevices`). Every error goes to the
 * sink and the resolution goes on past it (a failing element is left out), so `multus plan` lists every error an
 * ADD could hit, in the order ADD meets them; ADD fails with the first. The Warning events of a missing NAD or a
 * refused pool are returned in the sink, each with the number of errors met before it, so ADD posts only those an
 * ADD that stops at its first error would post.
 * Tested by test/unit/multus/plan-add.test.ts, test/unit/multus/kube-commands.test.ts.
 */
import { CniCode, CniError, toCniError, wrapError } from '../base/errors.ts';
import type { Nad, Pod } from '../k8s/types.ts';
import type { DeviceAssignment, DeviceFacts, DeviceWant } from '../devices/attachment-devices.ts';
import { assignDevices } from '../devices/attachment-devices.ts';
import type { ClaimRequestRef } from '../devices/claim-request.ts';
import { injectDeviceIdIntoNetwork } from '../devices/devices.ts';
import type { MultusConf } from './conf.ts';
import { resolveStaticNetworks } from './conf.ts';
import { PoolRefused, delegateFromNad } from './nad.ts';
import type { ClaimNetwork, ClaimNetworkRef } from './claim-attach.ts';
import { inlineDisplayName } from './claim-attach.ts';
import type { AttachmentSource, Delegate } from './attachments.ts';
import type { NetworkSelection } from './selection.ts';
import {
  NETWORKS_ANNOTATION,
  checkNamespaceIsolation,
  parseDefaultNetworkAnnotation,
  parseNetworkSelections,
  validateDefaultRoutes,
} from './selection.ts';

export const DEFAULT_NETWORK_ANNOTATION = 'v1.multus-cni.io/default-network';

export type PodLookup = { kind: 'found'; pod: Pod } | { kind: 'unknown'; reason: string };

/** One NAD as the call read it: found, missing (404), or unreadable (code 11). */
export type NadRead = { kind: 'found'; nad: Nad } | { kind: 'missing' } | { kind: 'error'; error: CniError };

/** What the API said about a pod's networks, read once for the call (podnetworks.ts `gatherPodNetworks`). */
export interface PodNetworks {
  lookup: PodLookup;
  /** clusterNetwork's and defaultNetworks' plain names found as NADs in multusNamespace, or why they could not be read. */
  clusterNads: Map<string, Nad> | CniError;
  /** Each NAD the pod's annotations or its claim networks name, by `namespace/name`. */
  nads: Map<string, NadRead>;
  /** With `draNetworks`, the pod's networks from claims of our DRA driver and their refusals, or why none were read. */
  claims?: { networks: ClaimNetwork[]; errors: CniError[] } | CniError;
}

/** A Warning event on the pod; `after` is the number of errors the planning had met when it was raised. */
export interface PlanEvent {
  reason: string;
  message: string;
  after: number;
}

/** Where planning puts what it meets. */
export interface PlanSink {
  errors: CniError[];
  events: PlanEvent[];
}

export const newSink = (): PlanSink => ({ errors: [], events: [] });

/** Runs `step`; an error goes to the sink and `fallback` is returned instead. */
export function attempt<T>(sink: PlanSink, fallback: T, step: () => T): T {
  try {
    return step();
  } catch (e) {
    sink.errors.push(toCniError(e));
    return fallback;
  }
}

type NadRef = Pick<NetworkSelection, 'namespace' | 'name' | 'request'>;

export const nadKey = (ref: Pick<NadRef, 'namespace' | 'name'>): string => `${ref.namespace}/${ref.name}`;

/** A missing NAD, phrased one way wherever one is named (ADD, `multus plan`, hot-plug); `fix` says what to do. */
export function missingNad(sel: Pick<NadRef, 'namespace' | 'name'>, fix: string): CniError {
  const msg = `cannot find a network-attachment-definition (${sel.name}) in namespace (${sel.namespace})`;
  return new CniError(CniCode.InvalidConfig, msg, { details: fix });
}

/** The pod as messages name it (a Pod, or the pod a hot-plug call names). */
type PodNamed = { metadata: { namespace: string; name: string } };

export function withPod<T>(pod: PodNamed, context: string, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    throw wrapError(e, `pod ${pod.metadata.namespace}/${pod.metadata.name}: ${context}`, CniCode.InvalidConfig);
  }
}

/** The override's element (without its requests: the cluster network ignores them), or undefined. */
export function overrideSelection(conf: MultusConf, pod: Pod): NadRef | undefined {
  const value = pod.metadata.annotations?.[DEFAULT_NETWORK_ANNOTATION];
  const parsed = withPod(pod, 'error in loading the default network from the pod annotation', () =>
    parseDefaultNetworkAnnotation(value, conf.multusNamespace),
  );
  return parsed ? { ...parsed, request: {} } : undefined;
}

/** The networks annotation's elements, checked for default-route conflicts. */
export function podSelections(pod: Pod): NetworkSelection[] {
  return withPod(pod, 'error loading k8s delegates', () => {
    const parsed = parseNetworkSelections(pod.metadata.annotations?.[NETWORKS_ANNOTATION], pod.metadata.namespace);
    validateDefaultRoutes(parsed);
    return parsed;
  });
}

/**
 * docs/behaviour.md#namespace-isolation, the rule every door keeps (ADD's annotation, `/delegate`, dynamic
 * networks), with its one message: the pod's error.
 */
export function assertIsolation(
  conf: MultusConf,
  pod: PodNamed,
  sel: Pick<NetworkSelection, 'namespace' | 'name'>,
  where: string = NETWORKS_ANNOTATION,
): void {
  if (!conf.namespaceIsolation) return;
  withPod(pod, 'error loading k8s delegates', () =>
    checkNamespaceIsolation([sel], pod.metadata.namespace, conf.globalNamespaces, where),
  );
}

/** Where a claim network's NAD is named, for messages: `ResourceClaim <namespace>/<claim> request <request>`. */
export const claimWhere = (ref: ClaimNetworkRef): string =>
  `ResourceClaim ${ref.namespace}/${ref.claim} request ${ref.request}`;

function selectionDelegate(
  conf: MultusConf,
  networks: PodNetworks,
  pod: Pod,
  sel: NadRef,
  source: AttachmentSource,
  sink: PlanSink,
  claim?: string,
): Delegate {
  const read = networks.nads.get(nadKey(sel)) ?? { kind: 'missing' };
  if (read.kind === 'error') throw read.error;
  if (read.kind === 'missing') {
    const annotation = source === 'cluster' ? DEFAULT_NETWORK_ANNOTATION : NETWORKS_ANNOTATION;
    const fix = claim ? `the config of ${claim}` : `the pod's ${annotation} annotation`;
    const error = missingNad(sel, `create it, or fix ${fix}`);
    sink.events.push({ reason: 'NoNetworkFound', message: error.msg, after: sink.errors.length });
    throw error;
  }
  try {
    return withPod(pod, 'error loading k8s delegates', () =>
      delegateFromNad(read.nad, conf.confDir, sel.request, source),
    );
  } catch (e) {
    // docs/behaviour.md#device-pool: a pool the NAD refuses is also a Warning event on the pod (Multus #1520)
    if (e instanceof CniError && e.cause instanceof PoolRefused)
      sink.events.push({ reason: e.cause.reason, message: e.cause.msg, after: sink.errors.length });
    throw e;
  }
}

/** The configured networks, with the NADs read for their plain names. */
export function clusterDelegates(conf: MultusConf, podNamespace: string, networks: PodNetworks): Delegate[] {
  const found = networks.clusterNads;
  if (found instanceof CniError) throw found;
  return resolveStaticNetworks(conf, {
    podNamespace,
    lookup: (name) => {
      const nad = found.get(name);
      return nad ? delegateFromNad(nad, conf.confDir, {}, 'default') : undefined;
    },
  });
}

/** The pod's delegates before devices (docs/behaviour.md#ordering); errors and events go to `sink`. */
export function resolveDelegates(
  conf: MultusConf,
  podNamespace: string,
  networks: PodNetworks,
  sink: PlanSink,
): Delegate[] {
  const delegates = attempt(sink, [], () => clusterDelegates(conf, podNamespace, networks));
  if (networks.lookup.kind !== 'found') return delegates;
  const pod = networks.lookup.pod;
  const override = attempt(sink, undefined, () => overrideSelection(conf, pod));
  if (override) {
    // The cluster network always gets CNI_IFNAME and ignores selection requests
    // (docs/behaviour.md#default-network-annotation, docs/behaviour.md#runtime-config); Multus
    // honours an @ifname here, which would hide eth0 from the runtime (docs/compatibility.md).
    const replaced = attempt(sink, undefined, () => selectionDelegate(conf, networks, pod, override, 'cluster', sink));
    if (replaced) delegates[0] = replaced;
  }
  for (const sel of attempt(sink, [], () => podSelections(pod))) {
    // Multus' order: each element's namespace isolation, then its NAD
    const delegate = attempt(sink, undefined, () => {
      assertIsolation(conf, pod, sel);
      return selectionDelegate(conf, networks, pod, sel, 'selection', sink);
    });
    if (delegate) delegates.push(delegate);
  }
  return [...delegates, ...claimDelegates(conf, networks, pod, sink)];
}

/**
 * docs/behaviour.md#claim-networks: the delegates of the pod's claims of our DRA driver, after the annotation's: a
 * NAD selection goes the annotation's way (namespace isolation, the NAD, its events), an inline network is taken as
 * dra/ loaded it; each carries its claim reference (`claimNetwork`) for the caches, the status and DEL.
 */
function claimDelegates(conf: MultusConf, networks: PodNetworks, pod: Pod, sink: PlanSink): Delegate[] {
  const found = networks.claims;
  if (found === undefined) return [];
  if (found instanceof CniError) return (sink.errors.push(found), []);
  sink.errors.push(...found.errors);
  const delegates: Delegate[] = [];
  for (const c of found.networks) {
    const where = claimWhere(c.ref);
    const delegate = attempt(sink, undefined, (): Delegate => {
      if ('network' in c) {
        const request = c.ifName ? { ifname: c.ifName } : {};
        return { network: c.network, displayName: inlineDisplayName(c.ref), request, source: 'selection' };
      }
      assertIsolation(conf, pod, c.selection, where);
      return selectionDelegate(conf, networks, pod, c.selection, 'selection', sink, where);
    });
    const claimNetwork = { ...c.ref } as Record<string, unknown>;
    if (delegate) delegates.push({ ...delegate, request: { ...delegate.request, claimNetwork } });
  }
  return delegates;
}

/** What each delegate asks of the devices (docs/behaviour.md#device-ids). */
export function deviceWants(delegates: readonly Delegate[]): DeviceWant[] {
  return delegates.map((d) => ({
    label: `the selection element for network ${d.displayName}`,
    ...(d.request.resourceName ? { resourceName: d.request.resourceName } : {}),
    strict: d.request.resourceNameRequest !== undefined,
    ...(d.request.claimRequest ? { claim: d.request.claimRequest as unknown as ClaimRequestRef } : {}),
  }));
}

/**
 * docs/behaviour.md#device-ids: each delegate with its device injected as `deviceID`/`pciBusID` into its config
 * (devices/attachment-devices.ts `assignDevices` chooses, never one of `taken`). The device errors name the pod.
 */
export function withDevices(
  delegates: Delegate[],
  facts: DeviceFacts,
  pod: Pod,
  sink: PlanSink,
  taken?: ReadonlySet<string>,
): Delegate[] {
  const assigned: DeviceAssignment = assignDevices(deviceWants(delegates), facts, taken);
  for (const e of assigned.errors) sink.errors.push(wrapError(e, `pod ${pod.metadata.namespace}/${pod.metadata.name}`));
  return delegates.map((d, i) => {
    const g = assigned.grants[i];
    if (!g) return d;
    const request = {
      ...d.request,
      deviceID: g.deviceId,
      ...(g.resourceName ? { resourceName: g.resourceName } : {}),
      ...(g.claimDevice ? { claimDevice: { ...g.claimDevice } } : {}),
    };
    return attempt(sink, d, () => ({ ...d, network: injectDeviceIdIntoNetwork(d.network, g.deviceId), request }));
  });
}

/** The pod's delegates with their devices, from what was read; `devices` undefined: not read (none assigned). */
export function planPodDelegates(
  conf: MultusConf,
  podNamespace: string,
  inputs: { networks: PodNetworks; devices: DeviceFacts | undefined },
  sink: PlanSink,
): Delegate[] {
  const delegates = resolveDelegates(conf, podNamespace, inputs.networks, sink);
  const { lookup } = inputs.networks;
  if (lookup.kind !== 'found' || !inputs.devices) return delegates;
  return withDevices(delegates, inputs.devices, lookup.pod, sink);
}
