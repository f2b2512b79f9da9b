/**
 * Claim networks through `multus plan` (explainAdd with the daemon's claim source, dra/claim-delegates.ts) on the
 * FakeKube: the claim's networks after the annotation's, a per-NAD device found through its slice's attributes,
 * every refusal listed, the reads (one GET per claim, one slice LIST only for a per-NAD device), nothing read
 * without `draNetworks`; and DEL's claim status (multus/claim-attach.ts): cleared, or kept while another pod the
 * claim is reserved for uses it.
 */
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/base/log.ts';
import { serveClaimNetworks } from '../../../src/dra/claim-delegates.ts';
import { networkDeviceName } from '../../../src/dra/device-names.ts';
import type { DraObject, Pod } from '../../../src/k8s/types.ts';
import { clearClaimNetworks } from '../../../src/multus/claim-attach.ts';
import { parseMultusConf } from '../../../src/multus/conf.ts';
import { explainAdd, formatExplanation } from '../../../src/multus/explain.ts';
import { FakeKube } from '../../helpers/fake-kube.ts';

const D = 'multus.k8s.cni.cncf.io';
const SEL = 'dra.multus.k8s.cni.cncf.io/v1alpha1';
const conf = (extra: Record<string, unknown> = {}) =>
  parseMultusConf({
    cniVersion: '1.0.0',
    name: 'multus',
    type: 'multus',
    delegates: [{ cniVersion: '1.0.0', name: 'cluster', type: 'p0' }],
    draNetworks: true,
    ...extra,
  });

function kubeWith(claim: DraObject): { kube: FakeKube; pod: Pod } {
  const kube = new FakeKube();
  kube.addNad('ns1', 'anno', { cniVersion: '1.0.0', type: 'anno' });
  kube.addNad('ns1', 'mac', { cniVersion: '1.0.0', type: 'macvlan' });
  const pod = kube.addPod('ns1', 'pod1', 'uid-1', { 'k8s.v1.cni.cncf.io/networks': 'anno' });
  pod.spec = { nodeName: 'n1', resourceClaims: [{ name: 'c', resourceClaimName: 'c1' }] };
  kube.claims.set('ns1/c1', claim);
  return { kube, pod };
}

const claim = (results: { request: string; device: string }[], config: unknown[] = []): DraObject => ({
  metadata: { namespace: 'ns1', name: 'c1', uid: 'cu' },
  status: {
    allocation: { devices: { results: results.map((r) => ({ driver: D, pool: 'n1', ...r })), config } },
    reservedFor: [{ resource: 'pods', name: 'pod1', uid: 'uid-1' }],
  },
});
const fromClaim = (parameters: unknown, requests?: string[]) => ({
  source: 'FromClaim',
  ...(requests ? { requests } : {}),
  opaque: { driver: D, parameters },
});

describe('multus plan shows claim networks (the daemon’s claim source)', () => {
  it('after the annotation’s, with their claim and request; one GET for the claim and no slice LIST', async () => {
    const { kube } = kubeWith(
      claim(
        [{ request: 'net', device: 'any' }],
        [fromClaim({ apiVersion: SEL, kind: 'NetworkSelection', name: 'mac', interface: 'fast0' })],
      ),
    );
    const x = await explainAdd(conf(), 'ns1', 'pod1', kube, silentLogger, { claimNetworks: serveClaimNetworks });
    expect(x.errors).toEqual([]);
    expect(x.attachments.map((a) => [a.ifName, a.displayName, a.claimNetwork])).toEqual([
      ['eth0', 'cluster', undefined],
      ['net1', 'ns1/anno', undefined],
      ['fast0', 'ns1/mac', { claim: 'ns1/c1', request: 'net', device: 'any' }],
    ]);
    expect(formatExplanation(x)).toContain('from request "net" of ResourceClaim ns1/c1 (device any)');
    expect(kube.received.filter((r) => /Claim|Slice/.test(r))).toEqual(['getResourceClaim ns1/c1']);
  });

  it('a per-NAD device attaches the NAD its slice’s attributes name', async () => {
    const device = networkDeviceName('ns1', 'mac');
    const { kube } = kubeWith(claim([{ request: 'net', device }]));
    kube.slices.push({
      metadata: { name: 's' },
      spec: {
        driver: D,
        nodeName: 'n1',
        pool: { name: 'n1' },
        devices: [
          {
            name: device,
            attributes: {
              'dra.multus.k8s.cni.cncf.io/namespace': { string: 'ns1' },
              'dra.multus.k8s.cni.cncf.io/name': { string: 'mac' },
            },
          },
        ],
      },
    });
    const x = await explainAdd(conf(), 'ns1', 'pod1', kube, silentLogger, { claimNetworks: serveClaimNetworks });
    expect(x.errors).toEqual([]);
    expect(x.attachments.map((a) => [a.ifName, a.displayName])).toEqual([
      ['eth0', 'cluster'],
      ['net1', 'ns1/anno'],
      ['net2', 'ns1/mac'],
    ]);
  });

  it('lists each refusal, naming claim and request', async () => {
    const { kube } = kubeWith(
      claim([
        { request: 'a', device: 'any' },
        { request: 'b', device: 'any' },
      ]),
    );
    const x = await explainAdd(conf(), 'ns1', 'pod1', kube, silentLogger, { claimNetworks: serveClaimNetworks });
    expect(x.errors.map((e) => e.code)).toEqual([7, 7]);
    expect(x.errors[0]!.msg).toMatch(
      /^pod ns1\/pod1: ResourceClaim ns1\/c1 request a \(device any\): no opaque config of driver/,
    );
    expect(x.errors[1]!.msg).toMatch(
      /^pod ns1\/pod1: ResourceClaim ns1\/c1 request b \(device any\): no opaque config of driver/,
    );
    expect(x.attachments.map((a) => a.displayName)).toEqual(['cluster', 'ns1/anno']);
  });

  it('reads no claim without draNetworks', async () => {
    const { kube } = kubeWith(claim([{ request: 'net', device: 'any' }]));
    const x = await explainAdd(conf({ draNetworks: false }), 'ns1', 'pod1', kube, silentLogger, {
      claimNetworks: serveClaimNetworks,
    });
    expect(x.errors).toEqual([]);
    expect(kube.received.filter((r) => /Claim|Slice/.test(r))).toEqual([]);
  });
});

describe('DEL clears our driver’s claim status', () => {
  const attachment = {
    request: { claimNetwork: { namespace: 'ns1', claim: 'c1', request: 'net', driver: D, pool: 'n1', device: 'any' } },
  };

  it('applies an empty list as the driver when only this pod holds the claim', async () => {
    const { kube } = kubeWith(claim([{ request: 'net', device: 'any' }]));
    await clearClaimNetworks(kube, { name: 'pod1', uid: 'uid-1' }, [attachment], silentLogger);
    expect(kube.received.filter((r) => r.startsWith('apply'))).toEqual([`applyClaimDevices ns1/c1 ${D} 0`]);
  });

  it('keeps it while another pod the claim is reserved for still uses it; a deleted claim is fine', async () => {
    const c = claim([{ request: 'net', device: 'any' }]);
    (c.status!.reservedFor as unknown[]).push({ resource: 'pods', name: 'pod2', uid: 'uid-2' });
    const { kube } = kubeWith(c);
    await clearClaimNetworks(kube, { name: 'pod1', uid: 'uid-1' }, [attachment], silentLogger);
    expect(kube.received.filter((r) => r.startsWith('apply'))).toEqual([]);
    kube.claims.clear();
    await clearClaimNetworks(kube, { name: 'pod1', uid: 'uid-1' }, [attachment], silentLogger);
    expect(kube.received.filter((r) => r.startsWith('apply'))).toEqual([]);
  });
});
