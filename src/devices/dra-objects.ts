/**
 * devices/dra-objects.ts: reading the DRA objects devices/dra.ts fetches (pure): a pod's claims and extended
 * resource mappings, a claim's allocation results, a driver's ResourceSlices indexed by pool and device with
 * Multus' two string attributes (docs/behaviour.md#device-ids). Every malformed object is a CNI error naming it.
 * Tested by test/unit/devices/dra.test.ts, test/k8s/dra.test.ts.
 */
import { CniCode, CniError } from '../base/errors.ts';
import type { Logger } from '../base/log.ts';
import { isObject } from '../base/json.ts';
import type { DraObject, Pod } from '../k8s/types.ts';

export const DRA_DEVICE_ID_ATTRIBUTE = 'k8s.cni.cncf.io/deviceID';
export const DRA_RESOURCE_NAME_ATTRIBUTE = 'k8s.cni.cncf.io/resourceName';

/** One allocated device of a claim (status.allocation.devices.results[]). */
export interface AllocationResult {
  request: string;
  driver: string;
  pool: string;
  device: string;
}

export interface DeviceInfo {
  deviceId: string;
  resourceName: string;
  /** The device's attributes as the slice has them (a driver's own, such as our networks': src/dra/). */
  attributes: Record<string, unknown>;
}

export interface ExtendedStatus {
  claimName: string;
  mappings: { requestName: string; resourceName: string }[];
}

export const str = (v: unknown): string => (typeof v === 'string' ? v : '');

export interface PodClaims {
  /** ResourceClaim names, in `spec.resourceClaims` order, then any other of `status.resourceClaimStatuses`. */
  names: string[];
  /** `spec.resourceClaims` entries from a template whose generated claim the status does not name yet. */
  pending: string[];
}

export function listOf(pod: Pod, value: unknown, where: string): unknown[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw podError(pod, `${where} is not a list`);
  return value;
}

/**
 * The pod's claims. Multus reads only `status.resourceClaimStatuses`, which names the claims generated from
 * templates; a `spec.resourceClaims` entry naming a claim directly (`resourceClaimName`) is read too.
 */
export function podClaims(pod: Pod, log: Logger | undefined): PodClaims {
  const generated = new Map<string, string | undefined>();
  listOf(pod, pod.status?.resourceClaimStatuses, 'status.resourceClaimStatuses').forEach((s, i) => {
    const name = isObject(s) ? str(s.resourceClaimName) : '';
    // Multus logs and goes on: no name means no claim was needed for the entry.
    if (name === '') log?.verbose(`pod ${podRef(pod)}: status.resourceClaimStatuses[${i}] names no ResourceClaim`);
    generated.set(isObject(s) ? str(s.name) : `#${i}`, name || undefined);
  });
  const names: string[] = [];
  const pending: string[] = [];
  const add = (n: string | undefined) => n && !names.includes(n) && names.push(n);
  for (const entry of listOf(pod, pod.spec?.resourceClaims, 'spec.resourceClaims')) {
    if (!isObject(entry)) continue;
    const direct = str(entry.resourceClaimName);
    if (direct !== '') add(direct);
    else if (generated.has(str(entry.name))) add(generated.get(str(entry.name)));
    else if (str(entry.resourceClaimTemplateName) !== '') pending.push(str(entry.name));
  }
  for (const n of generated.values()) add(n);
  return { names, pending };
}

export function extendedStatus(pod: Pod): ExtendedStatus | undefined {
  const ext = pod.status?.extendedResourceClaimStatus;
  if (ext === undefined || ext === null) return undefined;
  const bad = (what: string) => podError(pod, `status.extendedResourceClaimStatus ${what}`);
  if (!isObject(ext)) throw bad('is not an object');
  const claimName = str(ext.resourceClaimName);
  if (claimName === '') throw bad('names no resourceClaimName');
  const raw = ext.requestMappings ?? [];
  if (!Array.isArray(raw)) throw bad('requestMappings is not a list');
  const mappings = raw.map((m: unknown, i) => {
    const requestName = isObject(m) ? str(m.requestName) : '';
    const resourceName = isObject(m) ? str(m.resourceName) : '';
    if (requestName === '' || resourceName === '') {
      throw bad(`requestMappings[${i}] needs a requestName and a resourceName`);
    }
    return { requestName, resourceName };
  });
  return { claimName, mappings };
}

export const podRef = (pod: Pod): string => `${pod.metadata.namespace}/${pod.metadata.name}`;

export function podError(pod: Pod, problem: string): CniError {
  return new CniError(CniCode.InvalidConfig, `pod ${podRef(pod)}: ${problem}`);
}

/** The claim's allocated devices; an unallocated claim is an error naming it (Multus: "has no device allocation"). */
export function allocationResults(claim: DraObject, ref: string): AllocationResult[] {
  const devices = isObject(claim.status?.allocation) ? claim.status.allocation.devices : undefined;
  const results = isObject(devices) ? devices.results : undefined;
  if (!Array.isArray(results)) {
    throw new CniError(
      CniCode.TryAgainLater,
      `ResourceClaim ${ref} has no device allocation (status.allocation.devices.results): it is not allocated yet, or no longer`,
    );
  }
  return results.map((r: unknown, i) => {
    const result = isObject(r)
      ? { request: str(r.request), driver: str(r.driver), pool: str(r.pool), device: str(r.device) }
      : undefined;
    if (!result || result.driver === '' || result.pool === '' || result.device === '') {
      throw new CniError(
        CniCode.InvalidConfig,
        `ResourceClaim ${ref}: status.allocation.devices.results[${i}] needs a driver, a pool and a device`,
      );
    }
    return result;
  });
}

/** A device attribute's string value (`{"string": "..."}` in resource.k8s.io/v1), '' when absent or not a string. */
export function stringAttribute(device: Record<string, unknown>, name: string): string {
  const attrs = device.attributes;
  const attr = isObject(attrs) ? attrs[name] : undefined;
  return isObject(attr) ? str(attr.string) : '';
}

/**
 * The devices of a driver's slices with Multus' two attributes, by "pool\0device" ('' where a device lacks one;
 * the pooled lookup skips those without a deviceID as Multus does, a named claim request refuses them). A slice
 * that is not shaped as a ResourceSlice is an error naming it.
 */
export function indexSlices(slices: DraObject[], driver: string): Map<string, DeviceInfo> {
  const index = new Map<string, DeviceInfo>();
  for (const slice of slices) {
    const name = str(slice.metadata?.name) || '(unnamed)';
    const pool = isObject(slice.spec?.pool) ? str(slice.spec.pool.name) : '';
    const devices = slice.spec?.devices ?? [];
    if (pool === '' || !Array.isArray(devices)) {
      throw new CniError(
        CniCode.InvalidConfig,
        `ResourceSlice ${name} of driver ${driver} has no spec.pool.name or no spec.devices list`,
      );
    }
    for (const device of devices) {
      if (!isObject(device) || str(device.name) === '') continue;
      const deviceId = stringAttribute(device, DRA_DEVICE_ID_ATTRIBUTE);
      const resourceName = stringAttribute(device, DRA_RESOURCE_NAME_ATTRIBUTE);
      const attributes = isObject(device.attributes) ? device.attributes : {};
      index.set(`${pool}\0${str(device.name)}`, { deviceId, resourceName, attributes });
    }
  }
  return index;
}
