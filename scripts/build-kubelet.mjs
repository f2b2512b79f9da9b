#!/usr/bin/env node
/**
 * build-kubelet.mjs: bundles src/kubelet/index.ts (the kubelet's gRPC layer: @grpc/grpc-js, @grpc/proto-loader,
 * protobufjs and the kubelet's .proto files as text) into <outdir>/kubelet-grpc.cjs, a separate CommonJS file
 * that the executable embeds (scripts/build-steps/compile.mjs) and loads only when a call asks the kubelet
 * (src/kubelet/load.ts). The thin bundle never contains the library.
 *
 *   node scripts/build-kubelet.mjs [--outdir DIR]
 */
import { mkdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ASSET_BUNDLE_OPTIONS } from './build-k8s-fallback.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(join(ROOT, 'package.json'));

export const KUBELET_ASSET = 'kubelet-grpc.cjs';

/**
 * Builds <outdir>/kubelet-grpc.cjs. Returns the embedded files (name -> absolute path) and their sizes.
 * @param {{ outdir?: string, log?: (s: string) => void }} opts
 */
export async function buildKubelet(opts = {}) {
  const outdir = resolve(opts.outdir ?? join(ROOT, 'build'));
  mkdirSync(outdir, { recursive: true });
  const t = performance.now();
  const outfile = join(outdir, KUBELET_ASSET);
  const esbuild = await import(require.resolve('esbuild'));
  const res = await esbuild.build({
    ...ASSET_BUNDLE_OPTIONS,
    entryPoints: [join(ROOT, 'src/kubelet/index.ts')],
    outfile,
  });
  if (res.errors.length) throw new Error('esbuild failed');
  const sizes = { [KUBELET_ASSET]: statSync(outfile).size };
  opts.log?.(
    `kubelet: ${KUBELET_ASSET} ${(sizes[KUBELET_ASSET] / 1024).toFixed(1)} KiB in ${(performance.now() - t).toFixed(0)} ms`,
  );
  return { assets: { [KUBELET_ASSET]: outfile }, sizes };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const i = process.argv.indexOf('--outdir');
  buildKubelet({ outdir: i > 0 ? process.argv[i + 1] : undefined, log: (s) => process.stderr.write(`build: ${s}\n`) })
    .then((r) => process.stdout.write(`${JSON.stringify(r)}\n`))
    .catch((e) => {
      process.stderr.write(`build-kubelet: FAILED: ${e?.stack ?? e}\n`);
      process.exit(1);
    });
}
