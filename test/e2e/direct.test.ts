/**
 * build/multus exec'd directly, the way a runtime's exec layer does it (CNI_* env, config on stdin, result or
 * CNI error on stdout), with real plugins: ADD, CHECK and DEL with prevResult injected as libcni does, the
 * CNI error format, and the delegates' CNI_ARGS.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { needs } from '../helpers/skip.ts';
import {
  CLUSTER_NET,
  PLUGIN_DIR,
  TestWorld,
  clusterConflist,
  describeRun,
  e2eRequirements,
  ipv4Of,
  listDir,
  macvlanConf,
  multusConf,
  readJsonFile,
  reservedIps,
  resultCachePath,
  runMultus,
  scratchCachePath,
  writeMultusConf,
} from './helpers.ts';

const ready = needs(...e2eRequirements());

describe.skipIf(!ready)("multus exec'd directly with the CNI protocol", () => {
  let w: TestWorld;
  let cleanupConf = '';

  beforeEach(async () => {
    w = await new TestWorld().setup();
    cleanupConf = '';
  });
  afterEach(async () => {
    if (cleanupConf) await w.driver('del', cleanupConf).catch(() => undefined);
    await w.cleanup();
  });

  const call = (command: 'ADD' | 'CHECK' | 'DEL', config: Record<string, unknown>, args?: string) =>
    runMultus({
      command,
      config,
      containerId: w.containerId,
      netns: w.podNsPath,
      ifname: 'eth0',
      args: args ?? `IgnoreUnknown=1;K8S_POD_NAMESPACE=e2e;K8S_POD_NAME=pod-${w.id}`,
      path: [PLUGIN_DIR],
      hostNetns: w.hostNs,
    });

  it('ADD, CHECK and DEL with prevResult; delegates get IgnoreUnknown first even when the runtime sent none', async () => {
    const config = multusConf(w, '1.0.0', [
      clusterConflist(w, '1.0.0', '10.251.61.0/24'),
      macvlanConf(w, '1.0.0', '10.252.61.0/24'),
    ]);
    cleanupConf = await writeMultusConf(w, config);
    // No IgnoreUnknown from the runtime: multus knows every K8S_* key, and the bridge plugin (which rejects
    // unknown args) only accepts them because multus puts IgnoreUnknown in front of the delegate's args.
    const args = `K8S_POD_NAMESPACE=e2e;K8S_POD_NAME=pod-${w.id};K8S_POD_INFRA_CONTAINER_ID=${w.containerId};K8S_POD_UID=uid-${w.id}`;
    const add = await call('ADD', config, args);
    expect(add.code, describeRun(add)).toBe(0);
    expect(add.json?.cniVersion).toBe('1.0.0');
    expect(await ipv4Of(w.podNs, 'eth0')).toEqual(['10.251.61.2/24']);
    expect(await ipv4Of(w.podNs, 'net1')).toEqual(['10.252.61.2/24']);

    const cache = await readJsonFile<{ cniArgs: [string, string][] }>(resultCachePath(w, CLUSTER_NET, 'eth0'));
    expect(cache.cniArgs[0]?.[0]).toBe('IgnoreUnknown');
    expect(cache.cniArgs).toContainEqual(['K8S_POD_UID', `uid-${w.id}`]);

    const withPrev = { ...config, prevResult: add.json };
    const check = await call('CHECK', withPrev, args);
    expect(check.code, describeRun(check)).toBe(0);
    const del = await call('DEL', withPrev, args);
    expect(del.code, describeRun(del)).toBe(0);
    expect(await w.podLinks()).toEqual(['lo']);
    expect(await reservedIps(w.ipamDir)).toEqual([]);
    expect(await listDir(join(w.cniDir, 'results'))).toEqual([]);
    expect(existsSync(scratchCachePath(w))).toBe(false);
  });

  it('a delegate whose plugin does not exist: CNI error JSON on stdout, exit 1, nothing left', async () => {
    const config = multusConf(w, '1.0.0', [
      clusterConflist(w, '1.0.0', '10.251.62.0/24'),
      { cniVersion: '1.0.0', name: 'mts-missing', type: 'mts-no-such-plugin' },
    ]);
    cleanupConf = await writeMultusConf(w, config);
    const add = await call('ADD', config);
    expect(add.code, describeRun(add)).toBe(1);
    expect(add.json?.code).toEqual(expect.any(Number));
    expect(String(add.json?.msg)).toContain('mts-missing');
    expect(String(add.json?.msg) + String(add.json?.details ?? '')).toContain('mts-no-such-plugin');
    expect(await w.podLinks()).toEqual(['lo']);
    expect(await reservedIps(w.ipamDir)).toEqual([]);
    expect(await listDir(join(w.cniDir, 'results'))).toEqual([]);
  });
});
