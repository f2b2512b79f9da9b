/**
 * result.ts: a plugin's result and a failing plugin's output (pure, no I/O).
 *
 * Owns the public face of a result. `PluginResult` is a plugin's result decoded once (libcni
 * invoke.ExecPluginWithResult: fixupResultVersion, then create.Create), with every form ADD needs built from that
 * one model; `parseResult` checks a plugin's stdout the same way into a plain `CniResult`. `convertResult` moves a result between
 * CNI versions exactly as libcni v1.3.0 does (pkg/types/{020,040,100}, internal/convert.go), including the
 * wire form libcni prints: Go struct key order for 0.x, `"dns": {}` always present in 0.x, and alphabetically
 * sorted keys with empty `dns` dropped in 1.x (100's MarshalJSON round-trips through a map). Addresses come out
 * as Go's net.IPNet/net.IP print them (IPv6 compressed, IPv4-mapped shown as IPv4). `parsePluginError` turns a
 * non-zero exit into a `CniError` (pkg/invoke/raw_exec.go pluginErr). Checked against libcni itself:
 * test/data/results/libcni-conversions.json was produced by generate.go.txt next to it.
 */
import { CniCode, CniError } from '../base/errors.ts';
import type { CniResult, Obj, Typed } from './result-model.ts';
import { convertTyped, decode, encode, resultFamily } from './result-model.ts';
import { decodeJsonObject } from '../base/json.ts';
import { CURRENT_VERSION, versionOrDefault } from '../base/versions.ts';

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
  return PluginResult.parse(bytes, fallbackVersion).raw;
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

/**
 * A plugin's result, decoded once into libcni's typed model. `raw` is the result as the plugin printed it (its
 * version fixed up, unknown keys kept): what the next plugin of a chain gets as prevResult and what the result
 * cache keeps. Every other form comes from the one decoded model and is built once: `as(version)`, the result as
 * libcni prints it in that version (GetAsVersion, then its MarshalJSON), and the 1.x view `interfaces()`,
 * `ips()`, `routes()`, `dns()` that network-status, events and claims read. The objects returned are shared: read
 * or serialise them, never change them.
 */
export class PluginResult {
  private readonly printed = new Map<string, CniResult>();

  private constructor(
    readonly raw: CniResult,
    private readonly typed: Typed,
  ) {}

  /** A plugin's stdout (parseResult's rules). */
  static parse(bytes: Buffer | string, fallbackVersion: string): PluginResult {
    const raw = parseObject(bytes);
    const own = raw.cniVersion;
    const version = typeof own === 'string' && own !== '' ? own : versionOrDefault(fallbackVersion);
    const result: CniResult = { cniVersion: version, ...raw };
    result.cniVersion = version;
    return new PluginResult(result, decode(result, version));
  }

  /** A result object read back (a cache, a test), checked as parseResult checks a plugin's. */
  static of(raw: CniResult): PluginResult {
    return new PluginResult(raw, decode(raw, raw.cniVersion));
  }

  get cniVersion(): string {
    return this.raw.cniVersion;
  }

  /** libcni's print form in `version` (normalizeResult(convertResult(raw, version)), built once per version). */
  as(version: string): CniResult {
    const target = versionOrDefault(version);
    let out = this.printed.get(target);
    if (!out) {
      out = encode(convertTyped(this.typed, resultFamily(target)), target);
      this.printed.set(target, out);
    }
    return out;
  }

  /** The interfaces in 1.x form; a 0.1.0/0.2.0 result has none. */
  interfaces(): ResultInterface[] {
    return (this.as(CURRENT_VERSION).interfaces as ResultInterface[] | undefined) ?? [];
  }

  /** The IPs in 1.x form (a 0.1.0/0.2.0 result's ip4 then ip6), with Go's address spelling. */
  ips(): ResultIp[] {
    return (this.as(CURRENT_VERSION).ips as ResultIp[] | undefined) ?? [];
  }

  routes(): { dst: string; gw?: string }[] {
    return (this.as(CURRENT_VERSION).routes as { dst: string; gw?: string }[] | undefined) ?? [];
  }

  dns(): { nameservers?: string[]; domain?: string; search?: string[]; options?: string[] } {
    return (this.as(CURRENT_VERSION).dns as ReturnType<PluginResult['dns']> | undefined) ?? {};
  }
}
