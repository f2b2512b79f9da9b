/**
 * base/names.ts: the rules for names that reach a file path or the kernel (pure): container IDs and network
 * names (libcni's valid-name characters) and interface names (IFNAMSIZ, no "/", ":" or whitespace). Each
 * rejection is a CniError naming the value and the rule. Also the RFC 1123 label and subdomain tests Kubernetes
 * applies to namespaces and object names.
 * Tested by test/unit/cni/request.test.ts, test/unit/k8s/kubeconfig.test.ts.
 */
import { CniCode, CniError } from './errors.ts';

/** libcni `cniValidNameChars`: container IDs and network names share one rule. */
export const VALID_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;
export const VALID_NAME_HINT = 'use letters, digits, "_", "." and "-", starting with a letter or digit';

/** IFNAMSIZ - 1: the kernel's limit in bytes (libcni `maxInterfaceNameLength`). */
const MAX_IFNAME_BYTES = 15;

/**
 * '/', ':' and the runes Go's `unicode.IsSpace` accepts (libcni iterates runes). JS `\s` is not the same
 * set: it has U+FEFF and lacks U+0085.
 */
const IFNAME_FORBIDDEN = /[/:\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/u;

/** libcni `ValidateContainerID`: empty is "unknown container" (3), bad characters are code 4. */
export function validateContainerId(id: string): void {
  if (id === '') throw new CniError(CniCode.UnknownContainer, 'missing containerID');
  if (!VALID_NAME.test(id)) {
    throw new CniError(CniCode.InvalidEnv, `invalid characters in containerID ${JSON.stringify(id)}`, {
      details: VALID_NAME_HINT,
    });
  }
}

/** libcni `ValidateInterfaceName`, with the broken rule and the value in each message (code 4). */
export function validateIfName(name: string): void {
  if (name === '') throw new CniError(CniCode.InvalidEnv, 'interface name is empty');
  const quoted = JSON.stringify(name);
  const bytes = Buffer.byteLength(name, 'utf8');
  if (bytes > MAX_IFNAME_BYTES) {
    throw new CniError(
      CniCode.InvalidEnv,
      `interface name ${quoted} is too long: ${bytes} bytes, at most ${MAX_IFNAME_BYTES} allowed`,
    );
  }
  if (name === '.' || name === '..') {
    throw new CniError(CniCode.InvalidEnv, `interface name ${quoted} is not allowed: "." and ".." are reserved`);
  }
  const bad = IFNAME_FORBIDDEN.exec(name);
  if (bad) {
    throw new CniError(
      CniCode.InvalidEnv,
      `interface name ${quoted} contains ${JSON.stringify(bad[0])}: "/", ":" and whitespace are not allowed`,
    );
  }
}

/** libcni `ValidateNetworkName` (code 7). */
export function validateNetworkName(name: string): void {
  if (name === '') throw new CniError(CniCode.InvalidConfig, 'missing network name');
  if (!VALID_NAME.test(name)) {
    throw new CniError(CniCode.InvalidConfig, `invalid characters found in network name ${JSON.stringify(name)}`, {
      details: VALID_NAME_HINT,
    });
  }
}

// Kubernetes object names

const DNS1123_LABEL = /^[a-z0-9](?:[-a-z0-9]*[a-z0-9])?$/;

/** A namespace: RFC 1123 label, at most 63 characters. */
export function isDns1123Label(s: string): boolean {
  return s.length <= 63 && DNS1123_LABEL.test(s);
}

/** An object name (pods, network-attachment-definitions): RFC 1123 subdomain, at most 253 characters. */
export function isDns1123Subdomain(s: string): boolean {
  return s.length <= 253 && s.split('.').every((part) => DNS1123_LABEL.test(part));
}
