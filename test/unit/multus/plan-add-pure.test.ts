/**
 * multus/plan-add.ts `planAdd` alone: a pure function of what `gatherInputs` read (no Kubernetes client, no kubelet,
 * no files past the config's): the delegates of the read NADs in ADD's order, the devices handed out from the read
 * facts, every error in order, and the Warning events returned (not posted) with how many errors came before each.
 * test/unit/multus/plan-add.test.ts holds ADD and `multus plan` to the same verdict over a real gather.
 */
import { describe, expect, it } from 'vitest';
import { CniCode, CniError } from '../../../src/base/errors.ts';
import { podK8sArgs } from '../../../src/cni/cniargs.ts';
import type { DeviceFacts } from '../../../src/devices/attachment-devices.ts';
import type { Nad, Pod } from '../../../src/k8s/types.ts';
import { parseMultusConf } from '../../../src/multus/conf.ts';
import type { NadRead } from '../../../src/multus/pod-delegates.ts';
import type { AddInputs } from '../../../src/multus/plan-add.ts';
import { eventsBeforeFirstError, planAdd } from '../../../src/multus/plan-add.ts';

const conf = parseMultusConf(
  Buffer.from(
    JSON.stringify({
      cniVersion: '1.0.0',
      name: 'multus-cni-network',
      type: 'multus',
      kubeconfig: '/fake/kubeconfig',
      delegates: [{ cniVersion: '1.0.0', name: 'cluster', type: 'p0' }],
    }),
  ),
);

const nad = (name: string, annotations: Record<string, string> = {}): Nad => ({
  metadata: { namespace: 'ns1', name, annotations },
  spec: { config: JSON.stringify({ cniVersion: '1.0.0', type: `p-${name}` }) },
});

function inputs(networks: string, nads: [string, NadRead][], devices?: DeviceFacts): AddInputs {
  const pod: Pod = {
    metadata: { namespace: 'ns1', name: 'pod1', uid: 'u1', annotations: { 'k8s.v1.cni.cncf.io/networks': networks } },
  };
  return {
    conf,
    k8s: podK8sArgs({ namespace: 'ns1', name: 'pod1', uid: 'u1' }, 'c1'),
    ifName: 'eth0',
    containerId: 'c1',
    tag: '[ns1/pod1/u1]',
    networks: { lookup: { kind: 'found', pod }, clusterNads: new Map(), nads: new Map(nads) },
    devices,
    aux: undefined,
  };
}

const facts = (pool: string[]): DeviceFacts => ({
  node: 'node-1',
  podName: 'ns1/pod1',
  named: new Map(),
  pool: { resources: new Map([['intel.com/sriov', pool]]), sources: new Map() },
});

describe('planAdd (pure)', () => {
  it('plans the read NADs in annotation order, after the cluster network', () => {
    const plan = planAdd(
      inputs('a,b', [
        ['ns1/a', { kind: 'found', nad: nad('a') }],
        ['ns1/b', { kind: 'found', nad: nad('b') }],
      ]),
    );
    expect(plan.errors).toEqual([]);
    expect(plan.attachments.map((a) => `${a.ifName} ${a.network.plugins[0]!.type}`)).toEqual([
      'eth0 p0',
      'net1 p-a',
      'net2 p-b',
    ]);
  });

  it('returns every error in order and the events, without posting them', () => {
    const unreadable = new CniError(CniCode.TryAgainLater, 'cannot read network-attachment-definition ns1/b: 503');
    const plan = planAdd(
      inputs('gone,b,also-gone', [
        ['ns1/gone', { kind: 'missing' }],
        ['ns1/b', { kind: 'error', error: unreadable }],
        ['ns1/also-gone', { kind: 'missing' }],
      ]),
    );
    expect(plan.errors.map((e) => [e.code, e.msg])).toEqual([
      [CniCode.InvalidConfig, 'cannot find a network-attachment-definition (gone) in namespace (ns1)'],
      [CniCode.TryAgainLater, unreadable.msg],
      [CniCode.InvalidConfig, 'cannot find a network-attachment-definition (also-gone) in namespace (ns1)'],
    ]);
    expect(plan.events.map((e) => [e.reason, e.after])).toEqual([
      ['NoNetworkFound', 0],
      ['NoNetworkFound', 2],
    ]);
    expect(eventsBeforeFirstError(plan)).toHaveLength(1);
  });

  it("hands out the read devices: the NAD's pool in order, then none (best effort); an element's pool is strict", () => {
    const pool = { 'k8s.v1.cni.cncf.io/resourceName': 'intel.com/sriov' };
    const read: [string, NadRead][] = [['ns1/vf', { kind: 'found', nad: nad('vf', pool) }]];
    const plan = planAdd(inputs('vf,vf@x2', read, facts(['0000:af:00.1'])));
    expect(plan.errors).toEqual([]);
    expect(plan.attachments.map((a) => a.request.deviceID)).toEqual([undefined, '0000:af:00.1', undefined]);
    expect(plan.attachments[1]!.network.bytes.toString()).toContain('"deviceID":"0000:af:00.1"');
    const strict = JSON.stringify([{ name: 'vf' }, { name: 'vf', resourceName: 'intel.com/sriov', interface: 'x2' }]);
    const refused = planAdd(inputs(strict, read, facts(['0000:af:00.1'])));
    expect(refused.errors.map((e) => e.msg)).toEqual([
      'pod ns1/pod1: the selection element for network ns1/vf: pool "intel.com/sriov" has no free device: the pod\'s 1 device(s) of it went to earlier attachments',
    ]);
  });

  it('assigns no device when the devices were not read', () => {
    const pool = { 'k8s.v1.cni.cncf.io/resourceName': 'intel.com/sriov' };
    const plan = planAdd(inputs('vf', [['ns1/vf', { kind: 'found', nad: nad('vf', pool) }]]));
    expect(plan.attachments.map((a) => a.request.deviceID)).toEqual([undefined, undefined]);
  });
});
