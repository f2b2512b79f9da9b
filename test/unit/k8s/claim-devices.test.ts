/** k8s/claim-devices.ts: the status.devices fallback write (pure): keys, owned entries, merge, the guarded patch. */
import { describe, expect, it } from 'vitest';
import {
  changesDevices,
  claimDevicesPatchCall,
  deviceEntryKey,
  mergedDevices,
  ownedDeviceKeys,
} from '../../../src/k8s/claim-devices.ts';

const entry = (driver: string, device: string, shareID?: string, extra: Record<string, unknown> = {}) => ({
  driver,
  pool: 'node1',
  device,
  ...(shareID ? { shareID } : {}),
  ...extra,
});
const fieldKey = (e: ReturnType<typeof entry>) =>
  `k:${JSON.stringify({ device: e.device, driver: e.driver, pool: e.pool, ...(e.shareID ? { shareID: e.shareID } : {}) })}`;

function claim(devices: unknown[], owned: Record<string, ReturnType<typeof entry>[]>) {
  return {
    metadata: {
      name: 'c1',
      namespace: 'ns1',
      resourceVersion: '42',
      managedFields: Object.entries(owned).map(([manager, entries]) => ({
        manager,
        operation: 'Update',
        subresource: 'status',
        fieldsV1: { 'f:status': { 'f:devices': Object.fromEntries(entries.map((e) => [fieldKey(e), {}])) } },
      })),
    },
    status: { allocation: {}, devices },
  };
}

describe('claim-devices', () => {
  const mine = entry('ours', 'any', 's1', { networkData: { interfaceName: 'old' } });
  const theirs = entry('gpu', 'gpu0');
  const c = claim([theirs, mine], { ours: [mine], 'gpu-driver': [theirs] });

  it('reads the entries a manager owns from managedFields', () => {
    expect([...ownedDeviceKeys(c, 'ours')]).toEqual([deviceEntryKey(mine)]);
    expect([...ownedDeviceKeys(c, 'nobody')]).toEqual([]);
  });

  it("replaces the manager's entries and keeps every other", () => {
    const fresh = entry('ours', 'any', 's1', { networkData: { interfaceName: 'net1' } });
    expect(mergedDevices(c, 'ours', [fresh])).toEqual([theirs, fresh]);
    expect(mergedDevices(c, 'ours', [])).toEqual([theirs]);
    // an entry the write names is replaced even when another manager wrote it
    expect(mergedDevices(c, 'other', [entry('gpu', 'gpu0', undefined, { data: 1 })])).toEqual([
      mine,
      entry('gpu', 'gpu0', undefined, { data: 1 }),
    ]);
  });

  it('writes nothing when nothing changes, and guards the patch with the resourceVersion', () => {
    expect(changesDevices(c, 'nobody', [])).toBe(false);
    expect(changesDevices(c, 'ours', [])).toBe(true);
    const call = claimDevicesPatchCall(c, 'ours', []);
    expect(call.contentType).toBe('application/json-patch+json');
    expect(call.path).toBe('/apis/resource.k8s.io/v1/namespaces/ns1/resourceclaims/c1/status?fieldManager=ours');
    expect(call.body).toEqual([
      { op: 'test', path: '/metadata/resourceVersion', value: '42' },
      { op: 'add', path: '/status/devices', value: [theirs] },
    ]);
  });
});
