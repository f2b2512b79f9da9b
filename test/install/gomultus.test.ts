/**
 * `multus install` against Multus v4.3.0's real thin entrypoint (built by test/peers/build-gomultus.sh into
 * .cache/gomultus/): both run on the same node layout and the files they leave are compared byte for byte.
 *
 * Each run is in its own mount namespace (root) where a tmpfs on /run holds the node at /run/node and the
 * service account at /run/secrets/kubernetes.io/serviceaccount (the path Multus reads), so both get identical
 * arguments and paths. Every difference kept is asserted here and listed in docs/install.md:
 *   - `"cniConf": DIR` is written `"confDir": DIR` (the key the plugin reads);
 *   - the kubeconfig dir multus.d is 0700 (Multus: 0755);
 *   - the generated file of the other name (00-multus.conf vs .conflist) is removed (Multus leaves it, and a
 *     stale 00-multus.conf shadows a new 00-multus.conflist);
 *   - when the master's cniVersion changes, Multus fails and exits (0); multus install follows it;
 *   - with no master yet, Multus' entrypoint fails (and exits 0), multus install waits for one.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { describe, expect, it, onTestFinished } from 'vitest';
import { fileExists, isRoot, needs } from '../helpers/skip.ts';
import { BRIDGE_031, FLANNEL } from '../helpers/install.ts';

const REPO = join(import.meta.dirname, '..', '..');
const CACHE = process.env.MULTUS_TS_CACHE_DIR || join(REPO, '.cache');
const GO = process.env.MULTUS_TS_GOMULTUS_ENTRYPOINT || join(CACHE, 'gomultus', 'thin_entrypoint');
const TS = process.env.MULTUS_TS_BIN || join(REPO, 'build', 'multus');

const ready =
  needs(isRoot(), fileExists(GO, "Multus' thin_entrypoint (bash test/peers/build-gomultus.sh)")) &&
  needs(fileExists(TS, 'the built executable (npm run build)'));

const NODE = '/run/node';
const ARGS = [
  `--cni-bin-dir=${NODE}/bin`,
  `--cni-conf-dir=${NODE}/net.d`,
  `--multus-autoconfig-dir=${NODE}/net.d`,
  `--multus-bin-file=${NODE}/src/multus`,
  `--multus-cni-conf-dir=${NODE}/multus-net.d`,
];
// The node is bind-mounted at /run/node and the service account linked where Multus reads it; $1.. is the command.
const WRAP =
  'mount -t tmpfs -o mode=0755 tmpfs /run && mkdir -p /run/node /run/secrets/kubernetes.io && ' +
  'mount --bind "$NODE_DIR" /run/node && ln -s /run/node/sa /run/secrets/kubernetes.io/serviceaccount && exec "$@"';

interface Runner {
  dir: string;
  proc: ChildProcess | null;
  out: string;
  start(args: string[]): void;
  stop(): Promise<number | null>;
}

function node(): Runner {
  const dir = mkdtempSync(join(tmpdir(), 'multus-gocmp-'));
  for (const d of ['net.d', 'bin', 'src', 'sa']) mkdirSync(join(dir, d));
  writeFileSync(join(dir, 'sa', 'token'), 'eyJhbGciOiJSUzI1NiJ9.e30.sig');
  const pem = '-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----\n';
  writeFileSync(join(dir, 'sa', 'ca.crt'), pem);
  writeFileSync(join(dir, 'src', 'multus'), 'the executable');
  chmodSync(join(dir, 'src', 'multus'), 0o755);
  const r: Runner = {
    dir,
    proc: null,
    out: '',
    start(args) {
      const env: Record<string, string> = {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        NODE_DIR: dir,
        KUBERNETES_SERVICE_HOST: '10.96.0.1',
        KUBERNETES_SERVICE_PORT: '443',
      };
      const p = spawn('unshare', ['-m', 'sh', '-c', WRAP, 'sh', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
      p.stdout!.on('data', (d: Buffer) => (r.out += d.toString()));
      p.stderr!.on('data', (d: Buffer) => (r.out += d.toString()));
      r.proc = p;
    },
    async stop() {
      const p = r.proc;
      if (!p) return null;
      r.proc = null;
      if (p.exitCode !== null) return p.exitCode;
      const done = new Promise<number | null>((res) => p.on('exit', (c) => res(c)));
      p.kill('SIGTERM');
      return done;
    },
  };
  onTestFinished(async () => {
    await r.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  return r;
}

/** Every file and dir under net.d and bin: relative path -> mode and content. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (rel: string): void => {
    for (const name of readdirSync(join(dir, rel)).sort()) {
      const p = join(rel, name);
      const st = statSync(join(dir, p));
      const mode = (st.mode & 0o777).toString(8);
      if (st.isDirectory()) {
        out[p + '/'] = mode;
        walk(p);
      } else {
        out[p] = `${mode} ${readFileSync(join(dir, p), 'utf8')}`;
      }
    }
  };
  walk('net.d');
  walk('bin');
  return out;
}

/** Multus' output with the differences multus-ts keeps on purpose applied. */
function expectedFromGo(go: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(go)) {
    out[k] = k === 'net.d/multus.d/' ? '700' : v.replace(/\n {8}"cniConf": /, '\n        "confDir": ');
  }
  // ours also links passthru to the executable when none is beside it (the auxiliary chain's plugin;
  // docs/install.md); Multus' thin entrypoint copies none (its thick image's install_multus copies its own)
  if (out['bin/multus'] && !out['bin/passthru']) out['bin/passthru'] = out['bin/multus'];
  return out;
}

async function until(what: string, r: Runner, ok: () => boolean): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if (ok()) return;
    await delay(50);
  }
  throw new Error(`timed out waiting for ${what}; output:\n${r.out}`);
}

function has(r: Runner, file: string, text = ''): () => boolean {
  return () => {
    try {
      return readFileSync(join(r.dir, 'net.d', file), 'utf8').includes(text);
    } catch {
      return false;
    }
  };
}

type Setup = (netd: string) => void;

/** Starts both on the same setup, waits for `file` (containing `text`), returns both snapshots. */
async function both(setup: Setup, file: string, text: string, extra: string[] = []): Promise<[Runner, Runner]> {
  const go = node();
  const ts = node();
  setup(join(go.dir, 'net.d'));
  setup(join(ts.dir, 'net.d'));
  go.start([GO, ...ARGS, ...extra]);
  ts.start([TS, 'install', ...ARGS, ...extra]);
  await until(`Go's ${file}`, go, has(go, file, text));
  await until(`multus install's ${file}`, ts, has(ts, file, text));
  // Both write the kubeconfig first and the conf file last; the conf file seen means both are done.
  return [go, ts];
}

const put =
  (name: string, text: string): Setup =>
  (netd) =>
    writeFileSync(join(netd, name), text);
const FLANNEL_11 = FLANNEL.replace('"1.0.0"', '"1.1.0"');
const CALICO = JSON.stringify({
  name: 'k8s-pod-network',
  cniVersion: '0.3.1',
  plugins: [
    {
      type: 'calico',
      log_level: 'info',
      datastore_type: 'kubernetes',
      mtu: 1440,
      ipam: { type: 'calico-ipam' },
      policy: { type: 'k8s' },
      kubernetes: { kubeconfig: '/etc/cni/net.d/calico-kubeconfig' },
    },
    { type: 'portmap', snat: true, capabilities: { portMappings: true } },
    { type: 'bandwidth', capabilities: { bandwidth: true } },
  ],
});
const ALL_OPTIONS = [
  '--namespace-isolation',
  '--global-namespaces=default,tools',
  '--multus-log-to-stderr=false',
  '--multus-log-level=Verbose',
  '--multus-log-file=/var/log/multus.log',
  '--additional-bin-dir=/opt/extra/bin',
  '--readiness-indicator-file=/run/flannel/subnet.env',
  '--override-network-name',
  '--multus-kubeconfig-file-host=/etc/kubernetes/multus.kubeconfig',
];

describe.runIf(ready)("multus install vs Multus' thin entrypoint (byte for byte)", () => {
  it.each<[string, Setup, string, string[]]>([
    ['a single config (0.3.1)', put('10-bridge.conf', BRIDGE_031), '00-multus.conf', []],
    ['a conflist (1.0.0)', put('10-flannel.conflist', FLANNEL), '00-multus.conflist', []],
    ['a 1.1.0 conflist with every option', put('10-flannel.conflist', FLANNEL_11), '00-multus.conflist', ALL_OPTIONS],
    ['a pre-1.0 conflist (calico)', put('10-calico.conflist', CALICO), '00-multus.conf', []],
    [
      'several masters',
      (d) => {
        put('20-flannel.conflist', FLANNEL)(d);
        put('10-calico.conflist', CALICO)(d);
        put('05-x.json', '{}')(d);
      },
      '00-multus.conf',
      [],
    ],
    [
      'our own file present',
      (d) => {
        put('00-multus.conf', '{"cniVersion":"0.3.1","name":"stale","type":"multus"}')(d);
        put('10-flannel.conflist', FLANNEL)(d);
      },
      '00-multus.conflist',
      [],
    ],
  ])('%s', async (name, setup, file, extra) => {
    const [go, ts] = await both(setup, file, '"delegates"', extra);
    const snapGo = snapshot(go.dir);
    const snapTs = snapshot(ts.dir);
    expect(snapGo['net.d/multus.d/']).toBe('755');
    expect(snapGo[`net.d/${file}`]).toMatch(/\n {8}"cniConf": /);
    const expected = expectedFromGo(snapGo);
    if (name === 'our own file present') {
      // Multus leaves the stale 00-multus.conf, which sorts first and so shadows the new .conflist.
      expect(snapGo['net.d/00-multus.conf']).toContain('stale');
      delete expected['net.d/00-multus.conf'];
    }
    expect(snapTs).toEqual(expected);
  });

  it('a master that changes, is removed and restored (watch with --cleanup-config-on-exit)', async () => {
    const master = '10-net.conflist';
    const [go, ts] = await both(put(master, FLANNEL), '00-multus.conflist', 'cbr0', ['--cleanup-config-on-exit']);
    const changed = FLANNEL.replace('"portmap"', '"tuning"');
    for (const r of [go, ts]) writeFileSync(join(r.dir, 'net.d', master), changed);
    for (const r of [go, ts]) await until('the regenerated file', r, has(r, '00-multus.conflist', 'tuning'));
    expect(snapshot(ts.dir)).toEqual(expectedFromGo(snapshot(go.dir)));

    for (const r of [go, ts]) rmSync(join(r.dir, 'net.d', master));
    await delay(2500); // both tick every second: two ticks without a master
    expect(snapshot(ts.dir)).toEqual(expectedFromGo(snapshot(go.dir)));
    expect(snapshot(ts.dir)['net.d/00-multus.conflist']).toContain('tuning');

    for (const r of [go, ts]) writeFileSync(join(r.dir, 'net.d', master), FLANNEL);
    for (const r of [go, ts]) await until('the restored master', r, has(r, '00-multus.conflist', 'portmap'));
    expect(snapshot(ts.dir)).toEqual(expectedFromGo(snapshot(go.dir)));

    // The master's version changes (here below 1.0.0): Multus keeps the first master's version, fails and exits
    // (0), removing its file (--cleanup-config-on-exit); multus install writes 00-multus.conf and drops the
    // .conflist. What it writes is what a fresh run of Multus writes.
    for (const r of [go, ts]) writeFileSync(join(r.dir, 'net.d', master), CALICO);
    expect(await new Promise((res) => go.proc!.on('exit', res))).toBe(0);
    expect(go.out).toContain('Multus cni version is "1.0.0" while master plugin cni version is "0.3.1"');
    await until('the 0.3.1 file', ts, has(ts, '00-multus.conf', 'calico'));
    go.start([GO, ...ARGS, '--cleanup-config-on-exit']);
    await until("Go's fresh 0.3.1 file", go, has(go, '00-multus.conf', 'calico'));
    expect(snapshot(ts.dir)).toEqual(expectedFromGo(snapshot(go.dir)));

    // SIGTERM with --cleanup-config-on-exit: both remove the generated files (here: the one each has).
    expect(await go.stop()).toBe(0);
    expect(await ts.stop()).toBe(0);
    const left = (r: Runner): string[] => readdirSync(join(r.dir, 'net.d')).sort();
    expect(left(go)).toEqual([master, 'multus.d']);
    expect(left(ts)).toEqual([master, 'multus.d']);
  });

  it('a master that appears late: Multus fails (exit 0), multus install waits', async () => {
    const go = node();
    const ts = node();
    go.start([GO, ...ARGS]);
    ts.start([TS, 'install', ...ARGS]);
    expect(await new Promise((res) => go.proc!.on('exit', res))).toBe(0);
    expect(go.out).toContain('failed to create multus config: cannot find valid master CNI config');
    await until('the waiting line', ts, () => ts.out.includes('waiting for a master CNI config'));
    for (const r of [go, ts]) writeFileSync(join(r.dir, 'net.d', '10-flannel.conflist'), FLANNEL);
    go.start([GO, ...ARGS]);
    for (const r of [go, ts]) await until('the file', r, has(r, '00-multus.conflist', 'cbr0'));
    expect(snapshot(ts.dir)).toEqual(expectedFromGo(snapshot(go.dir)));
  });
});
