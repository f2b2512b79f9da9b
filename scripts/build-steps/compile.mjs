/**
 * build-steps/compile.mjs: steps 2-3 of scripts/build.mjs: Bun's compiler turns the three esbuild bundles into one
 * executable (`bun build --compile --bytecode --minify`): the thin bundle is its main module, the roles'
 * bundle and the client-node fallback are embedded files beside it (`/$bunfs/root/…`, loaded by
 * src/base/embedded.ts), all three compiled to JavaScriptCore bytecode at build time. The runtime and the
 * compiler are the one binary of the npm package `@oven/bun-linux-x64` that package.json pins; it is
 * also the executable's base (`--compile-executable-path`), so nothing is downloaded.
 */
import { createHash } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  existsSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fail, log, ms, requireFromRoot, run, show } from './common.mjs';
import { ALIGN, alignSegments, segmentSkews } from './align.mjs';
import { HOST_ARCH, arm64Bun, arm64Runner } from './arch.mjs';
import { COMPILED } from './launcher.mjs';

// Bump when this step changes what it produces, so a stale build/multus is not reused.
const RECIPE = 'multus-ts-bun-4';

/**
 * What the compiled executable must not read from the machine it runs on: a runtime execs the plugin in its own
 * working directory, whose `.env` or `bunfig.toml` would otherwise change the plugin's environment or runtime
 * settings (Bun's compiled executables load both by default).
 */
export const COMPILE_FLAGS = [
  '--compile',
  '--bytecode',
  '--minify',
  '--format=cjs',
  '--no-compile-autoload-dotenv',
  '--no-compile-autoload-bunfig',
  '--no-compile-autoload-tsconfig',
  '--no-compile-autoload-package-json',
  // JavaScriptCore's tier-up thresholds x1000 from the start: a CNI call lives ~20 ms, and the JIT compiler's
  // threads spent more CPU compiling its code than running it (a Kubernetes ADD 35 -> 28 ms CPU, docs/archive/performance.md,
  // "Where the thin plugin's time went"). Every other role (the daemon above all) sets the normal policy back
  // when it loads the roles' bundle (src/load-roles.ts).
  '--compile-jit-policy=1000',
];

/**
 * The pinned Bun binary: `bin/bun` of the platform package `@oven/bun-linux-x64` at the exact version package.json
 * names. That version is a release ("1.4.5") or a canary with its commit ("1.4.5-canary.20261202.1+c24943a"); the
 * binary's `--revision` ("1.4.5+a7733435c", "1.4.6-canary.1+c24943ad0") must name the same build. Why a canary:
 * docs/build.md, "Which Bun".
 */
export function bunBinary() {
  let pinned;
  let path;
  try {
    const manifest = requireFromRoot.resolve('@oven/bun-linux-x64/package.json');
    pinned = requireFromRoot('@oven/bun-linux-x64/package.json').version;
    path = join(dirname(manifest), 'bin/bun');
  } catch {
    fail('the @oven/bun-linux-x64 package is not installed (run npm ci)');
  }
  const r = existsSync(path) ? run(path, ['--revision']) : undefined;
  const revision = r?.status === 0 ? r.stdout.trim() : '';
  if (!sameBuild(pinned, revision)) {
    fail(`${show(path)} is not the pinned Bun ${pinned} (its --revision: ${revision || 'none'}; run npm ci)`);
  }
  return { path, version: revision };
}

/** Whether Bun's `--revision` names the build of the npm version `pinned` (see bunBinary). */
export function sameBuild(pinned, revision) {
  const [version, commit] = pinned.split('+');
  const [revVersion, revCommit] = revision.split('+');
  if (!revCommit) return false;
  return commit === undefined ? revVersion === version : revCommit.startsWith(commit);
}

/** The stamp of an executable: the recipe, the compiler, its flags and every embedded byte. */
function stampOf(bun, files) {
  const st = statSync(bun.path);
  const h = createHash('sha256').update(`${RECIPE}\0${bun.version}\0${st.size}\0${st.mtimeMs}\0`);
  h.update(COMPILE_FLAGS.join(' '));
  for (const f of files) h.update(`\0${basename(f)}\0`).update(readFileSync(f));
  return h.digest('hex');
}

/**
 * The Bun that compiles for `arch` and the command prefix that runs it. arm64: the pinned arm64 Bun compiles its own
 * executable (under qemu-user on x64), since `--bytecode` output runs only on the Bun build that made it
 * (build-steps/arch.mjs; docs/build.md, "arm64").
 * @param {string} arch
 */
function compilerFor(arch) {
  if (arch === HOST_ARCH && arch === 'amd64') return { bun: bunBinary(), prefix: [] };
  if (arch !== 'arm64') fail(`no Bun is pinned for linux/${arch} on linux/${HOST_ARCH}`);
  const prefix = arm64Runner();
  if (!prefix)
    fail('an arm64 build runs the arm64 Bun: install qemu-user-static and the arm64 root (scripts/setup.sh)');
  return { bun: arm64Bun(), prefix };
}

/**
 * Compiles <outdir>/multus.bun (carried and started by the launcher <outdir>/multus) from the thin bundle (main)
 * and the embedded bundles for linux/`arch`, unless the stamp says the same inputs made the file there now.
 * Returns whether it built.
 * @param {{ outdir: string, main: string, embedded: string[], force: boolean, arch?: string }} o
 */
export function compile({ outdir, main, embedded, force, arch = HOST_ARCH }) {
  const { bun, prefix } = compilerFor(arch);
  const exe = join(outdir, COMPILED);
  const stampFile = join(outdir, 'multus.stamp');
  const stamp = stampOf(bun, [main, ...embedded]);
  const exeId = () => {
    const st = statSync(exe);
    return `${st.size} ${st.mtimeMs}`;
  };
  let upToDate = false;
  try {
    upToDate = !force && readFileSync(stampFile, 'utf8').trim() === `${stamp} ${exeId()}`;
  } catch {}
  if (upToDate) {
    log(`${show(exe)} is up to date (same bundles and Bun; --force rebuilds)`);
    return { built: false, bun };
  }
  const t = performance.now();
  rmSync(stampFile, { force: true });
  const out = join(outdir, 'multus.compile');
  rmSync(out, { force: true });
  const args = ['build', ...COMPILE_FLAGS, `--compile-executable-path=${bun.path}`, `--root=${outdir}`];
  const [cmd, ...pre] = [...prefix, bun.path];
  const r = run(cmd, [...pre, ...args, `--outfile=${out}`, main, ...embedded], { cwd: outdir });
  if (r.status !== 0 || !existsSync(out)) fail(`bun build --compile exited ${r.status}: ${r.stderr}${r.stdout}`);
  // Its segments moved to their addresses modulo 64 KiB (align.mjs), and written in 64 KiB pieces, as an install
  // writes it: Bun writes the executable in a few large write(2)s, the page cache then holds it in large folios
  // that a page fault maps whole, and every run shows more RSS (docs/build.md).
  const compiled = readFileSync(out);
  const aligned = alignSegments(compiled);
  if (segmentSkews(aligned).some((s) => s !== 0)) fail(`${show(out)}: its segments could not be aligned`);
  const fresh = `${exe}.new`;
  rmSync(fresh, { force: true });
  writeInPieces(fresh, aligned, ALIGN);
  rmSync(out, { force: true });
  chmodSync(fresh, 0o755);
  renameSync(fresh, exe);
  writeFileSync(stampFile, `${stamp} ${exeId()}\n`);
  const skews = segmentSkews(compiled).map((s) => `${s / 1024} KiB`);
  log(
    `compiled ${[main, ...embedded].map((f) => basename(f)).join(' + ')} with Bun ${bun.version} in ${ms(t)} ` +
      `(segments ${skews.join(', ')} off 64 KiB, moved by ${(aligned.length - compiled.length) / 1024} KiB)`,
  );
  return { built: true, bun };
}

/** `data` to a new file `path` in `piece`-byte write(2)s. */
function writeInPieces(path, data, piece) {
  const fd = openSync(path, 'wx', 0o755);
  try {
    for (let off = 0; off < data.length;) off += writeSync(fd, data, off, Math.min(piece, data.length - off));
  } finally {
    closeSync(fd);
  }
}
