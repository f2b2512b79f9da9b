/**
 * cni/result-model.ts: the typed model of a CNI result (pure): libcni's Go structs, one shape per layout
 * (0.1.0/0.2.0, 0.3.x/0.4.0, 1.x), decoded from and encoded to the JSON libcni reads and prints, and the
 * conversions between layouts (libcni's converters). cni/result.ts is the public face.
 * Tested by test/unit/cni/result.test.ts (libcni's conversions, test/data/results/libcni-conversions.json).
 */
import { CniCode, CniError } from '../base/errors.ts';
import { SUPPORTED_VERSIONS, isSupportedVersion } from '../base/versions.ts';
import type { Cidr } from './ip.ts';
import { formatIp, parseCidr, parseIp } from './ip.ts';
import { isObject, sortKeysDeep } from '../base/json.ts';

export type CniResult = Record<string, unknown> & { cniVersion: string };
export type ResultFamily = '02x' | '04x' | '1x';

// libcni registers one result type per family: types020, types040, types100.
const FAMILIES = new Map<string, ResultFamily>([
  ['0.1.0', '02x'],
  ['0.2.0', '02x'],
  ['0.3.0', '04x'],
  ['0.3.1', '04x'],
  ['0.4.0', '04x'],
  ['1.0.0', '1x'],
  ['1.1.0', '1x'],
]);

/** Which result layout a version uses. Throws CniError(1) for a version libcni has no result type for. */
export function resultFamily(version: string): ResultFamily {
  const family = FAMILIES.get(version);
  if (family === undefined || !isSupportedVersion(version)) {
    throw new CniError(
      CniCode.IncompatibleVersion,
      `unsupported CNI result version "${version}": supported versions are ${SUPPORTED_VERSIONS.join(', ')}`,
    );
  }
  return family;
}

interface Route {
  dst: Cidr;
  gw?: string;
  mtu: number;
  advmss: number;
  priority: number;
  table?: number;
  scope?: number;
}
interface Dns {
  nameservers: string[];
  domain: string;
  search: string[];
  options: string[];
}
interface LegacyIp {
  ip: Cidr;
  gateway?: string;
  routes: Route[];
}
interface Iface {
  name: string;
  mac: string;
  mtu: number;
  sandbox: string;
  socketPath: string;
  pciID: string;
}
interface IpConfig {
  version: string;
  interface?: number;
  address: Cidr;
  gateway?: string;
}
interface Legacy {
  family: '02x';
  ip4?: LegacyIp;
  ip6?: LegacyIp;
  dns: Dns;
}
export interface Rich {
  family: '04x' | '1x';
  interfaces: Iface[];
  ips: IpConfig[];
  routes: Route[];
  dns: Dns;
}
export type Typed = Legacy | Rich;

export type Obj = Record<string, unknown>;

/** A bad field, turned into CniError(6) with the result's version by `decode`. */
class FieldError extends Error {
  constructor(
    readonly path: string,
    readonly expected: string,
    readonly got: unknown,
  ) {
    super(`${path} must be ${expected}`);
  }
}

function preview(value: unknown): string {
  if (value === undefined) return 'nothing';
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 60 ? `${text.slice(0, 60)}…` : text;
}

/** A field's value; JSON null reads as absent, as Go's decoder leaves the zero value. */
function get(obj: Obj, key: string): unknown {
  return obj[key] ?? undefined;
}

function asObj(value: unknown, path: string): Obj {
  if (!isObject(value)) throw new FieldError(path, 'an object', value);
  return value;
}

function optString(obj: Obj, key: string, path: string): string {
  const v = get(obj, key);
  if (v !== undefined && typeof v !== 'string') throw new FieldError(`${path}${key}`, 'a string', v);
  return v ?? '';
}

function optInt(obj: Obj, key: string, path: string): number | undefined {
  const v = get(obj, key);
  if (v !== undefined && !Number.isSafeInteger(v)) throw new FieldError(`${path}${key}`, 'an integer', v);
  return v as number | undefined;
}

function optArray(obj: Obj, key: string, path: string): unknown[] {
  const v = get(obj, key);
  if (v !== undefined && !Array.isArray(v)) throw new FieldError(`${path}${key}`, 'an array', v);
  return v ?? [];
}

function strings(obj: Obj, key: string, path: string): string[] {
  return optArray(obj, key, path).map((v, i) => {
    if (typeof v !== 'string') throw new FieldError(`${path}${key}[${i}]`, 'a string', v);
    return v;
  });
}

function cidr(obj: Obj, key: string, path: string): Cidr {
  const v = get(obj, key);
  const parsed = typeof v === 'string' ? parseCidr(v) : null;
  if (!parsed) throw new FieldError(`${path}${key}`, 'an address with prefix length such as "10.1.2.3/24"', v);
  return parsed;
}

/** An optional IP; "" is absent (net.IP.UnmarshalText gives nil), anything else must parse. */
function optIp(obj: Obj, key: string, path: string): string | undefined {
  const text = optString(obj, key, path);
  if (text === '') return undefined;
  const ip = parseIp(text);
  if (!ip) throw new FieldError(`${path}${key}`, 'an IP address such as "10.1.2.1"', text);
  return formatIp(ip.words);
}

function decodeRoute(value: unknown, path: string): Route {
  const o = asObj(value, path);
  const p = `${path}.`;
  const route: Route = {
    dst: cidr(o, 'dst', p),
    gw: optIp(o, 'gw', p),
    mtu: optInt(o, 'mtu', p) ?? 0,
    advmss: optInt(o, 'advmss', p) ?? 0,
    priority: optInt(o, 'priority', p) ?? 0,
    table: optInt(o, 'table', p),
    scope: optInt(o, 'scope', p),
  };
  return route;
}

function decodeRoutes(obj: Obj, key: string, path: string): Route[] {
  return optArray(obj, key, path).map((r, i) => decodeRoute(r, `${path}${key}[${i}]`));
}

function decodeDns(result: Obj): Dns {
  const v = get(result, 'dns');
  const o = v === undefined ? {} : asObj(v, 'dns');
  return {
    nameservers: strings(o, 'nameservers', 'dns.'),
    domain: optString(o, 'domain', 'dns.'),
    search: strings(o, 'search', 'dns.'),
    options: strings(o, 'options', 'dns.'),
  };
}

function decodeLegacyIp(result: Obj, key: 'ip4' | 'ip6'): LegacyIp | undefined {
  const v = get(result, key);
  if (v === undefined) return undefined;
  const o = asObj(v, key);
  const p = `${key}.`;
  return { ip: cidr(o, 'ip', p), gateway: optIp(o, 'gateway', p), routes: decodeRoutes(o, 'routes', p) };
}

function decodeIface(value: unknown, path: string, family: Rich['family']): Iface {
  const o = asObj(value, path);
  const p = `${path}.`;
  const is1x = family === '1x'; // 0.3.x/0.4.0 have no mtu/socketPath/pciID: libcni ignores them there
  return {
    name: optString(o, 'name', p),
    mac: optString(o, 'mac', p),
    mtu: is1x ? (optInt(o, 'mtu', p) ?? 0) : 0,
    sandbox: optString(o, 'sandbox', p),
    socketPath: is1x ? optString(o, 'socketPath', p) : '',
    pciID: is1x ? optString(o, 'pciID', p) : '',
  };
}

function decodeIpConfig(value: unknown, path: string, family: Rich['family']): IpConfig {
  const o = asObj(value, path);
  const p = `${path}.`;
  return {
    version: family === '04x' ? optString(o, 'version', p) : '', // 1.x has no `version`
    interface: optInt(o, 'interface', p),
    address: cidr(o, 'address', p),
    gateway: optIp(o, 'gateway', p),
  };
}

function decodeFields(result: Obj, family: ResultFamily): Typed {
  if (family === '02x') {
    return { family, ip4: decodeLegacyIp(result, 'ip4'), ip6: decodeLegacyIp(result, 'ip6'), dns: decodeDns(result) };
  }
  return {
    family,
    interfaces: optArray(result, 'interfaces', '').map((v, i) => decodeIface(v, `interfaces[${i}]`, family)),
    ips: optArray(result, 'ips', '').map((v, i) => decodeIpConfig(v, `ips[${i}]`, family)),
    routes: decodeRoutes(result, 'routes', ''),
    dns: decodeDns(result),
  };
}

/** The typed form of a result of `version`'s layout; CniError(6) naming the first bad field. */
export function decode(result: Obj, version: string): Typed {
  const family = resultFamily(version);
  try {
    return decodeFields(result, family);
  } catch (err) {
    if (!(err instanceof FieldError)) throw err;
    throw new CniError(
      CniCode.DecodingFailure,
      `invalid CNI ${version} result: ${err.path} must be ${err.expected}, got ${preview(err.got)}`,
    );
  }
}

// ---------------------------------------------------------------------------------------------------------
// Encoding: the JSON object libcni's json.Marshal produces for each layout.

function encodeRoute(r: Route): Obj {
  const o: Obj = { dst: r.dst.text };
  if (r.gw !== undefined) o.gw = r.gw;
  if (r.mtu) o.mtu = r.mtu;
  if (r.advmss) o.advmss = r.advmss;
  if (r.priority) o.priority = r.priority;
  if (r.table !== undefined) o.table = r.table; // *int: 0 is kept
  if (r.scope !== undefined) o.scope = r.scope;
  return o;
}

const isEmptyDns = (d: Dns): boolean =>
  d.nameservers.length === 0 && d.domain === '' && d.search.length === 0 && d.options.length === 0;

function encodeDns(d: Dns): Obj {
  const o: Obj = {};
  if (d.nameservers.length) o.nameservers = [...d.nameservers];
  if (d.domain) o.domain = d.domain;
  if (d.search.length) o.search = [...d.search];
  if (d.options.length) o.options = [...d.options];
  return o;
}

/** Sets `key` only when the list is non-empty (Go's omitempty on a slice). */
function putList<T>(o: Obj, key: string, list: T[], encodeItem: (item: T) => Obj): void {
  if (list.length > 0) o[key] = list.map(encodeItem);
}

function encodeLegacyIp(ip: LegacyIp): Obj {
  const o: Obj = { ip: ip.ip.text };
  if (ip.gateway !== undefined) o.gateway = ip.gateway;
  putList(o, 'routes', ip.routes, encodeRoute);
  return o;
}

export function encodeIface(i: Iface, family: Rich['family']): Obj {
  const o: Obj = { name: i.name };
  if (i.mac) o.mac = i.mac;
  if (family === '1x' && i.mtu) o.mtu = i.mtu;
  if (i.sandbox) o.sandbox = i.sandbox;
  if (family === '1x' && i.socketPath) o.socketPath = i.socketPath;
  if (family === '1x' && i.pciID) o.pciID = i.pciID;
  return o;
}

export function encodeIpConfig(ip: IpConfig, family: Rich['family']): Obj {
  const o: Obj = family === '04x' ? { version: ip.version } : {};
  if (ip.interface !== undefined) o.interface = ip.interface;
  o.address = ip.address.text;
  if (ip.gateway !== undefined) o.gateway = ip.gateway;
  return o;
}

/** Go marshals a map with sorted keys; 1.x results go through one (types100.Result.MarshalJSON). */
export function encode(t: Typed, version: string): CniResult {
  const out: CniResult = { cniVersion: version };
  if (t.family === '02x') {
    if (t.ip4) out.ip4 = encodeLegacyIp(t.ip4);
    if (t.ip6) out.ip6 = encodeLegacyIp(t.ip6);
    out.dns = encodeDns(t.dns); // a Go struct is never omitted: `"dns": {}` when empty
    return out;
  }
  putList(out, 'interfaces', t.interfaces, (i) => encodeIface(i, t.family));
  putList(out, 'ips', t.ips, (ip) => encodeIpConfig(ip, t.family));
  putList(out, 'routes', t.routes, encodeRoute);
  if (t.family === '04x') {
    out.dns = encodeDns(t.dns);
    return out;
  }
  if (!isEmptyDns(t.dns)) out.dns = encodeDns(t.dns); // 1.x deletes an empty dns
  return sortKeysDeep(out) as CniResult;
}

// ---------------------------------------------------------------------------------------------------------
// Conversions between layouts (libcni's converters, on the typed model).

/** 02x → 04x/1x (types040.convertFrom02x): ip4 then ip6, each with its routes; no interfaces. */
function fromLegacy(t: Legacy, family: Rich['family']): Rich {
  const pairs = [
    ['4', t.ip4],
    ['6', t.ip6],
  ] as const;
  const present = pairs.filter((p): p is readonly ['4' | '6', LegacyIp] => p[1] !== undefined);
  return {
    family,
    interfaces: [],
    ips: present.map(([version, ip]) => ({ version, address: ip.ip, gateway: ip.gateway })),
    routes: present.flatMap(([, ip]) => ip.routes),
    dns: t.dns,
  };
}

/** 1x → 04x (types100.convertIPConfigTo040): `version` from the address family; interface extras dropped. */
function withIpVersions(t: Rich): Rich {
  return { ...t, ips: t.ips.map((ip) => ({ ...ip, version: ip.address.is4 ? '4' : '6' })) };
}

/**
 * 04x → 02x (types040.convertTo02x): the first IP of each `version`, routes under them by the family of `dst`
 * (only dst and gw survive), interfaces dropped. 0.2.0 needs an IP, so a result without one cannot convert.
 */
function toLegacy(t: Rich): Legacy {
  const first = (v: string): LegacyIp | undefined => {
    const ip = t.ips.find((i) => i.version === v);
    return ip && { ip: ip.address, gateway: ip.gateway, routes: [] };
  };
  const [ip4, ip6] = [first('4'), first('6')];
  for (const r of t.routes) {
    const target = r.dst.is4 ? ip4 : ip6;
    target?.routes.push({ dst: r.dst, gw: r.gw, mtu: 0, advmss: 0, priority: 0 });
  }
  if (!ip4 && !ip6) {
    throw new CniError(
      CniCode.IncompatibleVersion,
      'cannot convert: no valid IP addresses (a 0.1.0/0.2.0 result must carry an IP address; ' +
        "set the network's cniVersion to 0.3.0 or later)",
    );
  }
  return { family: '02x', ip4, ip6, dns: t.dns };
}

export function convertTyped(t: Typed, to: ResultFamily): Typed {
  if (to === '02x') {
    if (t.family === '02x') return t;
    return toLegacy(t.family === '1x' ? withIpVersions(t) : t);
  }
  if (t.family === '02x') return fromLegacy(t, to);
  return to === '04x' && t.family === '1x' ? withIpVersions({ ...t, family: to }) : { ...t, family: to };
}
