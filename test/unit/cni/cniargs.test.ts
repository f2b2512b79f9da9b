/**
 * cniargs.ts: strict pair parsing (libcni LoadArgs), the typed K8S_* keys and the unknown-key rule, and the
 * delegate CNI_ARGS without Multus' duplicated keys.
 */
import { describe, expect, it } from 'vitest';
import { CniError } from '../../../src/base/errors.ts';
import type { ArgPairs, K8sArgs } from '../../../src/cni/cniargs.ts';
import { buildDelegateArgs, formatCniArgs, parseCniArgs, parseK8sArgs, podRef } from '../../../src/cni/cniargs.ts';

function thrown(fn: () => unknown): CniError {
  try {
    fn();
  } catch (err) {
    if (err instanceof CniError) return err;
    throw err;
  }
  throw new Error('expected a CniError, nothing was thrown');
}

const EMPTY: K8sArgs = {
  ignoreUnknown: false,
  podNamespace: '',
  podName: '',
  podInfraContainerId: '',
  podUid: '',
  ip: '',
};
const KUBELET = 'IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_INFRA_CONTAINER_ID=c;K8S_POD_UID=u';
const POD: K8sArgs = {
  ignoreUnknown: true,
  podNamespace: 'ns',
  podName: 'p',
  podInfraContainerId: 'c',
  podUid: 'u',
  ip: '',
};

describe('parseCniArgs', () => {
  it.each([
    ['', []],
    ['A=b', [['A', 'b']]],
    ['A=', [['A', '']]],
    ['=v', [['', 'v']]],
    [
      'A=1;b=2;A=3',
      [
        ['A', '1'],
        ['b', '2'],
        ['A', '3'],
      ],
    ],
    ['k8s_pod_name=x', [['k8s_pod_name', 'x']]],
  ])('%j → %j', (s, pairs) => {
    expect(parseCniArgs(s)).toEqual(pairs);
  });

  it.each([
    ['A', 'A'],
    ['A=b=c', 'A=b=c'],
    ['A=b;', ''],
    [';A=b', ''],
    ['A=b;;C=d', ''],
    ['A=b;C', 'C'],
  ])('%j → code 4 naming pair %j', (s, pair) => {
    const err = thrown(() => parseCniArgs(s));
    expect([err.code, err.msg]).toEqual([
      4,
      `CNI_ARGS: invalid pair ${JSON.stringify(pair)}: want KEY=VALUE with exactly one "="`,
    ]);
  });
});

describe('parseK8sArgs', () => {
  it.each([
    ['', EMPTY],
    [KUBELET, POD],
    ['K8S_POD_NAME=a;K8S_POD_NAME=b', { ...EMPTY, podName: 'b' }],
    ['IgnoreUnknown=TRUE', { ...EMPTY, ignoreUnknown: true }],
    ['IgnoreUnknown=true;IgnoreUnknown=0', EMPTY],
    ['IgnoreUnknown=False', EMPTY],
    ['IP=10.1.2.3', { ...EMPTY, ip: '10.1.2.3' }],
    ['IP=fd00::1', { ...EMPTY, ip: 'fd00::1' }],
    ['IP=', EMPTY],
    ['FOO=bar;IgnoreUnknown=1', { ...EMPTY, ignoreUnknown: true }],
    ['IgnoreUnknown=1;MAC=x;K8S_POD_UID=u', { ...EMPTY, ignoreUnknown: true, podUid: 'u' }],
  ])('%j → %j', (s, k8s) => {
    expect(parseK8sArgs(parseCniArgs(s))).toEqual(k8s);
  });

  it.each([
    ['FOO=bar', 'CNI_ARGS: unknown args ["FOO=bar"]; add IgnoreUnknown=1 to accept them'],
    ['A=1;K8S_POD_NAME=p;b=', 'CNI_ARGS: unknown args ["A=1", "b="]; add IgnoreUnknown=1 to accept them'],
    ['IgnoreUnknown=1;X=y;IgnoreUnknown=0', 'CNI_ARGS: unknown args ["X=y"]; add IgnoreUnknown=1 to accept them'],
    ['ignoreunknown=1', 'CNI_ARGS: unknown args ["ignoreunknown=1"]; add IgnoreUnknown=1 to accept them'],
    ['IgnoreUnknown=yes', 'CNI_ARGS: invalid value in pair "IgnoreUnknown=yes": want 1, true, 0 or false'],
    ['X=y;IgnoreUnknown=', 'CNI_ARGS: invalid value in pair "IgnoreUnknown=": want 1, true, 0 or false'],
    ['IP=10.1.2', 'CNI_ARGS: invalid value in pair "IP=10.1.2": want an IPv4 or IPv6 address'],
    ['IP=10.0.0.1/24', 'CNI_ARGS: invalid value in pair "IP=10.0.0.1/24": want an IPv4 or IPv6 address'],
    ['IP=fe80::1%eth0', 'CNI_ARGS: invalid value in pair "IP=fe80::1%eth0": want an IPv4 or IPv6 address'],
    ['IgnoreUnknown=1;IP=x', 'CNI_ARGS: invalid value in pair "IP=x": want an IPv4 or IPv6 address'],
  ])('%j → code 4 %s', (s, msg) => {
    const err = thrown(() => parseK8sArgs(parseCniArgs(s)));
    expect([err.code, err.msg]).toEqual([4, msg]);
  });
});

describe('buildDelegateArgs', () => {
  const BASE = 'IgnoreUnknown=true;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_INFRA_CONTAINER_ID=c;K8S_POD_UID=u';

  it.each<[string, K8sArgs, string, ArgPairs, string]>([
    ['no runtime args', POD, '', [], BASE],
    ['kubelet args: no duplicates (Multus would repeat all five)', POD, KUBELET, [], BASE],
    [
      'empty pod fields',
      EMPTY,
      '',
      [],
      'IgnoreUnknown=true;K8S_POD_NAMESPACE=;K8S_POD_NAME=;K8S_POD_INFRA_CONTAINER_ID=;K8S_POD_UID=',
    ],
    [
      'runtime fills an empty key in place',
      { ...POD, podUid: '' },
      'K8S_POD_UID=u2;K8S_POD_UID=u3',
      [],
      'IgnoreUnknown=true;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_INFRA_CONTAINER_ID=c;K8S_POD_UID=u2',
    ],
    ['an empty runtime value does not clear a filled key', POD, 'K8S_POD_NAME=', [], BASE],
    ['unknown runtime keys appended in order', POD, `${KUBELET};Z=1;A=2;Z=3`, [], `${BASE};Z=1;A=2`],
    [
      'extra appended',
      POD,
      KUBELET,
      [
        ['MAC', '02:00:00:00:00:01'],
        ['IP', '10.0.0.5/24'],
      ],
      `${BASE};MAC=02:00:00:00:00:01;IP=10.0.0.5/24`,
    ],
    [
      'extra replaces a runtime key in place',
      POD,
      `${KUBELET};IP=10.0.0.9;X=1`,
      [['IP', '10.0.0.5/24']],
      `${BASE};IP=10.0.0.5/24;X=1`,
    ],
    ['extra replaces a base key', POD, '', [['K8S_POD_NAME', 'q']], BASE.replace('K8S_POD_NAME=p', 'K8S_POD_NAME=q')],
  ])('%s', (_name, k8s, runtime, extra, expected) => {
    expect(formatCniArgs(buildDelegateArgs(k8s, parseCniArgs(runtime), extra))).toBe(expected);
  });

  it('never mutates its inputs', () => {
    const k8s = { ...POD, podUid: '' };
    const runtime: ArgPairs = [
      ['K8S_POD_UID', 'u'],
      ['IP', '10.0.0.9'],
    ];
    const extra: ArgPairs = [['IP', '10.0.0.5']];
    const snapshot = structuredClone([k8s, runtime, extra]);
    const out = buildDelegateArgs(k8s, runtime, extra);
    for (const pair of out) pair[1] = 'changed';
    expect([k8s, runtime, extra]).toEqual(snapshot);
  });
});

describe('formatCniArgs and podRef', () => {
  it.each<[ArgPairs, string]>([
    [[], ''],
    [[['A', 'b']], 'A=b'],
    [
      [
        ['A', ''],
        ['B', 'c'],
      ],
      'A=;B=c',
    ],
  ])('%j → %j', (pairs, s) => {
    expect(formatCniArgs(pairs)).toBe(s);
  });

  it('round-trips through parseCniArgs', () => {
    expect(formatCniArgs(parseCniArgs(KUBELET))).toBe(KUBELET);
  });

  it.each([
    [POD, 'ns/p/u'],
    [EMPTY, '//'],
  ])('podRef %j → %s', (k8s, ref) => {
    expect(podRef(k8s)).toBe(ref);
  });
});
