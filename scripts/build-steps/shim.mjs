/**
 * build-steps/shim.mjs: build/multus-shim, the resident mode's native shim (shim/, Go standard library only), when Go
 * is installed. Go's build cache makes an unchanged rebuild take a fraction of a second. Without Go: a notice,
 * no shim.
 */
import { findGo, goBuild } from './launcher.mjs';
import { join } from 'node:path';
import { log } from './common.mjs';
import { HOST_ARCH } from './arch.mjs';

/** @param {string} outdir @param {string} [arch] */
export function buildShim(outdir, arch = HOST_ARCH) {
  const go = findGo();
  if (!go || process.platform !== 'linux') {
    log(`${go ? 'not Linux' : 'go not found (PATH, /usr/local/go/bin)'}: skipping build/multus-shim (shim/)`);
    return;
  }
  goBuild('shim', join(outdir, 'multus-shim'), [], arch);
}
