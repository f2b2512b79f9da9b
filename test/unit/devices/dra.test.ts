/**
 * devices/dra.ts against the FakeKube seam: what Multus HEAD's draclient reads (claims in the pod's status, their
 * allocation results, the driver's slices of the pod's node, the two attributes), which devices are skipped,
 * which inputs fail and how the error names them, the extended-resource path's strictness, one LIST per
 * driver, the deadline, and that the kubelet's map is never changed. The real API server runs the same in
 * test/k8s/dra.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { CniCode } from '../../../src/base/errors.ts';
import type { Logger } from '../../../src/base/log.ts';
import { addDraDevices } from '../../../src/devices/dra.ts';
import type { DraObject, Pod } from '../../../src/k8s/types.ts';
import { rejection } from '../../helpers/errors.ts';
import { FakeKube } from '../../helpers/fake-kube.ts';

const NODE = 'node-1';
const NIC = 'sriov.example.com';
const GPU = 'gpu.example.com';

function pod(claims: string[], extra: Record<string, unknown> = {}): Pod {
  return {
    metadata: { namespace: 'ns', name: 'p', uid: 'u' },
    spec: { nodeName: NODE },
    status: {
      resourceClaimStatuses: claims.map((c, i) => ({ name: `ref${i}`, resourceClaimName: c })),
      ...extra,
    },
  };
}

function claim(name: string, results: { driver: string; pool: string; device: string; request?: string }[]) {
  return {
    metadata: { name, namespace: 'ns' },
    status: { allocation: { devices: { results: results.map((r) => ({ request: 'req', ...r })) } } },
  };
}

const attr = (v: string) => ({ string: v });
function slice(name: string, driver: string, pool: string, devices: Record<string, Record<string, string>>): DraObject {
  return {
    metadata: { name },
    spec: {
      driver,
      nodeName: NODE,
      pool: { name: pool, generation: 1, resourceSliceCount: 1 },
      devices: Object.entries(devices).map(([device, attrs]) => ({
        name: device,
        attributes: Object.fromEntries(Object.entries(attrs).map(([k, v]) => [k, attr(v)])),
      })),
    },
  };
}

const nicAttrs = (id: string, resource = 'example.com/sriov') => ({
  'k8s.cni.cncf.io/deviceID': id,
  'k8s.cni.cncf.io/resourceName': resource,
});

function world(): FakeKube {
  const kube = new FakeKube();
  kube.slices.push(
    slice('nic-slice', NIC, 'pool-a', { vf0: nicAttrs('0000:3b:00.2'), vf1: nicAttrs('0000:3b:00.3') }),
    slice('gpu-slice', GPU, 'gpus', { gpu0: { model: 'x' } }),
    {
      ...slice('other-node', NIC, 'pool-a', { vf9: nicAttrs('0000:99:00.0') }),
      spec: { driver: NIC, nodeName: 'node-2', pool: { name: 'pool-a' }, devices: [] },
    },
  );
  return kube;
}

const logs = (): { log: Logger; warnings: string[] } => {
  const warnings: string[] = [];
  const log = { warn: (m: string) => warnings.push(m), verbose() {}, debug() {}, error() {} } as unknown as Logger;
  return { log, warnings };
};

describe('DRA device IDs (Multus pkg/draclient)', () => {
  it('a claim mixing a NIC and a GPU: the NIC is mapped by its resourceName, the GPU skipped; kubelet IDs first', async () => {
    const kube = world();
    kube.claims.set(
      'ns/mixed',
      claim('mixed', [
        { driver: GPU, pool: 'gpus', device: 'gpu0' },
        { driver: NIC, pool: 'pool-a', device: 'vf1' },
      ]),
    );
    const kubelet = new Map([['example.com/sriov', ['0000:af:00.1']]]);
    const { log, warnings } = logs();
    const out = await addDraDevices(kubelet, pod(['mixed']), kube, { log });
    expect(Object.fromEntries(out)).toEqual({ 'example.com/sriov': ['0000:af:00.1', '0000:3b:00.3'] });
    expect(Object.fromEntries(kubelet)).toEqual({ 'example.com/sriov': ['0000:af:00.1'] }); // not changed
    expect(kube.received).toEqual([
      'getResourceClaim ns/mixed',
      `listResourceSlices ${NODE} ${GPU}`,
      `listResourceSlices ${NODE} ${NIC}`,
    ]);
    expect(warnings).toEqual([
      expect.stringContaining('device gpu0 (driver gpu.example.com, pool gpus) of ResourceClaim ns/mixed'),
    ]);
  });

  it('two claims of one driver (two containers): one LIST, IDs in claim order', async () => {
    const kube = world();
    kube.claims.set('ns/c-b', claim('c-b', [{ driver: NIC, pool: 'pool-a', device: 'vf0' }]));
    kube.claims.set('ns/c-a', claim('c-a', [{ driver: NIC, pool: 'pool-a', device: 'vf1' }]));
    const out = await addDraDevices(new Map(), pod(['c-a', 'c-b']), kube);
    expect(out.get('example.com/sriov')).toEqual(['0000:3b:00.3', '0000:3b:00.2']);
    expect(kube.received.filter((r) => r.startsWith('list'))).toEqual([`listResourceSlices ${NODE} ${NIC}`]);
  });

  it('a claim the pod spec names directly (not in status.resourceClaimStatuses, which Multus alone reads) counts', async () => {
    const kube = world();
    kube.claims.set('ns/direct', claim('direct', [{ driver: NIC, pool: 'pool-a', device: 'vf1' }]));
    kube.claims.set('ns/gen', claim('gen', [{ driver: NIC, pool: 'pool-a', device: 'vf0' }]));
    const p = pod([]);
    p.spec = {
      nodeName: NODE,
      resourceClaims: [
        { name: 'a', resourceClaimName: 'direct' },
        { name: 'b', resourceClaimTemplateName: 't' },
      ],
    };
    p.status = { resourceClaimStatuses: [{ name: 'b', resourceClaimName: 'gen' }] };
    const out = await addDraDevices(new Map(), p, kube);
    expect(out.get('example.com/sriov')).toEqual(['0000:3b:00.3', '0000:3b:00.2']); // spec order
  });

  it("a template claim the pod copy's status does not name yet: the pod is read again, past any cache; still none is code 11", async () => {
    const kube = world();
    kube.claims.set('ns/gen', claim('gen', [{ driver: NIC, pool: 'pool-a', device: 'vf0' }]));
    const stale = pod([]);
    stale.spec = { nodeName: NODE, resourceClaims: [{ name: 'b', resourceClaimTemplateName: 't' }] };
    kube.pods.set('ns/p', {
      ...structuredClone(stale),
      status: { resourceClaimStatuses: [{ name: 'b', resourceClaimName: 'gen' }] },
    });
    expect((await addDraDevices(new Map(), stale, kube)).get('example.com/sriov')).toEqual(['0000:3b:00.2']);
    expect(kube.received[0]).toBe('getPod ns/p');
    kube.pods.set('ns/p', structuredClone(stale));
    const e = await rejection(addDraDevices(new Map(), stale, kube));
    expect(e.code).toBe(CniCode.TryAgainLater);
    expect(e.msg).toMatch(/the ResourceClaim generated for its resourceClaims entry "b" is not in its status/);
  });

  it('a device in no slice of the node (a missing slice) is skipped as upstream does, with a warning naming it', async () => {
    const kube = world();
    kube.claims.set('ns/c', claim('c', [{ driver: NIC, pool: 'pool-x', device: 'vf7' }]));
    const { log, warnings } = logs();
    expect((await addDraDevices(new Map(), pod(['c']), kube, { log })).size).toBe(0);
    expect(warnings.join('\n')).toMatch(
      /device vf7 \(driver sriov.example.com, pool pool-x\) of ResourceClaim ns\/c: in no ResourceSlice/,
    );
  });

  it('a claim without an allocation is code 11 naming it; a missing claim names it too', async () => {
    const kube = world();
    kube.claims.set('ns/pending', { metadata: { name: 'pending' }, status: {} });
    const e1 = await rejection(addDraDevices(new Map(), pod(['pending']), kube));
    expect(e1.code).toBe(CniCode.TryAgainLater);
    expect(e1.msg).toMatch(/ResourceClaim ns\/pending has no device allocation/);
    const e2 = await rejection(addDraDevices(new Map(), pod(['gone']), kube));
    expect(e2.msg).toMatch(/cannot read ResourceClaim ns\/gone named in the pod's status: .*not found/);
  });

  it('a slice without pool or devices list, a result without device: errors naming them', async () => {
    const kube = world();
    kube.slices.push({ metadata: { name: 'broken' }, spec: { driver: 'bad.example.com', nodeName: NODE } });
    kube.claims.set('ns/b', claim('b', [{ driver: 'bad.example.com', pool: 'p', device: 'd' }]));
    expect((await rejection(addDraDevices(new Map(), pod(['b']), kube))).msg).toMatch(
      /ResourceSlice broken of driver bad.example.com has no spec.pool.name/,
    );
    kube.claims.set('ns/r', claim('r', [{ driver: NIC, pool: 'pool-a', device: '' }]));
    expect((await rejection(addDraDevices(new Map(), pod(['r']), kube))).msg).toMatch(
      /ResourceClaim ns\/r: status.allocation.devices.results\[0\] needs a driver, a pool and a device/,
    );
  });

  it('extended resources: mapped strictly; a mismatching or missing resourceName, or a device in no slice, fails', async () => {
    const kube = world();
    kube.slices.push(
      slice('ext', NIC, 'pool-e', {
        good: nicAttrs('0000:5e:00.1', 'example.com/ext'),
        other: nicAttrs('0000:5e:00.2', 'example.com/sriov'),
        bare: { 'k8s.cni.cncf.io/deviceID': '0000:5e:00.3' },
      }),
    );
    const ext = (device: string) => {
      kube.claims.set(
        'ns/ext-claim',
        claim('ext-claim', [{ driver: NIC, pool: 'pool-e', device, request: 'container-0-request-0' }]),
      );
      return pod([], {
        extendedResourceClaimStatus: {
          resourceClaimName: 'ext-claim',
          requestMappings: [
            { containerName: 'c', requestName: 'container-0-request-0', resourceName: 'example.com/ext' },
          ],
        },
      });
    };
    expect(Object.fromEntries(await addDraDevices(new Map(), ext('good'), kube))).toEqual({
      'example.com/ext': ['0000:5e:00.1'],
    });
    expect((await rejection(addDraDevices(new Map(), ext('other'), kube))).msg).toMatch(
      /device other .* extended resource example.com\/ext: the device has "example.com\/sriov" as k8s.cni.cncf.io\/resourceName; it must be "example.com\/ext"/,
    );
    expect((await rejection(addDraDevices(new Map(), ext('bare'), kube))).msg).toMatch(
      /the device has no k8s.cni.cncf.io\/resourceName/,
    );
    expect((await rejection(addDraDevices(new Map(), ext('nowhere'), kube))).msg).toMatch(
      /device nowhere .*: in no ResourceSlice/,
    );
  });

  it('the whole lookup has one deadline: a later call past it fails naming what it was reading', async () => {
    const kube = world();
    kube.claims.set('ns/c', claim('c', [{ driver: NIC, pool: 'pool-a', device: 'vf0' }]));
    let t = 0;
    const now = () => (t += 15_000); // each read 15 s later than the last
    const e = await rejection(addDraDevices(new Map(), pod(['c']), kube, { now }));
    expect(e.code).toBe(CniCode.TryAgainLater);
    expect(e.msg).toMatch(
      /DRA device lookup for pod ns\/p took over 20 s \(at the ResourceSlices of driver sriov.example.com on node node-1\)/,
    );
  });

  it('an API failure keeps its code (a 503 is code 11) and names the list', async () => {
    const kube = world();
    kube.claims.set('ns/c', claim('c', [{ driver: NIC, pool: 'pool-a', device: 'vf0' }]));
    const { FakeKubeError } = await import('../../helpers/fake-kube.ts');
    kube.failures.listResourceSlices = [new FakeKubeError(503, 'etcd is down')];
    const e = await rejection(addDraDevices(new Map(), pod(['c']), kube));
    expect(e.code).toBe(CniCode.TryAgainLater);
    expect(e.msg).toBe(`cannot list the ResourceSlices of driver ${NIC} on node ${NODE}: etcd is down`);
  });
});
