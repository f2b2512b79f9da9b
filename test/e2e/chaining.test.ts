/**
 * A conflist cluster network with chained plugins (bridge+host-local → tuning → bandwidth): each chained plugin
 * needs the previous result, so this proves prevResult flows through multus' chain execution with real
 * plugins on ADD, CHECK and DEL. Then STATUS and GC through a 1.1.0 multus config, including multus' own
 * collection of a pod that only its caches still know.
 */
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { needs } from '../helpers/skip.ts';
import {
  CLUSTER_NET,
  MACVLAN_NET,
  MULTUS_NET,
  TestWorld,
  clusterConflist,
  createNetns,
  deleteNetns,
  describeRun,
  e2eRequirements,
  ipv4Of,
  linkNames,
  listDir,
  macvlanConf,
  multusConf,
  netnsPath,
  readLinks,
  readSysctl,
  reservedIps,
  runOk,
  scratchCachePath,
  writeMultusConf,
} from './helpers.ts';

const ready = needs(...e2eRequirements());

const VERSION = '1.0.0';
const MAC = '02:6d:74:73:00:01';

describe.skipIf(!ready)('chained cluster network (bridge → tuning → bandwidth)', () => {
  const w = new TestWorld();
  let conf = '';
  let hostVeth = '';

  beforeAll(async () => {
    await w.setup();
    const cluster = clusterConflist(w, VERSION, '10.251.31.0/24', [
      { type: 'tuning', mac: MAC, sysctl: { 'net.ipv4.conf.eth0.arp_notify': '1' } },
      { type: 'bandwidth', ingressRate: 8_000_000, ingressBurst: 80_000, egressRate: 8_000_000, egressBurst: 80_000 },
    ]);
    conf = await writeMultusConf(w, multusConf(w, VERSION, [cluster]));
  });
  afterAll(async () => {
    if (conf) await w.driver('del', conf).catch(() => undefined);
    await w.cleanup();
  });

  const kinds = async (ns: string, kind: string): Promise<string[]> =>
    (await readLinks(ns)).filter((l) => l.linkinfo?.info_kind === kind).map((l) => l.ifname);

  it('ADD runs the whole chain: tuning and bandwidth act on the interfaces bridge reported', async () => {
    const r = await w.driver('add', conf);
    expect(r.code, describeRun(r)).toBe(0);
    expect(r.json?.cniVersion).toBe(VERSION);
    const ifaces = (r.json?.interfaces ?? []) as { name: string; mac?: string; sandbox?: string }[];
    // tuning rewrote the MAC in the result it got as prevResult and passed on.
    expect(ifaces.find((i) => i.name === 'eth0')?.mac).toBe(MAC);
    hostVeth = ifaces.find((i) => !i.sandbox && i.name !== w.bridge)?.name ?? '';
    expect(hostVeth).not.toBe('');

    const eth0 = (await readLinks(w.podNs)).find((l) => l.ifname === 'eth0');
    expect(eth0?.address).toBe(MAC);
    expect(await ipv4Of(w.podNs, 'eth0')).toEqual(['10.251.31.2/24']);
    expect(await readSysctl(w.podNs, 'net.ipv4.conf.eth0.arp_notify')).toBe('1');

    // bandwidth: a tbf qdisc on the host veth (ingress) and an ifb device for egress shaping.
    const qdisc = await runOk('tc', ['-n', w.hostNs, 'qdisc', 'show', 'dev', hostVeth]);
    expect(qdisc).toMatch(/tbf|ingress/);
    expect(await kinds(w.hostNs, 'ifb')).toHaveLength(1);
  });

  it('CHECK passes for every plugin of the chain', async () => {
    const r = await w.driver('check', conf);
    expect(r.code, describeRun(r)).toBe(0);
  });

  it('DEL unwinds the chain: ifb, host veth and IP are gone', async () => {
    const r = await w.driver('del', conf);
    expect(r.code, describeRun(r)).toBe(0);
    expect(await w.podLinks()).toEqual(['lo']);
    expect(await kinds(w.hostNs, 'ifb')).toEqual([]);
    expect((await readLinks(w.hostNs)).map((l) => l.ifname)).not.toContain(hostVeth);
    expect(await reservedIps(w.ipamDir)).toEqual([]);
    expect(await listDir(join(w.cniDir, 'results'))).toEqual([]);
  });
});

describe.skipIf(!ready)('multus cniVersion 1.1.0 over 1.0.0 delegates: STATUS and GC', () => {
  const w = new TestWorld();
  let conf = '';

  beforeAll(async () => {
    await w.setup();
    conf = await writeMultusConf(
      w,
      multusConf(w, '1.1.0', [
        clusterConflist(w, '1.0.0', '10.251.32.0/24'),
        macvlanConf(w, '1.0.0', '10.252.32.0/24'),
      ]),
    );
  });
  afterAll(async () => {
    if (conf) await w.driver('del', conf).catch(() => undefined);
    await w.cleanup();
  });

  it('ADD prints the eth0 result as 1.1.0', async () => {
    const r = await w.driver('add', conf);
    expect(r.code, describeRun(r)).toBe(0);
    expect(r.json?.cniVersion).toBe('1.1.0');
    expect(((r.json?.ips ?? []) as { address: string }[]).map((i) => i.address)).toEqual(['10.251.32.2/24']);
    expect(await ipv4Of(w.podNs, 'net1')).toEqual(['10.252.32.2/24']);
  });

  it('STATUS succeeds (cluster network below 1.1.0 has no STATUS)', async () => {
    const r = await w.driver('status', conf);
    expect(r.code, describeRun(r)).toBe(0);
  });

  it('GC with the attachment still valid changes nothing', async () => {
    const r = await w.driver('gc', conf, { validAttachments: [{ containerID: w.containerId, ifname: 'eth0' }] });
    expect(r.code, describeRun(r)).toBe(0);
    expect(await ipv4Of(w.podNs, 'eth0')).toEqual(['10.251.32.2/24']);
    expect(await ipv4Of(w.podNs, 'net1')).toEqual(['10.252.32.2/24']);
    expect(await reservedIps(w.ipamDir)).toHaveLength(2);
  });

  it('GC without the attachment makes libcni DEL it through multus: everything is released', async () => {
    const r = await w.driver('gc', conf, { validAttachments: [] });
    expect(r.code, describeRun(r)).toBe(0);
    expect(await w.podLinks()).toEqual(['lo']);
    expect(await reservedIps(w.ipamDir)).toEqual([]);
    expect(await listDir(join(w.cacheDir, 'results'))).not.toContain(`${MULTUS_NET}-${w.containerId}-eth0`);
    expect(await listDir(join(w.cniDir, 'results'))).toEqual([]);
  });
});

describe.skipIf(!ready)("GC with the runtime's valid attachments collects a stale pod multus still caches", () => {
  const w = new TestWorld();
  let stalePodNs = '';
  let conf = '';
  const staleId = `${w.containerId}-stale`;

  beforeAll(async () => {
    await w.setup();
    stalePodNs = await createNetns('mts-c');
    conf = await writeMultusConf(
      w,
      multusConf(w, '1.1.0', [
        clusterConflist(w, '1.0.0', '10.251.33.0/24'),
        macvlanConf(w, '1.0.0', '10.252.33.0/24'),
      ]),
    );
  });
  afterAll(async () => {
    if (conf) {
      await w.driver('del', conf).catch(() => undefined);
      await w.driver('del', conf, { id: staleId, netns: netnsPath(stalePodNs) }).catch(() => undefined);
    }
    if (stalePodNs) await deleteNetns(stalePodNs);
    await w.cleanup();
  });

  it("deletes the stale pod's delegate attachments and leaves the live pod alone", async () => {
    const live = await w.driver('add', conf);
    expect(live.code, describeRun(live)).toBe(0);
    const stale = await w.driver('add', conf, { id: staleId, netns: netnsPath(stalePodNs) });
    expect(stale.code, describeRun(stale)).toBe(0);
    expect(await reservedIps(w.ipamDir)).toHaveLength(4);
    expect(await listDir(join(w.cniDir, 'results'))).toHaveLength(4);

    // The runtime lost its own record of the stale pod (so libcni will not DEL it), but multus still has its
    // delegate caches: only multus' GC can release those addresses.
    await rm(join(w.cacheDir, 'results', `${MULTUS_NET}-${staleId}-eth0`));

    const gc = await w.driver('gc', conf, { validAttachments: [{ containerID: w.containerId, ifname: 'eth0' }] });
    expect(gc.code, describeRun(gc)).toBe(0);

    expect(await linkNames(stalePodNs)).toEqual(['lo']);
    expect(await ipv4Of(w.podNs, 'eth0')).toEqual(['10.251.33.2/24']);
    expect(await ipv4Of(w.podNs, 'net1')).toEqual(['10.252.33.2/24']);
    expect(await reservedIps(w.ipamDir)).toHaveLength(2);
    expect(await listDir(join(w.cniDir, 'results'))).toEqual(
      [`${CLUSTER_NET}-${w.containerId}-eth0`, `${MACVLAN_NET}-${w.containerId}-net1`].sort(),
    );
    expect(existsSync(join(w.cniDir, staleId))).toBe(false);
    expect(existsSync(scratchCachePath(w))).toBe(true);
  });
});
