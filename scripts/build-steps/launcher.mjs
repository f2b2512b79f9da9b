/**
 * build-steps/launcher.mjs: build/multus, the launcher (launcher/, Go standard library only, static): what a runtime
 * execs. It starts the Bun executable beside it (build/.multus-bun) with every caller variable held under a prefix
 * the Bun runtime never reads, so nothing in the caller's environment (BUN_OPTIONS, BUN_INSPECT, BUN_BE_BUN,
 * BUN_JSC_*, LD_PRELOAD, ...) can change what Bun does before our code runs (docs/build.md, "The launcher").
 * Go is required: without the launcher the executable would be open to all of them.
 */
import { existsSync, renameSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, cleanEnv, fail, log, mib, ms, run, show, which } from './common.mjs';

/** The Bun executable's name beside the launcher (launcher/main.go `payloadName`). */
export const PAYLOAD = '.multus-bun';

/** The Go toolchain, or null. */
export function findGo() {
  return which('go') || (existsSync('/usr/local/go/bin/go') ? '/usr/local/go/bin/go' : null);
}

/**
 * `go build` of dir into out (static, renamed over so a running copy keeps its inode).
 * @param {string} dir @param {string} out
 */
export function goBuild(dir, out) {
  const go = findGo();
  if (!go) fail(`go not found (PATH, /usr/local/go/bin): it builds ${show(out)} from ${dir}/`);
  const t = performance.now();
  const r = run(go, ['build', '-trimpath', '-ldflags', '-s -w', '-o', `${out}.new`, '.'], {
    cwd: join(ROOT, dir),
    env: cleanEnv({ CGO_ENABLED: '0' }),
  });
  if (r.status !== 0) fail(`go build (${dir}/) exited ${r.status}: ${r.stderr}${r.stdout}`);
  renameSync(`${out}.new`, out);
  log(`${show(out)} (${mib(statSync(out).size)}, static) in ${ms(t)}`);
}

/** @param {string} outdir */
export function buildLauncher(outdir) {
  if (process.platform !== 'linux') fail('the launcher (launcher/) is Linux only');
  goBuild('launcher', join(outdir, 'multus'));
}
