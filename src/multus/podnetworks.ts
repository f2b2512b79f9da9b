/**
 * podnetworks.ts: what the Kubernetes API says a pod's attachments are (I/O through the KubeClient seam).
 *
 * `lookupPod` fetches the pod with Multus' retry policy (docs/behaviour.md#pod-lookup: transient errors retried every
 * 250 ms for 2.5 s; ADD's 401 waits for a rotated kubeconfig within the readiness wait) and the UID check; its outcome is a union, never null-as-a-message. `resolvePodDelegates` is the
 * one resolver of a pod's ordered delegate list (docs/behaviour.md#ordering), for ADD, DEL and `multus plan`: cluster
 * network (a NAD in multusNamespace, a config name or a path), the default networks, the per-pod default-network
 * override (docs/behaviour.md#default-network-annotation), then one delegate per selection element in annotation
 * order (docs/behaviour.md#networks-annotation, docs/behaviour.md#nad). Every NAD is fetched once per call; ADD stops
 * at the first failure, before a delegate runs, and `multus plan` collects them all. `nadDelegate` is the one NAD
 * fetch (hot-plug uses it too), with the one "cannot find" message. API economy: one GET for the pod and one per NAD
 * (N+2 requests per ADD of N NADs with the status write, plus the events; a pod that names DRA claims adds its
 * claims' and their ResourceSlices' reads, devices/dra.ts).
 * Tested by test/unit/multus/kube-commands.test.ts, test/e2e-k8s/pod-networks.test.ts.
 */
import type { K8sArgs } from '../cni/cniargs.ts';
import type { MultusConf } from './conf.ts';
import { resolveStaticNetworks } from './conf.ts';
import { CniCode, CniError, messageOf, wrapError } from '../base/errors.ts';
import type { KubeClient, Nad, Pod } from '../k8s/types.ts';
import { httpStatusOf, isTransient } from '../k8s/types.ts';
import type { Logger } from '../base/log.ts';
import type { Clock } from '../base/backoff.ts';
import { backoffSchedule } from '../base/backoff.ts';
import type { ResourceMapDeps } from '../devices/devices.ts';
import { injectDeviceIdIntoNetwork } from '../devices/devices.ts';
import type { ClaimRequestRef } from '../devices/claim-request.ts';
import { grantDevices } from '../devices/attachment-devices.ts';
import { DraLookup, hasDraClaims } from '../devices/dra.ts';
import type { ClaimNetworkSource } from './claim-attach.ts';
import { claimDelegates } from './claim-attach.ts';
import { attempt } from './attempt.ts';

export { attempt };
import { PoolRefused, delegateFromNad } from './nad.ts';
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
const CONFIG_SOURCE_ANNOTATION = 'kubernetes.io/config.source';

export type PodLookup = { kind: 'found'; pod: Pod } | { kind: 'unknown'; reason: string };

const POLL_INTERVAL_MS = 250;
const POLL_TIMEOUT_MS = 2500;

/** A static pod's mirror has its own UID; the kubelet marks static pods with config.source != "api". */
function isStaticPod(pod: Pod): boolean {
  const source = pod.metadata.annotations?.[CONFIG_SOURCE_ANNOTATION];
  return source !== undefined && source !== 'api';
}

export interface LookupDeps {
  clock: Clock;
  log: Logger;
  /** ADD: its readiness wait bounds the wait for a rotated kubeconfig (below) */
  conf: Pick<MultusConf, 'readinessBackoff'>;
}

export async function lookupPod(
  kube: KubeClient | undefined,
  k8s: K8sArgs,
  command: 'ADD' | 'DEL',
  deps: LookupDeps,
): Promise<PodLookup> {
  if (!kube) return { kind: 'unknown', reason: 'no Kubernetes client configured' };
  if (!k8s.podNamespace || !k8s.podName) return { kind: 'unknown', reason: 'CNI_ARGS name no pod' };
  const pod = command === 'ADD' ? await getPodWithRetry(kube, k8s, deps) : await getPodOnce(kube, k8s, deps.log);
  if (!pod) return { kind: 'unknown', reason: `pod ${k8s.podNamespace}/${k8s.podName} not found` };
  if (k8s.podUid && pod.metadata.uid !== k8s.podUid && !isStaticPod(pod)) {
    const msg = `expected pod UID "${k8s.podUid}" but got "${pod.metadata.uid}" from Kube API`;
    if (command === 'ADD') {
      throw new CniError(CniCode.InvalidConfig, msg, {
        details: 'the pod was deleted and re-created with the same name; the runtime will retry with the new pod',
      });
    }
    deps.log.verbose(`${msg}; deleting from the cache only`);
    return { kind: 'unknown', reason: msg };
  }
  return { kind: 'found', pod };
}

async function getPodWithRetry(kube: KubeClient, k8s: K8sArgs, deps: LookupDeps): Promise<Pod | undefined> {
  const { clock } = deps;
  const deadline = clock.now() + POLL_TIMEOUT_MS;
  let reloaded = false;
  for (;;) {
    try {
      return await kube.getPod(k8s.podNamespace, k8s.podName, { ...uidHint(k8s), cacheMiss: 'wait' });
    } catch (e) {
      if (httpStatusOf(e) === 404) return undefined;
      if (httpStatusOf(e) === 401 && !reloaded) {
        reloaded = true;
        if (await awaitRotatedKubeconfig(kube, deps)) continue;
      }
      if (!isTransient(e) || clock.now() + POLL_INTERVAL_MS > deadline) {
        throw wrapError(e, 'error waiting for pod', CniCode.TryAgainLater);
      }
      await clock.sleep(POLL_INTERVAL_MS);
    }
  }
}

/**
 * ADD's pod GET refused 401 with a kubeconfig's inline token: the token of a DaemonSet pod that is gone, while
 * its successor has not yet written its own (an upgrade's window, docs/install.md "Upgrade"). The kubeconfig is
 * read again at once and after each sleep of the readiness wait's schedule; true once it changed (the client
 * then uses it, and the GET is tried once more). Go Multus fails the ADD at once (kubelet retries the sandbox).
 */
async function awaitRotatedKubeconfig(kube: KubeClient, deps: LookupDeps): Promise<boolean> {
  if (!kube.reloadKubeconfig) return false;
  if (await kube.reloadKubeconfig()) return true;
  const schedule = backoffSchedule(deps.conf.readinessBackoff);
  const total = schedule.reduce((a, b) => a + b, 0);
  deps.log.verbose(`the API server refused the kubeconfig's token: waiting up to ${total} ms for a new one`);
  for (const ms of schedule) {
    await deps.clock.sleep(ms);
    if (await kube.reloadKubeconfig()) return true;
  }
  return false;
}

/** The expected UID for a cached lookup (the lean client ignores it). */
const uidHint = (k8s: K8sArgs) => (k8s.podUid ? { uid: k8s.podUid } : {});

/** DEL must not depend on the API: one attempt; any failure means "use the caches". */
async function getPodOnce(kube: KubeClient, k8s: K8sArgs, log: Logger): Promise<Pod | undefined> {
  try {
    return await kube.getPod(k8s.podNamespace, k8s.podName, { ...uidHint(k8s), cacheMiss: 'only' });
  } catch (e) {
    if (httpStatusOf(e) !== 404)
      log.error(`cannot read pod ${k8s.podNamespace}/${k8s.podName}, deleting from the caches: ${messageOf(e)}`);
    return undefined;
  }
}

export interface ResolveDeps {
  kube: KubeClient | undefined;
  log: Logger;
  /** Where the kubelet's pod-resources socket and device checkpoint are (tests point elsewhere). */
  devices?: ResourceMapDeps;
  /** Warning events (NoNetworkFound) go through here; best effort, never throws. */
  warn(pod: Pod, reason: string, message: string): Promise<void>;
  /** The pod's networks from claims of our DRA driver, with `draNetworks` (the host's; multus/claim-attach.ts). */
  claimNetworks?: ClaimNetworkSource;
}

async function fetchNad(kube: KubeClient, namespace: string, name: string): Promise<Nad | undefined> {
  try {
    return await kube.getNad(namespace, name);
  } catch (e) {
    if (httpStatusOf(e) === 404) return undefined;
    throw wrapError(e, `cannot read network-attachment-definition ${namespace}/${name}`, CniCode.TryAgainLater);
  }
}

type NadRef = Pick<NetworkSelection, 'namespace' | 'name' | 'request'>;

/** A missing NAD, phrased one way wherever one is named (ADD, `multus plan`, hot-plug); `fix` says what to do. */
function missingNad(sel: NadRef, fix: string): CniError {
  const msg = `cannot find a network-attachment-definition (${sel.name}) in namespace (${sel.namespace})`;
  return new CniError(CniCode.InvalidConfig, msg, { details: fix });
}

/**
 * The delegate of the NAD `sel` names (one GET), with the selection's request: a missing NAD is code 7, another
 * failure to read it code 11 (try again), a NAD whose config does not load code 7.
 */
export async function nadDelegate(
  kube: KubeClient,
  confDir: string,
  sel: NadRef,
  fix: string,
  source: AttachmentSource,
): Promise<Delegate> {
  if (sel.request.resourceNameRequest !== undefined || sel.request.claimRequest !== undefined) {
    // docs/hotplug.md: a hot-plugged attachment gets no device, so an element that asks for one is refused
    const key = sel.request.claimRequest !== undefined ? 'resourceClaim' : 'resourceName';
    throw new CniError(
      CniCode.InvalidConfig,
      `network ${sel.namespace}/${sel.name}: "${key}" is not supported for a hot-plugged attachment (no device is assigned after the pod started)`,
      { details: `attach it when the pod is created, or drop "${key}"` },
    );
  }
  const nad = await fetchNad(kube, sel.namespace, sel.name);
  if (!nad) throw missingNad(sel, fix);
  return delegateFromNad(nad, confDir, sel.request, source);
}

/**
 * clusterNetwork/defaultNetworks (only clusterNetwork with `clusterOnly`): NADs in multusNamespace for plain names,
 * else config names or paths.
 */
async function clusterDelegates(
  conf: MultusConf,
  podNamespace: string,
  kube: KubeClient | undefined,
  clusterOnly = false,
): Promise<Delegate[]> {
  const found = new Map<string, Delegate>();
  if (kube && conf.clusterNetwork) {
    const defaults = clusterOnly || conf.systemNamespaces.includes(podNamespace) ? [] : conf.defaultNetworks;
    for (const name of new Set([conf.clusterNetwork, ...defaults].filter((n) => n && !n.includes('/')))) {
      const nad = await fetchNad(kube, conf.multusNamespace, name);
      if (nad) found.set(name, delegateFromNad(nad, conf.confDir, {}, 'default'));
    }
  }
  return resolveStaticNetworks(conf, { podNamespace, clusterOnly, lookup: (name) => found.get(name) });
}

/**
 * The cluster network of a call without a pod (STATUS, docs/behaviour.md#status), resolved as ADD resolves it: a
 * plain name is a NAD first when `kube` is given (the caller makes one only for a plain name), then a config name.
 */
export async function clusterNetworkDelegate(
  conf: MultusConf,
  kube: KubeClient | undefined,
): Promise<Delegate | undefined> {
  return (await clusterDelegates(conf, '', kube, true))[0];
}

/** The delegate of a NAD the pod's `annotation` names; a missing one also gets a NoNetworkFound event. */
async function selectionDelegate(
  conf: MultusConf,
  deps: ResolveDeps,
  pod: Pod,
  sel: NadRef,
  annotation: string,
  source: AttachmentSource,
): Promise<Delegate> {
  const nad = await fetchNad(deps.kube!, sel.namespace, sel.name);
  if (!nad) {
    const where = annotation.startsWith('ResourceClaim')
      ? `the config of ${annotation}`
      : `the pod's ${annotation} annotation`;
    const error = missingNad(sel, `create it, or fix ${where}`);
    await deps.warn(pod, 'NoNetworkFound', error.msg);
    throw error;
  }
  try {
    return withPod(pod, 'error loading k8s delegates', () => delegateFromNad(nad, conf.confDir, sel.request, source));
  } catch (e) {
    // docs/behaviour.md#device-pool: a pool the NAD refuses is also a Warning event on the pod (Multus #1520)
    if (e instanceof CniError && e.cause instanceof PoolRefused) await deps.warn(pod, e.cause.reason, e.cause.msg);
    throw e;
  }
}

/**
 * The ordered delegate list of a pod (docs/behaviour.md#ordering), the one resolver of ADD, DEL and `multus plan`.
 * ADD stops at the first error; with `collect` (`multus plan`) each error is handed to it and the resolution goes
 * on past it (a failing element is left out), so every error an ADD could hit is reported, in the order ADD meets
 * them. Device IDs are assigned from the kubelet only without `collect`.
 */
export async function resolvePodDelegates(
  conf: MultusConf,
  k8s: K8sArgs,
  lookup: PodLookup,
  deps: ResolveDeps,
  collect?: (error: CniError) => void,
): Promise<Delegate[]> {
  const delegates = await attempt(collect, [], () => clusterDelegates(conf, k8s.podNamespace, deps.kube));
  if (lookup.kind !== 'found') return delegates;
  const pod = lookup.pod;
  const annotations = pod.metadata.annotations ?? {};
  const override = await attempt(collect, undefined, () =>
    withPod(pod, 'error in loading the default network from the pod annotation', () =>
      parseDefaultNetworkAnnotation(annotations[DEFAULT_NETWORK_ANNOTATION], conf.multusNamespace),
    ),
  );
  if (override) {
    // The cluster network always gets CNI_IFNAME and ignores selection requests
    // (docs/behaviour.md#default-network-annotation, docs/behaviour.md#runtime-config); Multus
    // honours an @ifname here, which would hide eth0 from the runtime (docs/compatibility.md).
    const sel = { ...override, request: {} };
    const replaced = await attempt(collect, undefined, () =>
      selectionDelegate(conf, deps, pod, sel, DEFAULT_NETWORK_ANNOTATION, 'cluster'),
    );
    if (replaced) delegates[0] = replaced;
  }
  const selections = await attempt(collect, [], () =>
    withPod(pod, 'error loading k8s delegates', () => {
      const parsed = parseNetworkSelections(annotations[NETWORKS_ANNOTATION], pod.metadata.namespace);
      validateDefaultRoutes(parsed);
      return parsed;
    }),
  );
  for (const sel of selections) {
    const delegate = await attempt(collect, undefined, () =>
      isolatedDelegate(conf, deps, pod, sel, NETWORKS_ANNOTATION),
    );
    if (delegate) delegates.push(delegate);
  }
  const dra = deps.kube ? new DraLookup(deps.kube, pod, {}) : undefined;
  if (dra && conf.draNetworks && deps.claimNetworks && hasDraClaims(pod)) {
    const nad = (sel: NetworkSelection, where: string) => isolatedDelegate(conf, deps, pod, sel, where);
    const claimDeps = { kube: deps.kube!, log: deps.log, lookup: dra, source: deps.claimNetworks };
    delegates.push(...(await claimDelegates(claimDeps, conf, pod, nad, collect)));
  }
  return collect ? delegates : assignDeviceIds(delegates, pod, { ...deps, lookup: dra });
}

/** Multus' order for an element: its namespace isolation, then its NAD. */
function isolatedDelegate(
  conf: MultusConf,
  deps: ResolveDeps,
  pod: Pod,
  sel: NetworkSelection,
  where: string,
): Promise<Delegate> {
  if (conf.namespaceIsolation) {
    withPod(pod, 'error loading k8s delegates', () =>
      checkNamespaceIsolation([sel], pod.metadata.namespace, conf.globalNamespaces, where),
    );
  }
  return selectionDelegate(conf, deps, pod, sel, where, 'selection');
}

/**
 * docs/behaviour.md#device-ids: attachments with a pool (the NAD's resourceName or the element's) or a named
 * claim request get their device (devices/attachment-devices.ts), injected as `deviceID`/`pciBusID` into their
 * config. Nothing is asked of the kubelet or the API when no delegate wants a device.
 */
async function assignDeviceIds(
  delegates: Delegate[],
  pod: Pod,
  deps: ResolveDeps & { lookup: DraLookup | undefined },
): Promise<Delegate[]> {
  const wants = delegates.map((d) => ({
    label: `the selection element for network ${d.displayName}`,
    ...(d.request.resourceName ? { resourceName: d.request.resourceName } : {}),
    strict: d.request.resourceNameRequest !== undefined,
    ...(d.request.claimRequest ? { claim: d.request.claimRequest as unknown as ClaimRequestRef } : {}),
  }));
  const grant = {
    kube: deps.kube,
    log: deps.log,
    devices: deps.devices,
    ...(deps.lookup ? { lookup: deps.lookup } : {}),
  };
  const grants = await grantDevices(wants, pod, grant).catch((e: unknown) => {
    throw wrapError(e, `pod ${pod.metadata.namespace}/${pod.metadata.name}`);
  });
  return delegates.map((d, i) => {
    const g = grants[i];
    if (!g) return d;
    const request = {
      ...d.request,
      deviceID: g.deviceId,
      ...(g.resourceName ? { resourceName: g.resourceName } : {}),
      ...(g.claimDevice ? { claimDevice: { ...g.claimDevice } } : {}),
    };
    return { ...d, network: injectDeviceIdIntoNetwork(d.network, g.deviceId), request };
  });
}

function withPod<T>(pod: Pod, context: string, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    throw wrapError(e, `pod ${pod.metadata.namespace}/${pod.metadata.name}: ${context}`, CniCode.InvalidConfig);
  }
}
