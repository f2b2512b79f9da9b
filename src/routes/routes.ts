/**
 * routes.ts: planning the pod's `default-route` move and rewriting cached results to match (pure).
 *
 * A selection element's `default-route` names the gateway(s) the pod's default route should use, via that attachment's
 * interface (docs/behaviour.md#npwg, docs/behaviour.md#default-route). `planDefaultRoutes` turns the attachments'
 * requests into one `RoutePlan` per attachment: which families' default routes it loses and which gateways it gains.
 * `rewriteCachedRoutes` applies such a change to a libcni cached `result` of any layout, so that CHECK and DEL, which
 * get the cached result as `prevResult`, see the routes the pod really has. The netns side lives in netns-routes.ts.
 *
 * Multus quirks fixed here (docs/compatibility.md, docs/behaviour.md#default-route):
 * - only the requested families are touched; Multus deletes every default route of every family on each
 *   marked interface, so a v4-only request also removed eth0's IPv6 default route;
 * - a default route is recognised by its meaning (prefix length 0 of the family), not by the exact strings
 *   `0.0.0.0/0` / `::0/0`, so `::/0` (what libcni itself writes) is deleted too;
 * - cached route entries without `dst` are kept (Multus drops them in its delete pass);
 * - an emptied `routes` list is omitted in every layout, as libcni's `omitempty` writes it (Multus writes
 *   `null` in the legacy layout), and IPv6 routes are added as `::/0` in every layout (Multus writes `::0/0`
 *   in 0.3.0+ and `::/0` in 0.1.0/0.2.0).
 */
import { CniCode, CniError } from '../base/errors.ts';
import { resultFamily } from '../cni/result-model.ts';
import { ipFamily, isV4MappedText } from '../cni/ip.ts';
import { isObject } from '../base/json.ts';

export type IpFamily = 4 | 6;

/** What changes on one interface: its default routes of the flagged families go, the gateways come. */
export interface RouteChange {
  deleteV4: boolean;
  deleteV6: boolean;
  /** Gateways of new default routes via this interface, IPv4 as dotted text (at most one per family). */
  addGateways: string[];
}

export interface RoutePlan extends RouteChange {
  ifName: string;
}

/** The part of an `Attachment` (multus/attachments.ts) that planning reads. */
export interface RouteRequester {
  ifName: string;
  /**
   * Not read: the cluster network is planned like any attachment. A request on it (Multus honours one from
   * the default-network annotation) keeps the pod's default route on CNI_IFNAME, via the requested gateway.
   */
  isClusterNetwork?: boolean;
  request: { defaultRoute?: string[] };
}

type Json = Record<string, unknown>;

export interface Gateway {
  family: IpFamily;
  text: string;
}

/**
 * The family of a gateway and its text as `ip` and the cache get it. An IPv4-mapped IPv6 address counts as
 * IPv4 and is written dotted, as Go's `ip.To4() != nil` / `IP.String()` treat it (selection.ts agrees).
 */
export function gatewayFamily(gateway: string): Gateway {
  const kind = ipFamily(gateway);
  if (kind === 4) return { family: 4, text: gateway };
  if (kind === 6 && isV4MappedText(gateway)) return { family: 4, text: mappedToDotted(gateway) };
  if (kind === 6) return { family: 6, text: gateway };
  throw new CniError(
    CniCode.InvalidConfig,
    `invalid default-route gateway ${JSON.stringify(gateway)}: it must be an IPv4 or IPv6 address such as "10.1.1.1" or "fd00::1"`,
  );
}

/** `::ffff:a.b.c.d` or `::ffff:0a01:0101` (any spelling) as `a.b.c.d`. */
function mappedToDotted(ip: string): string {
  const tail = ip.slice(ip.lastIndexOf(':') + 1);
  if (tail.includes('.')) return tail;
  const groups = ip.split(':');
  const lo = parseInt(groups[groups.length - 1] || '0', 16);
  const hi = parseInt(groups[groups.length - 2] || '0', 16);
  return [hi >> 8, hi & 255, lo >> 8, lo & 255].join('.');
}

/**
 * The default-route moves of an ADD, one plan per attachment in order, or undefined when no attachment carries
 * `default-route` (nothing to do). For each requested family every attachment loses its default route in that
 * family, the requester included (its route is replaced by one via the requested gateway). `"default-route": []`
 * requests both families with no gateway: as in Multus (CheckGatewayConfig marks every delegate for filtering and
 * none is exempted by a gateway), every interface of the pod loses its default routes, eth0's included
 * (docs/behaviour.md#default-route). More than one gateway of a family, over all attachments, is ECMP, which
 * Multus does not support.
 */
export function planDefaultRoutes(attachments: RouteRequester[]): RoutePlan[] | undefined {
  const requests = attachments.flatMap((a) =>
    (a.request.defaultRoute ?? []).map((gw) => ({ a, ...gatewayFamily(gw) })),
  );
  const emptyList = attachments.some((a) => a.request.defaultRoute?.length === 0);
  if (requests.length === 0 && !emptyList) return undefined;
  for (const family of [4, 6] as const) {
    const same = requests.filter((r) => r.family === family);
    if (same.length > 1) {
      throw new CniError(
        CniCode.InvalidConfig,
        `multus does not support ECMP for default-route: IPv${family} gateways ${same.map((r) => `${r.text} (${r.a.ifName})`).join(', ')}; give at most one IPv4 and one IPv6 gateway`,
      );
    }
  }
  const deleteV4 = emptyList || requests.some((r) => r.family === 4);
  const deleteV6 = emptyList || requests.some((r) => r.family === 6);
  return attachments.map((a) => ({
    ifName: a.ifName,
    deleteV4,
    deleteV6,
    addGateways: requests.filter((r) => r.a === a).map((r) => r.text),
  }));
}

/** Whether a plan entry changes anything. */
export function changesRoutes(change: RouteChange): boolean {
  return change.deleteV4 || change.deleteV6 || change.addGateways.length > 0;
}

// ---------------------------------------------------------------------------------------------------------
// Cached results.

/** The family whose default route `dst` is (prefix length 0, any spelling of the address), or undefined. */
export function defaultRouteFamily(dst: string): IpFamily | undefined {
  const slash = dst.indexOf('/');
  if (slash < 0 || !/^\d+$/.test(dst.slice(slash + 1)) || Number(dst.slice(slash + 1)) !== 0) return undefined;
  const address = dst.slice(0, slash);
  const kind = ipFamily(address);
  if (kind === 4) return 4;
  if (kind === 6) return isV4MappedText(address) ? 4 : 6;
  return undefined;
}

const DEFAULT_DST: Record<IpFamily, string> = { 4: '0.0.0.0/0', 6: '::/0' };

function routesError(where: string, detail: string): CniError {
  return new CniError(
    CniCode.DecodingFailure,
    `cannot rewrite the default route of the cached result: ${where} ${detail}; the cache file is not a CNI result (remove it if its container is gone)`,
  );
}

/** The route list at `holder[key]` ([] when absent or null), checked: objects whose `dst`, if any, is a string. */
function readRoutes(holder: Json, key: string, where: string): Json[] {
  const list = holder[key];
  if (list === undefined || list === null) return [];
  if (!Array.isArray(list)) throw routesError(`"${where}"`, 'is not a list of routes');
  for (const [i, route] of list.entries()) {
    if (!isObject(route)) throw routesError(`"${where}[${i}]"`, 'is not a route object');
    if (route.dst !== undefined && typeof route.dst !== 'string')
      throw routesError(`"${where}[${i}].dst"`, 'is not a string');
  }
  return list as Json[];
}

function isDeleted(route: Json, change: RouteChange): boolean {
  // Entries without `dst` are kept: Multus drops them in its delete pass (quirk fixed).
  const family = typeof route.dst === 'string' ? defaultRouteFamily(route.dst) : undefined;
  return (family === 4 && change.deleteV4) || (family === 6 && change.deleteV6);
}

/**
 * Deletes the flagged families' default routes from `holder[key]` and appends `gateways`. A list left
 * unchanged is left as it was; one emptied is omitted, as libcni's omitempty writes it (Multus: `null`).
 */
function editRoutes(holder: Json, key: string, where: string, change: RouteChange, gateways: Gateway[]): void {
  const before = readRoutes(holder, key, where);
  const kept = before.filter((r) => !isDeleted(r, change));
  if (kept.length === before.length && gateways.length === 0) return;
  const routes = [...kept, ...gateways.map((g) => ({ dst: DEFAULT_DST[g.family], gw: g.text }))];
  if (routes.length > 0) holder[key] = routes;
  else delete holder[key];
}

/**
 * `result` with `change` applied to its routes, for every result layout: `ip4.routes`/`ip6.routes` in
 * 0.1.0/0.2.0 (a missing `cniVersion` counts as legacy, as in Multus; gateways are added only where the
 * family's `ip4`/`ip6` object exists, since a legacy result has nowhere else to put them) and top-level
 * `routes` in 0.3.0-1.1.0 (created when absent). The input is never mutated. A version libcni has no result
 * type for is CniError(1) naming it.
 */
export function rewriteCachedRoutes(result: Json, change: RouteChange): Json {
  const out = structuredClone(result);
  if (!changesRoutes(change)) return out;
  const gateways = change.addGateways.map(gatewayFamily);
  const version = out.cniVersion ?? '0.2.0'; // compat: Multus reads a result without cniVersion as legacy (docs/behaviour.md#default-route, docs/compatibility.md)
  if (typeof version !== 'string')
    throw routesError('"cniVersion"', `is ${JSON.stringify(version)}, not a version string`);
  if (resultFamily(version) !== '02x') {
    editRoutes(out, 'routes', 'routes', change, gateways);
    return out;
  }
  for (const [family, key] of [
    [4, 'ip4'],
    [6, 'ip6'],
  ] as const) {
    const ipConfig = out[key];
    if (ipConfig === undefined || ipConfig === null) continue;
    if (!isObject(ipConfig)) throw routesError(`"${key}"`, 'is not an IP configuration object');
    // Both lists get the delete pass, whichever family a stray route has; a gateway goes to its family's list.
    editRoutes(
      ipConfig,
      'routes',
      `${key}.routes`,
      change,
      gateways.filter((g) => g.family === family),
    );
  }
  return out;
}
