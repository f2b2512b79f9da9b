/**
 * result.ts: a plugin's result and a failing plugin's output (pure, no I/O).
 *
 * Owns three things. `parseResult` turns a plugin's stdout into a validated `CniResult` (libcni
 * invoke.ExecPluginWithResult: fixupResultVersion, then create.Create). `convertResult` moves a result between
 * CNI versions exactly as libcni v1.3.0 does (pkg/types/{020,040,100}, internal/convert.go), including the
 * wire form libcni prints: Go struct key order for 0.x, `"dns": {}` always present in 0.x, and alphabetically
 * sorted keys with empty `dns` dropped in 1.x (100's MarshalJSON round-trips through a map). Addresses come out
 * as Go's net.IPNet/net.IP print them (IPv6 compressed, IPv4-mapped shown as IPv4). `parsePluginError` turns a
 * non-zero exit into a `CniError` (pkg/invoke/raw_exec.go pluginErr). Checked against libcni itself:
 * test/fixtures/results/libcni-conversions.json was produced by generate.go.txt next to it.
 */
import { CniCode, CniError } from '../base/errors.ts';
import { SUPPORTED_VERSIONS, isSupportedVersion } from '../base/versions.ts';

export type CniResult = Record<string, unknown> & { cniVersion: string };
export type ResultFamily = '02x' | '04x' | '1x';

/** An interface of a result in 1.x form (libcni types100.Interface). */
export interface ResultInterface {
  name: string;
  mac?: string;
  mtu?: number;
  sandbox?: string;
  socketPath?: string;
  pciID?: string;
}

/** An IP of a result in 1.x form (libcni types100.IPConfig); `interface` indexes `interfaces`. */
export interface ResultIp {
  address: string;
  gateway?: string;
  interface?: number;
}

export interface PluginOutput {
  stdout: Buffer;
  stderr: Buffer;
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  timeoutMs?: number;
  plugin: string;
}

// libcni registers one result type per family: types020, types040, types100.
const FAMILIES = new Map<string, ResultFamily>([
  ['0.1.0', '02x'], ['0.2.0', '02x'],
  ['0.3.0', '04x'], ['0.3.1', '04x'], ['0.4.0', '04x'],
  ['1.0.0', '1x'], ['1.1.0', '1x'],
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

// ---------------------------------------------------------------------------------------------------------
// Addresses, as Go parses (netip.ParseAddr, net.ParseCIDR) and prints (net.IP.String, net.IPNet.String) them.

interface Cidr {
  text: string; // Go's IPNet.String() of types.ParseCIDR(s): host bits kept, "a.b.c.d/n" or "v6/n"
  is4: boolean; // Go's Dst.IP.To4() != nil: IPv4, or IPv4-mapped IPv6
}

const V4_PART = /^(0|[1-9]\d{0,2})$/; // netip rejects leading zeros
const V6_GROUP = /^[0-9a-fA-F]{1,4}$/;

function parseIPv4(s: string): number[] | null {
  const parts = s.split('.');
  if (parts.length !== 4 || !parts.every((p) => V4_PART.test(p) && Number(p) <= 255)) return null;
  return parts.map(Number);
}

/** 16-bit words of an IPv6 literal, or null. An embedded IPv4 is allowed only at the very end. */
function parseIPv6(s: string): number[] | null {
  const halves = s.split('::');
  if (halves.length > 2) return null;
  const pieces = halves.map((h) => (h === '' ? [] : h.split(':')));
  const words: number[][] = [];
  for (const [i, list] of pieces.entries()) {
    const out: number[] = [];
    for (const [j, piece] of list.entries()) {
      const last = i === pieces.length - 1 && j === list.length - 1;
      const v4 = last && piece.includes('.') ? parseIPv4(piece) : null;
      if (v4) out.push((v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!);
      else if (V6_GROUP.test(piece)) out.push(parseInt(piece, 16));
      else return null;
    }
    words.push(out);
  }
  const [head = [], tail = []] = words;
  if (halves.length === 1) return head.length === 8 ? head : null;
  const missing = 8 - head.length - tail.length;
  return missing >= 1 ? [...head, ...new Array<number>(missing).fill(0), ...tail] : null; // "::" stands for 1+ groups
}

/** 8 words (IPv4 as IPv4-mapped) and whether the text was IPv4; zones rejected like net.ParseIP. */
function parseIp(s: string): { words: number[]; v4Text: boolean } | null {
  const v4 = s.includes(':') ? null : parseIPv4(s);
  if (v4) return { words: [0, 0, 0, 0, 0, 0xffff, (v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!], v4Text: true };
  const v6 = s.includes('%') ? null : parseIPv6(s);
  return v6 ? { words: v6, v4Text: false } : null;
}

function isV4Mapped(w: number[]): boolean {
  return w.slice(0, 5).every((x) => x === 0) && w[5] === 0xffff;
}

/** Go's IP.String(): dotted IPv4 for IPv4-mapped, else RFC 5952 (longest run of 2+ zero groups, first wins). */
function formatIp(w: number[]): string {
  if (isV4Mapped(w)) return [w[6]! >> 8, w[6]! & 255, w[7]! >> 8, w[7]! & 255].join('.');
  let [start, end] = [-1, -1];
  for (let i = 0; i < 8; i++) {
    let j = i;
    while (j < 8 && w[j] === 0) j++;
    if (j - i >= 2 && j - i > end - start) [start, end] = [i, j];
  }
  const hex = (ws: number[]): string => ws.map((x) => x.toString(16)).join(':');
  return start < 0 ? hex(w) : `${hex(w.slice(0, start))}::${hex(w.slice(end))}`;
}

function parseCidr(s: string): Cidr | null {
  const slash = s.indexOf('/');
  const ip = slash < 0 ? null : parseIp(s.slice(0, slash));
  const bitsText = s.slice(slash + 1);
  if (!ip || !/^\d+$/.test(bitsText)) return null;
  const bits = Number(bitsText);
  if (bits > (ip.v4Text ? 32 : 128)) return null;
  const is4 = isV4Mapped(ip.words);
  // IPNet.String() of an IPv4-mapped address with a 128-bit mask prints the mask's last 32 bits.
  const prefix = is4 && !ip.v4Text ? Math.max(0, bits - 96) : bits;
  return { text: `${formatIp(ip.words)}/${prefix}`, is4 };
}

// ---------------------------------------------------------------------------------------------------------
// The typed model: the fields of libcni's Go structs, one shape per layout (04x and 1x share one).

interface Route {
  dst: Cidr;
  gw?: string;
  mtu: number;
  advmss: number;
  priority: number;
  table?: number;
  scope?: number;
}
interface Dns { nameservers: string[]; domain: string; search: string[]; options: string[] }
interface LegacyIp { ip: Cidr; gateway?: string; routes: Route[] }
interface Iface { name: string; mac: string; mtu: number; sandbox: string; socketPath: string; pciID: string }
interface IpConfig { version: string; interface?: number; address: Cidr; gateway?: string }
interface Legacy { family: '02x'; ip4?: LegacyIp; ip6?: LegacyIp; dns: Dns }
interface Rich { family: '04x' | '1x'; interfaces: Iface[]; ips: IpConfig[]; routes: Route[]; dns: Dns }
type Typed = Legacy | Rich;

type Obj = Record<string, unknown>;

/** A bad field, turned into CniError(6) with the result's version by `decode`. */
class FieldError extends Error {
  constructor(readonly path: string, readonly expected: string, readonly got: unknown) {
    super(`${path} must be ${expected}`);
  }
}

function preview(value: unknown): string {
  if (value === undefined) return 'nothing';
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 60 ? `${text.slice(0, 60)}…` : text;
}

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A field's value; JSON null reads as absent, as Go's decoder leaves the zero value. */
function get(obj: Obj, key: string): unknown {
  return obj[key] ?? undefined;
}

function asObj(value: unknown, path: string): Obj {
  if (!isObj(value)) throw new FieldError(path, 'an object', value);
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
function decode(result: Obj, version: string): Typed {
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

function encodeIface(i: Iface, family: Rich['family']): Obj {
  const o: Obj = { name: i.name };
  if (i.mac) o.mac = i.mac;
  if (family === '1x' && i.mtu) o.mtu = i.mtu;
  if (i.sandbox) o.sandbox = i.sandbox;
  if (family === '1x' && i.socketPath) o.socketPath = i.socketPath;
  if (family === '1x' && i.pciID) o.pciID = i.pciID;
  return o;
}

function encodeIpConfig(ip: IpConfig, family: Rich['family']): Obj {
  const o: Obj = family === '04x' ? { version: ip.version } : {};
  if (ip.interface !== undefined) o.interface = ip.interface;
  o.address = ip.address.text;
  if (ip.gateway !== undefined) o.gateway = ip.gateway;
  return o;
}

/** Go marshals a map with sorted keys; 1.x results go through one (types100.Result.MarshalJSON). */
function sortKeysDeep(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeysDeep);
  if (!isObj(value)) return value;
  return Object.fromEntries(Object.keys(value).sort().map((k) => [k, sortKeysDeep(value[k])]));
}

function encode(t: Typed, version: string): CniResult {
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
  const pairs = [['4', t.ip4], ['6', t.ip6]] as const;
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

function convertTyped(t: Typed, to: ResultFamily): Typed {
  if (to === '02x') {
    if (t.family === '02x') return t;
    return toLegacy(t.family === '1x' ? withIpVersions(t) : t);
  }
  if (t.family === '02x') return fromLegacy(t, to);
  return to === '04x' && t.family === '1x' ? withIpVersions({ ...t, family: to }) : { ...t, family: to };
}

// ---------------------------------------------------------------------------------------------------------
// Public API.

const MAX_QUOTE = 200;

function quote(text: string): string {
  return JSON.stringify(text.length > MAX_QUOTE ? `${text.slice(0, MAX_QUOTE)}…` : text);
}

function notAResult(why: string, text: string): CniError {
  return new CniError(CniCode.DecodingFailure, `plugin output is not a CNI result (${why}): ${quote(text)}`);
}

/** The JSON object on a plugin's stdout; `null` counts as `{}` (libcni fixupResultVersion does the same). */
function parseObject(bytes: Buffer | string): Obj {
  const text = typeof bytes === 'string' ? bytes : bytes.toString('utf8');
  if (text.trim() === '') {
    throw new CniError(
      CniCode.DecodingFailure,
      'plugin returned no result: a successful ADD must print a CNI result on stdout',
    );
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw notAResult(`invalid JSON: ${(err as Error).message}`, text);
  }
  if (value === null) return {};
  if (!isObj(value)) {
    throw notAResult(`expected a JSON object, got ${Array.isArray(value) ? 'an array' : typeof value}`, text);
  }
  return value;
}

/**
 * A plugin's stdout as a result of its own `cniVersion`, or of `fallbackVersion` (the config's) when that is
 * missing, empty or not a string: libcni's fixupResultVersion (cni#895). Unknown keys are kept. Throws
 * CniError(6) for output that is not a result or has a malformed field, CniError(1) for an unknown version.
 */
export function parseResult(bytes: Buffer | string, fallbackVersion: string): CniResult {
  const raw = parseObject(bytes);
  const own = raw.cniVersion;
  // An empty config version means 0.1.0 to libcni's ConfigDecoder.
  const version = typeof own === 'string' && own !== '' ? own : fallbackVersion || '0.1.0';
  const result: CniResult = { cniVersion: version, ...raw };
  result.cniVersion = version;
  decode(result, version);
  return result;
}

/**
 * `result` in `toVersion`'s layout, as libcni's GetAsVersion would print it; a fresh object, the input is
 * never changed. Same version: a validated deep copy (unknown keys kept). Throws CniError(1) for an unknown
 * version or a 0.1.0/0.2.0 target with no IP, CniError(6) for a malformed result.
 */
export function convertResult(result: CniResult, toVersion: string): CniResult {
  const target = toVersion === '' ? '0.1.0' : toVersion; // libcni convert.Convert: "" means 0.1.0
  const typed = decode(result, result.cniVersion);
  const family = resultFamily(target);
  if (result.cniVersion === target) return structuredClone(result);
  return encode(convertTyped(typed, family), target);
}

/** `result` exactly as libcni prints it in its own version: unknown keys dropped, libcni key order. */
export function normalizeResult(result: CniResult): CniResult {
  return encode(decode(result, result.cniVersion), result.cniVersion);
}

function to1x(result: CniResult): Rich {
  const typed = convertTyped(decode(result, result.cniVersion), '1x');
  if (typed.family === '02x') throw new Error('unreachable: conversion to 1.x gave a 0.2.0 layout');
  return typed;
}

/** The result's interfaces in 1.x form; a 0.1.0/0.2.0 result has none. */
export function resultInterfaces(result: CniResult): ResultInterface[] {
  return to1x(result).interfaces.map((i) => sortKeysDeep(encodeIface(i, '1x')) as unknown as ResultInterface);
}

/** The result's IPs in 1.x form (a 0.1.0/0.2.0 result's ip4 then ip6). */
export function resultIps(result: CniResult): ResultIp[] {
  return to1x(result).ips.map((ip) => sortKeysDeep(encodeIpConfig(ip, '1x')) as unknown as ResultIp);
}

// ---------------------------------------------------------------------------------------------------------
// A failing plugin's output.

const STDERR_TAIL_BYTES = 2048;
const MAX_STDERR_IN_MSG = 512;

/** The last ~2 KiB of stderr, trimmed; "" when stderr is blank. */
function stderrTail(stderr: Buffer): string {
  const cut = stderr.length > STDERR_TAIL_BYTES;
  // Cutting bytes may split a UTF-8 sequence: drop the replacement characters that leaves at the start.
  const text = stderr.subarray(cut ? stderr.length - STDERR_TAIL_BYTES : 0).toString('utf8');
  const tail = (cut ? text.replace(/^\uFFFD+/, '') : text).trim();
  return tail === '' ? '' : `${cut ? '…' : ''}${tail}`;
}

function exitStatus(out: PluginOutput): string {
  return out.exitCode === null ? 'exit status unknown' : `exit status ${out.exitCode}`;
}

/** `{code, msg?, details?}` with a non-negative integer code: a CNI error as skel prints it. */
function parseCniErrorJson(text: string, plugin: string): { code: number; msg: string; details?: string } | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (!isObj(value)) return null;
  const { code, msg, details } = value;
  if (typeof code !== 'number' || !Number.isSafeInteger(code) || code < 0) return null;
  if ((msg !== undefined && typeof msg !== 'string') || (details !== undefined && typeof details !== 'string')) {
    return null;
  }
  const message = msg || `plugin ${plugin} failed with error code ${code} and no message`;
  return { code, msg: message, details: details || undefined };
}

function describeFailure(out: PluginOutput): { code: number; msg: string; details?: string } {
  const internal = (msg: string) => ({ code: CniCode.Internal, msg });
  const p = out.plugin;
  if (out.timedOut) {
    const within = out.timeoutMs === undefined ? 'in time' : `within ${Number((out.timeoutMs / 1000).toFixed(3))}s`;
    return internal(`plugin ${p} did not finish ${within} and was killed`);
  }
  if (out.signal) return internal(`plugin ${p} was killed by signal ${out.signal}`);
  const stdout = out.stdout.toString('utf8').trim();
  if (stdout === '') {
    const stderr = out.stderr.toString('utf8').trim();
    if (stderr === '') return internal(`plugin ${p} failed with no error message (${exitStatus(out)})`);
    const shown = stderr.length > MAX_STDERR_IN_MSG ? `${stderr.slice(0, MAX_STDERR_IN_MSG)}…` : stderr;
    return internal(`plugin ${p} failed: ${shown}`);
  }
  const cniError = parseCniErrorJson(stdout, p);
  return cniError ?? internal(`plugin ${p} failed and its output is not a CNI error: ${quote(stdout)}`);
}

/**
 * The CniError for a plugin that failed (non-zero exit, signal or timeout), after libcni's pluginErr: a CNI
 * error on stdout keeps its code, msg and details; anything else is 999 saying what happened. The tail of
 * stderr, when there is one, is appended to `details`.
 */
export function parsePluginError(out: PluginOutput): CniError {
  const { code, msg, details } = describeFailure(out);
  const tail = stderrTail(out.stderr);
  const stderrPart = tail === '' ? undefined : `stderr: ${tail}`;
  const joined = [details, stderrPart].filter((d) => d !== undefined && d !== '').join('; ');
  return new CniError(code, msg, joined === '' ? {} : { details: joined });
}
