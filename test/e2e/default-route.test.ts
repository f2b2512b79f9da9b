/**
 * default-route end to end in a real network namespace, without CNI plugins: the pod's interfaces are two veth
 * pairs set up with `ip` (eth0 with the cluster network's IPv4/IPv6 default routes, net1 on a second subnet),
 * then a plan from `planDefaultRoutes` is applied with `applyRoutePlan` (nsenter + ip) and the kernel's routing
 * table is read back with `ip -j`. The libcni result caches of both attachments are rewritten in a temp cniDir
 * and compared with the routes the namespace really has.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ResultCacheEntry } from '../../src/cni/result-cache.ts';
import { decodeResultCache, writeResultCache } from '../../src/cni/result-cache.ts';
import { CniError } from '../../src/base/errors.ts';
import { applyRoutePlan, updateCachedDefaultRoutes } from '../../src/routes/netns-routes.ts';
import type { RoutePlan } from '../../src/routes/routes.ts';
import { planDefaultRoutes } from '../../src/routes/routes.ts';
import { isRoot, needs } from '../helpers/skip.ts';
import { deleteNetns, ip, netnsPath, randomSuffix, readRoutes, removeDir, runOk, tempDir } from './helpers.ts';

const ready = needs(isRoot());

/** `dst gateway dev` of every route in the main table of one family, in the kernel's order. */
async function routeLines(ns: string, family: '4' | '6'): Promise<string[]> {
  return (await readRoutes(ns, family))
    .filter((r) => !r.dst.startsWith('fe80:'))
    .map((r) => [r.dst, r.gateway ?? '-', r.dev ?? '-'].join(' '));
}

function planFor(defaultRoute: string[]): RoutePlan[] {
  const plan = planDefaultRoutes([
    { ifName: 'eth0', isClusterNetwork: true, request: {} },
    { ifName: 'net1', isClusterNetwork: false, request: { defaultRoute } },
  ]);
  if (plan === undefined) throw new Error('expected a plan');
  return plan;
}

describe.skipIf(!ready)('default-route in a real network namespace', () => {
  let ns = '';
  let nsPath = '';
  let cniDir: string | undefined;

  beforeEach(async () => {
    ns = `mts-dr-${randomSuffix(4)}`;
    nsPath = netnsPath(ns);
    await runOk('ip', ['netns', 'add', ns]);
    for (const [pod, peer, v4, v6] of [
      ['eth0', 'dr0p', '10.10.0.2/24', 'fd00:10::2/64'],
      ['net1', 'dr1p', '10.20.0.2/24', 'fd00:20::2/64'],
    ] as const) {
      await ip(ns, ['link', 'add', pod, 'type', 'veth', 'peer', 'name', peer]);
      await ip(ns, ['link', 'set', peer, 'up']);
      await ip(ns, ['link', 'set', pod, 'up']);
      await ip(ns, ['addr', 'add', v4, 'dev', pod]);
      await ip(ns, ['-6', 'addr', 'add', v6, 'dev', pod, 'nodad']);
    }
    await ip(ns, ['route', 'add', 'default', 'via', '10.10.0.1', 'dev', 'eth0']);
    await ip(ns, ['route', 'add', 'default', 'via', '10.10.0.1', 'dev', 'eth0', 'metric', '200']);
    await ip(ns, ['-6', 'route', 'add', 'default', 'via', 'fd00:10::1', 'dev', 'eth0']);
  });

  afterEach(async () => {
    await deleteNetns(ns);
    await removeDir(cniDir);
    cniDir = undefined;
  });

  it('starts with the default routes via eth0', async () => {
    expect(await routeLines(ns, '4')).toEqual([
      'default 10.10.0.1 eth0',
      'default 10.10.0.1 eth0',
      '10.10.0.0/24 - eth0',
      '10.20.0.0/24 - net1',
    ]);
    expect(await routeLines(ns, '6')).toEqual([
      'fd00:10::/64 - eth0',
      'fd00:20::/64 - net1',
      'default fd00:10::1 eth0',
    ]);
  });

  it('moves both default routes to net1 and rewrites both caches to match', async () => {
    const plan = planFor(['10.20.0.1', 'fd00:20::1']);
    await applyRoutePlan(nsPath, plan);
    expect(await routeLines(ns, '4')).toEqual(['default 10.20.0.1 net1', '10.10.0.0/24 - eth0', '10.20.0.0/24 - net1']);
    expect(await routeLines(ns, '6')).toEqual([
      'fd00:10::/64 - eth0',
      'fd00:20::/64 - net1',
      'default fd00:20::1 net1',
    ]);

    cniDir = await tempDir('mts-dr-cache-');
    const eth0 = cacheEntry('cluster', 'eth0', {
      cniVersion: '1.0.0',
      ips: [
        { address: '10.10.0.2/24', gateway: '10.10.0.1' },
        { address: 'fd00:10::2/64', gateway: 'fd00:10::1' },
      ],
      routes: [{ dst: '0.0.0.0/0', gw: '10.10.0.1' }, { dst: '::/0', gw: 'fd00:10::1' }, { dst: '10.96.0.0/12' }],
    });
    const net1 = cacheEntry('macvlan-conf', 'net1', {
      cniVersion: '0.3.1',
      ips: [
        { version: '4', address: '10.20.0.2/24' },
        { version: '6', address: 'fd00:20::2/64' },
      ],
    });
    writeResultCache(cniDir, eth0);
    writeResultCache(cniDir, net1);
    const attachments = [
      { ifName: 'eth0', networkName: 'cluster' },
      { ifName: 'net1', networkName: 'macvlan-conf' },
    ];
    expect(updateCachedDefaultRoutes(cniDir, eth0.containerId, attachments, plan).map((r) => r.outcome)).toEqual([
      'rewritten',
      'rewritten',
    ]);
    expect(cachedResult(cniDir, 'cluster-mts-dr-ctr-eth0')).toStrictEqual({
      ...eth0.result,
      routes: [{ dst: '10.96.0.0/12' }],
    });
    expect(cachedResult(cniDir, 'macvlan-conf-mts-dr-ctr-net1')).toStrictEqual({
      ...net1.result,
      routes: [
        { dst: '0.0.0.0/0', gw: '10.20.0.1' },
        { dst: '::/0', gw: 'fd00:20::1' },
      ],
    });
  });

  it('moves only the IPv4 default route for an IPv4 request, and is idempotent', async () => {
    const plan = planFor(['10.20.0.1']);
    await applyRoutePlan(nsPath, plan);
    await applyRoutePlan(nsPath, plan);
    expect(await routeLines(ns, '4')).toEqual(['default 10.20.0.1 net1', '10.10.0.0/24 - eth0', '10.20.0.0/24 - net1']);
    expect(await routeLines(ns, '6')).toEqual([
      'fd00:10::/64 - eth0',
      'fd00:20::/64 - net1',
      'default fd00:10::1 eth0',
    ]);
  });

  it("fails with the kernel's message when the gateway is not on net1's subnets", async () => {
    const err = await applyRoutePlan(nsPath, planFor(['10.99.0.1'])).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CniError);
    expect([(err as CniError).code, (err as CniError).msg.replace(/\/\S*\/(nsenter|ip) /g, '$1 ')]).toEqual([
      999,
      `cannot move the pod's default route: nsenter --net=${nsPath} -- ip -4 route replace default via 10.99.0.1 dev net1 exited 2: Error: Nexthop has invalid gateway.`,
    ]);
  });

  it('fails with code 8 for a namespace path that does not exist', async () => {
    const missing = netnsPath(`mts-dr-missing-${randomSuffix(4)}`);
    const err = await applyRoutePlan(missing, planFor(['10.20.0.1'])).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CniError);
    expect([(err as CniError).code, (err as CniError).msg.replace(/\/\S*\/(nsenter|ip) /g, '$1 ')]).toEqual([
      8,
      `cannot enter the pod's network namespace: nsenter --net=${missing} -- ip -4 route del default dev eth0 exited 1: nsenter: cannot open ${missing}: No such file or directory`,
    ]);
  });
});

function cacheEntry(networkName: string, ifName: string, result: Record<string, unknown>): ResultCacheEntry {
  return {
    kind: 'cniCacheV1',
    containerId: 'mts-dr-ctr',
    config: Buffer.from(JSON.stringify({ cniVersion: String(result.cniVersion), name: networkName, type: 'bridge' })),
    ifName,
    networkName,
    netns: '/var/run/netns/whatever',
    cniArgs: [],
    capabilityArgs: {},
    result,
  };
}

function cachedResult(cniDir: string, name: string): Record<string, unknown> {
  return decodeResultCache(readFileSync(join(cniDir, 'results', name))).result;
}
