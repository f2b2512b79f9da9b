/**
 * build-steps/smoke.mjs: the build's last check: a copy of the executable in a fresh temp dir, run with an empty
 * environment (as `env -i`) plus CNI_COMMAND=VERSION, must print a CNI version result and nothing on stderr:
 * it needs neither node_modules nor anything from this shell, and the copy of `multus` alone extracts the Bun
 * executable it carries (launcher/payload.go).
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fail, log } from './common.mjs';

/**
 * Fails the build (fail() ends the process) only once the temp dir is gone: an exit from inside the `try` skipped
 * its `finally` and left the copy (110 MiB, and the Bun executable it extracted) behind in the temp dir.
 * @param {string} exe
 */
export function smokeTest(exe) {
  const dir = mkdtempSync(join(tmpdir(), 'multus-build-'));
  let problem;
  try {
    problem = runCopy(exe, dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  if (problem) fail(problem);
}

/** @param {string} exe @param {string} dir @returns {string | undefined} what is wrong, if anything */
function runCopy(exe, dir) {
  const copy = join(dir, 'multus');
  copyFileSync(exe, copy);
  chmodSync(copy, 0o755);
  const t = performance.now();
  const r = spawnSync(copy, [], {
    env: { CNI_COMMAND: 'VERSION' },
    cwd: dir,
    input: '{"cniVersion":"1.0.0"}',
    encoding: 'utf8',
    maxBuffer: 64 << 20,
  });
  const took = performance.now() - t;
  // EPIPE: the copy exited before reading its stdin (VERSION needs none); its status is what counts.
  const epipe = /** @type {NodeJS.ErrnoException} */ (r.error)?.code === 'EPIPE' && r.status !== null;
  if (r.error && !epipe) return `smoke test (env -i CNI_COMMAND=VERSION ${copy}): ${r.error.message}`;
  let out;
  try {
    out = JSON.parse(r.stdout);
  } catch {
    out = null;
  }
  if (r.status !== 0 || !out || typeof out.cniVersion !== 'string' || !Array.isArray(out.supportedVersions)) {
    return (
      `smoke test (env -i CNI_COMMAND=VERSION ${copy}) exited ${r.status} signal ${r.signal}\n` +
      `stdout: ${r.stdout}\nstderr: ${r.stderr}`
    );
  }
  if (r.stderr !== '') return `smoke test printed on stderr: ${r.stderr}`;
  log(
    `smoke test: VERSION from a copy in ${dir} with an empty environment -> cniVersion ${out.cniVersion}, ` +
      `${out.supportedVersions.length} supported versions (${took.toFixed(0)} ms, first run of the copy)`,
  );
  return undefined;
}
