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
 * test/data/results/libcni-conversions.json was produced by generate.go.txt next to it.
 */
import { CniCode, CniError } from '../base/errors.ts';
import type { CniResult, Obj, Rich } from './result-model.ts';
import { convertTyped, decode, encode, encodeIface, encodeIpConfig, resultFamily } from './result-model.ts';
import { decodeJsonObject, sortKeysDeep } from '../base/json.ts';
import { versionOrDefault } from '../base/versions.ts';

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

const MAX_QUOTE = 200;

export function quote(text: string): string {
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
  if (text.trim() === 'null') return {};
  return decodeJsonObject(text, (p) =>
    notAResult('syntax' in p ? `invalid JSON: ${p.syntax}` : `expected a JSON object, got ${p.got}`, text),
  );
}

/**
 * A plugin's stdout as a result of its own `cniVersion`, or of `fallbackVersion` (the config's) when that is
 * missing, empty or not a string: libcni's fixupResultVersion (cni#895). Unknown keys are kept. Throws
 * CniError(6) for output that is not a result or has a malformed field, CniError(1) for an unknown version.
 */
export function parseResult(bytes: Buffer | string, fallbackVersion: string): CniResult {
  const raw = parseObject(bytes);
  const own = raw.cniVersion;
  const version = typeof own === 'string' && own !== '' ? own : versionOrDefault(fallbackVersion);
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
  const target = versionOrDefault(toVersion); // libcni convert.Convert too
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
