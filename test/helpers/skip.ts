/**
 * Skips that CI turns into failures.
 *
 * A test that needs root, a built executable or a peer (libcni driver, kube-apiserver) calls `needs(...)`
 * in `describe`/`it` options: on a laptop it is skipped with the printed reason; with
 * MULTUS_TS_REQUIRE_ALL=1 (set by `.ci/run`) a missing requirement fails the test instead.
 */
import { existsSync } from 'node:fs';

export const requireAll = process.env.MULTUS_TS_REQUIRE_ALL === '1';

export interface Requirement {
  ok: boolean;
  reason: string;
}

export function isRoot(): Requirement {
  return { ok: process.getuid?.() === 0, reason: 'needs root (network namespaces)' };
}

export function fileExists(path: string, what: string): Requirement {
  return { ok: existsSync(path), reason: `needs ${what} at ${path}` };
}

/**
 * Returns true when every requirement holds. Otherwise prints why and returns false (the caller skips),
 * or, under MULTUS_TS_REQUIRE_ALL=1, throws so the suite fails.
 */
export function needs(...reqs: Requirement[]): boolean {
  const missing = reqs.filter((r) => !r.ok).map((r) => r.reason);
  if (missing.length === 0) return true;
  const msg = `skipped: ${missing.join('; ')}`;
  if (requireAll) throw new Error(`${msg} (MULTUS_TS_REQUIRE_ALL=1 turns this skip into a failure)`);
  console.warn(msg);
  return false;
}
