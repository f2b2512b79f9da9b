/**
 * attachments.ts: which attachments a call makes, and what each delegate is given (pure).
 *
 * An attachment is one delegate network bound to one interface name in the pod: the cluster network first (CNI_IFNAME),
 * then the others as net<i> by position unless they ask for a name (docs/behaviour.md#ordering). For each attachment
 * this module derives its own deep copy of the runtime's runtimeConfig (docs/behaviour.md#runtime-config: nothing leaks
 * from one delegate to the next) and its CNI_ARGS (docs/behaviour.md#delegate-args). It also maps attachments to and
 * from the scratch cache's delegate records, so ADD and DEL agree on names and order.
 */
import type { AttachmentRequest } from './fields.ts';
import { ATTACHMENT_FIELDS, CAPABILITY_ORDER, cniArgValue, isRequested } from './fields.ts';
import type { CachedDelegate } from './scratch-cache.ts';
import type { ArgPairs, K8sArgs } from '../cni/cniargs.ts';
import { buildDelegateArgs } from '../cni/cniargs.ts';
import type { Network } from '../cni/network.ts';
import { editNetwork, parseNetwork } from '../cni/network.ts';
import { CniCode, CniError } from '../base/errors.ts';
import { DEFAULT_VERSION } from '../base/versions.ts';
import { validateIfName } from '../base/names.ts';

/**
 * Where an attachment comes from: the cluster network (the config's, or the pod's default-network override), one
 * of the config's defaultNetworks (or its other `delegates`), an element of the pod's networks annotation, the
 * auxiliary chain, or a hot-plug request (`/delegate`, `multus hotplug`).
 */
export type AttachmentSource = 'cluster' | 'default' | 'selection' | 'auxiliary' | 'hotplug';

export interface Delegate {
  network: Network;
  /** The name users see: "<namespace>/<nad>" for NADs, the network name otherwise. */
  displayName: string;
  request: AttachmentRequest;
  source: AttachmentSource;
}

export interface Attachment extends Delegate {
  ifName: string;
  /** `source === 'cluster'`: it gets CNI_IFNAME and ignores selection requests. */
  isClusterNetwork: boolean;
}

/** Interface names by docs/behaviour.md#ordering; two attachments asking for one name fail here, before anything runs. */
export function planAttachments(delegates: Delegate[], clusterIfName: string): Attachment[] {
  const byName = new Map<string, string>();
  return delegates.map((delegate, index) => {
    const isClusterNetwork = delegate.source === 'cluster';
    const ifName = delegate.request.ifname || (isClusterNetwork ? clusterIfName : `net${index}`);
    validateIfName(ifName);
    const previous = byName.get(ifName);
    if (previous !== undefined) {
      throw new CniError(
        CniCode.InvalidConfig,
        `interface name "${ifName}" is requested by both "${previous}" and "${delegate.displayName}": give one of them another interface name`,
      );
    }
    byName.set(ifName, delegate.displayName);
    return { ...delegate, ifName, isClusterNetwork };
  });
}

/**
 * The capability args of one attachment: a deep copy of the runtime's runtimeConfig; for attachments other
 * than the cluster network, the selection's own requests replace the copied values
 * (docs/behaviour.md#runtime-config, docs/behaviour.md#npwg). Empty values are not sent.
 */
export function capabilityArgsFor(
  attachment: Attachment,
  runtimeConfig: Record<string, unknown>,
): Record<string, unknown> {
  const args: Record<string, unknown> = structuredClone(runtimeConfig);
  if (!attachment.isClusterNetwork) {
    for (const field of CAPABILITY_FIELDS) {
      const value = attachment.request[field.key];
      if (isRequested(field, value)) args[field.capability!] = structuredClone(value);
    }
  }
  for (const key of Object.keys(args)) if (isEmpty(args[key])) delete args[key];
  for (const [key, names] of Object.entries(CONVENTION_KEYS)) {
    if (key in args) args[key] = conventionSpelling(args[key], names);
  }
  return args;
}

/**
 * The CNI conventions' spelling of the keys inside `portMappings` entries and `bandwidth`. Multus gets it by
 * decoding them into its own types (Go's JSON matches names case-insensitively) and encoding them again;
 * containerd sends go-cni's field names (`HostPort`, `ContainerPort`, ...), which a case-sensitive plugin would
 * not find (docs/compatibility.md). Values and other keys stay as they are.
 */
const CONVENTION_KEYS: Readonly<Record<string, readonly string[]>> = {
  portMappings: ['hostPort', 'containerPort', 'protocol', 'hostIP'],
  bandwidth: ['ingressRate', 'ingressBurst', 'egressRate', 'egressBurst'],
};

function conventionSpelling(value: unknown, names: readonly string[]): unknown {
  if (Array.isArray(value)) return value.map((v) => conventionSpelling(v, names));
  if (!value || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    const name = names.find((n) => n.toLowerCase() === key.toLowerCase()) ?? key;
    // the conventions' own spelling wins over another one of the same key
    if (!(name in out) || name === key) out[name] = v;
  }
  return out;
}

const CAPABILITY_FIELDS = CAPABILITY_ORDER.map((key) => ATTACHMENT_FIELDS.find((f) => f.key === key)!);

function isEmpty(value: unknown): boolean {
  return value === undefined || value === null || value === '' || (Array.isArray(value) && value.length === 0);
}

/**
 * The capabilities an attachment's selection requests that none of its plugins declares. NPWG says the
 * attachment must then fail; Multus silently drops the request (docs/compatibility.md: `strictCapabilities`).
 */
export function undeclaredCapabilities(attachment: Attachment): string[] {
  if (attachment.isClusterNetwork) return [];
  const declared = new Set<string>();
  for (const plugin of attachment.network.plugins) {
    const caps = plugin.capabilities;
    if (caps && typeof caps === 'object') {
      for (const [name, on] of Object.entries(caps as Record<string, unknown>)) if (on === true) declared.add(name);
    }
  }
  return CAPABILITY_FIELDS.filter((f) => f.mustDeclare && isRequested(f, attachment.request[f.key]))
    .map((f) => f.capability!)
    .filter((cap) => !declared.has(cap));
}

/** CNI_ARGS of one attachment: the K8S keys, the runtime's other keys once, and MAC=/IP= requests on ADD. */
export function delegateArgsFor(
  attachment: Attachment,
  k8s: K8sArgs,
  runtimePairs: ArgPairs,
  command: string,
): ArgPairs {
  const extra: ArgPairs = [];
  if (command === 'ADD' && !attachment.isClusterNetwork) {
    for (const field of ATTACHMENT_FIELDS) {
      const value = attachment.request[field.key];
      if (field.cniArg && isRequested(field, value)) extra.push([field.cniArg, cniArgValue(value)]);
    }
  }
  return buildDelegateArgs(k8s, runtimePairs, extra);
}

export function toCachedDelegate(attachment: Attachment): CachedDelegate {
  return {
    bytes: attachment.network.bytes,
    name: attachment.displayName,
    isList: attachment.network.isList,
    request: attachment.request,
  };
}

/**
 * The delegates a scratch cache records, each with its source. The cache keeps Go Multus' bytes, which do not
 * record it, so it is recovered here, the one place that reads it back: the first record is the cluster network;
 * the auxiliary chain is the record named `auxiliaryCNIChainName` whose first plugin is passthru; the next
 * `defaults` records are the config's defaultNetworks (`defaultsFor`); the rest are selections (an annotation's or
 * a hot-plug request's, which the cache does not tell apart).
 */
export function fromCachedDelegates(cached: CachedDelegate[], roles: CachedRoles = {}): Delegate[] {
  return cached.map((record, index) => fromCachedDelegateAt(record, index, roles));
}

/** The record at `index` of a scratch cache (fromCachedDelegates; DEL reads each record on its own). */
export function fromCachedDelegateAt(record: CachedDelegate, index: number, roles: CachedRoles = {}): Delegate {
  const network = parseNetwork(record.bytes);
  const displayName = record.name || network.name;
  let source: AttachmentSource = 'selection';
  if (index === 0) source = 'cluster';
  else if (roles.auxiliaryName && displayName === roles.auxiliaryName && network.plugins[0]?.type === 'passthru')
    source = 'auxiliary';
  else if (index <= (roles.defaults ?? 0)) source = 'default';
  return { network, displayName, request: record.request, source };
}

/** What tells the records of a scratch cache apart (fromCachedDelegates). */
export interface CachedRoles {
  /** How many of the config's defaultNetworks follow the cluster network (none for a pod in systemNamespaces). */
  defaults?: number;
  auxiliaryName?: string;
}

/** The roles of a pod's cached records under `conf` (its defaultNetworks unless the pod is in systemNamespaces). */
export function cachedRoles(
  conf: {
    defaultNetworks: string[];
    systemNamespaces: string[];
    auxiliaryCNIChainName: string;
    clusterNetwork: string;
    delegates: unknown[];
  },
  podNamespace: string,
): CachedRoles {
  const defaults =
    conf.clusterNetwork === ''
      ? Math.max(0, conf.delegates.length - 1)
      : conf.systemNamespaces.includes(podNamespace)
        ? 0
        : conf.defaultNetworks.length;
  return { defaults, ...(conf.auxiliaryCNIChainName ? { auxiliaryName: conf.auxiliaryCNIChainName } : {}) };
}

/**
 * Multus CmdDel: a conflist delegate without `cniVersion` (absent or "") runs with the multus config's version,
 * set in its bytes (no other key changes), so its plugins are not called as 0.1.0. multus-ts does the same on
 * ADD and CHECK, so the scratch cache, the libcni result caches and DEL agree (docs/compatibility.md).
 */
export function inheritListVersion(delegates: Delegate[], version: string): Delegate[] {
  if (version === DEFAULT_VERSION) return delegates;
  return delegates.map((delegate) => {
    if (!delegate.network.isList) return delegate;
    let changed = false;
    const network = editNetwork(delegate.network, (obj) => {
      if (typeof obj.cniVersion === 'string' && obj.cniVersion !== '') return;
      changed = true;
      return { ...obj, cniVersion: version };
    });
    return changed ? { ...delegate, network } : delegate;
  });
}
