/**
 * `npm run image` (scripts/image.sh): builds the image into a temp dir and reads the tarball as a runtime
 * would (index -> manifest -> config and layer): the file list is exactly the executable, the libraries ldd
 * lists, the CA bundle; entrypoint `multus install`; version and revision labels. As root, the unpacked layer
 * is a working root: the executable runs there (chroot) with nothing else but the /proc that every container
 * runtime mounts (Bun reads its own /proc/self, and aborts without it).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileExists, isRoot, needs } from '../helpers/skip.ts';

const REPO = join(import.meta.dirname, '..', '..');
const BUILT = join(REPO, 'build', 'multus');
const ready = needs(
  fileExists('/usr/bin/umoci', "Debian's umoci (apt-get install umoci)"),
  fileExists(BUILT, 'npm run build'),
);
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

  it('holds the executable, exactly the libraries ldd lists, the CA bundle and nothing else', () => {
    const shim = existsSync(join(REPO, 'build', 'multus-shim'));
    const bins = ['.multus-bun', 'multus', ...(shim ? ['multus-shim'] : [])];
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
      ...bins.map((b) => `./usr/src/multus-cni/bin/${b}`),
      ...extra.map((x) => `.${x}`),
      ...[...libs].map((l) => `.${l}`),
      './etc/ssl/certs/ca-certificates.crt',
    ].sort();
    expect(files).toEqual(expected);
    // containerd passes CNI_NETNS as /var/run/netns/<name>; the resident DaemonSet mounts /run/netns
    expect(links).toEqual(['./var/run -> ../run']);
  });

  it('runs `multus install`, names itself and carries the version and revision', () => {
    expect(config.config.Entrypoint).toEqual(['/usr/src/multus-cni/bin/multus', 'install']);
    expect(config.architecture).toBe('amd64');
    expect(config.config.Labels['org.opencontainers.image.version']).toBe(version);
    const head = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: REPO, encoding: 'utf8' }).trim();
    expect(config.config.Labels['org.opencontainers.image.revision']).toMatch(new RegExp(`^${head}(-dirty)?$`));
    expect(index.manifests[0]!.annotations['io.containerd.image.name']).toBe(`ghcr.io/multus-ts/multus-ts:${version}`);
  });

  it.runIf(needs(isRoot()))('is a working root: the executable runs there with nothing else', () => {
    const rootfs = join(dir, 'rootfs');
    mkdirSync(join(rootfs, 'proc'));
    execFileSync('mount', ['-t', 'proc', 'proc', join(rootfs, 'proc')]);
    try {
      const out = execFileSync('/usr/sbin/chroot', [rootfs, '/usr/src/multus-cni/bin/multus', '--version'], {
        encoding: 'utf8',
        env: {},
      });
      expect(out).toMatch(/^multus-ts: version:/);
      // the roles' bundle, an embedded file of the executable, loads there too
      const install = spawnSync('/usr/sbin/chroot', [rootfs, '/usr/src/multus-cni/bin/multus', 'install', '--help'], {
        encoding: 'utf8',
        env: {},
      });
      expect(install.stdout + install.stderr).toContain('usage: multus install');
    } finally {
      execFileSync('umount', [join(rootfs, 'proc')]);
    }
  });
});
