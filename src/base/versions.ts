/**
 * versions.ts: the CNI spec versions this plugin speaks and how to compare them (pure).
 * Tested by test/unit/multus/conf.test.ts, test/unit/cni/request.test.ts.
 */
import { CniCode, CniError } from './errors.ts';

export const SUPPORTED_VERSIONS = Object.freeze([
  '0.1.0',
  '0.2.0',
  '0.3.0',
  '0.3.1',
  '0.4.0',
  '1.0.0',
  '1.1.0',
] as const);
export const CURRENT_VERSION = '1.1.0';

/** The CNI rule, written once: a config or result with no (or an empty) cniVersion is version 0.1.0. */
export const DEFAULT_VERSION = '0.1.0';

export function versionOrDefault(version: string | undefined): string {
  return version === undefined || version === '' ? DEFAULT_VERSION : version;
}

export function isSupportedVersion(version: string): boolean {
  return (SUPPORTED_VERSIONS as readonly string[]).includes(version);
}

function parseVersion(version: string): [number, number, number] {
  const m = /^(\d+)\.(\d+)\.(\d+)$/.exec(version);
  if (!m) {
    throw new CniError(CniCode.IncompatibleVersion, `invalid CNI version "${version}": expected MAJOR.MINOR.PATCH`);
  }
  return [Number(m[1]), Number(m[2]), Number(m[3])];
}

/** Negative, zero or positive as a < b, a == b, a > b. Throws CniError(1) on a malformed version. */
export function compareVersions(a: string, b: string): number {
  const pa = parseVersion(a);
  const pb = parseVersion(b);
  for (let i = 0; i < 3; i++) {
    const d = pa[i]! - pb[i]!;
    if (d !== 0) return d;
  }
  return 0;
}

export function versionAtLeast(version: string, minimum: string): boolean {
  return compareVersions(version, minimum) >= 0;
}
