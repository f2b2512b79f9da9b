/**
 * devices/attachment-devices.ts: which device each attachment of an ADD gets (docs/behaviour.md#device-ids).
 *
 * An attachment wants a device when its NAD has a resource name, when its selection element picks a pool
 * (`resourceName`, docs/behaviour.md#device-pool) or when the element names a DRA claim request
 * (`resourceClaim`, docs/behaviour.md#claim-request). Named requests are served first: each takes the next
 * device of that request (claim-request.ts), and those devices are kept out of the pool. Then the pooled
 * wants, in order, take the next ID of their pool from the kubelet's map followed by the pod's DRA devices
 * (devices.ts, dra.ts). A NAD's pool with no device left leaves the attachment without one (Multus); a pool
 * the element asked for, or a named request, with no device is code 7 naming the attachment and the pool or
 * request. The kubelet and the API are asked only for what some attachment wants.
 */
import { CniCode, CniError, wrapError } from '../base/errors.ts';
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

export interface GrantDeps {
  kube: DraApi | undefined;
  log: Logger;
  devices?: ResourceMapDeps;
  /** The pod's DRA reads of this call, when the caller made some already (its claims' networks). */
  lookup?: DraLookup;
}

const podName = (pod: Pod): string => `${pod.metadata.namespace}/${pod.metadata.name}`;

const claimKey = (r: ClaimRequestRef): string => `${r.claimName}\0${r.requestName}`;
const claimText = (r: ClaimRequestRef): string =>
  `resourceClaim {claimName: ${JSON.stringify(r.claimName)}, requestName: ${JSON.stringify(r.requestName)}}`;

/** The devices of the named requests, handed out in want order; the same device is never given twice. */
async function namedGrants(
  wants: readonly DeviceWant[],
  pod: Pod,
  api: DraApi,
  lookup: DraLookup,
): Promise<Map<number, ClaimRequestDevice>> {
  const queues = new Map<string, { total: number; left: ClaimRequestDevice[] }>();
  for (const w of wants) {
    if (!w.claim || queues.has(claimKey(w.claim))) continue;
    const found = await claimRequestDevices(pod, w.claim, api, lookup).catch((e: unknown) => {
      throw wrapError(e, w.label);
    });
    queues.set(claimKey(w.claim), { total: found.length, left: [...found] });
  }
  const out = new Map<number, ClaimRequestDevice>();
  wants.forEach((w, i) => {
    if (!w.claim) return;
    const queue = queues.get(claimKey(w.claim))!;
    const device = queue.left.shift();
    if (!device) {
      throw new CniError(
        CniCode.InvalidConfig,
        `${w.label}: ${claimText(w.claim)} has no device left: its ${queue.total} device(s) went to earlier attachments`,
        {
          details: 'each device goes to one attachment: allocate more devices in the request, or name another request',
        },
      );
    }
    if (w.resourceName && device.resourceName !== '' && device.resourceName !== w.resourceName) {
      throw new CniError(
        CniCode.InvalidConfig,
        `${w.label}: the device of ${claimText(w.claim)} has ${DRA_RESOURCE_NAME_ATTRIBUTE} ${JSON.stringify(device.resourceName)}, but the NAD's resourceName is ${JSON.stringify(w.resourceName)}`,
        { details: "name a request whose device belongs to the NAD's pool, or use a NAD without that resourceName" },
      );
    }
    out.set(i, device);
  });
  return out;
}

/**
 * The pools the node has, for the message only: device-plugin resources registered with the kubelet (its
 * checkpoint) and the resource names DRA drivers publish in the node's slices. `complete` when both were read.
 */
async function nodePools(pod: Pod, deps: GrantDeps): Promise<{ pools: Set<string>; complete: boolean }> {
  const fromKubelet = registeredPools(deps.devices?.checkpointFile);
  const node = typeof pod.spec?.nodeName === 'string' ? pod.spec.nodeName : '';
  const slices =
    deps.kube && node !== '' ? await deps.kube.listResourceSlices(node, '').catch(() => undefined) : undefined;
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

async function poolRefusal(
  want: DeviceWant,
  pool: string,
  resources: ResourceMap,
  pod: Pod,
  deps: GrantDeps,
): Promise<CniError> {
  const had = resources.get(pool)?.length ?? 0;
  const at = `${want.label}: pool ${JSON.stringify(pool)}`;
  if (had > 0) {
    return new CniError(
      CniCode.InvalidConfig,
      `${at} has no free device: the pod's ${had} device(s) of it went to earlier attachments`,
      {
        details: `request one more ${pool} in the pod's resources, or attach fewer networks from this pool`,
      },
    );
  }
  const has = [...resources.keys()].filter((k) => (resources.get(k)?.length ?? 0) > 0).join(', ') || 'none';
  const node = typeof pod.spec?.nodeName === 'string' && pod.spec.nodeName !== '' ? pod.spec.nodeName : 'this node';
  const onNode = await nodePools(pod, deps);
  if (onNode.complete && !onNode.pools.has(pool)) {
    return new CniError(
      CniCode.InvalidConfig,
      `${at} is not on node ${node}: no device plugin registered it and no DRA driver publishes it there (the node has: ${[...onNode.pools].sort().join(', ') || 'none'})`,
      {
        details: `pick a pool of this node, or request ${pool} in the pod's resources so that it is scheduled where the pool is`,
      },
    );
  }
  const where = onNode.pools.has(pool) ? `on the node, but` : `unknown to pod ${podName(pod)}:`;
  return new CniError(
    CniCode.InvalidConfig,
    `${at} is ${where} neither its device plugins nor its DRA claims gave the pod a device of it (the pod has: ${has})`,
    {
      details: `request ${pool} in a container's resources.limits (device plugin) or in a ResourceClaim whose device carries ${DRA_RESOURCE_NAME_ATTRIBUTE} "${pool}"`,
    },
  );
}

interface Pool {
  resources: ResourceMap;
  /** Where each DRA device ID came from. */
  sources: Map<string, DraDeviceRef>;
}

/** The kubelet's map plus the pod's DRA devices, without the devices named requests took. */
async function pooledResources(
  pod: Pod,
  deps: GrantDeps,
  lookup: DraLookup | undefined,
  taken: ReadonlySet<string>,
): Promise<Pool> {
  const { namespace, name, uid } = pod.metadata;
  const resources = await readResourceMap({ namespace, name, uid }, { log: deps.log, ...deps.devices });
  const sources = new Map<string, DraDeviceRef>();
  if (!deps.kube || !hasDraClaims(pod)) return { resources, sources };
  const opts = { log: deps.log, sources, taken, ...(lookup ? { lookup } : {}) };
  const withDra = await addDraDevices(resources, pod, deps.kube, opts).catch((e: unknown) => {
    throw wrapError(e, 'failed to get resourceMap from DRA');
  });
  return { resources: withDra, sources };
}

/**
 * The device of each want (undefined: none), in order. Errors are CniErrors: code 7 for a refused pool or
 * request, the API's or kubelet's code otherwise (11 when they are unreachable).
 */
export async function grantDevices(
  wants: readonly DeviceWant[],
  pod: Pod,
  deps: GrantDeps,
): Promise<(DeviceGrant | undefined)[]> {
  const pooling = wants.some((w) => !w.claim && w.resourceName);
  const naming = wants.some((w) => w.claim);
  if (!pooling && !naming) return wants.map(() => undefined);
  if (naming && !deps.kube) {
    const w = wants.find((x) => x.claim)!;
    throw new CniError(
      CniCode.InvalidConfig,
      `${w.label}: "resourceClaim" needs the Kubernetes API, and multus has no kubeconfig`,
    );
  }
  const lookup = deps.lookup ?? (deps.kube ? new DraLookup(deps.kube, pod, {}) : undefined);
  const named = naming ? await namedGrants(wants, pod, deps.kube!, lookup!) : new Map<number, ClaimRequestDevice>();
  const taken = new Set([...named.values()].map((d) => d.key));
  const empty: Pool = { resources: new Map(), sources: new Map() };
  const { resources, sources } = pooling ? await pooledResources(pod, deps, lookup, taken) : empty;
  const allocator = new DeviceAllocator(resources);
  let refusal: { want: DeviceWant; pool: string } | undefined;
  const grants = wants.map((w, i): DeviceGrant | undefined => {
    const device = named.get(i);
    if (device)
      return {
        deviceId: device.deviceId,
        resourceName: device.resourceName || w.resourceName,
        claimDevice: device.ref,
      };
    if (w.claim || !w.resourceName) return undefined;
    const id = allocator.next(w.resourceName);
    if (id === undefined) {
      if (w.strict) refusal ??= { want: w, pool: w.resourceName };
      return undefined;
    }
    const source = sources.get(id);
    return { deviceId: id, resourceName: w.resourceName, ...(source ? { claimDevice: { ...source } } : {}) };
  });
  if (refusal) throw await poolRefusal(refusal.want, refusal.pool, resources, pod, deps);
  return grants;
}
