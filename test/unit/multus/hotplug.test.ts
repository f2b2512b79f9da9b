/** Hot-plug's pure parts: planning against the scratch cache, network-status edits, /delegate and CLI decoding. */
import { describe, expect, it } from 'vitest';
import { CniError } from '../../../src/base/errors.ts';
import { parseNetwork } from '../../../src/cni/network.ts';
import { decodeDelegateBody, selectionOf } from '../../../src/daemon/hotplug-api.ts';
import { UsageError, hotplugBody, parseHotplugArgs } from '../../../src/daemon/hotplug-cli.ts';
import { planDynamicChanges } from '../../../src/multus/dynamic-plan.ts';
import {
  cachedAttachments,
  editStatusEntries,
  parseStatusEntries,
  planHotplugAdd,
  planHotplugDel,
} from '../../../src/multus/hotplug.ts';
import type { Delegate } from '../../../src/multus/plan.ts';
import { toCachedDelegate } from '../../../src/multus/plan.ts';

function delegate(name: string, request: Delegate['request'] = {}, displayName = name): Delegate {
  return { network: parseNetwork({ cniVersion: '1.0.0', name, type: 'macvlan' }), displayName, request };
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

describe('decodeDelegateBody', () => {
  const env = {
    CNI_COMMAND: 'add',
    CNI_CONTAINERID: 'c1',
    CNI_NETNS: '/var/run/netns/x',
    CNI_IFNAME: 'net1',
    CNI_ARGS: 'K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_UID=u',
  };
  const body = (o: Record<string, unknown>) => Buffer.from(JSON.stringify(o));
  const config = Buffer.from('{"cniVersion":"1.0.0","name":"mv","type":"macvlan"}').toString('base64');

  it("takes CreateDelegateRequest's body (command case-insensitive, cni-args null)", () => {
    const req = decodeDelegateBody(
      body({ env, config, interfaceAttributes: { 'cni-args': null, ips: ['10.1.1.1/24'] } }),
      {},
    );
    expect(req).toMatchObject({ command: 'ADD', containerId: 'c1', ifName: 'net1', network: '' });
    expect(req.config.toString()).toContain('"macvlan"');
    expect(selectionOf(req, 'ns').request).toEqual({ ifname: 'net1', ips: ['10.1.1.1/24'] });
  });

  it('refuses what it cannot run, with the CNI code', () => {
    const code = (o: Record<string, unknown>) => {
      try {
        decodeDelegateBody(body(o), {});
        return 0;
      } catch (e) {
        return (e as CniError).code;
      }
    };
    expect(code({ env: { ...env, CNI_COMMAND: 'GC' }, config })).toBe(4);
    expect(code({ env: { ...env, CNI_IFNAME: '' }, config })).toBe(4);
    expect(code({ env: { ...env, CNI_CONTAINERID: '../x' }, config })).not.toBe(0);
    expect(code({ env })).toBe(7); // ADD with neither config nor network
    expect(code({ env, config, interfaceAttributes: [] })).toBe(6);
  });

  it('checks the interface attributes as a selection element', () => {
    const req = decodeDelegateBody(body({ env, network: 'other/mv', interfaceAttributes: { mac: 'zz' } }), {});
    expect(() => selectionOf(req, 'ns')).toThrow(/invalid MAC address/);
    const ok = decodeDelegateBody(
      body({ env, network: 'other/mv', interfaceAttributes: { 'cni-args': { a: 1 } } }),
      {},
    );
    expect(selectionOf(ok, 'ns')).toEqual({
      name: 'mv',
      namespace: 'other',
      request: { ifname: 'net1', configArgs: { a: 1 } },
    });
  });
});

describe('multus hotplug arguments', () => {
  it('parses a full command line and builds the /delegate body', () => {
    const a = parseHotplugArgs([
      'add',
      '--pod',
      'ns/p',
      '--network',
      'mv@net3',
      '--ip',
      '10.1.1.1/24',
      '--mac',
      '02:00:00:00:00:01',
      '--cni-arg',
      'k=v',
      '--socket-dir',
      '/s',
      '--cni-dir',
      '/c',
    ]);
    expect(a).toMatchObject({
      command: 'ADD',
      namespace: 'ns',
      name: 'p',
      network: 'mv',
      ifName: 'net3',
      socketDir: '/s',
      cniDir: '/c',
    });
    const body = JSON.parse(hotplugBody(a, { containerId: 'c1', netns: '/n', uid: 'u' }, 'net3'));
    expect(body).toEqual({
      env: {
        CNI_COMMAND: 'ADD',
        CNI_CONTAINERID: 'c1',
        CNI_NETNS: '/n',
        CNI_IFNAME: 'net3',
        CNI_ARGS: 'K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_UID=u',
      },
      network: 'mv',
      interfaceAttributes: { 'cni-args': { k: 'v' }, ips: ['10.1.1.1/24'], mac: '02:00:00:00:00:01' },
    });
  });
  it('refuses a bad command line', () => {
    expect(() => parseHotplugArgs(['plug', '--pod', 'ns/p', '--network', 'mv'])).toThrow(UsageError);
    expect(() => parseHotplugArgs(['add', '--pod', 'p', '--network', 'mv', '--cni-dir', '/c'])).toThrow(
      /NAMESPACE\/NAME/,
    );
    expect(() => parseHotplugArgs(['add', '--pod', 'ns/p', '--cni-dir', '/c'])).toThrow(/--network is required/);
    expect(() => parseHotplugArgs(['add', '--pod', 'ns/p', '--network', 'mv@', '--cni-dir', '/c'])).toThrow(
      /NAD\[@IFNAME\]/,
    );
  });
});

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
    );
  const sel = (name: string, ifname?: string, namespace = 'ns') => ({
    name,
    namespace,
    request: ifname ? { ifname } : {},
  });
  const show = (cs: ReturnType<typeof planDynamicChanges>) => cs.map((c) => `${c.kind} ${c.network}@${c.ifName}`);

  it('changes nothing when the annotation matches, in any order, and never touches the statics', () => {
    expect(planDynamicChanges(made(), 2, [sel('a'), sel('b', 'data0')])).toEqual([]);
    expect(planDynamicChanges(made(), 2, [sel('b', 'data0'), sel('a', 'net2')])).toEqual([]);
  });

  it('removes what left the annotation and adds what joined it, removals first, adds in annotation order', () => {
    expect(show(planDynamicChanges(made(), 2, [sel('c'), sel('b', 'data0'), sel('d', 'x1'), sel('c')]))).toEqual([
      'remove ns/a@net2',
      'add ns/c@net2', // net1 is the static's; net2 was freed by the removal
      'add ns/d@x1',
      'add ns/c@net3',
    ]);
  });

  it('moves an element to another interface name by removing and adding it', () => {
    expect(show(planDynamicChanges(made(), 2, [sel('a'), sel('b', 'data1')]))).toEqual([
      'remove ns/b@data0',
      'add ns/b@data1',
    ]);
  });
});
