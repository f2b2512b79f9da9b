/**
 * build-steps/launcher.mjs: build/multus, the launcher (launcher/, Go standard library only, static) with the Bun
 * executable inside it: what a runtime execs. It starts <its directory>/.multus-bun-<id> with every caller variable
 * held under a prefix the Bun runtime never reads, so nothing in the caller's environment (BUN_OPTIONS, BUN_INSPECT,
 * BUN_BE_BUN, BUN_JSC_*, LD_PRELOAD, ...) can change what Bun does before our code runs; when that file is not there
 * (a copy of `multus` alone, an upgrade) it writes it from its own file first (docs/build.md, "The launcher").
 * Go is required: without the launcher the executable would be open to all of them.
 */
import { createHash } from 'node:crypto';
import {
  appendFileSync,
  closeSync,
  existsSync,
  linkSync,
  openSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { HOST_ARCH } from './arch.mjs';
import { ROOT, cleanEnv, fail, log, mib, ms, run, show, which } from './common.mjs';

/** The Bun executable Bun's compiler writes (an input of this step; build-steps/compile.mjs). */
export const COMPILED = 'multus.bun';
/** What the launcher starts: `.multus-bun-<first 16 hex digits of its SHA-256>` beside it (launcher/main.go). */
export const PAYLOAD_PREFIX = '.multus-bun-';
const TRAILER_MAGIC = Buffer.from('multus-ts-bun\x00\x00\x01', 'latin1');

/** The Go toolchain, or null. */
export function findGo() {
  return which('go') || (existsSync('/usr/local/go/bin/go') ? '/usr/local/go/bin/go' : null);
}

/**
 * `go build` of dir into out for linux/`arch` (static, renamed over so a running copy keeps its inode), with `mark`
 * appended.
 * @param {string} dir @param {string} out @param {string[]} [ldflags] @param {Buffer} [mark] @param {string} [arch]
 */
export function goBuild(dir, out, ldflags = [], mark = undefined, arch = HOST_ARCH) {
  const go = findGo();
  if (!go) fail(`go not found (PATH, /usr/local/go/bin): it builds ${show(out)} from ${dir}/`);
  const t = performance.now();
  const r = run(go, ['build', '-trimpath', '-ldflags', ['-s', '-w', ...ldflags].join(' '), '-o', `${out}.new`, '.'], {
    cwd: join(ROOT, dir),
    env: cleanEnv({ CGO_ENABLED: '0', GOOS: 'linux', GOARCH: arch }),
  });
  if (r.status !== 0) fail(`go build (${dir}/) exited ${r.status}: ${r.stderr}${r.stdout}`);
  if (mark) appendFileSync(`${out}.new`, mark);
  renameSync(`${out}.new`, out);
  log(`${show(out)} (${mib(statSync(out).size)}, static, linux/${arch}) in ${ms(t)}`);
}

/**
 * The launcher's fast path (launcher/fastpath_amd64.s) is its ELF entry point where it is built for amd64: the CNI
 * plugin's call starts the Bun executable before the Go runtime starts (docs/build.md, "The launcher"). Elsewhere
 * (arm64) Go's own entry and main() serve every call.
 * @param {string} arch
 */
export function entryFlags(arch) {
  return arch === 'amd64' ? ['-E=main.fastEntry'] : [];
}

/** `parts` written to a new file `path` (0755), renamed over it. @param {string} path @param {Buffer[]} parts */
function writeParts(path, parts) {
  const fd = openSync(`${path}.new`, 'w', 0o755);
  for (const part of parts) for (let off = 0; off < part.length;) off += writeSync(fd, part, off);
  closeSync(fd);
  renameSync(`${path}.new`, path);
}

/**
 * @param {string} outdir @param {string} [arch] linux/`arch`, as the Bun executable in outdir
 * @returns {{ payload: string }} the path of build/.multus-bun-<id>
 */
export function buildLauncher(outdir, arch = HOST_ARCH) {
  if (process.platform !== 'linux') fail('the launcher (launcher/) is Linux only');
  const compiled = readFileSync(join(outdir, COMPILED));
  const sum = createHash('sha256').update(compiled).digest();
  const id = sum.subarray(0, 8).toString('hex');
  const launcher = join(outdir, 'multus.launcher');
  // its size too (16 hex digits): a file of another size at the payload's path is not it (launcher/payload.go)
  const size = compiled.length.toString(16).padStart(16, '0');
  const flags = [`-X main.payloadID=${id}`, `-X main.payloadSize=${size}`, ...entryFlags(arch)];
  goBuild('launcher', launcher, flags, undefined, arch);
  // launcher | payload | trailer (offset u64 LE, size u64 LE, SHA-256, magic): one file, copyable alone
  const head = readFileSync(launcher);
  const trailer = Buffer.alloc(64);
  trailer.writeBigUInt64LE(BigInt(head.length), 0);
  trailer.writeBigUInt64LE(BigInt(compiled.length), 8);
  sum.copy(trailer, 16);
  TRAILER_MAGIC.copy(trailer, 48);
  const out = join(outdir, 'multus');
  writeParts(out, [head, compiled, trailer]);
  // multus.launcher: the launcher alone, as the image stores it beside its Bun executable (scripts/image.sh), with
  // a trailer of offset 0 that names that Bun executable: `multus install` keeps the .multus-bun-<id> a launcher's
  // trailer names (src/install/payloads.ts), the plugin knows its own file by the magic (src/multus/nesting.ts),
  // and the launcher says what is missing when it is not beside it (launcher/payload.go)
  const alone = Buffer.from(trailer);
  alone.writeBigUInt64LE(0n, 0);
  writeParts(launcher, [head, alone]);
  // the file it starts, already beside it (a copy that it would otherwise extract on its first run)
  const payload = join(outdir, PAYLOAD_PREFIX + id);
  for (const name of readdirSync(outdir)) {
    if (name.startsWith(PAYLOAD_PREFIX) && name !== PAYLOAD_PREFIX + id) rmSync(join(outdir, name), { force: true });
  }
  if (!existsSync(payload)) linkSync(join(outdir, COMPILED), payload);
  log(`${show(out)}: the launcher with ${show(payload)} inside (${mib(statSync(out).size)})`);
  return { payload };
}
