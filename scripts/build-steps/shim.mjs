/**
 * build-steps/shim.mjs: build/multus-shim, the resident mode's native shim (shim/, Go standard library only), when Go
 * is installed. Go's build cache makes an unchanged rebuild take a fraction of a second. Without Go: a notice,
 * no shim.
 */
import { existsSync, renameSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, cleanEnv, fail, log, mib, ms, run, show, which } from './common.mjs';

/** @param {string} outdir */
export function buildShim(outdir) {
  const go = which('go') || (existsSync('/usr/local/go/bin/go') ? '/usr/local/go/bin/go' : null);
  if (!go || process.platform !== 'linux') {
    log(`${go ? 'not Linux' : 'go not found (PATH, /usr/local/go/bin)'}: skipping build/multus-shim (shim/)`);
    return;
  }
  const t = performance.now();
  const out = join(outdir, 'multus-shim');
  // Built beside and renamed over: a running shim keeps its inode (no ETXTBSY).
  const r = run(go, ['build', '-trimpath', '-ldflags', '-s -w', '-o', `${out}.new`, '.'], {
    cwd: join(ROOT, 'shim'),
    env: cleanEnv({ CGO_ENABLED: '0' }),
  });
  if (r.status !== 0) fail(`go build (shim/) exited ${r.status}: ${r.stderr}${r.stdout}`);
  renameSync(`${out}.new`, out);
  log(`${show(out)} (${mib(statSync(out).size)}, static) in ${ms(t)}`);
}
