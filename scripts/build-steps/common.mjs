/**
 * build-steps/common.mjs: what every step of scripts/build.mjs shares: the repository root, a logger, `fail`, child
 * processes run in a clean environment, PATH look-ups and size/time formatting.
 */
import { spawnSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { delimiter, dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const requireFromRoot = createRequire(join(ROOT, 'package.json'));

let quiet = false;
/** @param {boolean} q */
export function setQuiet(q) {
  quiet = q;
}
/** Progress, on stderr (stdout carries only the build's one result line). @param {string} s */
export function log(s) {
  if (!quiet) process.stderr.write(`build: ${s}\n`);
}
/** @param {string} msg @returns {never} */
export function fail(msg) {
  process.stderr.write(`build: FAILED: ${msg}\n`);
  process.exit(1);
}
/** @param {number} t */
export const ms = (t) => `${(performance.now() - t).toFixed(0)} ms`;
/** A path relative to the repository when it is inside it. @param {string} p */
export const show = (p) => {
  const r = relative(ROOT, p);
  return r && !r.startsWith('..') ? r : p;
};
/** @param {number} n */
export const mib = (n) => `${(n / 1048576).toFixed(1)} MiB`;

/** Environment for the child processes: no NODE_OPTIONS (could change the tools' flags) and no
 *  NODE_EXTRA_CA_CERTS (40-60 ms per Node start on machines that export a CA bundle).
 *  @param {Record<string, string>} [extra] @returns {NodeJS.ProcessEnv} */
export function cleanEnv(extra = {}) {
  const env = { ...process.env, ...extra };
  delete env.NODE_OPTIONS;
  delete env.NODE_EXTRA_CA_CERTS;
  return env;
}

/** @param {string} cmd @param {string[]} args @param {{env?: NodeJS.ProcessEnv, cwd?: string, input?: string}} [opts] */
export function run(cmd, args, { env = cleanEnv(), cwd = ROOT, input } = {}) {
  const r = spawnSync(cmd, args, { cwd, env, input, encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.error) fail(`${cmd}: ${r.error.message}`);
  return r;
}

/** @param {string} name @returns {string | null} */
export function which(name) {
  for (const d of (process.env.PATH || '/usr/bin:/bin').split(delimiter)) {
    const p = join(d, name);
    try {
      if (statSync(p).isFile()) return p;
    } catch {}
  }
  return null;
}
