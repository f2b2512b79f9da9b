/**
 * devices/attachment-devices.ts and claim-request.ts against the FakeKube seam and a device-plugin checkpoint:
 * which device each attachment gets when an element names a claim request (docs/behaviour.md#claim-request) or
 * picks a pool (docs/behaviour.md#device-pool), that a named device is never handed out twice (nor pooled), and
 * the code-7 refusals naming the attachment and the claim/request or pool. The real API server runs the claim
 * cases in test/k8s/dra-select.test.ts.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CniCode } from '../../../src/base/errors.ts';
import { silentLogger } from '../../../src/base/log.ts';
import type { DeviceWant } from '../../../src/devices/attachment-devices.ts';
import { grantDevices } from '../../../src/devices/attachment-devices.ts';
import type { DraApi } from '../../../src/devices/dra.ts';
import type { ResourceMapDeps } from '../../../src/devices/devices.ts';
import type { Logger } from '../../../src/base/log.ts';
import type { DraObject, Pod } from '../../../src/k8s/types.ts';
import { rejection } from '../../helpers/errors.ts';
import { FakeKube, FakeKubeError } from '../../helpers/fake-kube.ts';

const NODE = 'node-1';
const NIC = 'nic.example.com';
const GPU = 'gpu.example.com';
const POOL = 'example.com/sriov';
const dir = mkdtempSync(join(tmpdir(), 'mts-attach-dev-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The kubelet's view: a checkpoint where the pod has `ids` of `intel.com/sriov`, and the node `registered`. */
function kubelet(ids: string[], registered: Record<string, string[]> = { 'intel.com/sriov': ids }) {
  const checkpointFile = join(
    dir,
    `checkpoint-${ids.length}-${Object.keys(registered).join('+').replaceAll('/', '_')}`,
  );
  const entries = ids.length
    ? [{ PodUID: 'u', ContainerName: 'c', ResourceName: 'intel.com/sriov', DeviceIDs: { '0': ids } }]
    : [];
  writeFileSync(
    checkpointFile,
    JSON.stringify({ Data: { PodDeviceEntries: entries, RegisteredDevices: registered }, Checksum: 1 }),
  );
  return { podResourcesSocket: join(dir, 'no.sock'), checkpointFile };
}

/** A pod with spec.resourceClaims entries (template claims named in the status unless `pending`). */
function pod(entries: Record<string, string>, pending: string[] = []): Pod {
  return {
    metadata: { namespace: 'ns', name: 'p', uid: 'u' },
    spec: {
      nodeName: NODE,
      resourceClaims: Object.keys(entries).map((name) => ({ name, resourceClaimTemplateName: 't' })),
    },
    status: {
      resourceClaimStatuses: Object.entries(entries)
        .filter(([name]) => !pending.includes(name))
        .map(([name, claim]) => ({ name, resourceClaimName: claim })),
    },
  };
}

function claim(name: string, requests: string[], results?: [string, string, string][]): DraObject {
  return {
    metadata: { name, namespace: 'ns' },
    spec: { devices: { requests: requests.map((r) => ({ name: r, exactly: { deviceClassName: 'x' } })) } },
    ...(results
      ? {
          status: {
            allocation: {
              devices: {
                results: results.map(([request, driver, device]) => ({ request, driver, pool: NODE, device })),
              },
            },
          },
        }
      : {}),
  };
}

function slice(driver: string, devices: Record<string, Record<string, string>>): DraObject {
  return {
    metadata: { name: `${driver}-slice` },
    spec: {
      driver,
      nodeName: NODE,
      pool: { name: NODE, generation: 1, resourceSliceCount: 1 },
      devices: Object.entries(devices).map(([name, attrs]) => ({
        name,
        attributes: Object.fromEntries(Object.entries(attrs).map(([k, v]) => [k, { string: v }])),
      })),
    },
  };
}
const nic = (id: string) => ({ 'k8s.cni.cncf.io/deviceID': id, 'k8s.cni.cncf.io/resourceName': POOL });

/** A claim "gpu-nic-0" with a NIC request and a GPU request, two NICs and a GPU on the node. */
function cluster(): FakeKube {
  const kube = new FakeKube();
  kube.claims.set(
    'ns/gpu-nic-0',
    claim(
      'gpu-nic-0',
      ['nic', 'gpu', 'more'],
      [
        ['nic', NIC, 'vf0'],
        ['gpu', GPU, 'gpu0'],
        ['more', NIC, 'vf1'],
      ],
    ),
  );
  kube.slices.push(
    slice(NIC, { vf0: nic('0000:3b:00.2'), vf1: nic('0000:3b:00.3') }),
    slice(GPU, { gpu0: { model: 'x' } }),
  );
  return kube;
}

const want = (label: string, extra: Partial<DeviceWant> = {}): DeviceWant => ({ label, ...extra });
const named = (claimName: string, requestName: string) => ({ claim: { claimName, requestName } });

/** grantDevices with the client and a call of this logger and these kubelet paths (as a CallContext hands them). */
function grant(
  wants: DeviceWant[],
  of: Pod,
  d: { kube?: DraApi | undefined; log: Logger; devices?: ResourceMapDeps },
): ReturnType<typeof grantDevices> {
  return grantDevices(wants, of, d.kube, { log: d.log, seams: d.devices ? { devices: d.devices } : {} });
}

describe('an element naming a claim request', () => {
  it("takes exactly that request's device, which the pool then does not hand out", async () => {
    const kube = cluster();
    const grants = await grant(
      [
        want('pooled', { resourceName: POOL }),
        want('named', { resourceName: POOL, ...named('gpu-nic', 'nic') }),
        want('plain'),
      ],
      pod({ 'gpu-nic': 'gpu-nic-0' }),
      { kube, log: silentLogger, devices: kubelet([]) },
    );
    expect(grants).toEqual([
      // vf0 belongs to the named request: the pool gives the claim's other NIC
      {
        deviceId: '0000:3b:00.3',
        resourceName: POOL,
        claimDevice: { namespace: 'ns', claim: 'gpu-nic-0', driver: NIC, pool: NODE, device: 'vf1' },
      },
      {
        deviceId: '0000:3b:00.2',
        resourceName: POOL,
        claimDevice: { namespace: 'ns', claim: 'gpu-nic-0', driver: NIC, pool: NODE, device: 'vf0' },
      },
      undefined,
    ]);
    // one GET of the claim and one LIST per driver for both paths
    expect(kube.received.filter((r) => r.startsWith('getResourceClaim'))).toEqual(['getResourceClaim ns/gpu-nic-0']);
  });

  it('reads the pod again when its status does not name the template claim yet', async () => {
    const kube = cluster();
    const stale = pod({ 'gpu-nic': 'gpu-nic-0' }, ['gpu-nic']);
    kube.pods.set('ns/p', pod({ 'gpu-nic': 'gpu-nic-0' }));
    const [g] = await grant([want('w', named('gpu-nic', 'nic'))], stale, { kube, log: silentLogger });
    expect(g?.deviceId).toBe('0000:3b:00.2');
    expect(kube.received[0]).toBe('getPod ns/p');
  });

  it.each([
    [
      'an unknown claim entry',
      named('nic-claim', 'nic'),
      'pod ns/p has no spec.resourceClaims entry named "nic-claim" (it has: gpu-nic)',
    ],
    [
      'an unknown request',
      named('gpu-nic', 'vf'),
      'ResourceClaim ns/gpu-nic-0 has no request "vf" (its requests: nic, gpu, more)',
    ],
    [
      'a request whose device has no deviceID',
      named('gpu-nic', 'gpu'),
      `device gpu0 (driver ${GPU}, pool ${NODE}) of ResourceClaim ns/gpu-nic-0 has no k8s.cni.cncf.io/deviceID attribute`,
    ],
  ])('refuses %s with code 7 naming the element, the claim and the request', async (_, ref, problem) => {
    const err = await rejection(
      grant([want('element 0', ref)], pod({ 'gpu-nic': 'gpu-nic-0' }), { kube: cluster(), log: silentLogger }),
    );
    expect(err.code).toBe(CniCode.InvalidConfig);
    const { claimName, requestName } = ref.claim;
    expect(err.msg).toBe(
      `element 0: resourceClaim {claimName: "${claimName}", requestName: "${requestName}"}: ${problem}`,
    );
  });

  it('refuses an unallocated claim, and a device in no slice of the node, with code 7', async () => {
    const kube = cluster();
    kube.claims.set('ns/gpu-nic-0', claim('gpu-nic-0', ['nic']));
    let err = await rejection(
      grant([want('e', named('gpu-nic', 'nic'))], pod({ 'gpu-nic': 'gpu-nic-0' }), { kube, log: silentLogger }),
    );
    expect([err.code, err.msg]).toEqual([
      CniCode.InvalidConfig,
      'e: resourceClaim {claimName: "gpu-nic", requestName: "nic"}: ResourceClaim ns/gpu-nic-0 is not allocated (no status.allocation.devices.results)',
    ]);
    kube.claims.set('ns/gpu-nic-0', claim('gpu-nic-0', ['nic'], [['nic', NIC, 'vf7']]));
    err = await rejection(
      grant([want('e', named('gpu-nic', 'nic'))], pod({ 'gpu-nic': 'gpu-nic-0' }), { kube, log: silentLogger }),
    );
    expect(err.msg).toContain(
      `device vf7 (driver ${NIC}, pool ${NODE}) of ResourceClaim ns/gpu-nic-0 is in no ResourceSlice of the pod's node`,
    );
  });

  it('does not hand the same device to a second element naming the same request', async () => {
    const err = await rejection(
      grant(
        [want('first', named('gpu-nic', 'nic')), want('second', named('gpu-nic', 'nic'))],
        pod({ 'gpu-nic': 'gpu-nic-0' }),
        {
          kube: cluster(),
          log: silentLogger,
        },
      ),
    );
    expect([err.code, err.msg]).toEqual([
      CniCode.InvalidConfig,
      'second: resourceClaim {claimName: "gpu-nic", requestName: "nic"} has no device left: its 1 device(s) went to earlier attachments',
    ]);
  });

  it("refuses a device whose resourceName attribute is not the NAD's resourceName", async () => {
    const err = await rejection(
      grant(
        [want('e', { resourceName: 'intel.com/other', ...named('gpu-nic', 'nic') })],
        pod({ 'gpu-nic': 'gpu-nic-0' }),
        {
          kube: cluster(),
          log: silentLogger,
        },
      ),
    );
    expect(err.msg).toBe(
      `e: the device of resourceClaim {claimName: "gpu-nic", requestName: "nic"} has k8s.cni.cncf.io/resourceName "${POOL}", but the NAD's resourceName is "intel.com/other"`,
    );
  });
});

describe('an element picking a pool', () => {
  const noClaims: Pod = { metadata: { namespace: 'ns', name: 'p', uid: 'u' }, spec: { nodeName: NODE } };

  it("takes the pool's devices in order; the NAD's pool alone is best effort, the element's is not", async () => {
    const deps = { kube: new FakeKube(), log: silentLogger, devices: kubelet(['0000:af:00.1']) };
    const wants = [
      want('a', { resourceName: 'intel.com/sriov', strict: true }),
      want('b', { resourceName: 'intel.com/sriov' }),
    ];
    expect(await grant(wants, noClaims, deps)).toEqual([
      { deviceId: '0000:af:00.1', resourceName: 'intel.com/sriov' },
      undefined,
    ]);
    const err = await rejection(grant([wants[0]!, { ...wants[1]!, strict: true }], noClaims, deps));
    expect([err.code, err.msg]).toEqual([
      CniCode.InvalidConfig,
      'b: pool "intel.com/sriov" has no free device: the pod\'s 1 device(s) of it went to earlier attachments',
    ]);
  });

  it('refuses a pool the node does not have, naming the element, the pool and what the node has', async () => {
    const kube = new FakeKube();
    kube.slices.push(slice(NIC, { vf0: nic('0000:3b:00.2') }));
    const deps = { kube, log: silentLogger, devices: kubelet(['0000:af:00.1']) };
    const err = await rejection(
      grant([want('element 1', { resourceName: 'nvidia.com/vf', strict: true })], noClaims, deps),
    );
    expect([err.code, err.msg]).toEqual([
      CniCode.InvalidConfig,
      `element 1: pool "nvidia.com/vf" is not on node ${NODE}: no device plugin registered it and no DRA driver publishes it there (the node has: ${POOL}, intel.com/sriov)`,
    ]);
    expect(kube.received).toContain(`listResourceSlices ${NODE} `);
  });

  it('refuses a pool of the node the pod was given no device of; an unreadable node view says "unknown"', async () => {
    const kube = new FakeKube();
    const onNode = {
      kube,
      log: silentLogger,
      devices: kubelet(['0000:af:00.1'], { 'nvidia.com/vf': ['x'], 'intel.com/sriov': ['y'] }),
    };
    const w = want('element 1', { resourceName: 'nvidia.com/vf', strict: true });
    let err = await rejection(grant([w], noClaims, onNode));
    expect([err.code, err.msg]).toEqual([
      CniCode.InvalidConfig,
      'element 1: pool "nvidia.com/vf" is on the node, but neither its device plugins nor its DRA claims gave the pod a device of it (the pod has: intel.com/sriov)',
    ]);
    kube.failures.listResourceSlices = [new FakeKubeError(403, 'forbidden')];
    err = await rejection(grant([w], noClaims, { ...onNode, devices: kubelet(['0000:af:00.1']) }));
    expect(err.msg).toBe(
      'element 1: pool "nvidia.com/vf" is unknown to pod ns/p: neither its device plugins nor its DRA claims gave the pod a device of it (the pod has: intel.com/sriov)',
    );
  });

  it('asks neither the kubelet nor the API when nothing wants a device', async () => {
    const kube = new FakeKube();
    const grants = await grant([want('a'), want('b')], noClaims, {
      kube,
      log: silentLogger,
      devices: { podResourcesSocket: join(dir, 'no.sock'), checkpointFile: join(dir, 'missing') },
    });
    expect(grants).toEqual([undefined, undefined]);
    expect(kube.received).toEqual([]);
  });
});
