/**
 * build-steps/arch.mjs: the target platforms of `npm run build -- --arch amd64|arm64` and what an arm64 build needs
 * on an x64 machine (docs/build.md, "arm64"):
 *
 *   - the Bun for linux/arm64: npm's `@oven/bun-linux-aarch64`, pinned here (version, the npm tarball's integrity,
 *     the binary's SHA-256). npm installs no package of another CPU as a dependency, so it is fetched with
 *     `npm pack` (through npm's cache) into the cache dir once (scripts/setup.sh does it) and checked at every use;
 *   - qemu-user (Debian's qemu-user-static) to run that Bun's compiler: Bun's bytecode (`--bytecode`) must be made
 *     by the Bun build that runs it, and no arm64 build of the x64 canary exists;
 *   - an arm64 Debian root (`<cache>/arm64-root`, scripts/setup.sh: libc for qemu, and busybox, chroot, nsenter, ip
 *     and their libraries for the image, scripts/image.sh).
 *
 *   node scripts/build-steps/arch.mjs fetch      # the pinned arm64 Bun into the cache (setup.sh)
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { ROOT, cleanEnv, fail, log, run, show, which } from './common.mjs';

/** Go's names, as in OCI image indexes. */
export const ARCHES = ['amd64', 'arm64'];
export const HOST_ARCH = process.arch === 'x64' ? 'amd64' : process.arch;

/** Bun 1.4.5, the newest Bun published for linux/arm64 (docs/build.md, "Which Bun"). */
export const BUN_ARM64 = {
  spec: '@oven/bun-linux-aarch64@1.4.5',
  revision: '1.4.5+a7733435c',
  integrity: 'sha512-4BXmsSKnjOrlGWqZV4x/oWa7AVoR+B6lCXddMzOAXBIm3t50eslg9wb66gmtW1AamEQ1l1CDvmmruysEhqOWMg==',
  sha256: '04778f1f42399a69d086853e9c7af4acf574b2f21a43d0dc673853d8b84a2923',
};

/** Where setup.sh builds and fetches what the tests and builds need (MULTUS_TS_CACHE_DIR). */
export function cacheDir() {
  return process.env.MULTUS_TS_CACHE_DIR || join(ROOT, '.cache');
}

/** The arm64 Debian root setup.sh unpacks (libc, busybox-static, ip, nsenter, chroot), or null. */
export function arm64Root() {
  const root = join(cacheDir(), 'arm64-root');
  return existsSync(join(root, 'lib/ld-linux-aarch64.so.1')) ? root : null;
}

const sha = (alg, file, enc) => createHash(alg).update(readFileSync(file)).digest(enc);

/** `npm pack`s the pinned package into `dir` (checked against its integrity), unpacked. */
function fetchBun(dir) {
  mkdirSync(dirname(dir), { recursive: true });
  const tmp = mkdtempSync(`${dir}.fetch-`);
  try {
    const r = run('npm', ['pack', BUN_ARM64.spec, '--pack-destination', tmp, '--json'], { env: cleanEnv() });
    if (r.status !== 0) fail(`npm pack ${BUN_ARM64.spec} exited ${r.status}: ${r.stderr}`);
    const tgz = join(tmp, JSON.parse(r.stdout)[0].filename);
    const integrity = `sha512-${sha('sha512', tgz, 'base64')}`;
    if (integrity !== BUN_ARM64.integrity)
      fail(`${BUN_ARM64.spec}: integrity ${integrity}, pinned ${BUN_ARM64.integrity}`);
    const t = run('tar', ['-xzf', tgz, '-C', tmp, 'package/bin/bun', 'package/package.json']);
    if (t.status !== 0) fail(`tar: ${t.stderr}`);
    renameSync(join(tmp, 'package'), dir);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  log(`fetched ${BUN_ARM64.spec} into ${show(dir)}`);
}

/** The pinned arm64 Bun (fetched once into the cache), checked against its SHA-256. */
export function arm64Bun() {
  const dir = join(cacheDir(), `bun-linux-aarch64-${BUN_ARM64.revision.split('+')[0]}`);
  const path = join(dir, 'bin/bun');
  if (!existsSync(path)) fetchBun(dir);
  const sum = sha('sha256', path, 'hex');
  if (sum !== BUN_ARM64.sha256)
    fail(`${show(path)} is not the pinned ${BUN_ARM64.spec} (SHA-256 ${sum}): remove ${dir}`);
  return { path, version: BUN_ARM64.revision };
}

/**
 * The command prefix that runs an arm64 program here: nothing on arm64, else qemu-user with the arm64 root (or the
 * host's arm64 libc); null when neither is there.
 */
export function arm64Runner() {
  if (HOST_ARCH === 'arm64') return [];
  const qemu = which('qemu-aarch64-static') || which('qemu-aarch64');
  const root = arm64Root() ?? (existsSync('/lib/ld-linux-aarch64.so.1') ? '/' : null);
  return qemu && root ? [qemu, '-L', root] : null;
}

/**
 * Whether arm64 executables run here as they are (exec'd by the launcher, with no prefix): an arm64 machine, or
 * binfmt_misc's qemu-aarch64 entry enabled and the arm64 loader at its path (Debian's libc6:arm64).
 */
export function arm64Execs() {
  if (HOST_ARCH === 'arm64') return true;
  try {
    const entry = readFileSync('/proc/sys/fs/binfmt_misc/qemu-aarch64', 'utf8');
    return entry.startsWith('enabled') && existsSync('/lib/ld-linux-aarch64.so.1');
  } catch {
    return false;
  }
}

if (process.argv[1] && import.meta.filename === process.argv[1] && process.argv[2] === 'fetch') {
  process.stdout.write(`${arm64Bun().path}\n`);
}
