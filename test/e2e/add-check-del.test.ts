/**
 * The whole life of one pod through the real runtime client: libcni runs the built `multus` (installed into a
 * bin dir ahead of /usr/lib/cni), which runs the real bridge/macvlan/host-local plugins in real namespaces.
 *
 * Per multus cniVersion: ADD (eth0 on a bridge, net1 a macvlan on a veth end), the result and the caches it
 * leaves, CHECK (≥ 0.4.0), DEL (nothing left: links, host veth, reserved IPs, caches), and a second DEL.
 */
import { existsSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { needs } from '../helpers/skip.ts';
import {
  CLUSTER_NET,
  MACVLAN_NET,
  MULTUS_NET,
  TestWorld,
  clusterConflist,
  describeRun,
  e2eRequirements,
  ipv4Of,
  listDir,
  macvlanConf,
  multusConf,
  readJsonFile,
  readLinks,
  readRoutes,
  reservedIps,
  resultCachePath,
  scratchCachePath,
  writeMultusConf,
} from './helpers.ts';

const ready = needs(...e2eRequirements());

interface CacheEntry {
  kind: string;
  containerId: string;
  config: string;
  ifName: string;
  networkName: string;
  netns?: string;
  result?: Record<string, unknown>;
}

const mode = async (p: string): Promise<number> => (await stat(p)).mode & 0o777;

const cases = [
  { version: '0.3.1', net: 11, hasCheck: false },
  { version: '0.4.0', net: 12, hasCheck: true },
  { version: '1.0.0', net: 13, hasCheck: true },
];

describe.skipIf(!ready).each(cases)('multus cniVersion $version through libcni', ({ version, net, hasCheck }) => {
  const w = new TestWorld();
  const clusterSubnet = `10.251.${net}.0/24`;
  const macvlanSubnet = `10.252.${net}.0/24`;
  const eth0Addr = `10.251.${net}.2/24`;
  const gateway = `10.251.${net}.1`;
  const net1Addr = `10.252.${net}.2/24`;
  let cluster: Record<string, unknown>;
  let macvlan: Record<string, unknown>;
  let conf = '';
  let addResult: Record<string, unknown> | undefined;

  beforeAll(async () => {
    await w.setup();
    cluster = clusterConflist(w, version, clusterSubnet);
    macvlan = macvlanConf(w, version, macvlanSubnet);
    conf = await writeMultusConf(w, multusConf(w, version, [cluster, macvlan]));
  });
  afterAll(async () => {
    // Best effort: a DEL undoes whatever a failed step left before the namespaces go.
    if (conf) await w.driver('del', conf).catch(() => undefined);
    await w.cleanup();
  });

  it('ADD creates eth0 on the bridge and net1 as a macvlan, and prints the eth0 result', async () => {
    const r = await w.driver('add', conf);
    expect(r.code, describeRun(r)).toBe(0);
    addResult = r.json;
    expect(addResult?.cniVersion).toBe(version);
    const ips = (addResult?.ips ?? []) as { address: string; gateway?: string; version?: string }[];
    expect(ips.map((i) => i.address)).toEqual([eth0Addr]);
    expect(ips[0]?.gateway).toBe(gateway);
    // 0.3.x/0.4.0 results carry the IP family per address; 1.0.0 dropped the field.
    expect(ips[0]?.version).toBe(version === '1.0.0' ? undefined : '4');
    const ifaces = (addResult?.interfaces ?? []) as { name: string; sandbox?: string }[];
    expect(ifaces.find((i) => i.name === 'eth0')?.sandbox).toBe(w.podNsPath);
    expect(
      ifaces.some((i) => i.name === 'net1'),
      'only delegates[0] result is returned',
    ).toBe(false);

    expect(await ipv4Of(w.podNs, 'eth0')).toEqual([eth0Addr]);
    expect(await ipv4Of(w.podNs, 'net1')).toEqual([net1Addr]);
    const links = await readLinks(w.podNs);
    expect(links.find((l) => l.ifname === 'eth0')?.linkinfo?.info_kind).toBe('veth');
    expect(links.find((l) => l.ifname === 'net1')?.linkinfo?.info_kind).toBe('macvlan');

    const routes = await readRoutes(w.podNs);
    const defaults = routes.filter((rt) => rt.dst === 'default');
    expect(defaults).toEqual([expect.objectContaining({ gateway, dev: 'eth0' })]);

    // The bridge exists on the host side with the gateway address.
    expect(await ipv4Of(w.hostNs, w.bridge)).toEqual([`${gateway}/24`]);
  });

  it('writes a libcni result cache per delegate and the scratch cache', async () => {
    const resultsDir = join(w.cniDir, 'results');
    const expected = [
      { network: CLUSTER_NET, ifname: 'eth0', config: cluster, addr: eth0Addr },
      { network: MACVLAN_NET, ifname: 'net1', config: macvlan, addr: net1Addr },
    ];
    expect(await listDir(resultsDir)).toEqual(expected.map((e) => `${e.network}-${w.containerId}-${e.ifname}`).sort());
    expect(await mode(resultsDir)).toBe(0o700);
    for (const e of expected) {
      const path = resultCachePath(w, e.network, e.ifname);
      expect(await mode(path), path).toBe(0o600);
      const entry = await readJsonFile<CacheEntry>(path);
      expect(entry.kind).toBe('cniCacheV1');
      expect(entry.containerId).toBe(w.containerId);
      expect(entry.ifName).toBe(e.ifname);
      expect(entry.networkName).toBe(e.network);
      expect(JSON.parse(Buffer.from(entry.config, 'base64').toString('utf8'))).toEqual(e.config);
      const ips = (entry.result?.ips ?? []) as { address: string }[];
      expect(ips.map((i) => i.address)).toEqual([e.addr]);
    }

    const scratch = scratchCachePath(w);
    expect(await mode(w.cniDir)).toBe(0o700);
    expect(await mode(scratch)).toBe(0o600);
    const delegates = await readJsonFile<unknown[]>(scratch);
    expect(Array.isArray(delegates)).toBe(true);
    expect(delegates).toHaveLength(2);

    // libcni's own cache of the multus attachment lives in the runtime's cache dir, not in multus' cniDir.
    expect(existsSync(join(w.cacheDir, 'results', `${MULTUS_NET}-${w.containerId}-eth0`))).toBe(true);
  });

  if (hasCheck) {
    it('CHECK passes', async () => {
      const r = await w.driver('check', conf);
      expect(r.code, describeRun(r)).toBe(0);
    });
  } else {
    it('CHECK is refused by libcni before multus runs (config version < 0.4.0)', async () => {
      const r = await w.driver('check', conf);
      expect(r.code).toBe(1);
      expect(String(r.json?.error)).toContain('does not support the CHECK command');
    });
  }

  it('DEL removes both interfaces, the host veth, the reserved IPs and every cache file', async () => {
    const hostVeth = ((addResult?.interfaces ?? []) as { name: string; sandbox?: string }[]).find(
      (i) => !i.sandbox && i.name !== w.bridge,
    )?.name;
    expect(hostVeth, 'the bridge result names the host veth').toBeTruthy();
    expect((await readLinks(w.hostNs)).map((l) => l.ifname)).toContain(hostVeth);
    expect((await reservedIps(w.ipamDir)).length).toBe(2);

    const r = await w.driver('del', conf);
    expect(r.code, describeRun(r)).toBe(0);

    expect(await w.podLinks()).toEqual(['lo']);
    const hostLinks = await readLinks(w.hostNs);
    expect(hostLinks.map((l) => l.ifname)).not.toContain(hostVeth);
    expect(
      hostLinks.filter((l) => l.linkinfo?.info_kind === 'veth' && l.ifname !== w.master && l.ifname !== w.masterPeer),
    ).toEqual([]);
    expect(await reservedIps(w.ipamDir)).toEqual([]);
    expect(await listDir(join(w.cniDir, 'results'))).toEqual([]);
    expect(existsSync(scratchCachePath(w))).toBe(false);
    expect(await listDir(join(w.cacheDir, 'results'))).toEqual([]);
  });

  it('a second DEL succeeds and changes nothing', async () => {
    const r = await w.driver('del', conf);
    expect(r.code, describeRun(r)).toBe(0);
    expect(await w.podLinks()).toEqual(['lo']);
    expect(await reservedIps(w.ipamDir)).toEqual([]);
  });
});
