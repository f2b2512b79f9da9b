/**
 * plan.ts: which attachments a call makes, and what each delegate is given (pure).
 *
 * An attachment is one delegate network bound to one interface name in the pod: the cluster network
 * first (CNI_IFNAME), then the others as net<i> by position unless they ask for a name (docs/behaviour.md#ordering).
 * For each
 * attachment this module derives its own deep copy of the runtime's runtimeConfig (docs/behaviour.md#runtime-config:
 * nothing leaks from
 * one delegate to the next) and its CNI_ARGS (docs/behaviour.md#delegate-args). It also maps attachments to and from
 * the scratch
 * cache's delegate records, so ADD and DEL agree on names and order.
 */
import type { CachedDelegate } from '../store/scratch-cache.ts';
import type { ArgPairs, K8sArgs } from '../cni/cniargs.ts';
import { buildDelegateArgs } from '../cni/cniargs.ts';
import type { Network } from '../cni/network.ts';
import { parseNetwork } from '../cni/network.ts';
import { CniCode, CniError } from '../base/errors.ts';
import { validateIfName } from '../base/names.ts';

/** What a pod's selection element asks of one attachment (empty for static delegates). */
export interface SelectionRequest {
  ifname?: string;
  mac?: string;
  ips?: string[];
  infinibandGUID?: string;
  portMappings?: unknown[];
  bandwidth?: Record<string, unknown>;
  cniArgs?: Record<string, unknown>;
  defaultRoute?: string[];
  deviceID?: string;
  resourceName?: string;
}

export interface Delegate {
  network: Network;
  /** The name users see: "<namespace>/<nad>" for NADs, the network name otherwise. */
  displayName: string;
  request: SelectionRequest;
}

export interface Attachment extends Delegate {
  ifName: string;
  isClusterNetwork: boolean;
}

/** Interface names by docs/behaviour.md#ordering; two attachments asking for one name fail here, before anything runs. */
export function planAttachments(delegates: Delegate[], clusterIfName: string): Attachment[] {
  const byName = new Map<string, string>();
  return delegates.map((delegate, index) => {
    const isClusterNetwork = index === 0;
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

function isEmpty(value: unknown): boolean {
  return value === undefined || value === null || value === '' || (Array.isArray(value) && value.length === 0);
}

/**
 * The capability args of one attachment: a deep copy of the runtime's runtimeConfig; for attachments other
 * than the cluster network, the selection's own requests replace the copied values (docs/behaviour.md#runtime-config;
 * docs/behaviour.md#npwg).
 * Empty values are not sent (docs/behaviour.md#runtime-config).
 */
export function capabilityArgsFor(attachment: Attachment, runtimeConfig: Record<string, unknown>): Record<string, unknown> {
  const args: Record<string, unknown> = structuredClone(runtimeConfig);
  if (!attachment.isClusterNetwork) {
    const r = attachment.request;
    const requested: Record<string, unknown> = {
      portMappings: r.portMappings,
      bandwidth: r.bandwidth,
      ips: r.ips,
      mac: r.mac,
      infinibandGUID: r.infinibandGUID,
      deviceID: r.deviceID,
    };
    for (const [key, value] of Object.entries(requested)) {
      if (!isEmpty(value)) args[key] = structuredClone(value);
    }
  }
  for (const key of Object.keys(args)) if (isEmpty(args[key])) delete args[key];
  return args;
}

/** The capability each selection request needs a plugin of the attachment to declare (docs/behaviour.md#npwg). */
const REQUEST_CAPABILITIES: [keyof SelectionRequest, string][] = [
  ['ips', 'ips'],
  ['mac', 'mac'],
  ['infinibandGUID', 'infinibandGUID'],
  ['portMappings', 'portMappings'],
  ['bandwidth', 'bandwidth'],
];

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
  return REQUEST_CAPABILITIES.filter(([key, cap]) => !isEmpty(attachment.request[key]) && !declared.has(cap)).map(([, cap]) => cap);
}

/** CNI_ARGS of one attachment: the K8S keys, the runtime's other keys once, and MAC=/IP= requests on ADD. */
export function delegateArgsFor(attachment: Attachment, k8s: K8sArgs, runtimePairs: ArgPairs, command: string): ArgPairs {
  const extra: ArgPairs = [];
  if (command === 'ADD' && !attachment.isClusterNetwork) {
    if (attachment.request.mac) extra.push(['MAC', attachment.request.mac]);
    if (attachment.request.ips?.length) extra.push(['IP', attachment.request.ips.join(',')]);
  }
  return buildDelegateArgs(k8s, runtimePairs, extra);
}

export function toCachedDelegate(attachment: Attachment): CachedDelegate {
  const r = attachment.request;
  return {
    bytes: attachment.network.bytes,
    name: attachment.displayName,
    isList: attachment.network.isList,
    ifnameRequest: r.ifname ?? '',
    macRequest: r.mac ?? '',
    ipRequest: r.ips ?? [],
    infinibandGUIDRequest: r.infinibandGUID ?? '',
    defaultRoute: r.defaultRoute,
    isFilterV4Gateway: false,
    isFilterV6Gateway: false,
    deviceID: r.deviceID ?? '',
    resourceName: r.resourceName ?? '',
    ...(r.portMappings ? { portMappingsRequest: r.portMappings } : {}),
    ...(r.bandwidth ? { bandwidthRequest: r.bandwidth } : {}),
    ...(r.cniArgs ? { cniArgsRequest: r.cniArgs } : {}),
  };
}

export function fromCachedDelegate(cached: CachedDelegate): Delegate {
  const request: SelectionRequest = {};
  if (cached.ifnameRequest) request.ifname = cached.ifnameRequest;
  if (cached.macRequest) request.mac = cached.macRequest;
  if (cached.ipRequest.length > 0) request.ips = cached.ipRequest;
  if (cached.infinibandGUIDRequest) request.infinibandGUID = cached.infinibandGUIDRequest;
  if (cached.defaultRoute) request.defaultRoute = cached.defaultRoute;
  if (cached.deviceID) request.deviceID = cached.deviceID;
  if (cached.resourceName) request.resourceName = cached.resourceName;
  if (cached.portMappingsRequest) request.portMappings = cached.portMappingsRequest;
  if (cached.bandwidthRequest) request.bandwidth = cached.bandwidthRequest;
  if (cached.cniArgsRequest) request.cniArgs = cached.cniArgsRequest;
  const network = parseNetwork(cached.bytes);
  return { network, displayName: cached.name || network.name, request };
}
