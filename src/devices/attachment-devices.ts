/**
 * devices/attachment-devices.ts: which device each attachment of an ADD gets (docs/behaviour.md#device-ids), in two
 * steps: `gatherDevices` reads what the wants need (I/O), `assignDevices` hands the devices out (pure), so ADD,
 * DEL, `multus plan` and hot-plug assign through the same rule (multus/plan-add.ts).
 *
 * An attachment wants a device when its NAD has a resource name, when its selection element picks a pool
 * (`resourceName`, docs/behaviour.md#device-pool) or when the element names a DRA claim request
 * (`resourceClaim`, docs/behaviour.md#claim-request). Named requests are served first: each takes the next
 * device of that request (claim-request.ts), and those devices are kept out of the pool. Then the pooled
 * wants, in order, take the next ID of their pool from the kubelet's map followed by the pod's DRA devices
 * (devices.ts, dra.ts). A NAD's pool with no device left leaves the attachment without one (Multus); a pool
 * the element asked for, or a named request, with no device is code 7 naming the attachment and the pool or
 * request. The kubelet and the API are asked only for what some attachment wants; the node's pools (for the
 * message) only when an element's pool has no device of the pod at all.
 */
import { CniCode, CniError, toCniError, wrapError } from '../base/errors.ts';
import type { Logger } from '../base/log.ts';
import type { Pod } from '../k8s/types.ts';
import type { ClaimRequestDevice, ClaimRequestRef } from './claim-request.ts';
import { claimRequestDevices } from './claim-request.ts';
import type { ResourceMap, ResourceMapDeps } from './devices.ts';
import { DeviceAllocator, readResourceMap, registeredPools } from './devices.ts';
import type { DraApi, DraDeviceRef } from './dra.ts';
import { DraLookup, addDraDevices, hasDraClaims } from './dra.ts';
import { DRA_RESOURCE_NAME_ATTRIBUTE, stringAttribute } from './dra-objects.ts';
import { isObject } from '../base/json.ts';

export interface DeviceWant {
  /** How messages name the attachment, e.g. `the selection element for network ns/sriov-net`. */
  label: string;
  /** The attachment's pool: the NAD's resource name, or the one its element picked. */
  resourceName?: string;
  /** The element picked the pool: no free device is an error (a NAD's pool alone is best effort). */
  strict?: boolean;
  /** The element named a claim request: its device, and nothing from the pool. */
  claim?: ClaimRequestRef;
}

export interface DeviceGrant {
  deviceId: string;
  /** The pool the device counts as (for its device-info file): the device's own, else the NAD's. */
  resourceName?: string;
  /** Where a DRA device came from (KEP-4817 network data). */
  claimDevice?: DraDeviceRef;
}

/**
 * What reading devices takes from its call (a multus CallContext is one, passed as is): the logger, and where the
 * kubelet's pod-resources socket and device checkpoint are (tests point elsewhere).
 */
export interface DeviceCall {
  log: Logger;
  seams: { devices?: ResourceMapDeps };
}

interface Pool {
  resources: ResourceMap;
  /** Where each DRA device ID came from. */
  sources: Map<string, DraDeviceRef>;
}

/** What `gatherDevices` read for a list of wants: the input of the pure `assignDevices`. */
export interface DeviceFacts {
  /** The pod's node, for the messages. */
  node: string;
  podName: string;
  /** Some want names a claim request, and there is no Kubernetes client. */
  noApi?: boolean;
  /** The devices of each named request (`claimKey`), or why they could not be read. */
  named: Map<string, ClaimRequestDevice[] | CniError>;
  /** The pooled devices (the kubelet's map and the pod's DRA devices); undefined when nothing is pooled. */
  pool?: Pool | CniError;
  /** The kubelet's map could not be read here (`multus plan` off the node): pools are not assigned nor refused. */
  kubeletUnknown?: boolean;
  /** The pools of the node, read only for a refusal's message; `complete` when the kubelet and the API answered. */
  nodePools?: { pools: Set<string>; complete: boolean };
}

export interface DeviceAssignment {
  /** The device of each want (undefined: none), in order. */
  grants: (DeviceGrant | undefined)[];
  /** Code 7 for a refused pool or request, the API's or kubelet's code otherwise (11 when they are unreachable). */
  errors: CniError[];
}

const claimKey = (r: ClaimRequestRef): string => `${r.claimName}\0${r.requestName}`;
const claimText = (r: ClaimRequestRef): string =>
  `resourceClaim {claimName: ${JSON.stringify(r.claimName)}, requestName: ${JSON.stringify(r.requestName)}}`;

function noDeviceLeft(w: DeviceWant, claim: ClaimRequestRef, total: number): CniError {
  return new CniError(
    CniCode.InvalidConfig,
    `${w.label}: ${claimText(claim)} has no device left: its ${total} device(s) went to earlier attachments`,
    { details: 'each device goes to one attachment: allocate more devices in the request, or name another request' },
  );
}

function wrongPool(w: DeviceWant, claim: ClaimRequestRef, device: ClaimRequestDevice): CniError {
  return new CniError(
    CniCode.InvalidConfig,
    `${w.label}: the device of ${claimText(claim)} has ${DRA_RESOURCE_NAME_ATTRIBUTE} ${JSON.stringify(device.resourceName)}, but the NAD's resourceName is ${JSON.stringify(w.resourceName)}`,
    { details: "name a request whose device belongs to the NAD's pool, or use a NAD without that resourceName" },
  );
}

/** The devices of the named requests, handed out in want order; the same device is never given twice (pure). */
function allocateNamed(
  wants: readonly DeviceWant[],
  facts: DeviceFacts,
  taken: ReadonlySet<string> = new Set(),
): { devices: Map<number, ClaimRequestDevice>; errors: CniError[] } {
  const queues = new Map<string, { total: number; left: ClaimRequestDevice[] } | CniError>();
  const errors: CniError[] = [];
  const devices = new Map<number, ClaimRequestDevice>();
  wants.forEach((w, i) => {
    if (!w.claim) return;
    const key = claimKey(w.claim);
    if (!queues.has(key)) {
      const found = facts.named.get(key) ?? [];
      const left = found instanceof CniError ? [] : found.filter((d) => !taken.has(d.deviceId));
      queues.set(key, found instanceof CniError ? found : { total: found.length, left });
      if (found instanceof CniError) return errors.push(found);
    }
    const queue = queues.get(key)!;
    if (queue instanceof CniError) return;
    const device = queue.left.shift();
    if (!device) return errors.push(noDeviceLeft(w, w.claim, queue.total));
    if (w.resourceName && device.resourceName !== '' && device.resourceName !== w.resourceName)
      return errors.push(wrongPool(w, w.claim, device));
    devices.set(i, device);
  });
  return { devices, errors };
}

function poolRefusal(want: DeviceWant, pool: string, resources: ResourceMap, facts: DeviceFacts): CniError {
  const had = resources.get(pool)?.length ?? 0;
  const at = `${want.label}: pool ${JSON.stringify(pool)}`;
  if (had > 0) {
    return new CniError(
      CniCode.InvalidConfig,
      `${at} has no free device: the pod's ${had} device(s) of it went to earlier attachments`,
      { details: `request one more ${pool} in the pod's resources, or attach fewer networks from this pool` },
    );
  }
  const has = [...resources.keys()].filter((k) => (resources.get(k)?.length ?? 0) > 0).join(', ') || 'none';
  const node = facts.node !== '' ? facts.node : 'this node';
  const onNode = facts.nodePools ?? { pools: new Set<string>(), complete: false };
  if (onNode.complete && !onNode.pools.has(pool)) {
    return new CniError(
      CniCode.InvalidConfig,
      `${at} is not on node ${node}: no device plugin registered it and no DRA driver publishes it there (the node has: ${[...onNode.pools].sort().join(', ') || 'none'})`,
      {
        details: `pick a pool of this node, or request ${pool} in the pod's resources so that it is scheduled where the pool is`,
      },
    );
  }
  const where = onNode.pools.has(pool) ? `on the node, but` : `unknown to pod ${facts.podName}:`;
  return new CniError(
    CniCode.InvalidConfig,
    `${at} is ${where} neither its device plugins nor its DRA claims gave the pod a device of it (the pod has: ${has})`,
    {
      details: `request ${pool} in a container's resources.limits (device plugin) or in a ResourceClaim whose device carries ${DRA_RESOURCE_NAME_ATTRIBUTE} "${pool}"`,
    },
  );
}

/**
 * The device of each want, from what `gatherDevices` read (pure: no I/O). `taken`: device IDs the pod's attachments
 * already hold (hot-plug), handed to none of the wants.
 */
export function assignDevices(
  wants: readonly DeviceWant[],
  facts: DeviceFacts,
  taken: ReadonlySet<string> = new Set(),
): DeviceAssignment {
  const none = (): DeviceAssignment['grants'] => wants.map(() => undefined);
  if (facts.noApi) {
    const w = wants.find((x) => x.claim)!;
    const msg = `${w.label}: "resourceClaim" needs the Kubernetes API, and multus has no kubeconfig`;
    return { grants: none(), errors: [new CniError(CniCode.InvalidConfig, msg)] };
  }
  const named = allocateNamed(wants, facts, taken);
  if (facts.pool instanceof CniError) return { grants: none(), errors: [...named.errors, facts.pool] };
  const { resources, sources }: Pool = facts.pool ?? { resources: new Map(), sources: new Map() };
  const free: ResourceMap = new Map([...resources].map(([k, ids]) => [k, ids.filter((id) => !taken.has(id))]));
  const allocator = new DeviceAllocator(free);
  const errors = [...named.errors];
  let refused = false;
  const grants = wants.map((w, i): DeviceGrant | undefined => {
    const device = named.devices.get(i);
    if (device)
      return {
        deviceId: device.deviceId,
        resourceName: device.resourceName || w.resourceName,
        claimDevice: device.ref,
      };
    if (w.claim || !w.resourceName) return undefined;
    const id = allocator.next(w.resourceName);
    if (id === undefined) {
      if (w.strict && !refused && !facts.kubeletUnknown) errors.push(poolRefusal(w, w.resourceName, resources, facts));
      refused ||= w.strict === true;
      return undefined;
    }
    const source = sources.get(id);
    return { deviceId: id, resourceName: w.resourceName, ...(source ? { claimDevice: { ...source } } : {}) };
  });
  return { grants, errors };
}

/** The pools the node has, for a refusal's message: the kubelet's registered resources and the DRA slices' names. */
async function nodePools(
  pod: Pod,
  kube: DraApi | undefined,
  ctx: DeviceCall,
): Promise<{ pools: Set<string>; complete: boolean }> {
  const fromKubelet = registeredPools(ctx.seams.devices?.checkpointFile);
  const node = typeof pod.spec?.nodeName === 'string' ? pod.spec.nodeName : '';
  const slices = kube && node !== '' ? await kube.listResourceSlices(node, '').catch(() => undefined) : undefined;
  const pools = new Set(fromKubelet ?? []);
  for (const slice of slices ?? []) {
    const devices = Array.isArray(slice.spec?.devices) ? (slice.spec.devices as unknown[]) : [];
    for (const d of devices) {
      const name = isObject(d) ? stringAttribute(d, DRA_RESOURCE_NAME_ATTRIBUTE) : '';
      if (name !== '') pools.add(name);
    }
  }
  return { pools, complete: fromKubelet !== undefined && slices !== undefined };
}

export interface GatherOptions {
  /** `multus plan`: a kubelet map that cannot be read here leaves the pools unassigned instead of failing. */
  kubeletOptional?: boolean;
  /** The pod's DRA reads of this call, when the caller made some already (its claims' networks). */
  lookup?: DraLookup;
}

/** The kubelet's map plus the pod's DRA devices, without the devices named requests took. */
async function pooledResources(
  pod: Pod,
  kube: DraApi | undefined,
  ctx: DeviceCall,
  lookup: DraLookup | undefined,
  taken: ReadonlySet<string>,
  facts: DeviceFacts,
  opts: GatherOptions,
): Promise<Pool> {
  const { namespace, name, uid } = pod.metadata;
  let resources: ResourceMap;
  try {
    resources = await readResourceMap({ namespace, name, uid }, { log: ctx.log, ...ctx.seams.devices });
  } catch (e) {
    if (!opts.kubeletOptional) throw e;
    ctx.log.verbose(`the kubelet's device assignments cannot be read here: ${toCniError(e).msg}`);
    facts.kubeletUnknown = true;
    resources = new Map();
  }
  const sources = new Map<string, DraDeviceRef>();
  if (!kube || !hasDraClaims(pod)) return { resources, sources };
  const draOpts = { log: ctx.log, sources, taken, ...(lookup ? { lookup } : {}) };
  const withDra = await addDraDevices(resources, pod, kube, draOpts).catch((e: unknown) => {
    throw wrapError(e, 'failed to get resourceMap from DRA');
  });
  return { resources: withDra, sources };
}

/** Reads what `wants` need (I/O): the named requests' devices, the pooled devices, and the node's pools if needed. */
export async function gatherDevices(
  wants: readonly DeviceWant[],
  pod: Pod,
  kube: DraApi | undefined,
  ctx: DeviceCall,
  opts: GatherOptions = {},
): Promise<DeviceFacts> {
  const node = typeof pod.spec?.nodeName === 'string' ? pod.spec.nodeName : '';
  const facts: DeviceFacts = { node, podName: `${pod.metadata.namespace}/${pod.metadata.name}`, named: new Map() };
  const pooling = wants.some((w) => !w.claim && w.resourceName);
  const naming = wants.some((w) => w.claim);
  if (naming && !kube) return { ...facts, noApi: true };
  if (!pooling && !naming) return facts;
  const lookup = opts.lookup ?? (kube ? new DraLookup(kube, pod, {}) : undefined);
  for (const w of wants) {
    if (!w.claim || facts.named.has(claimKey(w.claim))) continue;
    const found = await claimRequestDevices(pod, w.claim, kube!, lookup!).catch((e: unknown) => wrapError(e, w.label));
    facts.named.set(claimKey(w.claim), found);
  }
  if (!pooling) return facts;
  const taken = new Set([...allocateNamed(wants, facts).devices.values()].map((d) => d.key));
  try {
    facts.pool = await pooledResources(pod, kube, ctx, lookup, taken, facts, opts);
  } catch (e) {
    facts.pool = toCniError(e);
    return facts;
  }
  const empty = (pool: string) => (facts.pool as Pool).resources.get(pool)?.length ?? 0;
  if (wants.some((w) => w.strict && !w.claim && w.resourceName && empty(w.resourceName) === 0))
    facts.nodePools = await nodePools(pod, kube, ctx);
  return facts;
}

/** `gatherDevices` then `assignDevices`; throws the first error. */
export async function grantDevices(
  wants: readonly DeviceWant[],
  pod: Pod,
  kube: DraApi | undefined,
  ctx: DeviceCall,
): Promise<(DeviceGrant | undefined)[]> {
  const { grants, errors } = assignDevices(wants, await gatherDevices(wants, pod, kube, ctx));
  if (errors[0]) throw errors[0];
  return grants;
}
