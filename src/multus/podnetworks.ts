/**
 * podnetworks.ts: what the Kubernetes API and the kubelet say a pod's attachments are (the read-only I/O of a call,
 * through the KubeClient seam and devices/).
 *
 * `lookupPod` fetches the pod with Multus' retry policy (docs/behaviour.md#pod-lookup: transient errors retried every
 * 250 ms for 2.5 s; ADD's 401 waits for a rotated kubeconfig within the readiness wait) and the UID check; its
 * outcome is a union, never null-as-a-message. `gatherPodInputs` reads what the pure resolver (pod-delegates.ts)
 * plans a pod's delegates from, for ADD, DEL and `multus plan`: the configured networks' NADs, each NAD the pod's
 * annotations name (a NAD namespace isolation refuses is never read), then the devices the delegates want. Every NAD
 * is read once per call. `nadDelegate` is hot-plug's NAD fetch, with the one "cannot find" message. API economy: one
 * GET for the pod and one per NAD, plus the status write and the events; a pod that names DRA claims adds its
 * claims' and their ResourceSlices' reads (devices/dra.ts).
 * Tested by test/unit/multus/kube-commands.test.ts, test/e2e-k8s/pod-networks.test.ts.
 */
import type { K8sArgs } from '../cni/cniargs.ts';
import type { MultusConf } from './conf.ts';
import { resolveStaticNetworks } from './conf.ts';
import { CniCode, CniError, messageOf, toCniError, wrapError } from '../base/errors.ts';
import type { KubeClient, Nad, Pod } from '../k8s/types.ts';
import { httpStatusOf, isTransient } from '../k8s/types.ts';
import type { Logger } from '../base/log.ts';
import type { CallContext, Seams } from './call-context.ts';
import { backoffSchedule } from '../base/backoff.ts';
import type { DeviceFacts } from '../devices/attachment-devices.ts';
import { gatherDevices } from '../devices/attachment-devices.ts';
import { DraLookup, hasDraClaims } from '../devices/dra.ts';
import { delegateFromNad } from './nad.ts';
import type { AttachmentSource, Delegate } from './attachments.ts';
import type { NetworkSelection } from './selection.ts';
import type { NadRead, PodLookup, PodNetworks } from './pod-delegates.ts';
import {
  assertIsolation,
  claimWhere,
  deviceWants,
  missingNad,
  nadKey,
  newSink,
  overrideSelection,
  podSelections,
  resolveDelegates,
} from './pod-delegates.ts';

type NadRef = Pick<NetworkSelection, 'namespace' | 'name' | 'request'>;

const CONFIG_SOURCE_ANNOTATION = 'kubernetes.io/config.source';

const POLL_INTERVAL_MS = 250;
const POLL_TIMEOUT_MS = 2500;

/** A static pod's mirror has its own UID; the kubelet marks static pods with config.source != "api". */
function isStaticPod(pod: Pod): boolean {
  const source = pod.metadata.annotations?.[CONFIG_SOURCE_ANNOTATION];
  return source !== undefined && source !== 'api';
}

/**
 * What a pod lookup takes from its call (a CallContext is one, passed as is): the logger, the clock, and the
 * readiness wait, which bounds ADD's wait for a rotated kubeconfig (below).
 */
type LookupCall = Pick<CallContext, 'log'> & {
  conf: Pick<MultusConf, 'readinessBackoff'>;
  seams: Pick<Seams, 'clock'>;
};

export async function lookupPod(
  kube: KubeClient | undefined,
  k8s: K8sArgs,
  command: 'ADD' | 'DEL',
  ctx: LookupCall,
): Promise<PodLookup> {
  if (!kube) return { kind: 'unknown', reason: 'no Kubernetes client configured' };
  if (!k8s.podNamespace || !k8s.podName) return { kind: 'unknown', reason: 'CNI_ARGS name no pod' };
  const pod = command === 'ADD' ? await getPodWithRetry(kube, k8s, ctx) : await getPodOnce(kube, k8s, ctx.log);
  if (!pod) return { kind: 'unknown', reason: `pod ${k8s.podNamespace}/${k8s.podName} not found` };
  if (k8s.podUid && pod.metadata.uid !== k8s.podUid && !isStaticPod(pod)) {
    const msg = `expected pod UID "${k8s.podUid}" but got "${pod.metadata.uid}" from Kube API`;
    if (command === 'ADD') {
      throw new CniError(CniCode.InvalidConfig, msg, {
        details: 'the pod was deleted and re-created with the same name; the runtime will retry with the new pod',
      });
    }
    ctx.log.verbose(`${msg}; deleting from the cache only`);
    return { kind: 'unknown', reason: msg };
  }
  return { kind: 'found', pod };
}

async function getPodWithRetry(kube: KubeClient, k8s: K8sArgs, ctx: LookupCall): Promise<Pod | undefined> {
  const { clock } = ctx.seams;
  const deadline = clock.now() + POLL_TIMEOUT_MS;
  let reloaded = false;
  for (;;) {
    try {
      return await kube.getPod(k8s.podNamespace, k8s.podName, { ...uidHint(k8s), cacheMiss: 'wait' });
    } catch (e) {
      if (httpStatusOf(e) === 404) return undefined;
      if (httpStatusOf(e) === 401 && !reloaded) {
        reloaded = true;
        if (await awaitRotatedKubeconfig(kube, ctx)) continue;
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
async function awaitRotatedKubeconfig(kube: KubeClient, ctx: LookupCall): Promise<boolean> {
  if (!kube.reloadKubeconfig) return false;
  if (await kube.reloadKubeconfig()) return true;
  const schedule = backoffSchedule(ctx.conf.readinessBackoff);
  const total = schedule.reduce((a, b) => a + b, 0);
  ctx.log.verbose(`the API server refused the kubeconfig's token: waiting up to ${total} ms for a new one`);
  for (const ms of schedule) {
    await ctx.seams.clock.sleep(ms);
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

/**
 * What reading a pod's networks takes from its call besides the client (a CallContext is one, passed as is;
 * `multus plan` hands its own): the logger, where the kubelet's devices are, and the host's claim networks.
 */
export type ReadCall = Pick<CallContext, 'log'> & { seams: Pick<Seams, 'devices' | 'claimNetworks'> };

async function fetchNad(kube: KubeClient, namespace: string, name: string): Promise<Nad | undefined> {
  try {
    return await kube.getNad(namespace, name);
  } catch (e) {
    if (httpStatusOf(e) === 404) return undefined;
    throw wrapError(e, `cannot read network-attachment-definition ${namespace}/${name}`, CniCode.TryAgainLater);
  }
}

/**
 * Hot-plug's delegate of the NAD `sel` names (one GET), with the selection's request (its device is assigned by
 * hotplug/delegate.ts through the same assignment as ADD's): a missing NAD is code 7, another failure to read it
 * code 11 (try again), a NAD whose config does not load code 7.
 */
export async function nadDelegate(
  kube: KubeClient,
  confDir: string,
  sel: Pick<NetworkSelection, 'namespace' | 'name' | 'request'>,
  fix: string,
  source: AttachmentSource,
): Promise<Delegate> {
  const nad = await fetchNad(kube, sel.namespace, sel.name);
  if (!nad) throw missingNad(sel, fix);
  return delegateFromNad(nad, confDir, sel.request, source);
}

/** clusterNetwork's and defaultNetworks' plain names (only clusterNetwork with `clusterOnly`) read as NADs. */
async function clusterNads(
  conf: MultusConf,
  podNamespace: string,
  kube: KubeClient | undefined,
  clusterOnly = false,
): Promise<Map<string, Nad>> {
  const found = new Map<string, Nad>();
  if (kube && conf.clusterNetwork) {
    const defaults = clusterOnly || conf.systemNamespaces.includes(podNamespace) ? [] : conf.defaultNetworks;
    for (const name of new Set([conf.clusterNetwork, ...defaults].filter((n) => n && !n.includes('/')))) {
      const nad = await fetchNad(kube, conf.multusNamespace, name);
      if (nad) found.set(name, nad);
    }
  }
  return found;
}

/**
 * The cluster network of a call without a pod (STATUS, docs/behaviour.md#status), resolved as ADD resolves it: a
 * plain name is a NAD first when `kube` is given (the caller makes one only for a plain name), then a config name.
 */
export async function clusterNetworkDelegate(
  conf: MultusConf,
  kube: KubeClient | undefined,
): Promise<Delegate | undefined> {
  const nads = await clusterNads(conf, '', kube, true);
  const lookup = (name: string) => {
    const nad = nads.get(name);
    return nad ? delegateFromNad(nad, conf.confDir, {}, 'default') : undefined;
  };
  return resolveStaticNetworks(conf, { clusterOnly: true, lookup })[0];
}

/** The NADs the pod's annotations name, in the order ADD meets them; `stopEarly` (ADD): none past the first refusal. */
function namedNads(conf: MultusConf, pod: Pod, stopEarly: boolean): NadRef[] {
  const refs: NadRef[] = [];
  let override: NadRef | undefined;
  try {
    override = overrideSelection(conf, pod);
  } catch {
    if (stopEarly) return refs;
  }
  if (override) refs.push(override);
  let selections: NetworkSelection[];
  try {
    selections = podSelections(pod);
  } catch {
    return refs;
  }
  for (const sel of selections) {
    try {
      assertIsolation(conf, pod, sel); // a NAD the pod may not name is never read
    } catch {
      if (stopEarly) return refs;
      continue;
    }
    refs.push(sel);
  }
  return refs;
}

/** Reads `ref` into `nads` once; false when the read refused (missing or unreadable). */
async function readNad(kube: KubeClient, ref: NadRef, nads: Map<string, NadRead>): Promise<boolean> {
  const known = nads.get(nadKey(ref));
  if (known) return known.kind === 'found';
  const read = await fetchNad(kube, ref.namespace, ref.name).then(
    (nad): NadRead => (nad ? { kind: 'found', nad } : { kind: 'missing' }),
    (e: unknown): NadRead => ({ kind: 'error', error: toCniError(e) }),
  );
  nads.set(nadKey(ref), read);
  return read.kind === 'found';
}

/** One read of a pod's networks: the client, the call, and the DRA lookup the device reads share. */
interface PodRead {
  kube: KubeClient | undefined;
  ctx: ReadCall;
  dra: DraLookup | undefined;
}

/**
 * docs/behaviour.md#claim-networks: with `draNetworks`, the pod's networks from claims of our DRA driver, through the
 * host's source (its claim reads shared with the device lookup, `dra`), and the NADs they name that namespace
 * isolation lets the pod use.
 */
async function readClaimNetworks(
  conf: MultusConf,
  pod: Pod,
  read: PodRead,
  dra: DraLookup,
  nads: Map<string, NadRead>,
): Promise<PodNetworks['claims']> {
  const { kube, ctx } = read;
  const { claimNetworks } = ctx.seams;
  if (!kube || !conf.draNetworks || !claimNetworks || !hasDraClaims(pod)) return undefined;
  let claims;
  try {
    claims = await claimNetworks(pod, conf, { kube, log: ctx.log, lookup: dra });
  } catch (e) {
    return toCniError(e);
  }
  for (const c of claims.networks) {
    if (!('selection' in c)) continue;
    try {
      assertIsolation(conf, pod, c.selection, claimWhere(c.ref)); // a NAD the pod may not name is never read
    } catch {
      continue;
    }
    await readNad(kube, c.selection, nads);
  }
  return claims;
}

/**
 * Reads what the pod's networks need (I/O): the configured networks' NADs, each NAD the pod's annotations name, and
 * its claim networks, each NAD once. A refused read is kept for the planner to report in its place; with `stopEarly`
 * (ADD) nothing is read past the first one.
 */
async function gatherPodNetworks(
  conf: MultusConf,
  podNamespace: string,
  lookup: PodLookup,
  read: PodRead,
  stopEarly: boolean,
): Promise<PodNetworks> {
  const { kube, dra } = read;
  const nads = new Map<string, NadRead>();
  let cluster: Map<string, Nad> | CniError;
  try {
    cluster = await clusterNads(conf, podNamespace, kube);
  } catch (e) {
    cluster = toCniError(e);
    if (stopEarly) return { lookup, clusterNads: cluster, nads };
  }
  if (lookup.kind !== 'found' || !kube) return { lookup, clusterNads: cluster, nads };
  for (const ref of namedNads(conf, lookup.pod, stopEarly)) {
    if (!(await readNad(kube, ref, nads)) && stopEarly) return { lookup, clusterNads: cluster, nads };
  }
  const claims = dra ? await readClaimNetworks(conf, lookup.pod, read, dra, nads) : undefined;
  return { lookup, clusterNads: cluster, nads, ...(claims ? { claims } : {}) };
}

/** What a pod's delegates are planned from: its networks and, when some delegate wants one, its devices. */
export interface PodInputs {
  networks: PodNetworks;
  /** undefined: not read (no pod, or, with `stopEarly`, the networks already failed). */
  devices: DeviceFacts | undefined;
}

/**
 * Reads the pod's networks, then the devices its delegates want (devices/attachment-devices.ts `gatherDevices`):
 * the delegates are resolved once without devices (pure) to learn which. With `stopEarly` (ADD, DEL) the devices
 * are not read when the networks already failed; `kubeletOptional` (`multus plan`, off the node) reads what the API
 * has and leaves the kubelet's pools unassigned when its map cannot be read.
 */
export async function gatherPodInputs(
  conf: MultusConf,
  k8s: K8sArgs,
  lookup: PodLookup,
  kube: KubeClient | undefined,
  ctx: ReadCall,
  opts: { stopEarly: boolean; kubeletOptional?: boolean },
): Promise<PodInputs> {
  const found = lookup.kind === 'found' ? lookup.pod : undefined;
  const dra = found && kube ? new DraLookup(kube, found, {}) : undefined;
  const networks = await gatherPodNetworks(conf, k8s.podNamespace, lookup, { kube, ctx, dra }, opts.stopEarly);
  if (lookup.kind !== 'found') return { networks, devices: undefined };
  const sink = newSink();
  const delegates = resolveDelegates(conf, k8s.podNamespace, networks, sink);
  if (opts.stopEarly && sink.errors.length > 0) return { networks, devices: undefined };
  const gather = { ...(opts.kubeletOptional ? { kubeletOptional: true } : {}), ...(dra ? { lookup: dra } : {}) };
  const devices = await gatherDevices(deviceWants(delegates), lookup.pod, kube, ctx, gather);
  return { networks, devices };
}
