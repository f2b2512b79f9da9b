/**
 * build-steps/bundle.mjs: step 1, esbuild bundles src/cli.ts into <outdir>/multus.cjs, the thin plugin's code, and
 * checks its start-up discipline: no module of it imports a built-in of LAZY_BUILTINS at its top (those are
 * loaded where a call uses them, through process.getBuiltinModule), and no module of
 * @kubernetes/client-node is in it at all (that is the k8s-fallback bundle's), nor of the gRPC library (that is
 * kubelet-grpc.cjs', scripts/build-kubelet.mjs).
 */
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, fail, log, ms, requireFromRoot, show } from './common.mjs';

/**
 * Built-ins the thin path must load only where it uses them: each costs every call start-up time (the network
 * ones 4-20 ms under Bun); child_process and the stream-based ones pull in Bun's JavaScript streams, the largest
 * cost of a thin call before they were made lazy (docs/archive/performance.md, "Where the thin plugin's time went").
 */
export const LAZY_BUILTINS = [
  'net',
  'tls',
  'http',
  'https',
  'http2',
  'child_process',
  'crypto',
  'os',
  'stream',
  'zlib',
  'timers/promises',
  'fs/promises',
  'buffer',
];

/**
 * The eager imports the thin bundle must not have, from esbuild's metafile: an `import` statement of a lazy
 * built-in (esbuild hoists it to the bundle's top, so it runs at every start) or any input from client-node or
 * the gRPC library.
 * @param {{ inputs: Record<string, { imports: { path: string, kind: string }[] }> }} metafile
 * @returns {string[]} one line per offence
 */
export function eagerImports(metafile) {
  const bad = [];
  const lazy = new Set(LAZY_BUILTINS.flatMap((m) => [m, `node:${m}`]));
  for (const [input, { imports }] of Object.entries(metafile.inputs)) {
    if (/node_modules[\\/]@kubernetes[\\/]client-node[\\/]/.test(input)) bad.push(`${input} (client-node)`);
    if (/node_modules[\\/](@grpc|protobufjs|@protobufjs)[\\/]/.test(input)) bad.push(`${input} (the gRPC library)`);
    for (const imp of imports) {
      if (imp.kind === 'import-statement' && lazy.has(imp.path)) bad.push(`${input} imports ${imp.path}`);
    }
  }
  return bad;
}

/** @param {{ entry: string, outdir: string }} opts @returns {Promise<string>} the bundle's path */
export async function bundleThin({ entry, outdir }) {
  if (!entry || !existsSync(entry)) {
    fail(`entry ${entry} does not exist (pass --entry FILE or set MULTUS_BUILD_ENTRY)`);
  }
  const t = performance.now();
  const esbuild = await import(requireFromRoot.resolve('esbuild'));
  const outfile = join(outdir, 'multus.cjs');
  const res = await esbuild.build({
    entryPoints: [entry],
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
    metafile: true,
  });
  if (res.errors.length) fail('esbuild failed');
  const bad = eagerImports(res.metafile);
  if (bad.length) {
    fail(`the thin bundle imports at start-up what it must load lazily (docs/build.md):\n  ${bad.join('\n  ')}`);
  }
  const size = statSync(outfile).size;
  log(`bundled ${show(entry)} -> ${show(outfile)} (${(size / 1024).toFixed(1)} KiB) in ${ms(t)}`);
  return outfile;
}
