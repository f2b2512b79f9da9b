/**
 * k8s/claim-devices.ts: the fallback write of a ResourceClaim's `status.devices[]` when server-side apply is
 * refused (pure: keys, merge, the call). docs/behaviour.md#claim-networks.
 *
 * A server-side apply of the status re-encodes the whole object, and with it the allocation's opaque
 * parameters; when the stored parameters were not written in sorted key order (a client other than kubectl, a Go
 * struct), the API server (1.37) takes the allocation as changed and answers 422 "status.allocation: field
 * cannot be modified once set", whatever the apply holds. Then the client reads the claim and writes the whole
 * list by a JSON patch guarded by the claim's resourceVersion, under the same field manager: the entries that
 * manager owned (read from managedFields, as the apply would have replaced them) and those the write names are
 * replaced; every other entry is kept as it is.
 * Tested by test/unit/k8s/claim-devices.test.ts and test/k8s/dra-networks.test.ts.
 */
import type { Call } from './calls.ts';
import { claimDevicesApplyCall } from './calls.ts';
import type { DraObject } from './types.ts';

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const text = (v: unknown): string => (typeof v === 'string' ? v : '');

/** The list-map key of a `status.devices[]` entry: driver, pool, device, shareID. */
export function deviceEntryKey(entry: unknown): string {
  const e = isRecord(entry) ? entry : {};
  return [e.driver, e.pool, e.device, e.shareID].map(text).join('\0');
}

/** The `status.devices[]` entries `manager` owns on the claim (its managedFields on the status subresource). */
export function ownedDeviceKeys(claim: DraObject, manager: string): Set<string> {
  const owned = new Set<string>();
  const managed = (claim.metadata as { managedFields?: unknown } | undefined)?.managedFields;
  for (const m of Array.isArray(managed) ? managed : []) {
    if (!isRecord(m) || m.manager !== manager) continue;
    const status = isRecord(m.fieldsV1) ? m.fieldsV1['f:status'] : undefined;
    const devices = isRecord(status) ? status['f:devices'] : undefined;
    for (const key of Object.keys(isRecord(devices) ? devices : {})) {
      if (!key.startsWith('k:')) continue;
      try {
        owned.add(deviceEntryKey(JSON.parse(key.slice(2))));
      } catch {
        // not a key of ours to read: left alone
      }
    }
  }
  return owned;
}

/** The claim's list with `manager`'s entries and those `devices` names replaced by `devices`. */
export function mergedDevices(claim: DraObject, manager: string, devices: unknown[]): unknown[] {
  const status = isRecord(claim.status) ? claim.status : {};
  const current = Array.isArray(status.devices) ? (status.devices as unknown[]) : [];
  const replaced = ownedDeviceKeys(claim, manager);
  for (const d of devices) replaced.add(deviceEntryKey(d));
  return [...current.filter((e) => !replaced.has(deviceEntryKey(e))), ...devices];
}

/** Whether writing `devices` as `manager` changes the claim's list (a clear of nothing writes nothing). */
export function changesDevices(claim: DraObject, manager: string, devices: unknown[]): boolean {
  const status = isRecord(claim.status) ? claim.status : {};
  const current = Array.isArray(status.devices) ? (status.devices as unknown[]) : [];
  return JSON.stringify(mergedDevices(claim, manager, devices)) !== JSON.stringify(current);
}

/** A JSON patch of `status.devices` that applies only to the claim as read (its resourceVersion). */
export function claimDevicesPatchCall(claim: DraObject, manager: string, devices: unknown[]): Call {
  const meta = (claim.metadata ?? {}) as { namespace?: string; name?: string; resourceVersion?: string };
  const apply = claimDevicesApplyCall(meta.namespace ?? '', meta.name ?? '', manager, []);
  return {
    ...apply,
    path: apply.path.replace(/&force=true$/, ''),
    body: [
      { op: 'test', path: '/metadata/resourceVersion', value: meta.resourceVersion ?? '' },
      { op: 'add', path: '/status/devices', value: mergedDevices(claim, manager, devices) },
    ],
    contentType: 'application/json-patch+json',
  };
}
