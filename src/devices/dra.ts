/**
 * devices/dra.ts: device IDs from Dynamic Resource Allocation (resource.k8s.io/v1), as Multus HEAD's
 * pkg/draclient reads them (k8snetworkplumbingwg/multus-cni#1492; docs/behaviour.md#device-ids).
 *
 * For each claim of the pod (`status.resourceClaimStatuses[]` as Multus reads, and, beyond Multus, the claims
 * `spec.resourceClaims[]` names directly, which that status never lists), GET its ResourceClaim, and for each
 * `status.allocation.devices.results[]` (driver, pool, device) find the device in the driver's ResourceSlices
 * of the pod's node (one LIST per driver per call, `fieldSelector=spec.nodeName=<node>,spec.driver=<driver>`),
 * and read its string attributes `k8s.cni.cncf.io/deviceID` and `k8s.cni.cncf.io/resourceName`. The ID is
 * appended to that resource name's list, after the kubelet's device-plugin IDs, in claim and result order. A
 * device that is in no slice, or has no deviceID, or no resourceName, is skipped (a GPU in the same claim must
 * not fail the pod's networking); a claim without an allocation is an error naming it. The pod's
 * `status.extendedResourceClaimStatus` (DRA extended resources) is strict, as upstream: each `requestMappings[]`
 * entry's devices must be found and carry exactly that resource name, or the call fails naming the device.
 *
 * The whole lookup has one deadline (upstream: 20 s); claims and slices are cached for the one call only (no
 * informer: docs/resident.md says why). Nothing is changed until everything was read: the caller gets a new
 * map or an error. Pure parsing of the API objects; I/O only through the injected `DraApi`.
 */
import { CniCode, CniError, messageOf } from '../base/errors.ts';
import type { Logger } from '../base/log.ts';
import { isObject } from '../base/json.ts';
import type { CallOptions, DraObject, Pod } from '../k8s/types.ts';
import type { ResourceMap } from './devices.ts';
import type { AllocationResult, DeviceInfo, ExtendedStatus, PodClaims } from './dra-objects.ts';
import {
  DRA_DEVICE_ID_ATTRIBUTE,
  DRA_RESOURCE_NAME_ATTRIBUTE,
  allocationResults,
  extendedStatus,
  indexSlices,
  podClaims,
  podRef,
  str,
} from './dra-objects.ts';

/** Multus draclient: a 20-second safety timeout for the whole lookup. */
export const DRA_LOOKUP_TIMEOUT_MS = 20_000;

/** The two calls this module makes (KubeClient has them). */
export interface DraApi {
  getPod(namespace: string, name: string, opts?: CallOptions): Promise<Pod>;
  getResourceClaim(namespace: string, name: string, opts?: CallOptions): Promise<DraObject>;
  listResourceSlices(nodeName: string, driver: string, opts?: CallOptions): Promise<DraObject[]>;
}

export interface DraOptions {
  timeoutMs?: number;
  log?: Logger;
  now?: () => number;
  /** Filled with where each device ID came from (the first device with that ID). */
  sources?: Map<string, DraDeviceRef>;
  /** Devices already given to attachments that named their claim request (`deviceKey`): not pooled again. */
  taken?: ReadonlySet<string>;
  /** The reads of this call, when the caller made some already (a `DraLookup` made for the same pod). */
  lookup?: DraLookup;
}

/** One allocated device of one of the pod's claims: "claim\0driver\0pool\0device". */
export function deviceKey(claim: string, r: { driver: string; pool: string; device: string }): string {
  return `${claim}\0${r.driver}\0${r.pool}\0${r.device}`;
}

/** One allocated device of a claim, as KEP-4817's status.devices[] entries name it. */
export interface DraDeviceRef {
  namespace: string;
  claim: string;
  driver: string;
  pool: string;
  device: string;
}

/** One call's reads: each claim GET once, each driver's slices LISTed once, all within one deadline. */
export class DraLookup {
  private readonly claims = new Map<string, Promise<DraObject>>();
  private readonly drivers = new Map<string, Promise<Map<string, DeviceInfo>>>();
  private readonly deadline: number;
  private readonly now: () => number;

  constructor(
    private readonly api: DraApi,
    private readonly pod: Pod,
    private readonly opts: Pick<DraOptions, 'timeoutMs' | 'now'>,
  ) {
    this.now = opts.now ?? Date.now;
    this.deadline = this.now() + (opts.timeoutMs ?? DRA_LOOKUP_TIMEOUT_MS);
  }

  private remaining(what: string): CallOptions {
    const left = this.deadline - this.now();
    if (left <= 0) {
      const s = (this.opts.timeoutMs ?? DRA_LOOKUP_TIMEOUT_MS) / 1000;
      throw new CniError(
        CniCode.TryAgainLater,
        `the DRA device lookup for pod ${podRef(this.pod)} took over ${s} s (at ${what})`,
      );
    }
    return { timeoutMs: left };
  }

  claim(name: string): Promise<DraObject> {
    const ref = `${this.pod.metadata.namespace}/${name}`;
    let p = this.claims.get(ref);
    if (!p) {
      p = this.api
        .getResourceClaim(this.pod.metadata.namespace, name, this.remaining(`ResourceClaim ${ref}`))
        .catch((e: unknown) => {
          throw apiError(e, `cannot read ResourceClaim ${ref} named in the pod's status`);
        });
      this.claims.set(ref, p);
    }
    return p;
  }

  devices(driver: string): Promise<Map<string, DeviceInfo>> {
    let p = this.drivers.get(driver);
    if (!p) {
      const node = str(this.pod.spec?.nodeName);
      const what = `the ResourceSlices of driver ${driver}${node ? ` on node ${node}` : ''}`;
      p = this.api
        .listResourceSlices(node, driver, this.remaining(what))
        .then((slices) => indexSlices(slices, driver))
        .catch((e: unknown) => {
          throw apiError(e, `cannot list ${what}`);
        });
      this.drivers.set(driver, p);
    }
    return p;
  }
}

function apiError(e: unknown, context: string): CniError {
  if (e instanceof CniError && e.msg.startsWith(context)) return e;
  const code = e instanceof CniError ? e.code : CniCode.Internal;
  return new CniError(code, `${context}: ${messageOf(e)}`, { cause: e });
}

const describeResult = (claim: string, r: AllocationResult): string =>
  `device ${r.device} (driver ${r.driver}, pool ${r.pool}) of ResourceClaim ${claim}`;

/** The pod's claims, in status order: the IDs of devices published for CNI, by resource name. */
async function claimDevices(
  lookup: DraLookup,
  pod: Pod,
  names: string[],
  out: ResourceMap,
  opts: DraOptions,
): Promise<void> {
  const log = opts.log;
  for (const name of names) {
    const ref = `${pod.metadata.namespace}/${name}`;
    const results = allocationResults(await lookup.claim(name), ref);
    for (const r of results) {
      if (opts.taken?.has(deviceKey(name, r))) continue;
      const info = (await lookup.devices(r.driver)).get(`${r.pool}\0${r.device}`);
      if (!info || info.deviceId === '') {
        log?.warn(
          `${describeResult(ref, r)}: in no ResourceSlice of this node with ${DRA_DEVICE_ID_ATTRIBUTE}; skipped`,
        );
        continue;
      }
      if (info.resourceName === '') {
        log?.warn(`${describeResult(ref, r)}: no ${DRA_RESOURCE_NAME_ATTRIBUTE} attribute; skipped`);
        continue;
      }
      append(out, info.resourceName, info.deviceId);
      remember(opts, info.deviceId, pod, name, r);
    }
  }
}

function remember(opts: DraOptions, id: string, pod: Pod, claim: string, r: AllocationResult): void {
  if (opts.sources && !opts.sources.has(id)) {
    opts.sources.set(id, {
      namespace: pod.metadata.namespace,
      claim,
      driver: r.driver,
      pool: r.pool,
      device: r.device,
    });
  }
}

/** DRA extended resources: strict, as upstream (every mapped device found, its resourceName exactly the mapping's). */
async function extendedDevices(
  lookup: DraLookup,
  pod: Pod,
  ext: ExtendedStatus,
  out: ResourceMap,
  opts: DraOptions,
): Promise<void> {
  const ref = `${pod.metadata.namespace}/${ext.claimName}`;
  const results = allocationResults(await lookup.claim(ext.claimName), ref);
  for (const m of ext.mappings) {
    const mine = results.filter((r) => r.request === m.requestName);
    if (mine.length === 0) {
      throw new CniError(
        CniCode.InvalidConfig,
        `request ${m.requestName} of the pod's extendedResourceClaimStatus is not in ResourceClaim ${ref}'s allocation`,
      );
    }
    for (const r of mine) {
      if (opts.taken?.has(deviceKey(ext.claimName, r))) continue;
      const info = (await lookup.devices(r.driver)).get(`${r.pool}\0${r.device}`);
      const where = `${describeResult(ref, r)}, extended resource ${m.resourceName}`;
      if (!info || info.deviceId === '') {
        throw new CniError(
          CniCode.InvalidConfig,
          `${where}: in no ResourceSlice of this node with ${DRA_DEVICE_ID_ATTRIBUTE}`,
        );
      }
      if (info.resourceName !== m.resourceName) {
        const has = info.resourceName === '' ? 'no' : `"${info.resourceName}" as`;
        throw new CniError(
          CniCode.InvalidConfig,
          `${where}: the device has ${has} ${DRA_RESOURCE_NAME_ATTRIBUTE}; it must be "${m.resourceName}", the mapping's (and the NAD's) resource name`,
        );
      }
      append(out, m.resourceName, info.deviceId);
      remember(opts, info.deviceId, pod, ext.claimName, r);
    }
  }
}

function append(map: ResourceMap, resourceName: string, id: string): void {
  const list = map.get(resourceName) ?? [];
  list.push(id);
  map.set(resourceName, list);
}

/** True when the pod's status names any DRA claim (so the API is asked at all). */
export function hasDraClaims(pod: Pod): boolean {
  const nonEmpty = (v: unknown) => Array.isArray(v) && v.length > 0;
  return (
    nonEmpty(pod.status?.resourceClaimStatuses) ||
    nonEmpty(pod.spec?.resourceClaims) ||
    isObject(pod.status?.extendedResourceClaimStatus)
  );
}

/**
 * The pod's claims; a template claim the status does not name yet means the pod copy is older than the
 * kubelet's (the daemon's informer lags): asked for again, once, past any cache. Still missing is code 11.
 */
export async function currentClaims(
  pod: Pod,
  api: DraApi,
  log: Logger | undefined,
): Promise<{ pod: Pod; claims: PodClaims }> {
  let claims = podClaims(pod, log);
  if (claims.pending.length === 0) return { pod, claims };
  const fresh = await api.getPod(pod.metadata.namespace, pod.metadata.name, { uid: pod.metadata.uid, fresh: true });
  claims = podClaims(fresh, log);
  if (claims.pending.length > 0) {
    throw new CniError(
      CniCode.TryAgainLater,
      `pod ${podRef(pod)}: the ResourceClaim generated for its resourceClaims entry "${claims.pending[0]}" is not in its status.resourceClaimStatuses yet`,
    );
  }
  return { pod: fresh, claims };
}

/**
 * `resources` (the kubelet's map) with the pod's DRA device IDs appended; `resources` itself is not changed.
 * Errors are CniErrors naming the claim, slice or device (code 11 while a claim is unallocated or the API is
 * unreachable, so the runtime retries).
 */
export async function addDraDevices(
  resources: ResourceMap,
  given: Pod,
  api: DraApi,
  opts: DraOptions = {},
): Promise<ResourceMap> {
  const out: ResourceMap = new Map([...resources].map(([name, ids]) => [name, [...ids]]));
  const current = await currentClaims(given, api, opts.log);
  const pod = current.pod;
  const names = current.claims.names;
  const ext = extendedStatus(pod);
  if (names.length === 0 && !ext) return out;
  const lookup = opts.lookup ?? new DraLookup(api, pod, opts);
  await claimDevices(lookup, pod, names, out, opts);
  if (ext) await extendedDevices(lookup, pod, ext, out, opts);
  return out;
}
