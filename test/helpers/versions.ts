/**
 * CNI versions for tables of tests (pure).
 *
 * `describe.each(ALL_VERSIONS)` and the predicates below replace one copied test file per version (the
 * containernetworking/plugins `testutils.AllSpecVersions` pattern, style.md "Tests"). The predicates encode
 * what each spec version added (docs/behaviour.md#protocol-rules) and how libcni lays out results
 * (pkg/types/{020,040,100}).
 */
import { SUPPORTED_VERSIONS, compareVersions } from '../../src/base/versions.ts';

export type Version = (typeof SUPPORTED_VERSIONS)[number];
export type ResultFamily = '02x' | '04x' | '1x';

export const ALL_VERSIONS: readonly Version[] = Object.freeze([...SUPPORTED_VERSIONS]);

function atLeast(version: string, minimum: string): boolean {
  return compareVersions(version, minimum) >= 0;
}

/** The result layout libcni uses for a version: `ip4`/`ip6` (02x), `ips[]` with `version` (04x), or 1.x. */
export function familyOf(version: string): ResultFamily {
  if (!atLeast(version, '0.3.0')) return '02x';
  if (!atLeast(version, '1.0.0')) return '04x';
  return '1x';
}

/** Results have `interfaces`, `ips[]` and top-level `routes` (0.3.0+). */
export const hasInterfaces = (v: string): boolean => atLeast(v, '0.3.0');
/** `ips[]` entries carry `version: "4"|"6"` (0.3.0 to 0.4.0; removed in 1.0.0). */
export const hasIpVersionField = (v: string): boolean => familyOf(v) === '04x';
/** Results use the legacy `ip4`/`ip6` objects (0.1.0, 0.2.0). */
export const hasLegacyIpFields = (v: string): boolean => familyOf(v) === '02x';
/** CHECK exists, and DEL gets `prevResult` (0.4.0+). */
export const hasCheck = (v: string): boolean => atLeast(v, '0.4.0');
/** STATUS exists (1.1.0+). */
export const hasStatus = (v: string): boolean => atLeast(v, '1.1.0');
/** GC exists (1.1.0+). */
export const hasGc = (v: string): boolean => atLeast(v, '1.1.0');

/** The versions for which `predicate` holds, for `it.each(versionsWhere(hasCheck))`. */
export function versionsWhere(predicate: (v: string) => boolean): Version[] {
  return ALL_VERSIONS.filter(predicate);
}

/** Every (from, to) pair of supported versions, for conversion matrices. */
export function versionPairs(): [Version, Version][] {
  return ALL_VERSIONS.flatMap((from) => ALL_VERSIONS.map((to): [Version, Version] => [from, to]));
}
