/**
 * The two device keys of a selection element: `resourceName` (Multus PR #1520, docs/behaviour.md#device-pool) and
 * `resourceClaim` (VEP-427's names, docs/behaviour.md#claim-request): how the parser reads and refuses them, and how
 * a NAD's `resourceName` / `allowedResourceNames` annotations accept or refuse an element's pool.
 */
import { describe, expect, it } from 'vitest';
import { CniCode } from '../../../src/base/errors.ts';
import type { Nad } from '../../../src/k8s/types.ts';
import { PoolRefused, delegateFromNad } from '../../../src/multus/nad.ts';
import { parseNetworkSelections } from '../../../src/multus/selection.ts';
import { thrown } from '../../helpers/errors.ts';
import { FakeKube } from '../../helpers/fake-kube.ts';
import { nadDelegate } from '../../../src/multus/podnetworks.ts';
import { formatExplanation } from '../../../src/multus/explain.ts';

const parse = (elements: unknown[]) => parseNetworkSelections(JSON.stringify(elements), 'ns1');

describe('selection element keys resourceName and resourceClaim', () => {
  it('reads them into the request, matching key case as Go does', () => {
    const [a, b] = parse([
      { name: 'sriov', resourceName: 'intel.com/sriov_a' },
      { name: 'sriov', ResourceClaim: { claimName: 'gpu-nic', requestName: 'nic' } },
    ]);
    expect(a!.request).toEqual({ resourceNameRequest: 'intel.com/sriov_a' });
    expect(b!.request).toEqual({ claimRequest: { claimName: 'gpu-nic', requestName: 'nic' } });
    // a subrequest of a prioritized-list request
    expect(parse([{ name: 'n', resourceClaim: { claimName: 'c', requestName: 'nic/vf' } }])[0]!.request).toEqual({
      claimRequest: { claimName: 'c', requestName: 'nic/vf' },
    });
  });

  it.each([
    [{ resourceName: 'sriov' }, '"resourceName" "sriov" is not a device pool name'],
    [{ resourceName: 'Intel.com/sriov' }, '"resourceName" "Intel.com/sriov" is not a device pool name'],
    [{ resourceName: 'intel.com/' }, '"resourceName" "intel.com/" is not a device pool name'],
    [
      { resourceName: 7 },
      'failed to parse pod Network Attachment Selection Annotation JSON format: "resourceName" must be a string, got 7',
    ],
    [
      { resourceClaim: 'gpu-nic' },
      'failed to parse pod Network Attachment Selection Annotation JSON format: "resourceClaim" must be an object, got "gpu-nic"',
    ],
    [{ resourceClaim: { claimName: 'c' } }, '"resourceClaim" needs "requestName" as a non-empty string, got none'],
    [
      { resourceClaim: { claimName: '', requestName: 'r' } },
      '"resourceClaim" needs "claimName" as a non-empty string, got ""',
    ],
    [
      { resourceClaim: { claimName: 'C', requestName: 'r' } },
      '"resourceClaim" "claimName" "C" is not a DNS-1123 label',
    ],
    [
      { resourceClaim: { claimName: 'c', requestName: 'a/b/c' } },
      '"resourceClaim" "requestName" "a/b/c" is not a DNS-1123 label',
    ],
    [{ resourceClaim: { claimName: 'c', requestName: 'r', claim: 'x' } }, '"resourceClaim" has unknown key "claim"'],
    [
      { resourceName: 'intel.com/sriov', resourceClaim: { claimName: 'c', requestName: 'r' } },
      'the element has both "resourceName" and "resourceClaim"',
    ],
  ])('refuses %j with code 7 naming the element', (keys, core) => {
    const err = thrown(() => parse([{ name: 'net-a' }, { name: 'sriov', ...keys }]));
    expect(err.code).toBe(CniCode.InvalidConfig);
    expect(err.msg).toContain(
      `parsePodNetworkAnnotation: ${core} (element 1 ("sriov") of k8s.v1.cni.cncf.io/networks)`,
    );
  });
});

function nad(annotations: Record<string, string>): Nad {
  return {
    metadata: { namespace: 'ns1', name: 'sriov', annotations },
    spec: { config: JSON.stringify({ cniVersion: '1.0.0', type: 'sriov' }) },
  };
}
const RN = 'k8s.v1.cni.cncf.io/resourceName';
const ALLOWED = 'k8s.v1.cni.cncf.io/allowedResourceNames';

describe("an element's pool against the NAD (docs/behaviour.md#device-pool)", () => {
  const pool = (annotations: Record<string, string>, requested?: string) =>
    delegateFromNad(nad(annotations), '/nonexistent', requested ? { resourceNameRequest: requested } : {}, 'selection')
      .request.resourceName;

  it("takes the NAD's pool without an element pool, the element's when the NAD has none or the same", () => {
    expect(pool({ [RN]: 'intel.com/a' })).toBe('intel.com/a');
    expect(pool({}, 'intel.com/b')).toBe('intel.com/b');
    expect(pool({ [RN]: 'intel.com/a' }, 'intel.com/a')).toBe('intel.com/a');
    expect(pool({}, undefined)).toBeUndefined();
  });

  it("refuses an element pool that differs from the NAD's resourceName (Multus #1520's message)", () => {
    const err = thrown(() => pool({ [RN]: 'intel.com/a' }, 'intel.com/b'));
    expect(err).toBeInstanceOf(PoolRefused);
    expect((err as PoolRefused).reason).toBe('ResourceNameConflict');
    expect(err.code).toBe(CniCode.InvalidConfig);
    expect(err.msg).toBe(
      'conflicting resourceName for network ns1/sriov: NAD annotation "intel.com/a" does not match NetworkSelectionElement request "intel.com/b"',
    );
  });

  it('lets the allow-list decide when the NAD has one (its resourceName stays the default)', () => {
    const annotations = { [RN]: 'intel.com/a', [ALLOWED]: 'intel.com/a, nvidia.com/b ,' };
    expect(pool(annotations)).toBe('intel.com/a');
    expect(pool(annotations, 'nvidia.com/b')).toBe('nvidia.com/b');
    const err = thrown(() => pool(annotations, 'intel.com/c'));
    expect((err as PoolRefused).reason).toBe('ResourceNameNotAllowed');
    expect(err.msg).toBe(
      'resourceName "intel.com/c" of the selection element for network ns1/sriov is not in the NAD\'s k8s.v1.cni.cncf.io/allowedResourceNames (intel.com/a, nvidia.com/b)',
    );
    expect(thrown(() => pool({ [ALLOWED]: '' }, 'intel.com/a')).msg).toContain('allowedResourceNames (empty)');
  });
});

describe('hot-plug (nadDelegate)', () => {
  it.each([
    ['resourceName', { resourceNameRequest: 'intel.com/sriov' }, { resourceName: 'intel.com/sriov' }],
    ['resourceClaim', { claimRequest: { claimName: 'c', requestName: 'r' } }, {}],
  ])("keeps an element's %s for the device assignment (hotplug/delegate.ts)", async (_key, request, pool) => {
    const kube = new FakeKube();
    kube.addNad('ns1', 'sriov', { cniVersion: '1.0.0', type: 'sriov' }, { [RN]: 'intel.com/sriov' });
    const d = await nadDelegate(kube, '/nonexistent', { namespace: 'ns1', name: 'sriov', request }, 'fix', 'hotplug');
    expect(d.request).toEqual({ ...request, resourceName: 'intel.com/sriov', ...pool });
  });
});

describe('multus plan (formatExplanation)', () => {
  it('names the claim request an attachment takes its device from, and the device', () => {
    const text = formatExplanation({
      pod: { namespace: 'ns1', name: 'p', uid: 'u', found: true },
      attachments: [
        {
          ifName: 'net1',
          network: 'sriov',
          displayName: 'ns1/sriov',
          isClusterNetwork: false,
          plugins: [{ type: 'sriov', runtimeConfig: {} }],
          cniArgs: 'K8S_POD_NAME=p',
          resourceClaim: { claimName: 'gpu-nic', requestName: 'nic' },
          deviceId: '0000:3b:00.2',
        },
      ],
      defaultRoutes: undefined,
      warnings: [],
      errors: [],
    });
    expect(text).toContain('       device: 0000:3b:00.2, the one of request "nic" of the pod\'s claim "gpu-nic"');
  });
});
