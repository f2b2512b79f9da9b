/**
 * 00-multus.conf generation (multusConfigFile: auto): the master is picked by name (never ours, never a multus
 * config), the file carries type multus-shim, daemonSocketDir, clusterNetwork and the daemon's 00-multus.conf
 * keys, is written 0600 when the master appears, regenerated when it changes, removed when it goes and on stop,
 * written again with a warning and a node event when another CNI renamed it away or another writer wrote its own.
 */
import { mkdtempSync, readFileSync, renameSync, rmSync, statSync, writeFileSync, existsSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ConfigWriter } from '../../../src/daemon/autoconf.ts';
import { shimSocketDir, startConfigWriter } from '../../../src/daemon/autoconf.ts';
import type { DaemonConfig } from '../../../src/daemon/config.ts';
import { parseDaemonConfig } from '../../../src/daemon/config.ts';
import { generateMultusConf as generate, pickMaster as pick } from '../../../src/multus/generate-conf.ts';

/** The one master rule in the daemon's (shim) mode. */
const pickMaster = (names: string[], wanted: string, read: (n: string) => Buffer | undefined) =>
  pick(names, wanted, { mode: 'shim', isDir: () => false, read });
/** The one generator in the daemon's (shim) mode, for a master object. */
const generateMultusConf = (cfg: DaemonConfig, path: string, master: Record<string, unknown>) =>
  generate(JSON.stringify(master), path, { ...cfg, mode: 'shim' }).text;
import { parseMultusConf } from '../../../src/multus/conf.ts';

const silent = { error() {}, warn() {}, verbose() {}, debug() {}, enabled: () => false };

describe('pickMaster', () => {
  const files: Record<string, string> = {
    '00-multus.conf': '{"type":"multus-shim","cniVersion":"1.0.0"}',
    '05-other-multus.conf': '{"type":"multus","cniVersion":"1.0.0"}',
    '10-flannel.conflist': '{"name":"cbr0","plugins":[{"type":"flannel"}]}',
    '20-bridge.conf': '{"type":"bridge"}',
    '01-broken.conf': '{',
    '00-aaa.txt': '{"type":"x"}',
  };
  const read = (n: string) => (n in files ? Buffer.from(files[n]!) : undefined);

  it('first by name among .conf/.conflist, skipping ours, other multus configs and non-JSON', () => {
    expect(pickMaster(Object.keys(files), '', read)).toBe('10-flannel.conflist');
  });

  it('multusMasterCNI names it; never ours even when named', () => {
    expect(pickMaster(Object.keys(files), '20-bridge.conf', read)).toBe('20-bridge.conf');
    expect(pickMaster(Object.keys(files), '00-multus.conf', read)).toBeUndefined();
    expect(pickMaster(Object.keys(files), 'missing.conf', read)).toBeUndefined();
  });
});

describe('generateMultusConf', () => {
  it('type multus-shim, daemonSocketDir, clusterNetwork = the master path, capabilities, the daemon keys', () => {
    const cfg = parseDaemonConfig(
      JSON.stringify({
        socketDir: '/host/run/multus/',
        daemonSocketDir: '/run/multus/',
        kubeconfig: '/k',
        binDir: '/b',
        capabilities: { bandwidth: true },
      }),
    );
    const text = generateMultusConf(cfg, '/etc/cni/net.d/10-x.conflist', {
      cniVersion: '0.4.0',
      name: 'x',
      plugins: [{ type: 'a', capabilities: { portMappings: true, foo: false } }],
    });
    expect(JSON.parse(text)).toEqual({
      cniVersion: '0.4.0',
      name: 'multus-cni-network',
      type: 'multus-shim',
      daemonSocketDir: '/run/multus/',
      clusterNetwork: '/etc/cni/net.d/10-x.conflist',
      kubeconfig: '/k',
      binDir: '/b',
      capabilities: { portMappings: true, bandwidth: true },
    });
    // A thin call reads the same file.
    expect(parseMultusConf(text)).toMatchObject({
      clusterNetwork: '/etc/cni/net.d/10-x.conflist',
      kubeconfig: '/k',
      binDir: '/b',
    });
  });

  it('shimWaitSeconds goes into the generated config for the shim, only when set', () => {
    const master = { cniVersion: '1.0.0', name: 'x', type: 'a' };
    const set = JSON.parse(generateMultusConf(parseDaemonConfig('{"shimWaitSeconds": 5}'), '/m.conf', master));
    expect(set.shimWaitSeconds).toBe(5);
    expect(parseMultusConf(JSON.stringify(set))).toMatchObject({ clusterNetwork: '/m.conf' });
    expect(JSON.parse(generateMultusConf(parseDaemonConfig('{}'), '/m.conf', master))).not.toHaveProperty(
      'shimWaitSeconds',
    );
  });

  it("cniVersion from the daemon config wins; overrideNetworkName takes the master's name", () => {
    const cfg = parseDaemonConfig(JSON.stringify({ cniVersion: '1.0.0', overrideNetworkName: true }));
    expect(
      JSON.parse(generateMultusConf(cfg, '/m.conf', { cniVersion: '0.3.1', name: 'mine', type: 't' })),
    ).toMatchObject({ cniVersion: '1.0.0', name: 'mine' });
  });
});

describe('startConfigWriter', () => {
  let dir: string;
  let writer: ConfigWriter | undefined;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'mts-autoconf-'));
  });
  afterEach(() => {
    writer?.stop({ remove: false });
    writer = undefined;
    rmSync(dir, { recursive: true, force: true });
  });
  const cfg = (extra: Record<string, unknown> = {}) =>
    parseDaemonConfig(JSON.stringify({ cniConfigDir: dir, socketDir: '/run/x/', pollMs: 1, ...extra }));
  const ours = () => join(dir, '00-multus.conf');
  const read = () => JSON.parse(readFileSync(ours(), 'utf8')) as Record<string, unknown>;

  it('waits for the master, writes 0600, follows changes, removes on stop', () => {
    writer = startConfigWriter({ cfg: cfg(), log: silent, pollMs: 3_600_000 });
    expect(existsSync(ours())).toBe(false);
    writeFileSync(join(dir, '20-b.conf'), '{"cniVersion":"1.0.0","type":"bridge","name":"b"}');
    writer.sync();
    expect(read()).toMatchObject({
      type: 'multus-shim',
      clusterNetwork: join(dir, '20-b.conf'),
      daemonSocketDir: '/run/x/',
    });
    expect(statSync(ours()).mode & 0o777).toBe(0o600);
    // A master earlier by name appears: it takes over.
    writeFileSync(join(dir, '10-a.conflist'), '{"cniVersion":"0.4.0","name":"a","plugins":[{"type":"ptp"}]}');
    writer.sync();
    expect(read()).toMatchObject({ clusterNetwork: join(dir, '10-a.conflist'), cniVersion: '0.4.0' });
    // It changes: regenerated.
    writeFileSync(join(dir, '10-a.conflist'), '{"cniVersion":"1.0.0","name":"a","plugins":[{"type":"ptp"}]}');
    writer.sync();
    expect(read()).toMatchObject({ cniVersion: '1.0.0' });
    // Our own file is never the master, however often we look.
    writer.sync();
    expect(read()).toMatchObject({ clusterNetwork: join(dir, '10-a.conflist') });
    writer.stop();
    writer = undefined;
    expect(existsSync(ours())).toBe(false);
    expect(existsSync(join(dir, '10-a.conflist'))).toBe(true);
  });

  it('with only our own file present there is no master: nothing is written', () => {
    writeFileSync(ours(), '{"cniVersion":"1.0.0","type":"multus-shim","name":"m","clusterNetwork":"/x"}');
    writer = startConfigWriter({ cfg: cfg(), log: silent, pollMs: 3_600_000 });
    expect(writer.current()).toBe('');
    expect(read()).toMatchObject({ clusterNetwork: '/x' }); // untouched, not ours to remove
    writer.stop();
    writer = undefined;
    expect(existsSync(ours())).toBe(true);
  });

  it("our file renamed away by another CNI (Cilium's .cilium_bak, Multus #972): written again, a warning and a node event, at most every 10 min", () => {
    writeFileSync(
      join(dir, '05-cilium.conflist'),
      '{"cniVersion":"1.0.0","name":"cilium","plugins":[{"type":"cilium-cni"}]}',
    );
    const warnings: string[] = [];
    const events: string[] = [];
    let now = 1_000_000;
    const log = { ...silent, warn: (m: string) => warnings.push(m) };
    writer = startConfigWriter({
      cfg: cfg(),
      log,
      pollMs: 3_600_000,
      now: () => now,
      warnNode: (reason, message) => events.push(`${reason}: ${message}`),
    });
    expect(existsSync(ours())).toBe(true);
    renameSync(ours(), `${ours()}.cilium_bak`);
    writer.sync();
    expect(read()).toMatchObject({ clusterNetwork: join(dir, '05-cilium.conflist') });
    expect(warnings).toEqual([
      `00-multus.conf in ${dir} was renamed to 00-multus.conf.cilium_bak by another program, so the runtime ran the primary network alone for new pods; Cilium renames every other CNI config when its cni.exclusive is true: set cni.exclusive=false (Helm value) to run Cilium as the primary network under multus. Writing 00-multus.conf again`,
    ]);
    expect(events).toEqual([`MultusConfigRenamed: ${warnings[0]}`]);
    // renamed again a minute later: rewritten, not reported again yet
    now += 60_000;
    rmSync(`${ours()}.cilium_bak`);
    renameSync(ours(), `${ours()}.cilium_bak`);
    writer.sync();
    expect(existsSync(ours())).toBe(true);
    expect(events).toHaveLength(1);
    // deleted (not renamed): rewritten silently
    now += 3_600_000;
    rmSync(`${ours()}.cilium_bak`);
    rmSync(ours());
    writer.sync();
    expect(existsSync(ours())).toBe(true);
    expect(events).toHaveLength(1);
    // renamed after the interval: reported again
    renameSync(ours(), `${ours()}.cilium_bak`);
    writer.sync();
    expect(events).toHaveLength(2);
  });

  it('another writer of 00-multus.conf (a second Multus DaemonSet): a warning and a node event at start and when it rewrites ours, none for our own file', () => {
    writeFileSync(join(dir, '10-a.conf'), '{"cniVersion":"1.0.0","type":"bridge","name":"a"}');
    const theirs = '{"cniVersion":"0.3.1","name":"multus-cni-network","type":"multus-shim"}';
    writeFileSync(ours(), theirs);
    const events: string[] = [];
    let now = 1_000_000;
    const options = {
      cfg: cfg(),
      log: silent,
      pollMs: 3_600_000,
      now: () => now,
      warnNode: (reason: string, message: string) => events.push(`${reason}: ${message}`),
    };
    writer = startConfigWriter(options);
    const mine = readFileSync(ours(), 'utf8');
    expect(mine).not.toBe(theirs);
    const tail =
      ': another Multus DaemonSet or installer may write it too, and two writers of one file take turns ' +
      '(kubectl get ds -A | grep -i multus; remove the other one). Writing ours';
    expect(events).toEqual([
      `MultusConfigForeign: ${ours()} was not written by multus-ts with this configuration${tail}`,
    ]);
    now += 11 * 60_000;
    writeFileSync(ours(), theirs);
    writer.sync();
    expect(readFileSync(ours(), 'utf8')).toBe(mine);
    expect(events[1]).toBe(
      `MultusConfigForeign: ${ours()} was changed by another program after multus-ts wrote it${tail}`,
    );
    // a restarted daemon (an upgrade) finds its own file: no warning
    writer.stop({ remove: false });
    events.length = 0;
    writer = startConfigWriter(options);
    expect(events).toEqual([]);
  });

  it('the master going away removes the file', () => {
    writeFileSync(join(dir, '10-a.conf'), '{"cniVersion":"1.0.0","type":"bridge","name":"a"}');
    writer = startConfigWriter({ cfg: cfg(), log: silent, pollMs: 3_600_000 });
    expect(existsSync(ours())).toBe(true);
    rmSync(join(dir, '10-a.conf'));
    writer.sync();
    expect(existsSync(ours())).toBe(false);
  });

  it('notices a master that appears late without being asked (watch or poll)', async () => {
    writer = startConfigWriter({ cfg: cfg(), log: silent, pollMs: 20 });
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, '10-late.conf'), '{"cniVersion":"1.0.0","type":"bridge","name":"late"}');
    for (let i = 0; i < 500 && !existsSync(ours()); i++) await new Promise((r) => setTimeout(r, 10));
    expect(read()).toMatchObject({ clusterNetwork: join(dir, '10-late.conf') });
  });

  it('multusConfigFile <path>: copied into cniConfigDir when elsewhere, left alone when already there', () => {
    const other = join(dir, 'elsewhere');
    mkdirSync(other);
    const given = '{"cniVersion":"1.0.0","type":"multus-shim","name":"mine","clusterNetwork":"/x"}';
    writeFileSync(join(other, '05-mine.conf'), given);
    const elsewhere = cfg({ multusConfigFile: join(other, '05-mine.conf') });
    writer = startConfigWriter({ cfg: elsewhere, log: silent, pollMs: 3_600_000 });
    expect(readFileSync(join(dir, '05-mine.conf'), 'utf8')).toBe(readFileSync(join(other, '05-mine.conf'), 'utf8'));
    expect(existsSync(ours())).toBe(false);
    writer.stop();
    writer = undefined;
    expect(existsSync(join(dir, '05-mine.conf'))).toBe(false);
    writeFileSync(join(dir, '06-here.conf'), given);
    const here = cfg({ multusConfigFile: join(dir, '06-here.conf') });
    writer = startConfigWriter({ cfg: here, log: silent, pollMs: 3_600_000 });
    expect(writer.current()).toBe(join(dir, '06-here.conf'));
    writer.stop();
    writer = undefined;
    expect(existsSync(join(dir, '06-here.conf'))).toBe(true);
  });
});

describe('shimSocketDir: the socket dir the generated config names for the shim', () => {
  // a container's view: the host's /run/multus at /host/run/multus (Multus' thick manifest) and under /hostroot
  const same = (pairs: [string, string][]) => (a: string, b: string) =>
    a === b || pairs.some(([x, y]) => (x === a && y === b) || (x === b && y === a));
  const base = { daemonSocketDir: '/host/run/multus/', daemonSocketDirSet: false, chrootDir: '/hostroot' };

  it("Multus' thick manifest (socketDir /host/run/multus/, chrootDir /hostroot): left out, the shim's default", () => {
    const cfg = { ...base, socketDir: '/host/run/multus/' };
    expect(shimSocketDir(cfg, same([['/host/run/multus/', '/hostroot/run/multus']]))).toEqual({ dir: '' });
    const generated = JSON.parse(
      generateMultusConf({ ...parseDaemonConfig('{}'), daemonSocketDir: '' }, '/host/etc/cni/net.d/10-a.conf', {}),
    );
    expect(Object.keys(generated)).not.toContain('daemonSocketDir');
  });

  it('the same path on the host (our resident manifest), a daemon on the host, or set in the config: kept', () => {
    const ours = { ...base, socketDir: '/run/multus/', daemonSocketDir: '/run/multus/' };
    expect(shimSocketDir(ours, same([['/run/multus/', '/hostroot/run/multus/']]))).toEqual({ dir: '/run/multus/' });
    const onHost = { ...base, chrootDir: '', socketDir: '/var/run/m/', daemonSocketDir: '/var/run/m/' };
    expect(shimSocketDir(onHost, same([]))).toEqual({ dir: '/var/run/m/' });
    const set = { ...base, socketDir: '/host/run/multus/', daemonSocketDir: '/run/x/', daemonSocketDirSet: true };
    expect(shimSocketDir(set, same([]))).toEqual({ dir: '/run/x/' });
  });

  it('neither the host path nor /run/multus: left out, with a warning naming daemonSocketDir', () => {
    const r = shimSocketDir({ ...base, socketDir: '/sock/' }, same([]));
    expect(r.dir).toBe('');
    expect(r.warning).toContain('set daemonSocketDir');
  });
});
