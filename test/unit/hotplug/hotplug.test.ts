/** hotplug/hotplug.ts' pure parts: planning against the scratch cache, network-status edits. */
import { describe, expect, it } from 'vitest';
import { CniError } from '../../../src/base/errors.ts';
import { parseNetwork } from '../../../src/cni/network.ts';
import { cachedAttachments, planHotplugAdd, planHotplugDel } from '../../../src/hotplug/hotplug.ts';
import { editStatusEntries, parseStatusEntries } from '../../../src/multus/network-status.ts';
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

/** A scratch cache as ADD writes it: cluster network, then net1, net2 by position. */
const cache = () =>
  [delegate('cluster'), delegate('a', {}, 'ns/a'), delegate('b', {}, 'ns/b')].map((d) =>
    toCachedDelegate({ ...d, ifName: '', isClusterNetwork: false }),
  );

describe('planHotplugAdd', () => {
  it('appends the attachment with its interface name and pins the names of the others', () => {
    const plan = planHotplugAdd(cache(), 'eth0', delegate('c', { ips: ['10.1.1.5/24'] }, 'ns/c'), 'data0', [
      'lo',
      'eth0',
      'net1',
      'net2',
    ]);
    expect(plan.attachment).toMatchObject({ ifName: 'data0', displayName: 'ns/c', isClusterNetwork: false });
    expect(plan.attachment.request.ips).toEqual(['10.1.1.5/24']);
    expect(plan.cache.map((d) => [d.name, d.request.ifname ?? ''])).toEqual([
      ['cluster', ''],
      ['ns/a', 'net1'],
      ['ns/b', 'net2'],
      ['ns/c', 'data0'],
    ]);
  });

  it('refuses a name an attachment has, or a link of the sandbox has, or an invalid name', () => {
    expect(() => planHotplugAdd(cache(), 'eth0', delegate('c'), 'net2', [])).toThrow(
      /already attached to the pod by "ns\/b"/,
    );
    expect(() => planHotplugAdd(cache(), 'eth0', delegate('c'), 'eth0', [])).toThrow(
      /already attached to the pod by "cluster"/,
    );
    expect(() => planHotplugAdd(cache(), 'eth0', delegate('c'), 'lo', ['lo'])).toThrow(
      /already exists in the pod's network namespace/,
    );
    expect(() => planHotplugAdd(cache(), 'eth0', delegate('c'), 'a/b', [])).toThrow(CniError);
  });
});

describe('planHotplugDel', () => {
  it('removes the attachment and keeps the names of those after it', () => {
    const plan = planHotplugDel(cache(), 'eth0', 'net1')!;
    expect(plan.attachment.displayName).toBe('ns/a');
    expect(cachedAttachments(plan.cache, 'eth0').map((a) => [a.displayName, a.ifName])).toEqual([
      ['cluster', 'eth0'],
      ['ns/b', 'net2'], // not renamed net1 by its new position
    ]);
  });

  it('has nothing for an unknown name and refuses the cluster network', () => {
    expect(planHotplugDel(cache(), 'eth0', 'net9')).toBeUndefined();
    expect(() => planHotplugDel(cache(), 'eth0', 'eth0')).toThrow(/cluster network and cannot be removed/);
  });

  it('refuses an attachment of a DRA claim: the claim owns it (docs/behaviour.md#claim-networks)', () => {
    const claimNetwork = {
      namespace: 'ns',
      claim: 'c1',
      uid: 'u',
      request: 'r1',
      driver: 'd',
      pool: 'p',
      device: 'any',
    };
    const cached = [
      ...cache(),
      toCachedDelegate({ ...delegate('x', { claimNetwork }, 'ns/x'), ifName: '', isClusterNetwork: false }),
    ];
    expect(() => planHotplugDel(cached, 'eth0', 'net3')).toThrow(/belongs to ResourceClaim ns\/c1 \(request "r1"\)/);
    expect(planHotplugDel(cached, 'eth0', 'net2')?.attachment.displayName).toBe('ns/b');
  });
});

describe('network-status edits', () => {
  const e = (name: string, iface: string) => ({ name, interface: iface, dns: {} });
  it('appends, replaces an entry of the same interface, and removes by interface', () => {
    const current = [e('cluster', 'eth0'), e('ns/a', 'net1')];
    expect(editStatusEntries(current, { remove: [], add: [e('ns/b', 'net2')] }).map((x) => x.interface)).toEqual([
      'eth0',
      'net1',
      'net2',
    ]);
    expect(editStatusEntries(current, { remove: [], add: [e('ns/z', 'net1')] }).map((x) => x.name)).toEqual([
      'cluster',
      'ns/z',
    ]);
    expect(editStatusEntries(current, { remove: ['net1'], add: [] })).toEqual([e('cluster', 'eth0')]);
  });
  it('reads an absent or broken annotation as no entries', () => {
    expect(parseStatusEntries(undefined)).toEqual([]);
    expect(parseStatusEntries('not json')).toEqual([]);
    expect(parseStatusEntries('[{"name":"x","interface":"eth0"}]')).toEqual([{ name: 'x', interface: 'eth0' }]);
  });
});
