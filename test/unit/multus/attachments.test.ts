import { describe, expect, it } from 'vitest';
import type { K8sArgs } from '../../../src/cni/cniargs.ts';
import { parseNetwork } from '../../../src/cni/network.ts';
import { CniError } from '../../../src/base/errors.ts';
import type { Delegate } from '../../../src/multus/attachments.ts';
import {
  capabilityArgsFor,
  delegateArgsFor,
  fromCachedDelegates,
  planAttachments as planAll,
  toCachedDelegate,
  undeclaredCapabilities,
} from '../../../src/multus/attachments.ts';

function delegate(name: string, request: Delegate['request'] = {}, displayName = name): Delegate {
  const network = parseNetwork({ cniVersion: '1.0.0', name, type: 'bridge' });
  return { network, displayName, request, source: 'selection' };
}

/** A pod's delegates as the resolvers give them: the cluster network first. */
const planAttachments = (delegates: Delegate[], clusterIfName: string) =>
  planAll(
    delegates.map((d, i) => (i === 0 ? { ...d, source: 'cluster' as const } : d)),
    clusterIfName,
  );

const k8s: K8sArgs = {
  ignoreUnknown: true,
  podNamespace: 'ns1',
  podName: 'pod1',
  podInfraContainerId: 'c1',
  podUid: 'u1',
  ip: '',
};

describe('planAttachments', () => {
  it('names the cluster network CNI_IFNAME and the others net<i> by position', () => {
    const plan = planAttachments([delegate('a'), delegate('b'), delegate('c')], 'eth0');
    expect(plan.map((a) => [a.network.name, a.ifName, a.isClusterNetwork])).toEqual([
      ['a', 'eth0', true],
      ['b', 'net1', false],
      ['c', 'net2', false],
    ]);
  });

  it('lets an explicit request win, and the named attachment still consumes its index', () => {
    const plan = planAttachments([delegate('a'), delegate('b', { ifname: 'data0' }), delegate('c')], 'eth0');
    expect(plan.map((a) => a.ifName)).toEqual(['eth0', 'data0', 'net2']);
  });

  it.each([
    [
      'an explicit name equal to a later automatic one',
      [delegate('a'), delegate('b', { ifname: 'net2' }), delegate('c')],
      'net2',
    ],
    ['two explicit names', [delegate('a'), delegate('b', { ifname: 'x' }), delegate('c', { ifname: 'x' })], 'x'],
    ['a request for the cluster interface', [delegate('a'), delegate('b', { ifname: 'eth0' })], 'eth0'],
  ])('rejects duplicate interface names before anything runs: %s', (_title, delegates, name) => {
    expect(() => planAttachments(delegates, 'eth0')).toThrowError(
      expect.objectContaining({
        code: 7,
        msg: expect.stringContaining(`interface name "${name}" is requested by both`),
      }),
    );
  });

  it('validates requested interface names', () => {
    expect(() => planAttachments([delegate('a'), delegate('b', { ifname: 'a/b' })], 'eth0')).toThrow(CniError);
  });
});

describe('capabilityArgsFor', () => {
  const runtimeConfig = {
    portMappings: [{ hostPort: 8080, containerPort: 80, protocol: 'tcp' }],
    bandwidth: { ingressRate: 1000 },
    'io.kubernetes.cri.pod-annotations': { a: 'b' },
    ips: [],
    mac: '',
  };

  it('gives every attachment its own deep copy', () => {
    const [cluster, other] = planAttachments([delegate('a'), delegate('b')], 'eth0');
    const one = capabilityArgsFor(cluster!, runtimeConfig);
    const two = capabilityArgsFor(other!, runtimeConfig);
    (one.portMappings as { hostPort: number }[])[0]!.hostPort = 1;
    expect((two.portMappings as { hostPort: number }[])[0]!.hostPort).toBe(8080);
    expect(runtimeConfig.portMappings[0]!.hostPort).toBe(8080);
  });

  it('keeps keys Multus would drop, and drops empty values', () => {
    const [cluster] = planAttachments([delegate('a')], 'eth0');
    expect(capabilityArgsFor(cluster!, runtimeConfig)).toEqual({
      portMappings: [{ hostPort: 8080, containerPort: 80, protocol: 'tcp' }],
      bandwidth: { ingressRate: 1000 },
      'io.kubernetes.cri.pod-annotations': { a: 'b' },
    });
  });

  it("spells portMappings' and bandwidth's keys as the CNI conventions do, as Multus' round trip does", () => {
    // containerd (go-cni) sends Go's field names
    const fromContainerd = {
      portMappings: [{ HostPort: 12000, ContainerPort: 80, Protocol: 'tcp', HostIP: '', extra: 1 }],
      bandwidth: { IngressRate: 1000, egressburst: 5 },
    };
    const [cluster, other] = planAttachments([delegate('a'), delegate('b')], 'eth0');
    for (const a of [cluster!, other!]) {
      expect(capabilityArgsFor(a, fromContainerd)).toEqual({
        portMappings: [{ hostPort: 12000, containerPort: 80, protocol: 'tcp', hostIP: '', extra: 1 }],
        bandwidth: { ingressRate: 1000, egressBurst: 5 },
      });
    }
    expect(fromContainerd.portMappings[0]!.HostPort, 'the runtime config itself').toBe(12000);
  });

  it("replaces copied values with a non-cluster attachment's requests, and ignores requests on the cluster network", () => {
    const request = { mac: '02:00:00:00:00:01', ips: ['10.0.0.5/24'], bandwidth: { egressRate: 5 } };
    const [cluster, other] = planAttachments([delegate('a', request), delegate('b', request)], 'eth0');
    expect(capabilityArgsFor(cluster!, runtimeConfig).mac).toBeUndefined();
    expect(capabilityArgsFor(other!, runtimeConfig)).toMatchObject({
      mac: '02:00:00:00:00:01',
      ips: ['10.0.0.5/24'],
      bandwidth: { egressRate: 5 },
    });
  });
});

describe('delegateArgsFor', () => {
  const runtimePairs: [string, string][] = [
    ['IgnoreUnknown', '1'],
    ['K8S_POD_NAMESPACE', 'ns1'],
    ['FOO', 'bar'],
  ];

  it.each([
    [
      'ADD',
      'IgnoreUnknown=true;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=pod1;K8S_POD_INFRA_CONTAINER_ID=c1;K8S_POD_UID=u1;FOO=bar;MAC=02:00:00:00:00:01;IP=10.0.0.5/24,fd00::5/64',
    ],
    [
      'DEL',
      'IgnoreUnknown=true;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=pod1;K8S_POD_INFRA_CONTAINER_ID=c1;K8S_POD_UID=u1;FOO=bar',
    ],
  ])('%s: K8S keys first, runtime keys once, MAC/IP only on ADD', (command, expected) => {
    const [, other] = planAttachments(
      [delegate('a'), delegate('b', { mac: '02:00:00:00:00:01', ips: ['10.0.0.5/24', 'fd00::5/64'] })],
      'eth0',
    );
    const args = delegateArgsFor(other!, k8s, runtimePairs, command);
    expect(args.map(([k, v]) => `${k}=${v}`).join(';')).toBe(expected);
  });
});

describe('scratch cache records', () => {
  it('round-trip an attachment through toCachedDelegate/fromCachedDelegates', () => {
    const request = {
      ifname: 'data0',
      mac: '02:00:00:00:00:01',
      ips: ['10.0.0.5/24'],
      portMappings: [{ hostPort: 1, containerPort: 2 }],
    };
    const [attachment] = planAttachments([delegate('nad-a', request, 'ns1/nad-a')], 'eth0');
    const [back] = fromCachedDelegates([toCachedDelegate(attachment!)]);
    expect(back!.displayName).toBe('ns1/nad-a');
    expect(back!.request).toEqual(request);
    expect(back!.network.name).toBe('nad-a');
    expect(back!.network.bytes.equals(attachment!.network.bytes)).toBe(true);
  });
});

describe('undeclaredCapabilities', () => {
  it.each([
    ['nothing requested', {}, undefined, []],
    ['ips and mac without capabilities', { ips: ['10.0.0.1/24'], mac: '02:00:00:00:00:01' }, undefined, ['ips', 'mac']],
    ['ips declared, mac not', { ips: ['10.0.0.1/24'], mac: '02:00:00:00:00:01' }, { ips: true }, ['mac']],
    ['a capability declared false', { bandwidth: { ingressRate: 1 } }, { bandwidth: false }, ['bandwidth']],
    [
      'everything declared',
      { portMappings: [{ hostPort: 1 }], infinibandGUID: 'x' },
      { portMappings: true, infinibandGUID: true },
      [],
    ],
  ])('%s', (_t, request, capabilities, expected) => {
    const network = parseNetwork({
      cniVersion: '1.0.0',
      name: 'b',
      type: 'bridge',
      ...(capabilities ? { capabilities } : {}),
    });
    const [, other] = planAttachments(
      [delegate('a'), { network, displayName: 'ns/b', request, source: 'selection' }],
      'eth0',
    );
    expect(undeclaredCapabilities(other!)).toEqual(expected);
  });

  it('never applies to the cluster network (it ignores selection requests)', () => {
    const [cluster] = planAttachments([delegate('a', { mac: '02:00:00:00:00:01' })], 'eth0');
    expect(undeclaredCapabilities(cluster!)).toEqual([]);
  });
});
