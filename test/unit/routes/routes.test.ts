/**
 * Tests for src/routes.ts: default-route planning (families, requester, ECMP, gateway spelling) and the cache
 * rewrite on realistic libcni cached results of every layout (0.2.0 ip4/ip6, 0.3.1, 0.4.0, 1.0.0, 1.1.0).
 */
import { describe, expect, it } from 'vitest';
import type { RouteChange, RoutePlan, RouteRequester } from '../../../src/routes/routes.ts';
import {
  changesRoutes,
  defaultRouteFamily,
  gatewayFamily,
  planDefaultRoutes,
  rewriteCachedRoutes,
} from '../../../src/routes/routes.ts';
import { thrown } from '../../helpers/errors.ts';

const att = (ifName: string, defaultRoute?: string[]): RouteRequester => ({
  ifName,
  isClusterNetwork: ifName === 'eth0',
  request: defaultRoute === undefined ? {} : { defaultRoute },
});

const plan = (ifName: string, deleteV4: boolean, deleteV6: boolean, addGateways: string[] = []): RoutePlan => ({
  ifName,
  deleteV4,
  deleteV6,
  addGateways,
});

// ---------------------------------------------------------------------------------------------------------

describe('planDefaultRoutes', () => {
  it.each<[string, RouteRequester[], RoutePlan[] | undefined]>([
    ['no request: nothing to do', [att('eth0'), att('net1'), att('net2')], undefined],
    [
      'an empty list (Multus CheckGatewayConfig): every attachment loses its default routes of both families, none gains one',
      [att('eth0'), att('net1', []), att('net2')],
      [plan('eth0', true, true), plan('net1', true, true), plan('net2', true, true)],
    ],
    [
      'an empty list on the cluster network (default-network annotation): the same',
      [att('eth0', []), att('net1')],
      [plan('eth0', true, true), plan('net1', true, true)],
    ],
    ['no attachments', [], undefined],
    [
      'single IPv4 request: every attachment loses its IPv4 default, IPv6 untouched',
      [att('eth0'), att('net1', ['10.1.1.1']), att('net2')],
      [plan('eth0', true, false), plan('net1', true, false, ['10.1.1.1']), plan('net2', true, false)],
    ],
    [
      'single IPv6 request: only IPv6 defaults go',
      [att('eth0'), att('net1'), att('net2', ['fd00:20::1'])],
      [plan('eth0', false, true), plan('net1', false, true), plan('net2', false, true, ['fd00:20::1'])],
    ],
    [
      'dual-stack request on one attachment',
      [att('eth0'), att('net1', ['fd00:20::1', '10.20.0.1'])],
      [plan('eth0', true, true), plan('net1', true, true, ['fd00:20::1', '10.20.0.1'])],
    ],
    [
      'request on the cluster network: its route is replaced, the others lose theirs',
      [att('eth0', ['10.0.0.254']), att('net1')],
      [plan('eth0', true, false, ['10.0.0.254']), plan('net1', true, false)],
    ],
    [
      'families requested on two attachments (selection.ts forbids it; the planner still keeps them apart)',
      [att('eth0'), att('net1', ['10.1.1.1']), att('net2', ['fd00::1'])],
      [plan('eth0', true, true), plan('net1', true, true, ['10.1.1.1']), plan('net2', true, true, ['fd00::1'])],
    ],
    [
      'an IPv4-mapped IPv6 gateway is IPv4, written dotted (Go To4)',
      [att('eth0'), att('net1', ['::ffff:10.1.1.1'])],
      [plan('eth0', true, false), plan('net1', true, false, ['10.1.1.1'])],
    ],
  ])('%s', (_name, attachments, expected) => {
    expect(planDefaultRoutes(attachments)).toEqual(expected);
  });

  it.each<[string, RouteRequester[], string]>([
    [
      'two IPv4 gateways on one attachment',
      [att('eth0'), att('net1', ['10.1.1.1', '10.1.1.2'])],
      'multus does not support ECMP for default-route: IPv4 gateways 10.1.1.1 (net1), 10.1.1.2 (net1); give at most one IPv4 and one IPv6 gateway',
    ],
    [
      'two IPv6 gateways on two attachments',
      [att('eth0', ['fd00::1']), att('net1', ['fd01::1'])],
      'multus does not support ECMP for default-route: IPv6 gateways fd00::1 (eth0), fd01::1 (net1); give at most one IPv4 and one IPv6 gateway',
    ],
    [
      'a gateway that is not an address',
      [att('net1', ['10.1.1'])],
      'invalid default-route gateway "10.1.1": it must be an IPv4 or IPv6 address such as "10.1.1.1" or "fd00::1"',
    ],
    [
      'a gateway with a zone',
      [att('net1', ['fe80::1%eth0'])],
      'invalid default-route gateway "fe80::1%eth0": it must be an IPv4 or IPv6 address such as "10.1.1.1" or "fd00::1"',
    ],
  ])('rejects %s', (_name, attachments, msg) => {
    const err = thrown(() => planDefaultRoutes(attachments));
    expect([err.code, err.msg]).toEqual([7, msg]);
  });
});

describe('gatewayFamily', () => {
  it.each([
    ['10.1.1.1', 4, '10.1.1.1'],
    ['fd00::1', 6, 'fd00::1'],
    ['fe80::1', 6, 'fe80::1'],
    ['::ffff:192.168.1.1', 4, '192.168.1.1'],
    ['::ffff:c0a8:0101', 4, '192.168.1.1'],
    ['0:0:0:0:0:ffff:a01:101', 4, '10.1.1.1'],
  ])('%s is IPv%i written %s', (gw, family, text) => {
    expect(gatewayFamily(gw)).toEqual({ family, text });
  });
});

describe('defaultRouteFamily', () => {
  it.each<[string, 4 | 6 | undefined]>([
    ['0.0.0.0/0', 4],
    ['10.0.0.0/0', 4],
    ['::/0', 6],
    ['::0/0', 6],
    ['0:0::0/0', 6],
    ['0:0:0:0:0:0:0:0/0', 6],
    ['::ffff:0.0.0.0/0', 4],
    ['0.0.0.0/00', 4],
    ['0.0.0.0/1', undefined],
    ['::/1', undefined],
    ['10.0.0.0/8', undefined],
    ['fd00::/64', undefined],
    ['0.0.0.0', undefined],
    ['default', undefined],
    ['0/0', undefined],
    ['/0', undefined],
    ['0.0.0.0/-0', undefined],
  ])('%s → %s', (dst, family) => {
    expect(defaultRouteFamily(dst)).toBe(family);
  });
});

describe('changesRoutes', () => {
  it.each<[RouteChange, boolean]>([
    [{ deleteV4: false, deleteV6: false, addGateways: [] }, false],
    [{ deleteV4: true, deleteV6: false, addGateways: [] }, true],
    [{ deleteV4: false, deleteV6: true, addGateways: [] }, true],
    [{ deleteV4: false, deleteV6: false, addGateways: ['10.1.1.1'] }, true],
  ])('%j → %s', (change, expected) => {
    expect(changesRoutes(change)).toBe(expected);
  });
});

// ---------------------------------------------------------------------------------------------------------
// Cached results as libcni writes them for a bridge + host-local attachment, per layout.

const V4_DEFAULT = { dst: '0.0.0.0/0', gw: '10.10.0.1' };
const V6_DEFAULT = { dst: '::/0', gw: 'fd00:10::1' };
const V4_NET = { dst: '192.168.0.0/16', gw: '10.10.0.1' };
const V6_NET = { dst: 'fd00:99::/64', gw: 'fd00:10::1' };
const NO_DST = { gw: '10.10.0.254' };

const interfaces = [
  { name: 'cni0', mac: '6a:3e:11:22:33:44' },
  { name: 'veth1a2b3c4d', mac: 'ae:01:02:03:04:05' },
  { name: 'eth0', mac: '0a:58:0a:0a:00:02', sandbox: '/var/run/netns/cni-1234' },
];

function result031(routes?: unknown[]): Record<string, unknown> {
  return {
    cniVersion: '0.3.1',
    dns: {},
    interfaces,
    ips: [
      { version: '4', interface: 2, address: '10.10.0.2/24', gateway: '10.10.0.1' },
      { version: '6', interface: 2, address: 'fd00:10::2/64', gateway: 'fd00:10::1' },
    ],
    ...(routes === undefined ? {} : { routes }),
  };
}

function result040(routes?: unknown[]): Record<string, unknown> {
  return { ...result031(routes), cniVersion: '0.4.0' };
}

function result1x(version: '1.0.0' | '1.1.0', routes?: unknown[]): Record<string, unknown> {
  return {
    cniVersion: version,
    interfaces,
    ips: [
      { interface: 2, address: '10.10.0.2/24', gateway: '10.10.0.1' },
      { interface: 2, address: 'fd00:10::2/64', gateway: 'fd00:10::1' },
    ],
    ...(routes === undefined ? {} : { routes }),
  };
}

function result020(
  ip4routes?: unknown[] | null,
  ip6routes?: unknown[] | null,
  families: (4 | 6)[] = [4, 6],
): Record<string, unknown> {
  const out: Record<string, unknown> = { cniVersion: '0.2.0', dns: {} };
  if (families.includes(4))
    out.ip4 = { ip: '10.10.0.2/24', gateway: '10.10.0.1', ...(ip4routes === undefined ? {} : { routes: ip4routes }) };
  if (families.includes(6))
    out.ip6 = { ip: 'fd00:10::2/64', gateway: 'fd00:10::1', ...(ip6routes === undefined ? {} : { routes: ip6routes }) };
  return out;
}

const deleteV4: RouteChange = { deleteV4: true, deleteV6: false, addGateways: [] };
const deleteV6: RouteChange = { deleteV4: false, deleteV6: true, addGateways: [] };
const deleteBoth: RouteChange = { deleteV4: true, deleteV6: true, addGateways: [] };
const moveV4: RouteChange = { deleteV4: true, deleteV6: false, addGateways: ['10.20.0.1'] };
const moveBoth: RouteChange = { deleteV4: true, deleteV6: true, addGateways: ['10.20.0.1', 'fd00:20::1'] };
const nothing: RouteChange = { deleteV4: false, deleteV6: false, addGateways: [] };

const NEW_V4 = { dst: '0.0.0.0/0', gw: '10.20.0.1' };
const NEW_V6 = { dst: '::/0', gw: 'fd00:20::1' };

type Case = [string, Record<string, unknown>, RouteChange, Record<string, unknown>];

/** The same cases for every 0.3.0+ version: only the top-level `routes` differs between input and output. */
function topLevelCases(make: (routes?: unknown[]) => Record<string, unknown>): Case[] {
  return [
    [
      'delete v4 keeps v6 default and non-default routes',
      make([V4_DEFAULT, V4_NET, V6_DEFAULT, V6_NET]),
      deleteV4,
      make([V4_NET, V6_DEFAULT, V6_NET]),
    ],
    [
      'delete v6 keeps v4 routes',
      make([V4_DEFAULT, V4_NET, V6_DEFAULT, V6_NET]),
      deleteV6,
      make([V4_DEFAULT, V4_NET, V6_NET]),
    ],
    ['delete both', make([V4_DEFAULT, V4_NET, V6_DEFAULT, V6_NET]), deleteBoth, make([V4_NET, V6_NET])],
    [
      'delete every spelling of the v6 default',
      make([{ dst: '::0/0', gw: 'fd00:10::1' }, { dst: '0:0::0/0', gw: 'fd00:10::1' }, V6_DEFAULT, V6_NET]),
      deleteV6,
      make([V6_NET]),
    ],
    ['delete leaves routes without dst', make([NO_DST, V4_DEFAULT]), deleteBoth, make([NO_DST])],
    ['delete of the only routes drops the key', make([V4_DEFAULT, V6_DEFAULT]), deleteBoth, make()],
    ['delete without routes key changes nothing', make(), deleteBoth, make()],
    ['delete with nothing to delete leaves an empty list as it was', make([]), deleteV4, make([])],
    [
      'move v4 appends the new default after the kept routes',
      make([V4_DEFAULT, V4_NET, V6_DEFAULT]),
      moveV4,
      make([V4_NET, V6_DEFAULT, NEW_V4]),
    ],
    ['move both', make([V4_DEFAULT, V4_NET, V6_DEFAULT, V6_NET]), moveBoth, make([V4_NET, V6_NET, NEW_V4, NEW_V6])],
    ['move creates routes when absent', make(), moveBoth, make([NEW_V4, NEW_V6])],
    [
      'add only, without deleting',
      make([V4_NET]),
      { deleteV4: false, deleteV6: false, addGateways: ['fd00:20::1'] },
      make([V4_NET, NEW_V6]),
    ],
    ['no change', make([V4_DEFAULT]), nothing, make([V4_DEFAULT])],
  ];
}

const legacyCases: Case[] = [
  [
    'delete v4 from ip4.routes, ip6 untouched',
    result020([V4_DEFAULT, V4_NET], [V6_DEFAULT, V6_NET]),
    deleteV4,
    result020([V4_NET], [V6_DEFAULT, V6_NET]),
  ],
  [
    'delete v6 from ip6.routes',
    result020([V4_DEFAULT], [{ dst: '::0/0', gw: 'fd00:10::1' }, V6_NET]),
    deleteV6,
    result020([V4_DEFAULT], [V6_NET]),
  ],
  [
    'delete both, emptied lists dropped',
    result020([V4_DEFAULT], [V6_DEFAULT]),
    deleteBoth,
    result020(undefined, undefined),
  ],
  ['delete keeps routes without dst', result020([NO_DST, V4_DEFAULT], null), deleteV4, result020([NO_DST], null)],
  [
    'ip4 without routes, delete: unchanged',
    result020(undefined, undefined),
    deleteBoth,
    result020(undefined, undefined),
  ],
  ['ip4 with routes null, delete: unchanged', result020(null, null), deleteBoth, result020(null, null)],
  [
    'move both adds to ip4 and ip6',
    result020([V4_DEFAULT, V4_NET], [V6_DEFAULT]),
    moveBoth,
    result020([V4_NET, NEW_V4], [NEW_V6]),
  ],
  ['ip4 without routes gets a routes list', result020(undefined, undefined), moveV4, result020([NEW_V4], undefined)],
  [
    'ip4 only: the v6 gateway has nowhere to go',
    result020([V4_DEFAULT], undefined, [4]),
    moveBoth,
    result020([NEW_V4], undefined, [4]),
  ],
  [
    'ip6 only: the v4 gateway is skipped',
    result020(undefined, [V6_DEFAULT], [6]),
    moveBoth,
    result020(undefined, [NEW_V6], [6]),
  ],
  [
    'a stray v6 default in ip4.routes is deleted by the v6 pass',
    result020([V4_NET, V6_DEFAULT], undefined, [4]),
    deleteV6,
    result020([V4_NET], undefined, [4]),
  ],
  [
    '0.1.0 is legacy too',
    { cniVersion: '0.1.0', ip4: { ip: '10.10.0.2/24', routes: [V4_DEFAULT] } },
    moveV4,
    { cniVersion: '0.1.0', ip4: { ip: '10.10.0.2/24', routes: [NEW_V4] } },
  ],
  [
    'no cniVersion is legacy (compat)',
    { ip4: { ip: '10.10.0.2/24', routes: [V4_DEFAULT] }, routes: [V4_DEFAULT] },
    deleteV4,
    { ip4: { ip: '10.10.0.2/24' }, routes: [V4_DEFAULT] },
  ],
];

describe('rewriteCachedRoutes', () => {
  describe.each<[string, Case[]]>([
    ['0.2.0', legacyCases],
    ['0.3.0', topLevelCases((r) => ({ ...result031(r), cniVersion: '0.3.0' }))],
    ['0.3.1', topLevelCases(result031)],
    ['0.4.0', topLevelCases(result040)],
    ['1.0.0', topLevelCases((r) => result1x('1.0.0', r))],
    ['1.1.0', topLevelCases((r) => result1x('1.1.0', r))],
  ])('[%s]', (_version, cases) => {
    it.each(cases)('%s', (_name, input, change, expected) => {
      const snapshot = structuredClone(input);
      const out = rewriteCachedRoutes(input, change);
      expect(out).toStrictEqual(expected);
      expect(input).toStrictEqual(snapshot);
      expect(out).not.toBe(input);
    });
  });

  it('does not share route objects with the input', () => {
    const input = result1x('1.0.0', [V4_NET]);
    const out = rewriteCachedRoutes(input, moveV4);
    (out.routes as Record<string, unknown>[])[0]!.gw = 'changed';
    expect((input.routes as Record<string, unknown>[])[0]).toEqual(V4_NET);
  });

  it.each<[string, Record<string, unknown>, number, string]>([
    [
      'an unknown version',
      { cniVersion: '0.9.0', routes: [] },
      1,
      'unsupported CNI result version "0.9.0": supported versions are 0.1.0, 0.2.0, 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0',
    ],
    [
      'a numeric version',
      { cniVersion: 1, routes: [] },
      6,
      'cannot rewrite the default route of the cached result: "cniVersion" is 1, not a version string; the cache file is not a CNI result (remove it if its container is gone)',
    ],
    [
      'routes not a list',
      { cniVersion: '1.0.0', routes: {} },
      6,
      'cannot rewrite the default route of the cached result: "routes" is not a list of routes; the cache file is not a CNI result (remove it if its container is gone)',
    ],
    [
      'a route that is not an object',
      { cniVersion: '1.0.0', routes: [V4_NET, 'x'] },
      6,
      'cannot rewrite the default route of the cached result: "routes[1]" is not a route object; the cache file is not a CNI result (remove it if its container is gone)',
    ],
    [
      'a dst that is not a string',
      { cniVersion: '0.4.0', routes: [{ dst: 0 }] },
      6,
      'cannot rewrite the default route of the cached result: "routes[0].dst" is not a string; the cache file is not a CNI result (remove it if its container is gone)',
    ],
    [
      'ip4 not an object',
      { cniVersion: '0.2.0', ip4: [] },
      6,
      'cannot rewrite the default route of the cached result: "ip4" is not an IP configuration object; the cache file is not a CNI result (remove it if its container is gone)',
    ],
    [
      'legacy routes not a list',
      { cniVersion: '0.2.0', ip6: { routes: 'x' } },
      6,
      'cannot rewrite the default route of the cached result: "ip6.routes" is not a list of routes; the cache file is not a CNI result (remove it if its container is gone)',
    ],
    [
      'an invalid gateway',
      { cniVersion: '1.0.0' },
      7,
      'invalid default-route gateway "gw": it must be an IPv4 or IPv6 address such as "10.1.1.1" or "fd00::1"',
    ],
  ])('rejects %s', (name, input, code, msg) => {
    const change = name === 'an invalid gateway' ? { ...moveV4, addGateways: ['gw'] } : deleteBoth;
    const err = thrown(() => rewriteCachedRoutes(input, change));
    expect([err.code, err.msg]).toEqual([code, msg]);
  });

  it('leaves an unsupported version alone when nothing changes', () => {
    expect(rewriteCachedRoutes({ cniVersion: '0.9.0' }, nothing)).toStrictEqual({ cniVersion: '0.9.0' });
  });
});
