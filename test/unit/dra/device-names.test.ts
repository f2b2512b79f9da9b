/**
 * dra/device-names.ts: a per-NAD device's name is a DNS label of at most 63 characters, readable, stable, and
 * different for NADs whose parts only differ in where a dash falls.
 */
import { describe, expect, it } from 'vitest';
import * as names from '../../../src/dra/device-names.ts';
import { networkDeviceName } from '../../../src/dra/device-names.ts';

const LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

describe('networkDeviceName', () => {
  it('is the NAD’s name and namespace with a hash, the same each time', () => {
    const n = networkDeviceName('team', 'macvlan-conf');
    expect(n).toMatch(/^macvlan-conf-team-[0-9a-f]{10}$/);
    expect(networkDeviceName('team', 'macvlan-conf')).toBe(n);
  });

  it('never joins two NADs whose dashes fall elsewhere', () => {
    expect(networkDeviceName('a-b', 'c')).not.toBe(networkDeviceName('a', 'b-c'));
    expect(networkDeviceName('a', 'b.c')).not.toBe(networkDeviceName('a', 'b-c'));
  });

  it.each([
    ['team', 'x'.repeat(253)],
    ['n'.repeat(63), 'net.with.dots'],
    ['team', '9lives'],
  ])('is a DNS label of at most 63 characters: %s/%s', (ns, name) => {
    const n = networkDeviceName(ns, name);
    expect(n.length).toBeLessThanOrEqual(63);
    expect(n).toMatch(LABEL);
  });

  it('is never the device "any"', () => {
    expect(networkDeviceName('', '')).toMatch(/^n-[0-9a-f]{10}$/);
  });
});

describe('the published names (fixed: DeviceClasses and CEL selectors of users name them)', () => {
  it('are the documented ones', () => {
    expect([
      names.ANY_NETWORK_DEVICE,
      names.DRA_KIND_ATTRIBUTE,
      names.DRA_NAMESPACE_ATTRIBUTE,
      names.DRA_NAME_ATTRIBUTE,
      names.DRA_CNI_TYPE_ATTRIBUTE,
      names.DRA_CAPACITY_NAME,
      names.DRA_DEVICE_ANNOTATION,
      names.DRA_CAPACITY_ANNOTATION,
    ]).toEqual([
      'any',
      'dra.multus.k8s.cni.cncf.io/kind',
      'dra.multus.k8s.cni.cncf.io/namespace',
      'dra.multus.k8s.cni.cncf.io/name',
      'dra.multus.k8s.cni.cncf.io/cniType',
      'dra.multus.k8s.cni.cncf.io/attachments',
      'dra.multus.k8s.cni.cncf.io/device',
      'dra.multus.k8s.cni.cncf.io/capacity',
    ]);
  });
});
