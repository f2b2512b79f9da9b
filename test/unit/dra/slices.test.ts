/**
 * src/dra/slices.ts (pure): the devices a node offers from its NADs (`any`, one per opted-in NAD with its
 * attributes and capacity, bounded, cut into slices), the slice objects (owner, pool, hash), and planSync's
 * decisions against existing slices (nothing when equal; a new generation for all when anything differs; extra
 * slices deleted).
 */
import { describe, expect, it } from 'vitest';
import { DRA_CAPACITY_NAME as ATTACHMENTS_CAPACITY, networkDeviceName } from '../../../src/dra/device-names.ts';
import { HASH_ANNOTATION, desiredSlices, planSync, sliceName, sliceObject } from '../../../src/dra/slices.ts';
import type { DraObject } from '../../../src/k8s/types.ts';
import { nad } from './fake-driver-api.ts';

const O = { nodeName: 'node-1', driver: 'multus.k8s.cni.cncf.io', nodeUid: 'uid-n1' };

describe('desiredSlices', () => {
  it('offers `any`, then each opted-in NAD in namespace/name order with its attributes', () => {
    const nads = [nad('b', 'net2', { type: 'bridge' }), nad('a', 'net1'), nad('a', 'plain', { device: false })];
    const { slices, published, skipped } = desiredSlices(nads, O);
    expect(published).toBe(2);
    expect(skipped).toEqual([]);
    expect(slices).toHaveLength(1);
    const [any, first, second] = slices[0]!;
    expect(any).toEqual({
      name: 'any',
      attributes: { 'dra.multus.k8s.cni.cncf.io/kind': { string: 'any' } },
      allowMultipleAllocations: true,
    });
    expect(first!.name).toBe(networkDeviceName('a', 'net1'));
    expect(second!.name).toBe(networkDeviceName('b', 'net2'));
    expect(second!.attributes).toEqual({
      'dra.multus.k8s.cni.cncf.io/kind': { string: 'network' },
      'dra.multus.k8s.cni.cncf.io/namespace': { string: 'b' },
      'dra.multus.k8s.cni.cncf.io/name': { string: 'net2' },
      'dra.multus.k8s.cni.cncf.io/cniType': { string: 'bridge' },
      'multinetwork.networking.k8s.io/podNetwork': { string: 'net2' },
      'multinetwork.networking.k8s.io/podNetworkNamespace': { string: 'b' },
      'multinetwork.networking.k8s.io/networkKind': { string: 'networkattachmentdefinition' },
      'multinetwork.networking.k8s.io/podNetworkKind': { string: 'networkattachmentdefinition' },
    });
    expect(second!.allowMultipleAllocations).toBe(true);
    expect(second!.capacity).toBeUndefined();
  });

  it('gives a NAD with a capacity annotation that many attachments, each request taking one', () => {
    const { slices } = desiredSlices([nad('a', 'limited', { capacity: '3' })], O);
    expect(slices[0]![1]!.capacity).toEqual({
      [ATTACHMENTS_CAPACITY]: { value: '3', requestPolicy: { default: '1', validValues: ['1'] } },
    });
  });

  it('takes the type of a conflist from its first plugin, and none from a NAD without config', () => {
    const list = nad('a', 'list');
    list.spec = {
      config: JSON.stringify({ cniVersion: '1.0.0', name: 'x', plugins: [{ type: 'ptp' }, { type: 'tuning' }] }),
    };
    const bare = nad('a', 'bare');
    bare.spec = {};
    const [, b, l] = desiredSlices([list, bare], O).slices[0]!;
    expect(l!.attributes['dra.multus.k8s.cni.cncf.io/cniType']).toEqual({ string: 'ptp' });
    expect(b!.attributes['dra.multus.k8s.cni.cncf.io/cniType']).toBeUndefined();
  });

  it('skips, with the reason, a bad capacity and a name too long for an attribute', () => {
    const long = 'n'.repeat(65);
    const { published, skipped } = desiredSlices(
      [nad('a', 'bad', { capacity: '0' }), nad('a', long), nad('a', 'ok')],
      O,
    );
    expect(published).toBe(1);
    expect(skipped).toEqual([
      { nad: 'a/bad', why: expect.stringContaining('"0" is not a whole number from 1 to 1000000') },
      { nad: `a/${long}`, why: 'its name is longer than 64 characters' },
    ]);
  });

  it('publishes at most maxDevices NADs and cuts the devices into slices of perSlice', () => {
    const nads = Array.from({ length: 10 }, (_, i) => nad('ns', `net-${String(i).padStart(2, '0')}`));
    const { slices, published, skipped } = desiredSlices(nads, { ...O, maxDevices: 6, perSlice: 4 });
    expect(published).toBe(6);
    expect(skipped.map((s) => s.nad)).toEqual(['ns/net-06', 'ns/net-07', 'ns/net-08', 'ns/net-09']);
    expect(skipped[0]!.why).toBe('more than 6 NADs opt in');
    expect(slices.map((s) => s.length)).toEqual([4, 3]);
  });
});

describe('sliceObject and sliceName', () => {
  it('is owned by the Node, one pool named after the node, with a hash that ignores the generation', () => {
    const devices = desiredSlices([nad('a', 'n')], O).slices[0]!;
    const s1 = sliceObject(devices, { index: 0, count: 1, generation: 1 }, O);
    const s2 = sliceObject(devices, { index: 0, count: 1, generation: 7 }, O);
    expect(s1.metadata).toMatchObject({
      name: 'node-1-multus.k8s.cni.cncf.io-0',
      ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: 'node-1', uid: 'uid-n1', controller: true }],
    });
    expect(s1.spec).toMatchObject({
      driver: O.driver,
      nodeName: 'node-1',
      pool: { name: 'node-1', generation: 1, resourceSliceCount: 1 },
    });
    const hash = (s: DraObject) => (s.metadata!.annotations as Record<string, string>)[HASH_ANNOTATION];
    expect(hash(s1)).toBe(hash(s2));
    expect(hash(sliceObject(devices.slice(0, 1), { index: 0, count: 1, generation: 1 }, O))).not.toBe(hash(s1));
  });

  it('hashes a name that would be longer than a DNS subdomain', () => {
    const name = sliceName('n'.repeat(250), 'multus.k8s.cni.cncf.io', 3);
    expect(name).toMatch(/^multus-dra-[0-9a-f]{32}-3$/);
  });
});

describe('planSync', () => {
  const desired = (n: number, perSlice = 2) =>
    desiredSlices(
      Array.from({ length: n }, (_, i) => nad('ns', `net${i}`)),
      { ...O, perSlice },
    ).slices;
  /** What the API holds after a plan is written (resourceVersions as the API server gives them). */
  const written = (plan: ReturnType<typeof planSync>, rv = '5') =>
    [...plan.create, ...plan.update].map((s) => ({ ...s, metadata: { ...s.metadata, resourceVersion: rv } }));

  it('creates every slice at generation 1 on a node that has none', () => {
    const plan = planSync(desired(3), [], O);
    expect(plan.update).toEqual([]);
    expect(plan.delete).toEqual([]);
    expect(plan.create.map((s) => [s.metadata!.name, (s.spec!.pool as { generation: number }).generation])).toEqual([
      ['node-1-multus.k8s.cni.cncf.io-0', 1],
      ['node-1-multus.k8s.cni.cncf.io-1', 1],
    ]);
  });

  it('writes nothing when the slices are there as desired', () => {
    const existing = written(planSync(desired(3), [], O));
    expect(planSync(desired(3), existing, O)).toEqual({ create: [], update: [], delete: [] });
  });

  it('rewrites every slice under the next generation when one device changed, keeping resourceVersions', () => {
    const existing = written(planSync(desired(3), [], O));
    const plan = planSync(desired(2), existing, O);
    expect(plan.create).toEqual([]);
    expect(plan.delete).toEqual([]);
    expect(plan.update.map((s) => (s.spec!.pool as { generation: number }).generation)).toEqual([2, 2]);
    expect(plan.update.every((s) => s.metadata!.resourceVersion === '5')).toBe(true);
  });

  it('deletes the slices no longer needed and counts only the ones kept', () => {
    const existing = written(planSync(desired(5), [], O));
    expect(existing).toHaveLength(3);
    const plan = planSync(desired(1), existing, O);
    expect(plan.update).toHaveLength(1);
    expect((plan.update[0]!.spec!.pool as { resourceSliceCount: number }).resourceSliceCount).toBe(1);
    expect(plan.delete).toEqual(['node-1-multus.k8s.cni.cncf.io-1', 'node-1-multus.k8s.cni.cncf.io-2']);
  });

  it('rewrites slices owned by an old Node of the same name (a re-created node has a new UID)', () => {
    const existing = written(planSync(desired(1), [], O));
    const plan = planSync(desired(1), existing, { ...O, nodeUid: 'uid-new' });
    expect(plan.update).toHaveLength(1);
    expect(plan.update[0]!.metadata!.ownerReferences).toEqual([expect.objectContaining({ uid: 'uid-new' })]);
  });
});
