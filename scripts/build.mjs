#!/usr/bin/env node
/**
 * Builds build/multus: one executable, compiled by Bun from three esbuild bundles, serving every role (the CNI
 * plugin, passthru, daemon, hotplug, plan, install, --is-default-ready). docs/build.md says why each step.
 *
 *   npm run build                       # src/cli.ts -> build/multus
 *   node scripts/build.mjs --entry /tmp/entry.ts --outdir /tmp/out
 *   node scripts/build.mjs --force --quiet
 *   npm run build -- --arch arm64       # build/arm64/multus (+ multus-shim) for linux/arm64 (docs/build.md, "arm64")
 *
 * Steps:
 *   1. esbuild: src/cli.ts -> build/multus.cjs (the thin plugin; build-steps/bundle.mjs also checks that it imports
 *      no node:net/tls/https/http2 or client-node at start-up), src/roles.ts -> build/multus-daemon.cjs
 *      (build-daemon.mjs), src/k8s/fallback.ts -> build/k8s-fallback.cjs (build-k8s-fallback.mjs),
 *      src/kubelet/index.ts -> build/kubelet-grpc.cjs (build-kubelet.mjs)
 *   2. `bun build --compile --bytecode --minify` of the three (build-steps/compile.mjs) into build/multus.bun:
 *      multus.cjs is the main module, the other two embedded files; skipped when build/multus.stamp says the same
 *      inputs made it
 *   2b. build/multus, the launcher (launcher/, Go) with build/multus.bun inside: what a runtime execs; it starts
 *      build/.multus-bun-<id> (extracting it on its first run elsewhere) with the caller's environment held from the
 *      Bun runtime (build-steps/launcher.mjs)
 *   3. smoke test (build-steps/smoke.mjs): a copy in a fresh temp dir, empty environment but CNI_COMMAND=VERSION
 *      (for arm64 on x64: under qemu-user through binfmt_misc when it is set up, else skipped with a notice)
 *   4. build/multus-shim from shim/ with Go, when Go is installed (build-steps/shim.mjs)
 * No network access: everything comes from node_modules (esbuild, bun / @oven/bun-linux-x64); for arm64 from the
 * cache (the pinned arm64 Bun, fetched once with `npm pack`; build-steps/arch.mjs).
 */
import { mkdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { buildDaemon } from './build-daemon.mjs';
import { buildK8sFallback } from './build-k8s-fallback.mjs';
import { buildKubelet } from './build-kubelet.mjs';
import { bundleThin } from './build-steps/bundle.mjs';
import { ARCHES, HOST_ARCH, arm64Execs } from './build-steps/arch.mjs';
import { ROOT, fail, log, mib, setQuiet, show } from './build-steps/common.mjs';
import { compile } from './build-steps/compile.mjs';
import { lock } from './build-steps/lock.mjs';
import { buildLauncher } from './build-steps/launcher.mjs';
import { buildShim } from './build-steps/shim.mjs';
import { smokeTest } from './build-steps/smoke.mjs';

const t0 = performance.now();

function usage(code) {
  process.stderr.write(
    'usage: node scripts/build.mjs [--entry FILE] [--outdir DIR] [--force] [--quiet]\n' +
      '  --entry FILE      bundle FILE instead of src/cli.ts (also MULTUS_BUILD_ENTRY)\n' +
      '  --outdir DIR      write into DIR instead of build/ (also MULTUS_BUILD_OUTDIR)\n' +
      '  --force           rebuild even if build/multus.stamp matches\n' +
      `  --arch ARCH       build for linux/ARCH (${ARCHES.join(', ')}; default ${HOST_ARCH}); another than this\n` +
      "                    machine's goes to build/ARCH/ unless --outdir says where\n",
  );
  process.exit(code);
}

function parseArgs(argv) {
  const o = {
    // src/cli.ts calls run() from src/main.ts, which has no side effects so that tests can import it.
    entry: process.env.MULTUS_BUILD_ENTRY || join(ROOT, 'src/cli.ts'),
    outdir: process.env.MULTUS_BUILD_OUTDIR || '',
    arch: HOST_ARCH,
    force: false,
    quiet: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => argv[++i] ?? usage(2);
    if (a === '--entry') o.entry = val();
    else if (a.startsWith('--entry=')) o.entry = a.slice(8);
    else if (a === '--outdir') o.outdir = val();
    else if (a.startsWith('--outdir=')) o.outdir = a.slice(9);
    else if (a === '--arch') o.arch = val();
    else if (a.startsWith('--arch=')) o.arch = a.slice(7);
    else if (a === '--force') o.force = true;
    else if (a === '--quiet') o.quiet = true;
    else if (a === '-h' || a === '--help') usage(0);
    else {
      process.stderr.write(`build: unknown argument ${a}\n`);
      usage(2);
    }
  }
  if (!ARCHES.includes(o.arch)) {
    process.stderr.write(`build: --arch ${o.arch}: one of ${ARCHES.join(', ')}\n`);
    usage(2);
  }
  const outdir = o.outdir || join(ROOT, 'build', ...(o.arch === HOST_ARCH ? [] : [o.arch]));
  return { ...o, entry: resolve(o.entry), outdir: resolve(outdir) };
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  setQuiet(opts.quiet);
  mkdirSync(opts.outdir, { recursive: true });
  lock(opts.outdir);
  const main = await bundleThin(opts);
  // @kubernetes/client-node's KubeConfig, for kubeconfigs the lean client cannot serve (exec, auth-provider):
  // loaded only when such a kubeconfig is used (docs/kubernetes.md).
  const fallback = await buildK8sFallback({ outdir: opts.outdir, log });
  // The kubelet's gRPC (pod-resources, plugin registration): loaded only when a call asks the kubelet.
  const kubelet = await buildKubelet({ outdir: opts.outdir, log });
  // The resident daemon and the other roles: loaded only in those roles (docs/resident.md).
  const daemon = await buildDaemon({ outdir: opts.outdir, log });
  const embedded = Object.values({ ...daemon.assets, ...fallback.assets, ...kubelet.assets });
  const { arch } = opts;
  const { built, bun } = compile({ outdir: opts.outdir, main, embedded, force: opts.force, arch });
  const { payload } = buildLauncher(opts.outdir, arch);
  const exe = join(opts.outdir, 'multus');
  if (arch === HOST_ARCH || arm64Execs()) smokeTest(exe);
  else log(`no smoke test: linux/${arch} programs do not run here (qemu-user-static and binfmt_misc, docs/build.md)`);
  buildShim(opts.outdir, arch);
  const size = statSync(exe).size;
  // The one line on stdout: what and how long.
  process.stdout.write(
    `build: ${show(exe)} ${mib(size)} (${size} bytes; the launcher and ${show(payload)}), linux/${arch}, Bun ${bun.version}, ` +
      `${built ? 'built' : 'up to date'} in ${((performance.now() - t0) / 1000).toFixed(2)} s\n`,
  );
}

main().catch((e) => fail(e?.stack || String(e)));
