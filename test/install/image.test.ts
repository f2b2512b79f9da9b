/**
 * `npm run image` (scripts/image.sh): builds the image into a temp dir and reads the tarball as a runtime
 * would (index -> the platforms' index -> each manifest -> config and layer): one index of linux/amd64 and
 * linux/arm64 named <name>:<version>-<short commit>[-dirty]; in each platform's one layer (at most 100 MB
 * compressed) the file list is exactly Multus' layout (the launcher under each of Multus' names as hard links and
 * its Bun executable beside it, each stored once; the shim), busybox, the libraries the programs link, the CA bundle; entrypoint /thin_entrypoint; version
 * and revision labels; our manifests and the chart naming that tag. As root, the unpacked amd64 layer is a working
 * root: every entrypoint name runs there (chroot) with its flags, bad ones included, as Multus' manifests and
 * rke2's chart call them, with nothing else but the /proc that every container runtime mounts (Bun reads its own
 * /proc/self, and aborts without it); the arm64 one answers VERSION there under qemu-user. The image build costs
 * this file about a minute (two gzip'd layers; the arm64 build is made once, build/arm64).
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
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
const CACHE = process.env.MULTUS_TS_CACHE_DIR || join(REPO, '.cache');
const ready = needs(
  fileExists('/usr/bin/umoci', "Debian's umoci (apt-get install umoci)"),
  fileExists(BUILT, 'npm run build'),
  fileExists('/usr/bin/busybox', "Debian's busybox-static (apt-get install busybox-static)"),
  fileExists(join(CACHE, 'arm64-root/bin/busybox'), 'the arm64 root (bash scripts/setup-arm64.sh)'),
  fileExists('/usr/bin/qemu-aarch64-static', "Debian's qemu-user-static, which runs the arm64 Bun's compiler"),
);
const HELM = join(CACHE, 'helm', 'helm');
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
const ARCHES = ['amd64', 'arm64'] as const;
type Arch = (typeof ARCHES)[number];
const version = (JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string }).version;
const git = (...args: string[]) => execFileSync('git', args, { cwd: REPO, encoding: 'utf8' }).trim();
const sha256 = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  platform?: { os: string; architecture: string };
  annotations?: Record<string, string>;
}
interface Platform {
  config: { config: { Entrypoint: string[]; Labels: Record<string, string> }; architecture: string; os: string };
  layers: Descriptor[];
  rootfs: string;
  files: string[];
  links: string[];
  /** the layer's tar listing, one line per entry (`tar -tvzf`) */
  listing: string[];
}

describe.runIf(ready)('npm run image', () => {
  let dir = '';
  let out = '';
  let tag = '';
  let top: { manifests: Descriptor[] };
  let index: { mediaType: string; manifests: Descriptor[] };
  const img = {} as Record<Arch, Platform>;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'multus-image-'));
    out = join(dir, 'out');
    // the tag the image gets: the work tree as the script finds it
    const dirty = git('status', '--porcelain') === '' ? '' : '-dirty';
    tag = `${version}-${git('rev-parse', '--short', 'HEAD')}${dirty}`;
    const r = spawnSync('bash', [join(REPO, 'scripts', 'image.sh')], {
      env: { ...process.env, MULTUS_TS_IMAGE_DIR: out },
      encoding: 'utf8',
    });
    expect(r.status, r.stderr).toBe(0);
    const unpacked = join(dir, 'tar');
    mkdirSync(unpacked);
    execFileSync('tar', ['-xf', join(out, `multus-ts-${tag}.tar`), '-C', unpacked]);
    const blob = (digest: string): string => join(unpacked, 'blobs', ...digest.split(':'));
    const json = (digest: string) => JSON.parse(readFileSync(blob(digest), 'utf8'));
    top = JSON.parse(readFileSync(join(unpacked, 'index.json'), 'utf8'));
    index = json(top.manifests[0]!.digest);
    for (const m of index.manifests) {
      const arch = m.platform!.architecture as Arch;
      const manifest = json(m.digest) as { config: { digest: string }; layers: Descriptor[] };
      const rootfs = join(dir, `rootfs-${arch}`);
      mkdirSync(rootfs);
      const layer = blob(manifest.layers[0]!.digest);
      execFileSync('tar', ['-xzf', layer, '-C', rootfs]);
      const find = (...a: string[]) => execFileSync('find', ['.', ...a], { cwd: rootfs, encoding: 'utf8' }).trim();
      img[arch] = {
        config: json(manifest.config.digest),
        layers: manifest.layers,
        rootfs,
        files: find('-type', 'f').split('\n').sort(),
        links: find('-type', 'l', '-printf', '%p -> %l\\n').split('\n').sort(),
        listing: execFileSync('tar', ['-tvzf', layer], { encoding: 'utf8', maxBuffer: 16 << 20 })
          .trim()
          .split('\n'),
      };
    }
  }, 600_000);
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('is one index of linux/amd64 and linux/arm64, named <name>:<version>-<short commit>[-dirty]', () => {
    expect(tag).toMatch(new RegExp(`^${version.replaceAll('.', '\\.')}-[0-9a-f]{7,}(-dirty)?$`));
    expect(top.manifests).toHaveLength(1);
    expect(top.manifests[0]).toMatchObject({
      mediaType: 'application/vnd.oci.image.index.v1+json',
      annotations: {
        'io.containerd.image.name': `ghcr.io/multus-ts/multus-ts:${tag}`,
        'org.opencontainers.image.ref.name': `ghcr.io/multus-ts/multus-ts:${tag}`,
      },
    });
    expect(index.manifests.map((m) => m.platform)).toEqual(
      ARCHES.map((architecture) => ({ architecture, os: 'linux' })),
    );
    // the layout keeps the plain tag, as skopeo and umoci address it (oci:build/image/oci:<tag>)
    const layout = JSON.parse(readFileSync(join(out, 'oci', 'index.json'), 'utf8')) as typeof top;
    expect(layout.manifests.map((m) => m.annotations)).toEqual([{ 'org.opencontainers.image.ref.name': tag }]);
  });

  it.each(ARCHES)('%s: one layer of at most 100 MB compressed, the executable in it once', (arch) => {
    const p = img[arch];
    expect(p.layers).toHaveLength(1);
    expect(p.layers[0]!.size).toBeLessThanOrEqual(100_000_000);
    const bin = join(REPO, 'build', ...(arch === 'amd64' ? [] : [arch]));
    // every name is the launcher (one inode, build/multus without its payload), and its Bun executable is one file
    // beside it and in / (build/multus would have been a second copy of it)
    expect(new Set(NAMES.map((n) => statSync(join(p.rootfs, n)).ino)).size).toBe(1);
    expect(sha256(join(p.rootfs, NAMES[0]!))).toBe(sha256(join(bin, 'multus.launcher')));
    const payload = readdirSync(bin).find((f) => f.startsWith('.multus-bun-'))!;
    const payloads = [`/${payload}`, `/usr/src/multus-cni/bin/${payload}`];
    expect(p.files.filter((f) => f.includes('.multus-bun-')).sort()).toEqual(payloads.map((f) => `.${f}`));
    expect(new Set(payloads.map((f) => statSync(join(p.rootfs, f)).ino)).size).toBe(1);
    expect(sha256(join(p.rootfs, payloads[0]!))).toBe(sha256(join(bin, payload)));
    // in the layer's tar: one large file, every other name a hard link
    const big = p.listing.filter((l) => /^-/.test(l) && Number(l.split(/\s+/)[2]) > 10_000_000);
    expect(big).toHaveLength(1);
    expect(p.listing.filter((l) => /^h.* link to /.test(l))).toHaveLength(NAMES.length - 1 + payloads.length - 1);
  });

  it('a name copied out of the image alone says that its Bun executable belongs beside it (CNI error)', () => {
    const alone = join(dir, 'alone');
    mkdirSync(alone);
    copyFileSync(join(img.amd64.rootfs, 'usr/src/multus-cni/bin/passthru'), join(alone, 'passthru'));
    chmodSync(join(alone, 'passthru'), 0o755);
    const r = spawnSync(join(alone, 'passthru'), [], {
      env: { CNI_COMMAND: 'VERSION' },
      input: '{}',
      encoding: 'utf8',
    });
    expect(r.status).toBe(1);
    expect(JSON.parse(r.stdout)).toMatchObject({
      code: 999,
      details: expect.stringContaining('is the launcher alone'),
    });
  });

  it.each(ARCHES)("%s: Multus' layout, the shim, busybox, the programs' libraries, the CA bundle", (arch) => {
    const p = img[arch];
    const bin = join(REPO, 'build', ...(arch === 'amd64' ? [] : [arch]));
    const shim = existsSync(join(bin, 'multus-shim'));
    // the resident daemon's tools: chroot for chrootDir, nsenter and ip for the routes it sets in pods
    const extra = shim ? ['/usr/sbin/chroot', '/usr/bin/nsenter', '/usr/bin/ip'] : [];
    const payload = readdirSync(bin).find((f) => f.startsWith('.multus-bun-'))!;
    const own = [
      ...NAMES.map((n) => `.${n}`),
      `./${payload}`,
      `./usr/src/multus-cni/bin/${payload}`,
      ...(shim ? ['./usr/src/multus-cni/bin/multus-shim'] : []),
      ...extra.map((x) => `.${x}`),
      './bin/busybox',
      './etc/ssl/certs/ca-certificates.crt',
    ];
    const libs = p.files.filter((f) => !own.includes(f));
    expect(p.files.filter((f) => own.includes(f)).sort()).toEqual(own.sort());
    if (arch === 'amd64') {
      // exactly what ldd lists for the Bun executable and the tools
      const want = new Set<string>();
      for (const b of [join(bin, payload), ...extra]) {
        for (const line of spawnSync('ldd', [b], { encoding: 'utf8' }).stdout.split('\n')) {
          const m = /=> (\/\S+)/.exec(line) ?? /^\s*(\/\S+) \(/.exec(line);
          if (m) want.add(`.${m[1]}`);
        }
      }
      expect(libs.sort()).toEqual([...want].sort());
    } else {
      expect(libs).toEqual(
        expect.arrayContaining(['./lib/ld-linux-aarch64.so.1', './lib/aarch64-linux-gnu/libc.so.6']),
      );
      for (const l of libs) expect(l).toMatch(/^\.\/(usr\/)?lib\/(aarch64-linux-gnu\/)?[^/]+\.so[.0-9]*$/);
    }
    // containerd passes CNI_NETNS as /var/run/netns/<name>; the resident DaemonSet mounts /run/netns
    expect(p.links).toEqual(['./var/run -> ../run', ...BUSYBOX_TOOLS.map((t) => `./bin/${t} -> busybox`)].sort());
  });

  it.each(ARCHES)("%s: runs /thin_entrypoint (as Multus' thin image) and carries the version and revision", (arch) => {
    const { config } = img[arch];
    expect([config.os, config.architecture]).toEqual(['linux', arch]);
    expect(config.config.Entrypoint).toEqual(['/thin_entrypoint']);
    expect(config.config.Labels['org.opencontainers.image.version']).toBe(version);
    const head = git('rev-parse', 'HEAD');
    expect(config.config.Labels['org.opencontainers.image.revision']).toMatch(new RegExp(`^${head}(-dirty)?$`));
  });

  it('renders our manifests with the tag; a tag that is not one is refused', () => {
    for (const f of readdirSync(join(REPO, 'deployments')).filter((n) => n.endsWith('.yml'))) {
      const committed = readFileSync(join(REPO, 'deployments', f), 'utf8');
      const rendered = readFileSync(join(out, 'deployments', f), 'utf8');
      expect(rendered).toBe(committed.replaceAll(`multus-ts/multus-ts:${version}\n`, `multus-ts/multus-ts:${tag}\n`));
    }
    expect(readFileSync(join(out, 'deployments', 'multus-ts-thin.yml'), 'utf8')).toContain(`multus-ts:${tag}\n`);
    const bad = spawnSync('bash', [join(REPO, 'scripts', 'image.sh'), '--tag', 'no/tag'], { encoding: 'utf8' });
    expect([bad.status, bad.stderr]).toEqual([1, expect.stringContaining('is not an image tag')]);
  });

  it.runIf(needs(fileExists(HELM, 'helm (bash test/peers/build-go-tool.sh helm)')))(
    'packages the chart with the tag as its appVersion, the image its default',
    () => {
      const chart = readdirSync(out).find((f) => /^multus-.*\.tgz$/.test(f))!;
      const meta = execFileSync('tar', ['-xzOf', join(out, chart), 'multus/Chart.yaml'], { encoding: 'utf8' });
      expect(meta).toMatch(new RegExp(`^appVersion: ${tag}$`, 'm'));
      const env = { ...process.env, HOME: dir };
      const rendered = execFileSync(HELM, ['template', 'm', join(out, chart)], { encoding: 'utf8', env });
      expect(rendered).toContain(`image: ghcr.io/multus-ts/multus-ts:${tag}\n`);
    },
  );

  describe.runIf(needs(isRoot()))('arm64 under qemu-user', () => {
    it.runIf(needs(fileExists('/proc/sys/fs/binfmt_misc/qemu-aarch64', 'qemu-aarch64 in binfmt_misc')))(
      'the arm64 root answers VERSION in a chroot',
      () => {
        const rootfs = img.arm64.rootfs;
        mkdirSync(join(rootfs, 'proc'), { recursive: true });
        execFileSync('mount', ['-t', 'proc', 'proc', join(rootfs, 'proc')]);
        try {
          const r = spawnSync('/usr/sbin/chroot', [rootfs, '/usr/src/multus-cni/bin/passthru'], {
            encoding: 'utf8',
            env: { CNI_COMMAND: 'VERSION' },
            input: '{"cniVersion":"1.0.0"}',
          });
          expect(JSON.parse(r.stdout).supportedVersions, r.stderr).toContain('1.0.0');
        } finally {
          execFileSync('umount', [join(rootfs, 'proc')]);
        }
      },
      120_000,
    );
  });

  describe.runIf(needs(isRoot()))('a working root: every name runs there with its flags', () => {
    let rootfs = '';
    beforeAll(() => {
      rootfs = img.amd64.rootfs;
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
