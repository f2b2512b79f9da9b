/** hotplug/dynamic-plan.ts: the plugs and unplugs that bring a pod in line with its networks annotation. */
import { describe, expect, it } from 'vitest';
import { parseNetwork } from '../../../src/cni/network.ts';
import { planDynamicChanges } from '../../../src/hotplug/dynamic-plan.ts';
import { cachedAttachments } from '../../../src/hotplug/hotplug.ts';
import type { Delegate } from '../../../src/multus/attachments.ts';
import { toCachedDelegate } from '../../../src/multus/attachments.ts';

function delegate(name: string, request: Delegate['request'] = {}, displayName = name): Delegate {
  return {
    network: parseNetwork({ cniVersion: '1.0.0', name, type: 'macvlan' }),
    displayName,
    request,
    source: 'selection',
  };
}

describe('planDynamicChanges', () => {
  // the pod as made: cluster network, one defaultNetwork (a static), then ns/a as net2 and ns/b@data0
  const made = () =>
    cachedAttachments(
      [
        delegate('cluster'),
        delegate('dflt', {}, 'kube-system/dflt'),
        delegate('a', {}, 'ns/a'),
        delegate('b', { ifname: 'data0' }, 'ns/b'),
      ].map((d) => toCachedDelegate({ ...d, ifName: '', isClusterNetwork: false })),
      'eth0',
      { defaults: 1 },
    );
  const sel = (name: string, ifname?: string, namespace = 'ns') => ({
    name,
    namespace,
    request: ifname ? { ifname } : {},
  });
  const show = (cs: ReturnType<typeof planDynamicChanges>) => cs.map((c) => `${c.kind} ${c.network}@${c.ifName}`);

  it('changes nothing when the annotation matches, in any order, and never touches the statics', () => {
    expect(planDynamicChanges(made(), [sel('a'), sel('b', 'data0')])).toEqual([]);
    expect(planDynamicChanges(made(), [sel('b', 'data0'), sel('a', 'net2')])).toEqual([]);
  });

  it('never touches a network of a claim of our DRA driver (docs/behaviour.md#claim-networks)', () => {
    const claimNetwork = { namespace: 'ns', claim: 'c1', request: 'net', driver: 'd', pool: 'p', device: 'any' };
    const withClaim = cachedAttachments(
      [delegate('cluster'), delegate('a', {}, 'ns/a'), delegate('m', { ifname: 'dra0', claimNetwork }, 'ns/m')].map(
        (d) => toCachedDelegate({ ...d, ifName: '', isClusterNetwork: false }),
      ),
      'eth0',
      {},
    );
    expect(planDynamicChanges(withClaim, [sel('a')])).toEqual([]);
    expect(show(planDynamicChanges(withClaim, []))).toEqual(['remove ns/a@net1']);
  });

  it('removes what left the annotation and adds what joined it, removals first, adds in annotation order', () => {
    expect(show(planDynamicChanges(made(), [sel('c'), sel('b', 'data0'), sel('d', 'x1'), sel('c')]))).toEqual([
      'remove ns/a@net2',
      'add ns/c@net2', // net1 is the static's; net2 was freed by the removal
      'add ns/d@x1',
      'add ns/c@net3',
    ]);
  });

  it('moves an element to another interface name by removing and adding it', () => {
    expect(show(planDynamicChanges(made(), [sel('a'), sel('b', 'data1')]))).toEqual([
      'remove ns/b@data0',
      'add ns/b@data1',
    ]);
  });
});
