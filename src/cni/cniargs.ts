/**
 * cniargs.ts: the one parser and builder for CNI_ARGS (pure).
 *
 * `parseCniArgs` splits the runtime's `K=V;K=V` string exactly as libcni `types.LoadArgs` does (strict:
 * every pair has one "="); `parseK8sArgs` reads Multus' typed keys (the pod identity, `IP`, `IgnoreUnknown`)
 * with LoadArgs' unknown-key rule; `buildDelegateArgs` derives the CNI_ARGS each delegate receives
 * (docs/behaviour.md#delegate-args) from the parsed pairs, never from the process environment, and without
 * Multus' duplicated keys; `formatCniArgs` writes pairs back to the wire form. Errors are CniError(4).
 */
import { CniCode, CniError } from '../base/errors.ts';
import { ipFamily } from './ip.ts';

export type ArgPairs = [string, string][];

export interface K8sArgs {
  ignoreUnknown: boolean;
  podNamespace: string;
  podName: string;
  podInfraContainerId: string;
  podUid: string;
  ip: string;
}

/** The string keys of Multus' `K8sArgs` struct and the fields they fill. */
const POD_KEYS = {
  K8S_POD_NAMESPACE: 'podNamespace',
  K8S_POD_NAME: 'podName',
  K8S_POD_INFRA_CONTAINER_ID: 'podInfraContainerId',
  K8S_POD_UID: 'podUid',
} as const satisfies Record<string, keyof K8sArgs>;

function isPodKey(key: string): key is keyof typeof POD_KEYS {
  return Object.hasOwn(POD_KEYS, key);
}

/**
 * libcni LoadArgs: '' is no pairs; otherwise split on ';' and each piece on '=' into exactly two parts.
 * compat: a value containing "=" and a trailing ';' (an empty pair) are rejected, as Multus' GetK8sArgs
 * rejects them (docs/behaviour.md#k8s-args).
 */
export function parseCniArgs(s: string): ArgPairs {
  if (s === '') return [];
  return s.split(';').map((pair): [string, string] => {
    const kv = pair.split('=');
    if (kv.length !== 2) {
      throw new CniError(
        CniCode.InvalidEnv,
        `CNI_ARGS: invalid pair ${JSON.stringify(pair)}: want KEY=VALUE with exactly one "="`,
      );
    }
    return [kv[0]!, kv[1]!];
  });
}

/** libcni `UnmarshallableBool`: 1/true/0/false in any case. */
function parseIgnoreUnknown(value: string): boolean {
  const lower = value.toLowerCase();
  if (lower === '1' || lower === 'true') return true;
  if (lower === '0' || lower === 'false') return false;
  throw new CniError(
    CniCode.InvalidEnv,
    `CNI_ARGS: invalid value in pair ${JSON.stringify(`IgnoreUnknown=${value}`)}: want 1, true, 0 or false`,
  );
}

/**
 * Go `net.IP` text unmarshalling: empty means no IP; otherwise an IPv4 or IPv6 address without a zone
 * (Go's ParseIP has no zones; node's isIP accepts "fe80::1%eth0").
 */
function parseIp(value: string): string {
  if (value === '' || ipFamily(value) !== 0) return value;
  throw new CniError(
    CniCode.InvalidEnv,
    `CNI_ARGS: invalid value in pair ${JSON.stringify(`IP=${value}`)}: want an IPv4 or IPv6 address`,
  );
}

/**
 * Multus `GetK8sArgs` over libcni LoadArgs: pairs are applied in order (a later duplicate wins), a bad value
 * fails at once, and unknown keys fail afterwards unless the final IgnoreUnknown is true.
 */
export function parseK8sArgs(pairs: ArgPairs): K8sArgs {
  const k8s: K8sArgs = {
    ignoreUnknown: false,
    podNamespace: '',
    podName: '',
    podInfraContainerId: '',
    podUid: '',
    ip: '',
  };
  const unknown: string[] = [];
  for (const [key, value] of pairs) {
    if (isPodKey(key)) k8s[POD_KEYS[key]] = value;
    else if (key === 'IgnoreUnknown') k8s.ignoreUnknown = parseIgnoreUnknown(value);
    else if (key === 'IP') k8s.ip = parseIp(value);
    else unknown.push(`${key}=${value}`);
  }
  if (unknown.length > 0 && !k8s.ignoreUnknown) {
    throw new CniError(
      CniCode.InvalidEnv,
      `CNI_ARGS: unknown args [${unknown.map((p) => JSON.stringify(p)).join(', ')}]; add IgnoreUnknown=1 to accept them`,
    );
  }
  return k8s;
}

/** The pod arguments of a pod the caller already knows (dynamic networks, `multus plan`): no CNI_ARGS to parse. */
export function podK8sArgs(pod: { namespace: string; name: string; uid: string }, infraContainerId = ''): K8sArgs {
  return {
    ignoreUnknown: false,
    podNamespace: pod.namespace,
    podName: pod.name,
    podInfraContainerId: infraContainerId,
    podUid: pod.uid,
    ip: '',
  };
}

/**
 * The delegate's CNI_ARGS (Multus `CreateCNIRuntimeConf`, docs/behaviour.md#delegate-args): the five base keys in
 * Multus' order, then the runtime's pairs merged once, then `extra` (MAC=/IP= on ADD) replacing same-named keys.
 * compat: Multus re-reads the process env and appends every already-filled key a second time
 * (`IgnoreUnknown=true;...;IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;...`); here a known key is only filled when it is
 * empty, so the delegate gets each key once and no runtime key is lost. Returns new arrays.
 */
export function buildDelegateArgs(k8s: K8sArgs, runtimePairs: ArgPairs, extra: ArgPairs = []): ArgPairs {
  const out: ArgPairs = [
    ['IgnoreUnknown', 'true'],
    ['K8S_POD_NAMESPACE', k8s.podNamespace],
    ['K8S_POD_NAME', k8s.podName],
    ['K8S_POD_INFRA_CONTAINER_ID', k8s.podInfraContainerId],
    ['K8S_POD_UID', k8s.podUid],
  ];
  for (const [key, value] of runtimePairs) {
    const at = out.findIndex(([k]) => k === key);
    if (at < 0) out.push([key, value]);
    else if (out[at]![1] === '' && value !== '') out[at] = [key, value];
  }
  for (const [key, value] of extra) {
    const at = out.findIndex(([k]) => k === key);
    if (at < 0) out.push([key, value]);
    else out[at] = [key, value];
  }
  return out;
}

/** The wire form `K=V;K=V`. */
export function formatCniArgs(pairs: ArgPairs): string {
  return pairs.map(([key, value]) => `${key}=${value}`).join(';');
}

/** "ns/name/uid", the pod triple Multus puts in its error prefixes (`[ns/name/uid]`). */
export function podRef(k8s: K8sArgs): string {
  return `${k8s.podNamespace}/${k8s.podName}/${k8s.podUid}`;
}
