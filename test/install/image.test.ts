/**
 * `npm run image` (scripts/image.sh): builds the image into a temp dir and reads the tarball as a runtime
 * would (index -> manifest -> config and layer): the file list is exactly Multus' layout (the executable under
 * each of Multus' names, the shim), busybox, the libraries ldd lists, the CA bundle; entrypoint /thin_entrypoint;
 * version and revision labels. As root, the unpacked layer is a working root: every entrypoint name runs there
 * (chroot) with its flags, bad ones included, as Multus' manifests and rke2's chart call them, with nothing else
 * but the /proc that every container runtime mounts (Bun reads its own /proc/self, and aborts without it).
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileExists, isRoot, needs } from '../helpers/skip.ts';

const REPO = join(import.meta.dirname, '..', '..');
const BUILT = join(REPO, 'build', 'multus');
const ready = needs(
  fileExists('/usr/bin/umoci', "Debian's umoci (apt-get install umoci)"),
  fileExists(BUILT, 'npm run build'),
  fileExists('/usr/bin/busybox', "Debian's busybox-static (apt-get install busybox-static)"),
);
/** Multus' names of the one executable, in the image (hard links: one file in the layer). */
const NAMES = [
  '/thin_entrypoint',
  '/install_multus',
  ...['multus', 'multus-daemon', 'install_multus', 'passthru', 'thin_entrypoint'].map(
    (n) => `/usr/src/multus-cni/bin/${n}`,
  ),
];
const BUSYBOX_TOOLS = [
  'sh',
  'cp',
  'mv',
  'rm',
  'ln',
  'ls',
  'cat',
  'mkdir',
  'chmod',
  'echo',
  'test',
  'sleep',
  'true',
  'false',
];
const version = (JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string }).version;

describe.runIf(ready)('npm run image', () => {
  let dir = '';
  let unpacked = '';
  let files: string[] = [];
  let links: string[] = [];
  let config: { config: { Entrypoint: string[]; Labels: Record<string, string> }; architecture: string };
  let index: { manifests: Array<{ digest: string; annotations: Record<string, string> }> };

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'multus-image-'));
    const r = spawnSync('bash', [join(REPO, 'scripts', 'image.sh')], {
      env: { ...process.env, MULTUS_TS_IMAGE_DIR: join(dir, 'out') },
      encoding: 'utf8',
    });
    expect(r.status, r.stderr).toBe(0);
    unpacked = join(dir, 'tar');
    mkdirSync(unpacked);
    execFileSync('tar', ['-xf', join(dir, 'out', `multus-ts-${version}.tar`), '-C', unpacked]);
    const blob = (digest: string): string => join(unpacked, 'blobs', ...digest.split(':'));
    index = JSON.parse(readFileSync(join(unpacked, 'index.json'), 'utf8'));
    const manifest = JSON.parse(readFileSync(blob(index.manifests[0]!.digest), 'utf8')) as {
      config: { digest: string };
      layers: Array<{ digest: string }>;
    };
    config = JSON.parse(readFileSync(blob(manifest.config.digest), 'utf8'));
    expect(manifest.layers).toHaveLength(1);
    const root = join(dir, 'rootfs');
    mkdirSync(root);
    execFileSync('tar', ['-xzf', blob(manifest.layers[0]!.digest), '-C', root]);
    files = execFileSync('find', ['.', '-type', 'f'], { cwd: root, encoding: 'utf8' }).trim().split('\n').sort();
    links = execFileSync('find', ['.', '-type', 'l', '-printf', '%p -> %l\\n'], { cwd: root, encoding: 'utf8' })
      .trim()
      .split('\n');
  }, 300_000);
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("holds Multus' layout: the executable under each name, the shim, busybox, exactly ldd's libraries, the CA bundle", () => {
    const shim = existsSync(join(REPO, 'build', 'multus-shim'));
    const payloads = readdirSync(join(REPO, 'build')).filter((f) => f.startsWith('.multus-bun-'));
    const bins = [...payloads, 'multus', ...(shim ? ['multus-shim'] : [])];
    // the resident daemon's tools: chroot for chrootDir, nsenter and ip for the routes it sets in pods
    const extra = shim ? ['/usr/sbin/chroot', '/usr/bin/nsenter', '/usr/bin/ip'] : [];
    const libs = new Set<string>();
    for (const b of [...bins.map((x) => join(REPO, 'build', x)), ...extra]) {
      // a static executable (the launcher, the Go shim): ldd says "not a dynamic executable" and exits 1
      const out = spawnSync('ldd', [b], { encoding: 'utf8' }).stdout;
      for (const line of out.split('\n')) {
        const m = /=> (\/\S+)/.exec(line) ?? /^\s*(\/\S+) \(/.exec(line);
        if (m) libs.add(m[1]!);
      }
    }
    expect(libs.size).toBeGreaterThan(3);
    const expected = [
      ...NAMES.map((n) => `.${n}`),
      // the Bun executable the launcher carries, beside each directory of its names (docs/build.md)
      ...payloads.flatMap((p) => [`./usr/src/multus-cni/bin/${p}`, `./${p}`]),
      ...(shim ? ['./usr/src/multus-cni/bin/multus-shim'] : []),
      ...extra.map((x) => `.${x}`),
      ...[...libs].map((l) => `.${l}`),
      './bin/busybox',
      './etc/ssl/certs/ca-certificates.crt',
    ].sort();
    expect(files).toEqual(expected);
    // every name is the one executable (one inode: the layer holds it once)
    const root = join(dir, 'rootfs');
    expect(new Set(NAMES.map((n) => statSync(join(root, n)).ino)).size).toBe(1);
    // containerd passes CNI_NETNS as /var/run/netns/<name>; the resident DaemonSet mounts /run/netns
    expect(links.sort()).toEqual(['./var/run -> ../run', ...BUSYBOX_TOOLS.map((t) => `./bin/${t} -> busybox`)].sort());
  });

  it("runs /thin_entrypoint (as Multus' thin image), names itself and carries the version and revision", () => {
    expect(config.config.Entrypoint).toEqual(['/thin_entrypoint']);
    expect(config.architecture).toBe('amd64');
    expect(config.config.Labels['org.opencontainers.image.version']).toBe(version);
    const head = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: REPO, encoding: 'utf8' }).trim();
    expect(config.config.Labels['org.opencontainers.image.revision']).toMatch(new RegExp(`^${head}(-dirty)?$`));
    expect(index.manifests[0]!.annotations['io.containerd.image.name']).toBe(`ghcr.io/multus-ts/multus-ts:${version}`);
  });

  describe.runIf(needs(isRoot()))('a working root: every name runs there with its flags', () => {
    let rootfs = '';
    beforeAll(() => {
      rootfs = join(dir, 'rootfs');
      mkdirSync(join(rootfs, 'proc'));
      execFileSync('mount', ['-t', 'proc', 'proc', join(rootfs, 'proc')]);
      // the host paths Multus' manifests mount, and a service account (thin_entrypoint's kubeconfig)
      for (const d of ['host/opt/cni/bin', 'host/etc/cni/net.d', 'var/run/secrets/kubernetes.io/serviceaccount']) {
        mkdirSync(join(rootfs, d), { recursive: true });
      }
      const sa = join(rootfs, 'run/secrets/kubernetes.io/serviceaccount');
      writeFileSync(join(sa, 'token'), 'a-token');
      writeFileSync(join(sa, 'ca.crt'), 'a CA\n');
      const master = { cniVersion: '1.0.0', name: 'cbr0', plugins: [{ type: 'bridge' }] };
      writeFileSync(join(rootfs, 'host/etc/cni/net.d/10-bridge.conflist'), JSON.stringify(master));
    });
    afterAll(() => {
      if (rootfs) execFileSync('umount', [join(rootfs, 'proc')]);
    });
    const inRoot = (args: string[], env: Record<string, string> = {}) => {
      const r = spawnSync('/usr/sbin/chroot', [rootfs, ...args], { encoding: 'utf8', env });
      return { code: r.status, stdout: r.stdout, stderr: r.stderr };
    };
    const hostBin = () => readdirSync(join(rootfs, 'host/opt/cni/bin')).sort();

    it("multus and passthru: the version, the roles' bundle (embedded) and a CNI VERSION call", () => {
      expect(inRoot(['/usr/src/multus-cni/bin/multus', '--version']).stdout).toMatch(/^multus-ts: version:/);
      expect(inRoot(['/usr/src/multus-cni/bin/multus', 'install', '--help']).stdout).toContain('usage: multus install');
      expect(inRoot(['/usr/src/multus-cni/bin/multus', '-bogus']).code).toBe(2);
      const v = inRoot(['/usr/src/multus-cni/bin/passthru'], { CNI_COMMAND: 'VERSION' });
      expect(JSON.parse(v.stdout).supportedVersions).toContain('1.0.0');
    });

    it("install_multus -d /host/opt/cni/bin -t thick|thin (the manifests' init containers); bad flags exit 2", () => {
      const shim = existsSync(join(rootfs, 'usr/src/multus-cni/bin/multus-shim'));
      if (shim) {
        const thick = ['/usr/src/multus-cni/bin/install_multus', '-d', '/host/opt/cni/bin', '-t', 'thick'];
        expect(inRoot(thick)).toMatchObject({ code: 0, stdout: expect.stringContaining('multus multus-shim copy') });
        expect(hostBin()).toEqual(['multus-shim', 'passthru']);
      }
      expect(inRoot(['/install_multus', '--type', 'thin']).code).toBe(0);
      // and the Bun executable our launcher (multus) starts, beside it (docs/build.md, "The launcher")
      const [payload, ...rest] = hostBin();
      expect(payload).toMatch(/^\.multus-bun-[0-9a-f]{16}$/);
      expect(rest).toEqual(shim ? ['multus', 'multus-shim', 'passthru'] : ['multus', 'passthru']);
      expect(inRoot(['/install_multus', '--bogus'])).toMatchObject({ code: 2, stderr: /unknown flag: --bogus\n$/ });
      expect(inRoot(['/install_multus', '-t', 'thinner'])).toMatchObject({ code: 1 });
    });

    it('sh -c "cp ... && cp ..." (rke2-multus\' thick init container) with the image\'s busybox', () => {
      rmSync(join(rootfs, 'host/opt/cni/bin'), { recursive: true });
      mkdirSync(join(rootfs, 'host/opt/cni/bin'));
      const cp =
        'cp /usr/src/multus-cni/bin/passthru /host/opt/cni/bin/passthru && ' +
        'cp /usr/src/multus-cni/bin/multus /host/opt/cni/bin/multus';
      expect(inRoot(['/bin/sh', '-c', cp], { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' }).code).toBe(0);
      expect(hostBin()).toEqual(['multus', 'passthru']);
    });

    it('multus-daemon: -version exits 4, a bad flag 2, -config reaches the daemon', () => {
      const bin = '/usr/src/multus-cni/bin/multus-daemon';
      expect(inRoot([bin, '-version'])).toMatchObject({ code: 4, stdout: /^multus-daemon: version:/ });
      expect(inRoot([bin, '-bogus'])).toMatchObject({ code: 2, stderr: /^flag provided but not defined: -bogus\n/ });
      const d = inRoot([bin, '-config', '/nowhere.json']);
      expect([d.code, d.stderr]).toEqual([2, expect.stringContaining('cannot read the daemon config /nowhere.json')]);
    });

    it("/thin_entrypoint: Multus' thin manifest's args write the kubeconfig and 00-multus.conflist; bad flags exit 2", async () => {
      expect(inRoot(['/thin_entrypoint', '--bogus'])).toMatchObject({ code: 2, stderr: /unknown flag: --bogus\n$/ });
      expect(inRoot(['/thin_entrypoint', '-h'])).toMatchObject({ code: 1, stderr: /--multus-conf-file string/ });
      const args = [
        '--multus-conf-file=auto',
        '--multus-autoconfig-dir=/host/etc/cni/net.d',
        '--cni-conf-dir=/host/etc/cni/net.d',
      ];
      const env = { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' };
      const p = spawn('/usr/sbin/chroot', [rootfs, '/thin_entrypoint', ...args], { env, stdio: 'ignore' });
      const conf = join(rootfs, 'host/etc/cni/net.d/00-multus.conflist');
      try {
        for (let i = 0; i < 300 && !existsSync(conf); i++) await new Promise((r) => setTimeout(r, 100));
        const generated = JSON.parse(readFileSync(conf, 'utf8'));
        expect(generated.plugins[0].delegates[0].name).toBe('cbr0');
        const kubeconfig = readFileSync(join(rootfs, 'host/etc/cni/net.d/multus.d/multus.kubeconfig'), 'utf8');
        expect(kubeconfig).toContain('server: https://10.96.0.1:443');
        expect(hostBin()).toContain('multus');
      } finally {
        const exited = new Promise((r) => p.once('exit', (code) => r(code)));
        p.kill('SIGTERM');
        expect(await exited).toBe(0);
      }
    }, 60_000);
  });
});
