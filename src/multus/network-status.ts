/**
 * network-status.ts: the `k8s.v1.cni.cncf.io/network-status` annotation from delegate results (pure, no I/O).
 *
 * `buildNetworkStatuses` turns one delegate's result (any CNI version, read in its 1.x form) into entries as
 * network-attachment-definition-client's CreateNetworkStatuses does (docs/behaviour.md#network-status):
 * - exactly one interface: one entry; interface/mac/mtu from it when it has a sandbox, every IP
 *   (without prefix length), `default` for the cluster network, dns, and the gateways of default routes;
 * - 0 or ≥ 2 interfaces: one entry per sandbox interface, IPs attached by their `interface` index (IPs
 *   without one go to the last entry), every entry with all default-route gateways; for the cluster network
 *   `default` goes to the interface of the first IP with a gateway, else to the first sandbox interface.
 * `formatNetworkStatus` serialises entries exactly as Multus does: each `json.MarshalIndent(e, "", "    ")`,
 * joined by ",", wrapped in "[" "]", Go's key order and omitempty, Go's HTML escaping.
 *
 * Deliberate differences (docs/behaviour.md#npwg: the cluster network must have an entry with `default: true`):
 * - A result with IPs but no interfaces (0.1.0/0.2.0 plugins, IPAM-only results) gets one entry with name,
 *   ips, dns, gateway and `default`; Multus writes no entry for it.
 * - `default` goes to the first IP-with-gateway whose `interface` is a sandbox interface; Multus picks the
 *   first IP with a gateway even if its interface is host-side, and then marks no entry at all.
 * - A default route without `gw` adds nothing to `gateway`; Multus writes the string "<nil>".
 */
import { goHtmlEscape } from '../base/json.ts';
import type { PluginResult, ResultInterface, ResultIp } from '../cni/result.ts';

/** The annotation this module writes (named here only). */
export const NETWORK_STATUS_ANNOTATION = 'k8s.v1.cni.cncf.io/network-status';

export interface NetworkStatusDns {
  nameservers?: string[];
  domain?: string;
  search?: string[];
  options?: string[];
}

/** One entry of the annotation (nad-client v1.NetworkStatus). */
export interface NetworkStatus {
  name: string;
  interface?: string;
  ips?: string[];
  mac?: string;
  mtu?: number;
  default?: boolean;
  dns: NetworkStatusDns;
  'device-info'?: Record<string, unknown>;
  gateway?: string[];
  /** multus-ts: the claim and request of our DRA driver the attachment came from (docs/behaviour.md#claim-networks). */
  resourceClaim?: { name: string; request: string };
}

interface Result1x {
  interfaces: ResultInterface[];
  ips: ResultIp[];
  routes: { dst: string; gw?: string }[];
  dns: NetworkStatusDns;
}

/** The result's 1.x view with Go's address spelling (decoded once, PluginResult). */
function as1x(result: PluginResult): Result1x {
  return { interfaces: result.interfaces(), ips: result.ips(), routes: result.routes(), dns: result.dns() };
}

/** Go's net.IP.String() of the address: the CIDR text without its prefix length. */
const ipOf = (ip: ResultIp): string => ip.address.slice(0, ip.address.lastIndexOf('/'));

/** nad-client isDefaultRoute: the destination's address is 0.0.0.0 or :: (whatever the prefix length). */
function defaultGateways(routes: Result1x['routes']): string[] {
  const isDefault = (dst: string): boolean => ['0.0.0.0', '::'].includes(dst.slice(0, dst.lastIndexOf('/')));
  return routes.flatMap((r) => (isDefault(r.dst) && r.gw !== undefined ? [r.gw] : []));
}

/** convertDNS: the four lists/strings, empties omitted, in Go's field order. */
function dnsOf(dns: NetworkStatusDns): NetworkStatusDns {
  const out: NetworkStatusDns = {};
  if (dns.nameservers?.length) out.nameservers = [...dns.nameservers];
  if (dns.domain) out.domain = dns.domain;
  if (dns.search?.length) out.search = [...dns.search];
  if (dns.options?.length) out.options = [...dns.options];
  return out;
}

interface EntryParts {
  name: string;
  iface?: ResultInterface;
  ips: string[];
  isDefault: boolean;
  dns: NetworkStatusDns;
  deviceInfo: Record<string, unknown> | undefined;
  gateway: string[];
}

/** A copy with Go's key order (the struct's field order), empty optional fields left out (omitempty). */
function ordered(s: NetworkStatus): NetworkStatus {
  const o: Record<string, unknown> = { name: s.name };
  if (s.interface) o.interface = s.interface;
  if (s.ips?.length) o.ips = [...s.ips];
  if (s.mac) o.mac = s.mac;
  if (s.mtu) o.mtu = s.mtu;
  if (s.default) o.default = true;
  o.dns = dnsOf(s.dns); // a struct, never omitted: {} when empty
  if (s['device-info']) o['device-info'] = structuredClone(s['device-info']);
  if (s.gateway?.length) o.gateway = [...s.gateway];
  if (s.resourceClaim) o.resourceClaim = { name: s.resourceClaim.name, request: s.resourceClaim.request };
  return o as unknown as NetworkStatus;
}

function entry(p: EntryParts): NetworkStatus {
  return ordered({
    name: p.name,
    interface: p.iface?.name,
    ips: p.ips,
    mac: p.iface?.mac,
    mtu: p.iface?.mtu,
    default: p.isDefault,
    dns: p.dns,
    'device-info': p.deviceInfo,
    gateway: p.gateway,
  });
}

/** Index of the interface that gets `default`: first IP with a gateway on a sandbox interface, else first sandbox. */
function defaultIndex(r: Result1x, sandboxes: number[]): number | undefined {
  const withGateway = r.ips.find(
    (ip) => ip.gateway !== undefined && ip.interface !== undefined && sandboxes.includes(ip.interface),
  );
  return withGateway?.interface ?? sandboxes[0];
}

/** 0 or ≥ 2 interfaces: one entry per sandbox interface (nad-client CreateNetworkStatuses). */
function perInterface(r: Result1x, base: Omit<EntryParts, 'iface' | 'ips'>): NetworkStatus[] {
  const sandboxes = r.interfaces.flatMap((iface, i) => (iface.sandbox ? [i] : []));
  if (sandboxes.length === 0) {
    // fix: IPs but no interfaces still make an entry (see header); nothing at all makes none.
    return r.interfaces.length === 0 && r.ips.length > 0 ? [entry({ ...base, ips: r.ips.map(ipOf) })] : [];
  }
  const ipsByIndex = new Map<number, string[]>(sandboxes.map((i) => [i, []]));
  const last = sandboxes[sandboxes.length - 1]!;
  for (const ip of r.ips) ipsByIndex.get(ip.interface ?? last)?.push(ipOf(ip));
  const defaultAt = base.isDefault ? defaultIndex(r, sandboxes) : undefined;
  return sandboxes.map((i) =>
    entry({ ...base, iface: r.interfaces[i], ips: ipsByIndex.get(i) ?? [], isDefault: i === defaultAt }),
  );
}

/**
 * The network-status entries of one delegate's result. `displayName` is the delegate's display name
 * (`<namespace>/<nad>` for NADs); `isDefault` marks the cluster network; `deviceInfo` is the content of the
 * CNIDeviceInfoFile when there was one. Throws CniError for a malformed result (result.ts).
 */
export function buildNetworkStatuses(
  displayName: string,
  result: PluginResult,
  isDefault: boolean,
  deviceInfo?: Record<string, unknown>,
): NetworkStatus[] {
  const r = as1x(result);
  const base = { name: displayName, isDefault, dns: dnsOf(r.dns), deviceInfo, gateway: defaultGateways(r.routes) };
  if (r.interfaces.length !== 1) return perInterface(r, base);
  const [only] = r.interfaces;
  return [entry({ ...base, iface: only?.sandbox ? only : undefined, ips: r.ips.map(ipOf) })];
}

/**
 * The annotation value. compat: byte for byte what nad-client's SetNetworkStatus writes: each entry as Go's
 * MarshalIndent with 4 spaces, joined by "," (no newline), wrapped in "[" "]"; `[]` for no entries.
 */
export function formatNetworkStatus(statuses: NetworkStatus[]): string {
  const entries = statuses.map((s) => goHtmlEscape(JSON.stringify(ordered(s), null, 4)));
  return `[${entries.join(',')}]`;
}

/**
 * The annotation's value as the JSON list it should be, its elements as written: [] when absent or empty,
 * undefined when it is not a JSON list (a pod's owner may write anything there). The one parser of it.
 */
export function statusAnnotationList(value: string | undefined): unknown[] | undefined {
  if (!value) return [];
  try {
    const parsed = JSON.parse(value) as unknown;
    return Array.isArray(parsed) ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/** The network-status entries of an annotation value (unparseable or absent: none). */
export function parseStatusEntries(value: string | undefined): NetworkStatus[] {
  return (statusAnnotationList(value) ?? []).filter((e): e is NetworkStatus => typeof e === 'object' && e !== null);
}

/** The entries with those of `ifName` replaced by `added` (appended) and those of each `removed` name gone. */
export function editStatusEntries(
  current: NetworkStatus[],
  edit: { remove: string[]; add: NetworkStatus[] },
): NetworkStatus[] {
  const gone = new Set([...edit.remove, ...edit.add.map((e) => e.interface).filter((n): n is string => !!n)]);
  return [...current.filter((e) => !(e.interface && gone.has(e.interface))), ...edit.add];
}
