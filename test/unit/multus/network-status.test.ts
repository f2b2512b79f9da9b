/**
 * network-status.test.ts: network-status entries from delegate results of every CNI version family, and the
 * annotation's exact text (docs/behaviour.md#network-status; nad-client CreateNetworkStatuses, SetNetworkStatus).
 * Entries are compared as JSON text, so key order counts.
 */
import { describe, expect, it } from 'vitest';
import type { NetworkStatus } from '../../../src/multus/network-status.ts';
import { buildNetworkStatuses as build, formatNetworkStatus } from '../../../src/multus/network-status.ts';
import type { CniResult } from '../../../src/cni/result-model.ts';
import { PluginResult } from '../../../src/cni/result.ts';

/** The entries of a result given as the plugin printed it (decoded once, as ADD does). */
const buildNetworkStatuses = (name: string, result: CniResult, isDefault: boolean, info?: Record<string, unknown>) =>
  build(name, PluginResult.of(result), isDefault, info);

const NS = '/var/run/netns/pod';
const PCI = { type: 'pci', version: '1.1.0', pci: { 'pci-address': '0000:03:00.1' } };

/** Order-sensitive: the JSON text of the entries. */
const text = (v: unknown): string => JSON.stringify(v);

describe('buildNetworkStatuses: one delegate result', () => {
  const legacy = (cniVersion: string): CniResult => ({
    cniVersion,
    ip4: {
      ip: '10.1.1.5/24',
      gateway: '10.1.1.1',
      routes: [
        { dst: '0.0.0.0/0', gw: '10.1.1.1' },
        { dst: '10.2.0.0/16', gw: '10.1.1.2' },
      ],
    },
    ip6: { ip: '2001:db8::5/64', gateway: '2001:db8::1', routes: [{ dst: '::/0', gw: '2001:db8::1' }] },
    dns: { nameservers: ['10.96.0.10'] },
  });
  const legacyEntry = {
    name: 'net',
    ips: ['10.1.1.5', '2001:db8::5'],
    default: true,
    dns: { nameservers: ['10.96.0.10'] },
    gateway: ['10.1.1.1', '2001:db8::1'],
  };

  it.each<[string, CniResult, boolean, NetworkStatus[]]>([
    ['0.1.0 ip4/ip6, no interfaces: one entry (fix)', legacy('0.1.0'), true, [legacyEntry]],
    ['0.2.0 ip4/ip6, no interfaces: one entry (fix)', legacy('0.2.0'), true, [legacyEntry]],
    [
      '0.2.0 for a non-cluster network: no default',
      legacy('0.2.0'),
      false,
      [
        {
          name: 'net',
          ips: ['10.1.1.5', '2001:db8::5'],
          dns: { nameservers: ['10.96.0.10'] },
          gateway: ['10.1.1.1', '2001:db8::1'],
        },
      ],
    ],
    [
      '0.3.1 bridge: host-side interfaces skipped, a default route without gw adds no gateway',
      {
        cniVersion: '0.3.1',
        interfaces: [
          { name: 'cni0', mac: 'aa:aa:aa:aa:aa:aa' },
          { name: 'veth1', mac: 'bb:bb:bb:bb:bb:bb' },
          { name: 'eth0', mac: '0a:58:0a:f4:01:05', sandbox: NS },
        ],
        ips: [{ version: '4', address: '10.244.1.5/24', gateway: '10.244.1.1', interface: 2 }],
        routes: [{ dst: '0.0.0.0/0' }],
      },
      true,
      [{ name: 'net', interface: 'eth0', ips: ['10.244.1.5'], mac: '0a:58:0a:f4:01:05', default: true, dns: {} }],
    ],
    [
      '0.4.0 single interface: mtu is not a 0.4.0 field, dns keys in Go order, non-default routes ignored',
      {
        cniVersion: '0.4.0',
        interfaces: [{ name: 'net1', mac: 'c2:b0:57:49:47:f1', sandbox: NS, mtu: 9000 }],
        ips: [{ version: '4', address: '192.168.1.5/24', interface: 0 }],
        routes: [{ dst: '10.0.0.0/8', gw: '192.168.1.1' }],
        dns: { options: ['ndots:5'], search: ['a.svc', 'svc'], domain: 'example.com', nameservers: ['1.1.1.1'] },
      },
      false,
      [
        {
          name: 'net',
          interface: 'net1',
          ips: ['192.168.1.5'],
          mac: 'c2:b0:57:49:47:f1',
          dns: { nameservers: ['1.1.1.1'], domain: 'example.com', search: ['a.svc', 'svc'], options: ['ndots:5'] },
        },
      ],
    ],
    [
      '1.0.0 single interface with mtu',
      {
        cniVersion: '1.0.0',
        interfaces: [{ name: 'eth0', mac: '0a:58:0a:f4:01:05', mtu: 1400, sandbox: NS }],
        ips: [{ address: '10.244.1.5/24', gateway: '10.244.1.1', interface: 0 }],
        routes: [{ dst: '0.0.0.0/0', gw: '10.244.1.1' }],
      },
      true,
      [
        {
          name: 'net',
          interface: 'eth0',
          ips: ['10.244.1.5'],
          mac: '0a:58:0a:f4:01:05',
          mtu: 1400,
          default: true,
          dns: {},
          gateway: ['10.244.1.1'],
        },
      ],
    ],
    [
      '1.1.0 dual stack with an IPv6 default route',
      {
        cniVersion: '1.1.0',
        interfaces: [{ name: 'net1', mac: 'c2:b0:57:49:47:f1', mtu: 1500, sandbox: NS }],
        ips: [
          { address: '10.10.0.5/16', gateway: '10.10.0.1', interface: 0 },
          { address: 'fd00::5/64', interface: 0 },
        ],
        routes: [
          { dst: '0.0.0.0/0', gw: '10.10.0.1' },
          { dst: '::/0', gw: 'fd00::1' },
        ],
      },
      false,
      [
        {
          name: 'net',
          interface: 'net1',
          ips: ['10.10.0.5', 'fd00::5'],
          mac: 'c2:b0:57:49:47:f1',
          mtu: 1500,
          dns: {},
          gateway: ['10.10.0.1', 'fd00::1'],
        },
      ],
    ],
    [
      '1.1.0 addresses and gateways spelled as Go prints them; default routes by destination address',
      {
        cniVersion: '1.1.0',
        interfaces: [{ name: 'net1', sandbox: NS }],
        ips: [
          { address: '2001:DB8:0:0::5/64', interface: 0 },
          { address: '::ffff:10.1.1.5/120', interface: 0 },
        ],
        routes: [
          { dst: '::0/0', gw: '2001:DB8::1' },
          { dst: '0.0.0.0/8', gw: '10.0.0.1' },
          { dst: '10.0.0.0/0', gw: '10.0.0.2' },
          { dst: '::/0' },
          { dst: '::1/128', gw: 'fe80::2' },
        ],
      },
      false,
      [
        {
          name: 'net',
          interface: 'net1',
          ips: ['2001:db8::5', '10.1.1.5'],
          dns: {},
          gateway: ['2001:db8::1', '10.0.0.1'],
        },
      ],
    ],
    [
      '1.0.0 single host-side interface: one entry without interface or mac',
      {
        cniVersion: '1.0.0',
        interfaces: [{ name: 'host0', mac: 'aa:aa:aa:aa:aa:aa' }],
        ips: [{ address: '10.3.0.5/24', interface: 0 }],
      },
      true,
      [{ name: 'net', ips: ['10.3.0.5'], default: true, dns: {} }],
    ],
    [
      '1.0.0 single interface: IPs without an index count too',
      {
        cniVersion: '1.0.0',
        interfaces: [{ name: 'net1', sandbox: NS }],
        ips: [{ address: '10.3.0.5/24' }, { address: '10.4.0.5/24', interface: 0 }],
      },
      false,
      [{ name: 'net', interface: 'net1', ips: ['10.3.0.5', '10.4.0.5'], dns: {} }],
    ],
    [
      '1.0.0 IPs but no interfaces (IPAM-only): one entry (fix)',
      {
        cniVersion: '1.0.0',
        ips: [{ address: '10.5.0.5/24', gateway: '10.5.0.1' }],
        routes: [{ dst: '0.0.0.0/0', gw: '10.5.0.1' }],
        dns: { nameservers: ['10.5.0.2'] },
      },
      true,
      [{ name: 'net', ips: ['10.5.0.5'], default: true, dns: { nameservers: ['10.5.0.2'] }, gateway: ['10.5.0.1'] }],
    ],
    ['1.0.0 nothing at all: no entry', { cniVersion: '1.0.0' }, true, []],
    [
      '1.1.0 only host-side interfaces: no entry',
      {
        cniVersion: '1.1.0',
        interfaces: [{ name: 'h1' }, { name: 'h2' }],
        ips: [{ address: '10.6.0.5/24', interface: 0 }],
      },
      true,
      [],
    ],
  ])('%s', (_title, result, isDefault, expected) => {
    expect(text(buildNetworkStatuses('net', result, isDefault))).toBe(text(expected));
  });

  it('does not change the result it is given', () => {
    const result: CniResult = {
      cniVersion: '1.1.0',
      interfaces: [{ name: 'net1', sandbox: NS }],
      ips: [{ address: '10.0.0.5/24', interface: 0 }],
    };
    const before = structuredClone(result);
    buildNetworkStatuses('net', result, true);
    expect(result).toEqual(before);
  });
});

describe('buildNetworkStatuses: several interfaces', () => {
  const multi = (ips: unknown[], routes: unknown[] = []): CniResult => ({
    cniVersion: '1.1.0',
    interfaces: [
      { name: 'br0', mac: 'aa:aa:aa:aa:aa:aa' },
      { name: 'net1', mac: 'c2:00:00:00:00:01', sandbox: NS },
      { name: 'net2', mac: 'c2:00:00:00:00:02', mtu: 9000, sandbox: NS },
    ],
    ips,
    routes,
  });
  const net1 = (more: Partial<NetworkStatus>): NetworkStatus =>
    ({ name: 'ns/sriov', interface: 'net1', ...more, mac: 'c2:00:00:00:00:01', dns: {} }) as NetworkStatus;
  const net2 = { name: 'ns/sriov', interface: 'net2' };
  const mixedIps = [
    { address: '10.0.0.1/24', interface: 0 },
    { address: '10.1.0.5/24', interface: 1 },
    { address: '10.2.0.5/24', gateway: '10.2.0.1', interface: 2 },
    { address: 'fd00::5/64' },
    { address: '10.9.0.5/24', interface: 7 },
  ];
  const routes = [
    { dst: '0.0.0.0/0', gw: '10.2.0.1' },
    { dst: '::/0', gw: 'fe80::1' },
  ];

  it.each<[string, CniResult, boolean, unknown[]]>([
    [
      'IPs by index (host-side and unknown indexes dropped, no index → last); default on the gateway interface',
      multi(mixedIps, routes),
      true,
      [
        { ...net1({ ips: ['10.1.0.5'] }), gateway: ['10.2.0.1', 'fe80::1'] },
        {
          ...net2,
          ips: ['10.2.0.5', 'fd00::5'],
          mac: 'c2:00:00:00:00:02',
          mtu: 9000,
          default: true,
          dns: {},
          gateway: ['10.2.0.1', 'fe80::1'],
        },
      ],
    ],
    [
      'a non-cluster network: no default',
      multi(mixedIps),
      false,
      [
        net1({ ips: ['10.1.0.5'] }),
        { ...net2, ips: ['10.2.0.5', 'fd00::5'], mac: 'c2:00:00:00:00:02', mtu: 9000, dns: {} },
      ],
    ],
    [
      'no gateway: default on the first sandbox interface; an interface without IPs has no ips',
      multi([{ address: '10.2.0.5/24', interface: 2 }]),
      true,
      [net1({ default: true }), { ...net2, ips: ['10.2.0.5'], mac: 'c2:00:00:00:00:02', mtu: 9000, dns: {} }],
    ],
    [
      'a gateway IP without an index does not pick the default',
      multi([
        { address: '10.1.0.5/24', gateway: '10.1.0.1' },
        { address: '10.2.0.5/24', gateway: '10.2.0.1', interface: 2 },
      ]),
      true,
      [
        net1({}),
        { ...net2, ips: ['10.1.0.5', '10.2.0.5'], mac: 'c2:00:00:00:00:02', mtu: 9000, default: true, dns: {} },
      ],
    ],
    [
      'a gateway on a host-side interface: default on the first sandbox interface (fix)',
      multi([
        { address: '10.0.0.1/24', gateway: '10.0.0.254', interface: 0 },
        { address: '10.1.0.5/24', interface: 1 },
      ]),
      true,
      [net1({ ips: ['10.1.0.5'], default: true }), { ...net2, mac: 'c2:00:00:00:00:02', mtu: 9000, dns: {} }],
    ],
  ])('%s', (_title, result, isDefault, expected) => {
    const statuses = buildNetworkStatuses('ns/sriov', result, isDefault);
    expect(text(statuses)).toBe(text(expected.map((e) => reorder(e as NetworkStatus))));
  });

  it.each<[string, CniResult]>([
    [
      'one interface',
      {
        cniVersion: '1.0.0',
        interfaces: [{ name: 'net1', sandbox: NS }],
        routes: [{ dst: '0.0.0.0/0', gw: '10.0.0.1' }],
      },
    ],
    ['several interfaces', multi([], [{ dst: '0.0.0.0/0', gw: '10.0.0.1' }])],
  ])('puts device-info after dns in every entry: %s', (_title, result) => {
    const statuses = buildNetworkStatuses('ns/sriov', result, false, PCI);
    expect(statuses.length).toBeGreaterThan(0);
    for (const s of statuses) {
      expect(Object.keys(s).slice(-3)).toEqual(['dns', 'device-info', 'gateway']);
      expect(s['device-info']).toEqual(PCI);
    }
  });
});

/** Test-side key order of nad-client's NetworkStatus, to write expectations in any order. */
function reorder(s: NetworkStatus): NetworkStatus {
  const keys = ['name', 'interface', 'ips', 'mac', 'mtu', 'default', 'dns', 'device-info', 'gateway'] as const;
  return Object.fromEntries(keys.filter((k) => s[k] !== undefined).map((k) => [k, s[k]])) as unknown as NetworkStatus;
}

describe('formatNetworkStatus', () => {
  it('prints a two-network pod exactly as Multus does', () => {
    const cluster: CniResult = {
      cniVersion: '1.0.0',
      interfaces: [{ name: 'eth0', mac: '0a:58:0a:f4:01:05', mtu: 1400, sandbox: NS }],
      ips: [{ address: '10.244.1.5/24', gateway: '10.244.1.1', interface: 0 }],
      routes: [{ dst: '0.0.0.0/0', gw: '10.244.1.1' }],
    };
    const macvlan: CniResult = {
      cniVersion: '0.3.1',
      interfaces: [{ name: 'net1', mac: 'c2:b0:57:49:47:f1', sandbox: NS }],
      ips: [{ version: '4', address: '10.10.0.5/16', interface: 0 }],
      dns: {},
    };
    const statuses = [
      ...buildNetworkStatuses('ovn-kubernetes', cluster, true),
      ...buildNetworkStatuses('ns1/macvlan-conf', macvlan, false),
    ];
    expect(formatNetworkStatus(statuses)).toBe(`[{
    "name": "ovn-kubernetes",
    "interface": "eth0",
    "ips": [
        "10.244.1.5"
    ],
    "mac": "0a:58:0a:f4:01:05",
    "mtu": 1400,
    "default": true,
    "dns": {},
    "gateway": [
        "10.244.1.1"
    ]
},{
    "name": "ns1/macvlan-conf",
    "interface": "net1",
    "ips": [
        "10.10.0.5"
    ],
    "mac": "c2:b0:57:49:47:f1",
    "dns": {}
}]`);
  });

  it.each<[string, NetworkStatus[], string]>([
    ['no entries', [], '[]'],
    [
      'Go key order and omitempty, whatever the input',
      [
        {
          gateway: [],
          'device-info': PCI,
          dns: { options: [], search: ['svc'], domain: '', nameservers: ['10.96.0.10'] },
          default: false,
          mtu: 0,
          mac: '',
          ips: [],
          interface: '',
          name: 'n',
        },
      ],
      `[{
    "name": "n",
    "dns": {
        "nameservers": [
            "10.96.0.10"
        ],
        "search": [
            "svc"
        ]
    },
    "device-info": {
        "type": "pci",
        "version": "1.1.0",
        "pci": {
            "pci-address": "0000:03:00.1"
        }
    }
}]`,
    ],
    [
      "Go's HTML and line-terminator escapes",
      [{ name: 'ns/a<b>&c\u2028\u2029', dns: { domain: 'x&y' } }],
      '[{\n    "name": "ns/a\\u003cb\\u003e\\u0026c\\u2028\\u2029",\n    "dns": {\n        "domain": "x\\u0026y"\n    }\n}]',
    ],
    [
      'three entries joined by "," only',
      [
        { name: 'a', dns: {} },
        { name: 'b', default: true, dns: {} },
        { name: 'c', mtu: 9000, dns: {} },
      ],
      '[{\n    "name": "a",\n    "dns": {}\n},{\n    "name": "b",\n    "default": true,\n    "dns": {}\n},{\n    "name": "c",\n    "mtu": 9000,\n    "dns": {}\n}]',
    ],
  ])('%s', (_title, statuses, expected) => {
    expect(formatNetworkStatus(statuses)).toBe(expected);
  });

  it('round-trips as JSON to the entries', () => {
    const statuses = buildNetworkStatuses(
      'ns/x',
      {
        cniVersion: '1.1.0',
        interfaces: [{ name: 'net1', sandbox: NS }],
        ips: [{ address: '10.0.0.5/24', interface: 0 }],
      },
      true,
      PCI,
    );
    expect(JSON.parse(formatNetworkStatus(statuses))).toEqual(statuses);
  });
});
