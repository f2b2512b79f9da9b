/**
 * build-steps/smoke.mjs: the build's last check: a copy of the executable in a fresh temp dir, run with an empty
 * environment (as `env -i`) plus CNI_COMMAND=VERSION, must print a CNI version result and nothing on stderr:
 * it needs neither node_modules nor anything from this shell, and the copy of `multus` alone extracts the Bun
 * executable it carries (launcher/payload.go).
 */
import { chmodSync, copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fail, log, run } from './common.mjs';

/** @param {string} exe */
export function smokeTest(exe) {
  const dir = mkdtempSync(join(tmpdir(), 'multus-build-'));
  try {
    const copy = join(dir, 'multus');
    copyFileSync(exe, copy);
    chmodSync(copy, 0o755);
    const t = performance.now();
    const r = run(copy, [], { env: { CNI_COMMAND: 'VERSION' }, cwd: dir, input: '{"cniVersion":"1.0.0"}' });
    const took = performance.now() - t;
    let out;
    try {
      out = JSON.parse(r.stdout);
    } catch {
      out = null;
    }
    if (r.status !== 0 || !out || typeof out.cniVersion !== 'string' || !Array.isArray(out.supportedVersions)) {
      fail(
        `smoke test (env -i CNI_COMMAND=VERSION ${copy}) exited ${r.status} signal ${r.signal}\n` +
          `stdout: ${r.stdout}\nstderr: ${r.stderr}`,
      );
    }
    if (r.stderr !== '') fail(`smoke test printed on stderr: ${r.stderr}`);
    log(
      `smoke test: VERSION from a copy in ${dir} with an empty environment -> cniVersion ${out.cniVersion}, ` +
        `${out.supportedVersions.length} supported versions (${took.toFixed(0)} ms, first run of the copy)`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
