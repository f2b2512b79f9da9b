/**
 * build-steps/shim.mjs: build/multus-shim, the resident mode's native shim (shim/, Go standard library only), when Go
 * is installed. Go's build cache makes an unchanged rebuild take a fraction of a second. Without Go: a notice,
 * no shim. The shim ends with a 16-byte mark (SHIM_MARK) by which the plugin knows it.
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
  // The shim's mark, 16 bytes after the ELF's end (the kernel loads by the program headers and never reads it):
  // the plugin refuses a file that ends with it as a delegate under any name (src/multus/nesting.ts).
  goBuild('shim', join(outdir, 'multus-shim'), [], SHIM_MARK, arch);
}

/** src/multus/nesting.ts' OWN_MARKS[1]. */
const SHIM_MARK = Buffer.from('multus-ts-shim\x00\x01', 'latin1');
