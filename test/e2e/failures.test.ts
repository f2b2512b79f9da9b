/**
 * Failure paths with real plugins: an ADD whose second delegate fails must roll the first one back (no
 * interface, no IP, no cache left), and a DEL whose scratch cache was truncated must still tear everything
 * down from the static delegates and the libcni result caches.
 */
import { existsSync } from 'node:fs';
import { readFile, truncate } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { needs } from '../helpers/skip.ts';
import {
  CLUSTER_NET,
  MACVLAN_NET,
  TestWorld,
  clusterConflist,
  describeRun,
  e2eRequirements,
  ipv4Of,
  listDir,
  macvlanConf,
  multusConf,
  readLinks,
  reservedIps,
  scratchCachePath,
  writeMultusConf,
} from './helpers.ts';

const ready = needs(...e2eRequirements());

const VERSION = '1.0.0';

describe.skipIf(!ready)('failures with real plugins', () => {
  let w: TestWorld;
  let conf = '';

  beforeEach(async () => {
    w = await new TestWorld().setup();
    conf = '';
  });
  afterEach(async () => {
    if (conf) await w.driver('del', conf).catch(() => undefined);
    await w.cleanup();
  });

  /** Links in the host namespace made by plugins (not the test's own macvlan master pair). */
  const pluginVeths = async (): Promise<string[]> =>
    (await readLinks(w.hostNs))
      .filter((l) => l.linkinfo?.info_kind === 'veth' && l.ifname !== w.master && l.ifname !== w.masterPeer)
      .map((l) => l.ifname);

  it('ADD rolls back the cluster network when the second delegate fails', async () => {
    const missingMaster = `mtsno${w.id}`;
    conf = await writeMultusConf(
      w,
      multusConf(w, VERSION, [
        clusterConflist(w, VERSION, '10.251.21.0/24'),
        macvlanConf(w, VERSION, '10.252.21.0/24', missingMaster),
      ]),
    );

    const r = await w.driver('add', conf);
    expect(r.code, describeRun(r)).toBe(1);
    expect(typeof r.json?.code, describeRun(r)).toBe('number');
    expect(String(r.json?.error)).toContain(MACVLAN_NET);

    expect(await w.podLinks()).toEqual(['lo']);
    expect(await pluginVeths()).toEqual([]);
    expect(await reservedIps(w.ipamDir), 'host-local released eth0 address').toEqual([]);
    expect(await listDir(join(w.cniDir, 'results'))).toEqual([]);
    expect(await listDir(join(w.cacheDir, 'results'))).toEqual([]);

    // The runtime follows a failed ADD with a DEL. The scratch cache written before the delegates ran lists
    // both, so both get a DEL; the macvlan plugin's own DEL fails while its master is missing ("Link not
    // found", it looks the master up before anything else), and multus reports that failure alone, having
    // still run the cluster network's DEL, and drops the scratch cache as upstream does.
    const del = await w.driver('del', conf);
    expect(del.code, describeRun(del)).toBe(1);
    expect(String(del.json?.error)).toContain(MACVLAN_NET);
    expect(String(del.json?.error)).not.toContain(CLUSTER_NET);
    expect(existsSync(scratchCachePath(w))).toBe(false);
    expect(await w.podLinks()).toEqual(['lo']);
    expect(await pluginVeths()).toEqual([]);
    expect(await reservedIps(w.ipamDir)).toEqual([]);
    conf = ''; // nothing for afterEach to DEL
  });

  it('DEL with a truncated scratch cache still removes eth0 and net1 and releases both IPs', async () => {
    conf = await writeMultusConf(
      w,
      multusConf(w, VERSION, [
        clusterConflist(w, VERSION, '10.251.22.0/24'),
        macvlanConf(w, VERSION, '10.252.22.0/24'),
      ]),
    );
    const add = await w.driver('add', conf);
    expect(add.code, describeRun(add)).toBe(0);
    expect(await ipv4Of(w.podNs, 'eth0')).toEqual(['10.251.22.2/24']);
    expect(await ipv4Of(w.podNs, 'net1')).toEqual(['10.252.22.2/24']);
    expect(await reservedIps(w.ipamDir)).toHaveLength(2);
    expect(await pluginVeths()).toHaveLength(1);

    const scratch = scratchCachePath(w);
    const full = await readFile(scratch);
    await truncate(scratch, Math.floor(full.length / 2));

    const del = await w.driver('del', conf);
    expect(del.code, describeRun(del)).toBe(0);
    expect(await w.podLinks()).toEqual(['lo']);
    expect(await pluginVeths()).toEqual([]);
    expect(await reservedIps(w.ipamDir)).toEqual([]);
    expect(await listDir(join(w.cniDir, 'results'))).toEqual([]);
    expect(existsSync(scratch), 'the corrupt scratch cache is removed').toBe(false);
    // The plugin says in its log that it could not use the scratch cache.
    const log = existsSync(w.logFile) ? await readFile(w.logFile, 'utf8') : '';
    expect(log).toContain(scratch);
  });
});
