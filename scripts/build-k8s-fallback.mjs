#!/usr/bin/env node
/**
 * build-k8s-fallback.mjs: bundles src/k8s/fallback.ts (@kubernetes/client-node's KubeConfig and js-yaml) into
 * <outdir>/k8s-fallback.cjs, a separate CommonJS file that the executable embeds (scripts/build-steps/compile.mjs)
 * and loads only when a kubeconfig needs it (exec / auth-provider users, proxy-url, YAML the lean reader
 * refuses; src/k8s/fallback-loader.ts). The main bundle never contains client-node.
 *
 * Two shims keep the bundle small and quiet: client-node's config.js imports the generated API classes only
 * for makeApiClient (not used: requests go through src/k8s/client.ts), and node-fetch only for Headers (whatwg-url in
 * node-fetch 2 loads the deprecated `punycode` builtin, which prints a DeprecationWarning).
 *
 *   node scripts/build-k8s-fallback.mjs [--outdir DIR] [--quiet]
 *
 * prints one JSON line: {"assets": {"k8s-fallback.cjs": "<path>"}, "sizes": {...}}, the files to embed.
 * build.mjs can instead `import { buildK8sFallback }` from this file.
 */
import { mkdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(join(ROOT, 'package.json'));

export const FALLBACK_ASSET = 'k8s-fallback.cjs';

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

/** esbuild options shared by the bundles embedded in the executable (this one and scripts/build-daemon.mjs). */
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

/**
 * Builds <outdir>/k8s-fallback.cjs. Returns the embedded files (name -> absolute path) and their sizes.
 * @param {{ outdir?: string, log?: (s: string) => void }} opts
 */
export async function buildK8sFallback(opts = {}) {
  const outdir = resolve(opts.outdir ?? join(ROOT, 'build'));
  const log = opts.log ?? (() => {});
  mkdirSync(outdir, { recursive: true });
  const t = performance.now();
  const bundleFile = join(outdir, FALLBACK_ASSET);
  await bundle(bundleFile);
  const assets = { [FALLBACK_ASSET]: bundleFile };
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
    else if (a === '--quiet') o.quiet = true;
    else {
      process.stderr.write(
        `build-k8s-fallback: unknown argument ${a}\n` +
          'usage: node scripts/build-k8s-fallback.mjs [--outdir DIR] [--quiet]\n',
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
