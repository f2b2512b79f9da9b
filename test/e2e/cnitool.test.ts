/**
 * The CNI project's own client drives the built `multus`: cnitool v1.3.0 (github.com/containernetworking/cni/cnitool,
 * built from the module proxy by test/peers/build-go-tool.sh cnitool) runs add, check, status, del and gc on a multus
 * network whose delegates are Debian's real plugins (eth0: bridge + host-local; net1: a macvlan on a veth end +
 * host-local) in a real network namespace.
 *
 * cnitool runs inside the world's host namespace (`ip netns exec`), so the bridge and the veth master live there,
 * not on the machine. It keeps libcni's cache in /var/lib/cni (it has no option for another), under this run's
 * own network name. Asserted: what each command prints, the interfaces and addresses ADD makes, and that DEL, and
 * GC (which DELs every cached attachment of the network: cnitool passes no valid attachments), leave nothing:
 * links, host veths, reserved IPs, multus' caches, libcni's cache. libcni's GC DELs the attachments it has cached
 * itself; one case removes libcni's entry first, so that multus sees a GC naming no valid attachments for a pod
 * it holds (it must keep it) and then a DEL.
 */
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileExists, needs } from '../helpers/skip.ts';
import * as e2e from './helpers.ts';

const CACHE = process.env.MULTUS_TS_CACHE_DIR || join(e2e.REPO_ROOT, '.cache');
const CNITOOL = join(CACHE, 'cnitool', 'cnitool');
const ready = needs(
  ...e2e.e2eRequirements(),
  fileExists(CNITOOL, 'cnitool v1.3.0 (bash test/peers/build-go-tool.sh cnitool)'),
);

describe.skipIf(!ready)('cnitool v1.3.0 drives build/multus', () => {
  const w = new e2e.TestWorld();
  const net = `mts-cnitool-${w.id}`;
  const version = '1.1.0'; // libcni sends GC and STATUS to 1.1.0 configs only
  const plugins = '1.0.0'; // the newest Debian's plugins speak
  let confDir = '';

  /** `ip netns exec <host ns> cnitool <cmd> <net> <pod netns>`, as a runtime's CNI client would call it. */
  const cnitool = (cmd: 'add' | 'check' | 'status' | 'del' | 'gc') =>
    e2e.run('ip', ['netns', 'exec', w.hostNs, CNITOOL, cmd, net, w.podNsPath], {
      env: {
        PATH: '/usr/sbin:/usr/bin:/sbin:/bin',
        NETCONFPATH: confDir,
        CNI_PATH: `${w.binDir}:${e2e.PLUGIN_DIR}`,
        CNI_IFNAME: 'eth0',
      },
    });

  /** `cnitool cmd` exits 0 and prints nothing (all but add). */
  const quiet = async (cmd: 'check' | 'status' | 'del' | 'gc') => {
    const r = await cnitool(cmd);
    expect([r.code, r.stdout, r.stderr], `${cmd}: ${e2e.describeRun(r)}`).toEqual([0, '', '']);
  };
  const addOk = async () => {
    const add = await cnitool('add');
    expect(add.code, e2e.describeRun(add)).toBe(0);
  };

  /** libcni's cache entries of this network, which cnitool keeps in /var/lib/cni/results. */
  const libcniCache = async (): Promise<string[]> =>
    (await e2e.listDir('/var/lib/cni/results').catch(() => [])).filter((n) => n.startsWith(`${net}-`));

  beforeAll(async () => {
    await w.setup();
    confDir = join(w.dir, 'net.d');
    const delegates = [
      e2e.clusterConflist(w, plugins, '10.251.40.0/24'),
      e2e.macvlanConf(w, plugins, '10.252.40.0/24'),
    ];
    await e2e.writeJson(
      join(confDir, '00-multus.conf'),
      e2e.multusConf(w, version, delegates, { name: net, logToStderr: false }),
    );
  });
  afterAll(async () => {
    if (confDir) await cnitool('del').catch(() => undefined);
    await w.cleanup();
  });

  /** Nothing of the pod is left: its links, the host veth, reserved IPs, multus' and libcni's caches. */
  async function expectNothingLeft(): Promise<void> {
    expect((await e2e.readLinks(w.podNs)).map((l) => l.ifname)).toEqual(['lo']);
    expect((await w.hostLinks()).filter((l) => l.startsWith('veth'))).toEqual([]);
    expect(await e2e.reservedIps(w.ipamDir)).toEqual([]);
    expect(await e2e.listDir(join(w.cniDir, 'results')).catch(() => [])).toEqual([]);
    expect((await e2e.listDir(w.cniDir).catch(() => [])).filter((n) => n !== 'results')).toEqual([]);
    expect(await libcniCache()).toEqual([]);
  }

  it('add: prints the cluster network result (1.1.0) and makes eth0 (bridge veth) and net1 (macvlan)', async () => {
    const r = await cnitool('add');
    expect(r.code, e2e.describeRun(r)).toBe(0);
    const result = JSON.parse(r.stdout) as {
      cniVersion: string;
      interfaces: { name: string; sandbox?: string }[];
      ips: { address: string; gateway: string; interface: number }[];
      routes?: { dst: string; gw?: string }[];
    };
    expect(result.cniVersion).toBe(version);
    expect(result.ips.map((i) => [i.address, i.gateway])).toEqual([['10.251.40.2/24', '10.251.40.1']]);
    expect(result.interfaces[result.ips[0]!.interface]).toEqual(
      expect.objectContaining({ name: 'eth0', sandbox: w.podNsPath }),
    );
    expect(result.routes).toContainEqual(expect.objectContaining({ dst: '0.0.0.0/0', gw: '10.251.40.1' }));
    expect(r.stderr).toBe('');
    const links = await e2e.readLinks(w.podNs);
    expect(links.find((l) => l.ifname === 'eth0')?.linkinfo?.info_kind).toBe('veth');
    expect(links.find((l) => l.ifname === 'net1')?.linkinfo?.info_kind).toBe('macvlan');
    expect(await e2e.ipv4Of(w.podNs, 'net1')).toEqual(['10.252.40.2/24']);
    expect(await libcniCache(), "libcni's cache of the multus attachment").toHaveLength(1);
    expect(existsSync(join(w.cniDir, 'results'))).toBe(true);
  });

  it('check and status: exit 0, print nothing', async () => {
    for (const cmd of ['check', 'status'] as const) await quiet(cmd);
  });

  it('del: exit 0, prints nothing, leaves nothing; a second del succeeds too', async () => {
    for (let i = 0; i < 2; i++) {
      await quiet('del');
      await expectNothingLeft();
    }
  });

  it('gc: the attachment made by a new add is not valid for cnitool, so it is deleted; nothing is left', async () => {
    await addOk();
    expect(await e2e.reservedIps(w.ipamDir)).toHaveLength(2);
    await quiet('gc');
    await expectNothingLeft();
  });

  it('gc of an attachment libcni has no cache of: cnitool names no valid attachments, so multus deletes nothing by itself; del does', async () => {
    await addOk();
    const forgotten = await libcniCache();
    expect(forgotten).toHaveLength(1);
    for (const n of forgotten) await rm(join('/var/lib/cni/results', n));
    await quiet('gc');
    // without "cni.dev/valid-attachments" no attachment is known to be stale (docs/compatibility.md, GC)
    expect((await e2e.readLinks(w.podNs)).map((l) => l.ifname).sort()).toEqual(['eth0', 'lo', 'net1']);
    expect(await e2e.reservedIps(w.ipamDir)).toHaveLength(2);
    await quiet('del');
    await expectNothingLeft();
  });
});
