#!/usr/bin/env node
/**
 * build-daemon.mjs: bundles src/roles.ts (the daemon, hot-plug, plan and install roles; docs/resident.md) into
 * <outdir>/multus-daemon.cjs, a CommonJS file that the executable embeds (scripts/build-steps/compile.mjs) and loads
 * only for those roles (src/load-roles.ts). The thin plugin's bundle never contains the daemon, nor what
 * only the daemon needs (informers, metrics).
 *
 *   node scripts/build-daemon.mjs [--outdir DIR]
 *
 * build.mjs `import { buildDaemon }`s it; it returns the files to embed (name -> path).
 */
import { mkdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ASSET_BUNDLE_OPTIONS } from './build-k8s-fallback.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(join(ROOT, 'package.json'));

export const DAEMON_ASSET = 'multus-daemon.cjs';

/** @param {{ outdir?: string, log?: (s: string) => void }} opts */
export async function buildDaemon(opts = {}) {
  const outdir = resolve(opts.outdir ?? join(ROOT, 'build'));
  const log = opts.log ?? (() => {});
  mkdirSync(outdir, { recursive: true });
  const t = performance.now();
  const outfile = join(outdir, DAEMON_ASSET);
  const esbuild = await import(require.resolve('esbuild'));
  const res = await esbuild.build({
    ...ASSET_BUNDLE_OPTIONS,
    entryPoints: [join(ROOT, 'src/roles.ts')],
    outfile,
  });
  if (res.errors.length) throw new Error('esbuild failed for the daemon bundle');
  const size = statSync(outfile).size;
  log(`daemon: ${DAEMON_ASSET} ${(size / 1024).toFixed(1)} KiB in ${(performance.now() - t).toFixed(0)} ms`);
  return { assets: { [DAEMON_ASSET]: outfile }, sizes: { [DAEMON_ASSET]: size } };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const i = process.argv.indexOf('--outdir');
  buildDaemon({ outdir: i > 0 ? process.argv[i + 1] : undefined, log: (s) => process.stderr.write(`build: ${s}\n`) })
    .then((r) => process.stdout.write(`${JSON.stringify(r)}\n`))
    .catch((e) => {
      process.stderr.write(`build-daemon: FAILED: ${e?.stack ?? e}\n`);
      process.exit(1);
    });
}
