/**
 * Tests for src/netns-routes.ts without root: `applyRoutePlan` against a hand-written fake runner (exact
 * command lines, order, what counts as "nothing to delete", error codes and messages), and
 * `updateCachedDefaultRoutes` on cache files in a fresh temp directory.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ResultCacheEntry } from '../../../src/cni/result-cache.ts';
import { encodeResultCache, writeResultCache } from '../../../src/cni/result-cache.ts';
import { CniError } from '../../../src/base/errors.ts';
import type { CommandOutput } from '../../../src/routes/nsenter.ts';
import { findRouteTools } from '../../../src/routes/nsenter.ts';
import { applyRoutePlan, updateCachedDefaultRoutes } from '../../../src/routes/netns-routes.ts';
import type { RoutePlan } from '../../../src/routes/routes.ts';

const TOOLS = { nsenter: '/usr/bin/nsenter', ip: '/sbin/ip' };
const NETNS = '/var/run/netns/cni-1234';

const ok: CommandOutput = { exitCode: 0, signal: null, stdout: '', stderr: '' };
const esrch: CommandOutput = { exitCode: 2, signal: null, stdout: '', stderr: 'RTNETLINK answers: No such process\n' };
const noDevice: CommandOutput = { exitCode: 1, signal: null, stdout: '', stderr: 'Cannot find device "net9"\n' };

/** A fake runner: records `ip` argument lines and answers from a script keyed by them (default: ok once, then ESRCH). */
class FakeRunner {
  readonly received: string[] = [];
  readonly returns = new Map<string, CommandOutput[]>();
  readonly files: string[] = [];

  readonly run = async (file: string, args: readonly string[]): Promise<CommandOutput> => {
    this.files.push(`${file} ${args.slice(0, 3).join(' ')}`);
    const line = args.slice(3).join(' ');
    this.received.push(line);
    const script = this.returns.get(line);
    if (script !== undefined) return script.shift() ?? esrch;
    const seen = this.received.filter((l) => l === line).length;
    return line.includes(' del ') && seen > 1 ? esrch : ok;
  };
}

const p = (ifName: string, deleteV4: boolean, deleteV6: boolean, addGateways: string[] = []): RoutePlan => ({
  ifName,
  deleteV4,
  deleteV6,
  addGateways,
});

async function rejected(promise: Promise<unknown>): Promise<CniError> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(CniError);
    return err as CniError;
  }
  throw new Error('expected a CniError, nothing was thrown');
}

describe('applyRoutePlan', () => {
  it('runs ip through nsenter with the netns path, every delete (until ESRCH) before any add', async () => {
    const fake = new FakeRunner();
    await applyRoutePlan(NETNS, [p('eth0', true, true), p('net1', true, true, ['10.20.0.1', 'fd00:20::1'])], {
      run: fake.run,
      tools: TOOLS,
    });
    expect(fake.received).toEqual([
      '-4 route del default dev eth0',
      '-4 route del default dev eth0',
      '-6 route del default dev eth0',
      '-6 route del default dev eth0',
      '-4 route del default dev net1',
      '-4 route del default dev net1',
      '-6 route del default dev net1',
      '-6 route del default dev net1',
      '-4 route replace default via 10.20.0.1 dev net1',
      '-6 route replace default via fd00:20::1 dev net1',
    ]);
    expect(new Set(fake.files)).toEqual(new Set(['/usr/bin/nsenter --net=/var/run/netns/cni-1234 -- /sbin/ip']));
  });

  it('runs the adds after the deletes of later entries too', async () => {
    const fake = new FakeRunner();
    await applyRoutePlan(NETNS, [p('eth0', true, false, ['10.10.0.254']), p('net1', true, false)], {
      run: fake.run,
      tools: TOOLS,
    });
    expect(fake.received).toEqual([
      '-4 route del default dev eth0',
      '-4 route del default dev eth0',
      '-4 route del default dev net1',
      '-4 route del default dev net1',
      '-4 route replace default via 10.10.0.254 dev eth0',
    ]);
  });

  it('touches only the flagged families, and nothing for an empty entry', async () => {
    const fake = new FakeRunner();
    await applyRoutePlan(
      NETNS,
      [p('eth0', true, false), p('net1', false, false), p('net2', true, false, ['::ffff:10.1.1.1'])],
      { run: fake.run, tools: TOOLS },
    );
    expect(fake.received).toEqual([
      '-4 route del default dev eth0',
      '-4 route del default dev eth0',
      '-4 route del default dev net2',
      '-4 route del default dev net2',
      '-4 route replace default via 10.1.1.1 dev net2',
    ]);
  });

  it('deletes every default route of a link, and treats a missing link as nothing to delete', async () => {
    const fake = new FakeRunner();
    fake.returns.set('-4 route del default dev eth0', [ok, ok, ok, esrch]);
    fake.returns.set('-4 route del default dev net9', [noDevice]);
    await applyRoutePlan(NETNS, [p('eth0', true, false), p('net9', true, false)], { run: fake.run, tools: TOOLS });
    expect(fake.received).toEqual([
      '-4 route del default dev eth0',
      '-4 route del default dev eth0',
      '-4 route del default dev eth0',
      '-4 route del default dev eth0',
      '-4 route del default dev net9',
    ]);
  });

  it('gives up on a link whose default routes never run out', async () => {
    const fake = new FakeRunner();
    fake.returns.set('-6 route del default dev eth0', new Array<CommandOutput>(40).fill(ok));
    const err = await rejected(applyRoutePlan(NETNS, [p('eth0', false, true)], { run: fake.run, tools: TOOLS }));
    expect([err.code, err.msg, err.details]).toEqual([
      999,
      "cannot move the pod's default route: eth0 still has IPv6 default routes after 32 deletions (/usr/bin/nsenter --net=/var/run/netns/cni-1234 -- /sbin/ip -6 route del default dev eth0)",
      'check what keeps adding default routes to eth0 in the pod (router advertisements, a routing daemon)',
    ]);
    expect(fake.received.length).toBe(32);
  });

  it.each<[string, RoutePlan[], string, CommandOutput, number, string, string]>([
    [
      'a failing add names the command, its stderr and the subnet to check',
      [p('net1', true, false, ['10.99.0.1'])],
      '-4 route replace default via 10.99.0.1 dev net1',
      { exitCode: 2, signal: null, stdout: '', stderr: 'Error: Nexthop has invalid gateway.\n' },
      999,
      "cannot move the pod's default route: /usr/bin/nsenter --net=/var/run/netns/cni-1234 -- /sbin/ip -4 route replace default via 10.99.0.1 dev net1 exited 2: Error: Nexthop has invalid gateway.",
      'check that net1 exists in the pod and that 10.99.0.1 is inside the subnet of one of its IPv4 addresses',
    ],
    [
      'a failing delete other than ESRCH',
      [p('eth0', false, true)],
      '-6 route del default dev eth0',
      { exitCode: 2, signal: null, stdout: '', stderr: 'RTNETLINK answers: Operation not permitted\n' },
      999,
      "cannot move the pod's default route: /usr/bin/nsenter --net=/var/run/netns/cni-1234 -- /sbin/ip -6 route del default dev eth0 exited 2: RTNETLINK answers: Operation not permitted",
      'check the IPv6 routes of eth0 in the pod (ip -6 route show dev eth0)',
    ],
    [
      'a killed command',
      [p('eth0', true, false)],
      '-4 route del default dev eth0',
      { exitCode: null, signal: 'SIGKILL', stdout: '', stderr: '' },
      999,
      "cannot move the pod's default route: /usr/bin/nsenter --net=/var/run/netns/cni-1234 -- /sbin/ip -4 route del default dev eth0 was killed (SIGKILL): (no output)",
      'check the IPv4 routes of eth0 in the pod (ip -4 route show dev eth0)',
    ],
    [
      'a namespace nsenter cannot enter is code 8',
      [p('eth0', true, false)],
      '-4 route del default dev eth0',
      {
        exitCode: 1,
        signal: null,
        stdout: '',
        stderr: 'nsenter: cannot open /var/run/netns/cni-1234: No such file or directory\n',
      },
      8,
      "cannot enter the pod's network namespace: /usr/bin/nsenter --net=/var/run/netns/cni-1234 -- /sbin/ip -4 route del default dev eth0 exited 1: nsenter: cannot open /var/run/netns/cni-1234: No such file or directory",
      'check that CNI_NETNS /var/run/netns/cni-1234 is a network namespace that still exists and that multus runs as root',
    ],
  ])('%s', async (_name, plan, line, reply, code, msg, details) => {
    const fake = new FakeRunner();
    fake.returns.set(line, [reply]);
    const err = await rejected(applyRoutePlan(NETNS, plan, { run: fake.run, tools: TOOLS }));
    expect([err.code, err.msg, err.details]).toEqual([code, msg, details]);
  });

  it('reports a command that cannot be started', async () => {
    const run = async (): Promise<CommandOutput> => {
      throw Object.assign(new Error('spawn /usr/bin/nsenter ENOENT'), { code: 'ENOENT' });
    };
    const err = await rejected(applyRoutePlan(NETNS, [p('eth0', true, false)], { run, tools: TOOLS }));
    expect([err.code, err.msg, err.details]).toEqual([
      999,
      "cannot move the pod's default route: cannot run /usr/bin/nsenter --net=/var/run/netns/cni-1234 -- /sbin/ip -4 route del default dev eth0: spawn /usr/bin/nsenter ENOENT",
      'check that nsenter and ip are executable',
    ]);
  });

  it.each<[string, string, RoutePlan[], number, string]>([
    ['an empty netns', '', [p('eth0', true, false)], 8, "cannot move the pod's default route: CNI_NETNS is empty"],
    [
      'an empty interface name',
      NETNS,
      [p('', true, false)],
      7,
      'cannot move the pod\'s default route: invalid interface name ""',
    ],
    [
      'an option-like interface name',
      NETNS,
      [p('-x', true, false)],
      7,
      'cannot move the pod\'s default route: invalid interface name "-x"',
    ],
    [
      'a bad gateway in a later entry',
      NETNS,
      [p('eth0', true, false), p('net1', true, false, ['10.0.0.1/24'])],
      7,
      'invalid default-route gateway "10.0.0.1/24": it must be an IPv4 or IPv6 address such as "10.1.1.1" or "fd00::1"',
    ],
  ])('rejects %s before running anything', async (_name, netns, plan, code, msg) => {
    const fake = new FakeRunner();
    const err = await rejected(applyRoutePlan(netns, plan, { run: fake.run, tools: TOOLS }));
    expect([err.code, err.msg]).toEqual([code, msg]);
    expect(fake.received).toEqual([]);
  });
});

describe('findRouteTools', () => {
  it('finds absolute paths of nsenter and ip (both installed here)', () => {
    const tools = findRouteTools();
    expect(tools.nsenter).toMatch(/^\/(usr\/)?s?bin\/nsenter$/);
    expect(tools.ip).toMatch(/^\/(usr\/)?s?bin\/ip$/);
    expect(findRouteTools()).toBe(tools);
  });
});

// ---------------------------------------------------------------------------------------------------------

describe('updateCachedDefaultRoutes', () => {
  let cniDir: string;
  beforeEach(() => {
    cniDir = mkdtempSync(join(tmpdir(), 'multus-ts-routes-'));
  });
  afterEach(() => {
    rmSync(cniDir, { recursive: true, force: true });
  });

  const ID = 'c0ffee';
  const entry = (networkName: string, ifName: string, result: Record<string, unknown>): ResultCacheEntry => ({
    kind: 'cniCacheV1',
    containerId: ID,
    config: Buffer.from(`{"cniVersion":"1.0.0","name":"${networkName}","type":"bridge"}`),
    ifName,
    networkName,
    netns: NETNS,
    cniArgs: [['K8S_POD_NAME', 'pod1']],
    capabilityArgs: {},
    result,
  });
  const attachments = [
    { ifName: 'eth0', networkName: 'cluster' },
    { ifName: 'net1', networkName: 'macvlan-conf' },
    { ifName: 'net2', networkName: 'other' },
  ];
  const resultPath = (name: string) => join(cniDir, 'results', name);

  it("rewrites each changed attachment's cache file in place, mode 0600, other fields untouched", () => {
    const eth0 = entry('cluster', 'eth0', {
      cniVersion: '1.0.0',
      routes: [
        { dst: '0.0.0.0/0', gw: '10.10.0.1' },
        { dst: '::/0', gw: 'fd00:10::1' },
      ],
    });
    const net1 = entry('macvlan-conf', 'net1', {
      cniVersion: '0.4.0',
      ips: [{ version: '4', address: '10.20.0.2/24' }],
    });
    writeResultCache(cniDir, eth0);
    writeResultCache(cniDir, net1);
    const plan = [p('eth0', true, false), p('net1', true, false, ['10.20.0.1'])];
    expect(updateCachedDefaultRoutes(cniDir, ID, attachments, plan)).toEqual([
      { ifName: 'eth0', path: resultPath('cluster-c0ffee-eth0'), outcome: 'rewritten' },
      { ifName: 'net1', path: resultPath('macvlan-conf-c0ffee-net1'), outcome: 'rewritten' },
    ]);
    expect(readFileSync(resultPath('cluster-c0ffee-eth0'), 'utf8')).toBe(
      encodeResultCache({ ...eth0, result: { cniVersion: '1.0.0', routes: [{ dst: '::/0', gw: 'fd00:10::1' }] } }),
    );
    expect(readFileSync(resultPath('macvlan-conf-c0ffee-net1'), 'utf8')).toBe(
      encodeResultCache({
        ...net1,
        result: {
          cniVersion: '0.4.0',
          ips: [{ version: '4', address: '10.20.0.2/24' }],
          routes: [{ dst: '0.0.0.0/0', gw: '10.20.0.1' }],
        },
      }),
    );
    expect(statSync(resultPath('cluster-c0ffee-eth0')).mode & 0o777).toBe(0o600);
  });

  it('skips entries without a change, leaves unchanged files alone and reports missing ones', () => {
    const eth0 = entry('cluster', 'eth0', { cniVersion: '1.1.0', routes: [{ dst: '10.0.0.0/8', gw: '10.10.0.1' }] });
    writeResultCache(cniDir, eth0);
    const before = statSync(resultPath('cluster-c0ffee-eth0')).mtimeMs;
    const plan = [p('eth0', true, false), p('net1', true, false, ['10.20.0.1']), p('net2', false, false)];
    expect(updateCachedDefaultRoutes(cniDir, ID, attachments, plan)).toEqual([
      { ifName: 'eth0', path: resultPath('cluster-c0ffee-eth0'), outcome: 'unchanged' },
      { ifName: 'net1', path: resultPath('macvlan-conf-c0ffee-net1'), outcome: 'missing' },
    ]);
    expect(statSync(resultPath('cluster-c0ffee-eth0')).mtimeMs).toBe(before);
    expect(readFileSync(resultPath('cluster-c0ffee-eth0'), 'utf8')).toBe(encodeResultCache(eth0));
  });

  it('keeps a legacy cache file (the raw result) in its legacy form', () => {
    mkdirSync(join(cniDir, 'results'), { recursive: true });
    const raw = { cniVersion: '0.2.0', ip4: { ip: '10.10.0.2/24', routes: [{ dst: '0.0.0.0/0', gw: '10.10.0.1' }] } };
    writeFileSync(resultPath('cluster-c0ffee-eth0'), JSON.stringify(raw));
    expect(
      updateCachedDefaultRoutes(cniDir, ID, attachments, [p('eth0', true, false, ['10.10.0.254'])])[0]?.outcome,
    ).toBe('rewritten');
    expect(JSON.parse(readFileSync(resultPath('cluster-c0ffee-eth0'), 'utf8'))).toStrictEqual({
      cniVersion: '0.2.0',
      ip4: { ip: '10.10.0.2/24', routes: [{ dst: '0.0.0.0/0', gw: '10.10.0.254' }] },
    });
  });

  it.each<[string, () => void, RoutePlan[], number, string]>([
    [
      'a corrupt cache file',
      () => {
        mkdirSync(join(cniDir, 'results'), { recursive: true });
        writeFileSync(join(cniDir, 'results', 'cluster-c0ffee-eth0'), '{not json');
      },
      [p('eth0', true, false)],
      6,
      'error setting default gateway in cache: corrupt libcni result cache CNIDIR/results/cluster-c0ffee-eth0: libcni result cache is not valid JSON: line 1, column 2: expected a member name in double quotes (remove the file if its container is gone)',
    ],
    [
      'an unsupported result version',
      () => writeResultCache(cniDir, entry('cluster', 'eth0', { cniVersion: '0.9.0' })),
      [p('eth0', true, false)],
      1,
      'error setting default gateway in cache CNIDIR/results/cluster-c0ffee-eth0: unsupported CNI result version "0.9.0": supported versions are 0.1.0, 0.2.0, 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0',
    ],
    [
      'a plan entry for an interface no attachment has',
      () => undefined,
      [p('net7', true, false)],
      999,
      'cannot rewrite the cached result of interface "net7": no attachment has that interface name',
    ],
  ])('rejects %s', (_name, setup, plan, code, msg) => {
    setup();
    const err = (() => {
      try {
        updateCachedDefaultRoutes(cniDir, ID, attachments, plan);
      } catch (e) {
        return e as CniError;
      }
      throw new Error('expected a CniError');
    })();
    expect(err).toBeInstanceOf(CniError);
    expect([err.code, err.msg]).toEqual([code, msg.replace('CNIDIR', cniDir)]);
  });
});
