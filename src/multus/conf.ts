/**
 * conf.ts: Multus' own config (00-multus.conf) and the delegate network configs it runs (pure parsers plus
 * thin file wrappers).
 *
 * `parseMultusConf` turns stdin into a `MultusConf` with the defaults of multus-behaviour.md §1.2 and the
 * checks of §1.3; `parseNetwork` turns one delegate (a single-plugin config or a conflist, §1.3 rule 6, §4.2)
 * into a `Network`, libcni's NetworkConfigList. Parsers take bytes or objects and return new values; they
 * never log, warnings come back as data. `loadNetworkFile`, `loadNetworkPath` and `findNetworkInDir` only read
 * files and directories and hand the bytes to the parsers (libcni conf.go's FromBytes/FromFile split), and
 * `resolveStaticNetworks` picks the cluster and default networks that need no Kubernetes (§4.5).
 *
 * Keys of ours, not in Multus (Multus ignores them, so one 00-multus.conf serves both):
 * | key | type | default | meaning |
 * |---|---|---|---|
 * | `readinessBackoff` | object | `{"initialMs": 250, "factor": 4, "jitter": 0.1, "steps": 4}` | how long to wait for `readinessindicatorfile`: `steps` sleeps (whole number 0..20) of `initialMs * factor^i` ms (numbers > 0), each stretched by up to `jitter` (0..1) |
 * | `delegateTimeoutSeconds` | number > 0 | 60 | a delegate plugin still running after this long is killed |
 * | `strictCapabilities` | boolean | false | stricter runtimeConfig/capabilities handling for delegates (the planner defines it; see README) |
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { CniCode, CniError, messageOf, wrapError } from '../base/errors.ts';
import { CURRENT_VERSION, SUPPORTED_VERSIONS, compareVersions, isSupportedVersion } from '../base/versions.ts';
import type { LogLevel, LogOptions } from '../base/log.ts';
import type { BackoffOptions } from './readiness.ts';
export type { LogLevel, LogOptions };
import { DEFAULT_BACKOFF } from './readiness.ts';

export type PluginConf = Record<string, unknown> & { type: string };

/** libcni's NetworkConfigList; a single-plugin config is a list of one. */
export interface Network {
  name: string;
  cniVersion: string;
  isList: boolean;
  disableCheck: boolean;
  disableGC: boolean;
  /** Each plugin's JSON object as written (single config: the whole object). */
  plugins: PluginConf[];
  /** The exact bytes to cache and execute (file bytes when loaded from a file, unless rebuilt). */
  bytes: Buffer;
}

export type { BackoffOptions };

export interface MultusConf {
  name: string;
  type: string;
  cniVersion: string;
  kubeconfig: string;
  confDir: string;
  cniDir: string;
  binDir: string;
  delegates: Network[];
  clusterNetwork: string;
  defaultNetworks: string[];
  systemNamespaces: string[];
  multusNamespace: string;
  logFile: string;
  logLevel: LogLevel;
  logToStderr: boolean;
  logOptions: LogOptions | undefined;
  readinessIndicatorFile: string;
  readinessBackoff: BackoffOptions;
  namespaceIsolation: boolean;
  globalNamespaces: string[];
  retryDeleteOnError: boolean;
  auxiliaryCNIChainName: string;
  runtimeConfig: Record<string, unknown>;
  delegateTimeoutMs: number;
  strictCapabilities: boolean;
  /** Things the caller should log, e.g. an unknown log level. */
  warnings: string[];
  /** The decoded stdin, untouched. */
  raw: Record<string, unknown>;
}

export interface StaticNetwork {
  network: Network;
  /** The name shown in network-status and events: the config name, or `<namespace>/<nad>` from a lookup. */
  displayName: string;
}

/**
 * The seam for Kubernetes: tried first for a clusterNetwork/defaultNetworks value without `/` (§4.5 step 1,
 * NAD `<multusNamespace>/<value>`). Return undefined to fall back to a config of that name in confDir; throw
 * (a CniError) to fail the call. It is synchronous: fetch the NADs first, then answer from what was fetched.
 */
export type NetworkLookup = (name: string) => StaticNetwork | undefined;

const DEFAULT_DELEGATE_TIMEOUT_SECONDS = 60;

/** libcni `cniValidNameChars` (ValidateNetworkName). */
const VALID_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$/;
const VALID_NAME_HINT = 'use letters, digits, "_", "." and "-", starting with a letter or digit';
const LOG_LEVELS: readonly LogLevel[] = ['panic', 'error', 'verbose', 'debug'];
const NETWORK_FILE_EXTS = ['.conf', '.json', '.conflist'];

// ---------------------------------------------------------------------------------------------------------
// Key validation, one predicate per type (esbuild's getFlag/mustBeX)

interface Kind<T> {
  readonly what: string;
  is(value: unknown): value is T;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

const STRING: Kind<string> = { what: 'a string', is: (v): v is string => typeof v === 'string' };
const BOOLEAN: Kind<boolean> = { what: 'a boolean', is: (v): v is boolean => typeof v === 'boolean' };
const OBJECT: Kind<Record<string, unknown>> = { what: 'a JSON object', is: isObject };
const STRINGS: Kind<string[]> = {
  what: 'an array of strings',
  is: (v): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string'),
};
const NAMES: Kind<string[]> = {
  what: 'an array of non-empty strings',
  is: (v): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string' && x !== ''),
};
const OBJECTS: Kind<Record<string, unknown>[]> = {
  what: 'an array of JSON objects',
  is: (v): v is Record<string, unknown>[] => Array.isArray(v) && v.every(isObject),
};
const BOOLEAN_MAP: Kind<Record<string, boolean>> = {
  what: 'an object of booleans',
  is: (v): v is Record<string, boolean> => isObject(v) && Object.values(v).every((x) => typeof x === 'boolean'),
};
const POSITIVE: Kind<number> = { what: 'a number greater than 0', is: (v): v is number => isNumber(v) && v > 0 };
const FRACTION: Kind<number> = { what: 'a number from 0 to 1', is: (v): v is number => isNumber(v) && v >= 0 && v <= 1 };
const COUNT: Kind<number> = { what: 'a whole number >= 0', is: (v): v is number => Number.isInteger(v) && (v as number) >= 0 };
const STEPS: Kind<number> = {
  what: 'a whole number from 0 to 20',
  is: (v): v is number => Number.isInteger(v) && (v as number) >= 0 && (v as number) <= 20,
};
/** libcni readBool: a boolean, or the string "true"/"false" in any case. */
const FLAG: Kind<boolean | string> = {
  what: 'a boolean or "true"/"false"',
  is: (v): v is boolean | string => typeof v === 'boolean' || (typeof v === 'string' && /^(true|false)$/i.test(v)),
};

function invalid(msg: string): CniError {
  return new CniError(CniCode.InvalidConfig, msg);
}

/**
 * One key of `obj`, or undefined when absent or null (compat: Go's json leaves a field at its default on
 * null). A value of another type throws "`<label>` must be <what>".
 */
function getKey<T>(obj: Record<string, unknown>, key: string, kind: Kind<T>, label = key): T | undefined {
  const value = obj[key];
  if (value === undefined || value === null) return undefined;
  if (!kind.is(value)) throw invalid(`\`${label}\` must be ${kind.what}`);
  return value;
}

function readFlag(obj: Record<string, unknown>, key: string): boolean {
  const value = getKey(obj, key, FLAG);
  return typeof value === 'string' ? value.toLowerCase() === 'true' : (value ?? false);
}

function decodeObject(bytes: Buffer | string, what: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(typeof bytes === 'string' ? bytes : bytes.toString('utf8'));
  } catch (err) {
    throw new CniError(CniCode.DecodingFailure, `${what} is not valid JSON: ${messageOf(err)}`, { cause: err });
  }
  if (!isObject(value)) {
    const got = value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value;
    throw new CniError(CniCode.DecodingFailure, `${what} must be a JSON object, got ${got}`);
  }
  return value;
}

function withContext<T>(context: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    throw wrapError(err, context, CniCode.InvalidConfig);
  }
}

// ---------------------------------------------------------------------------------------------------------
// 00-multus.conf

const MULTUS_KEYS = [
  'name', 'type', 'cniVersion', 'kubeconfig', 'confDir', 'cniDir', 'binDir', 'delegates', 'clusterNetwork',
  'defaultNetworks', 'systemNamespaces', 'multusNamespace', 'logFile', 'logLevel', 'logToStderr', 'logOptions',
  'readinessindicatorfile', 'namespaceIsolation', 'globalNamespaces', 'retryDeleteOnError',
  'auxiliaryCNIChainName', 'runtimeConfig', 'prevResult', 'readinessBackoff', 'delegateTimeoutSeconds',
  'strictCapabilities',
];

/**
 * The known keys of the config under their canonical spelling. compat: Go's encoding/json matches object keys
 * to struct tags case-insensitively (an exact match wins, the last key in the object wins), so Multus reads
 * `readinessIndicatorFile` as `readinessindicatorfile`; we do too, and say so in a warning.
 */
function foldKeys(raw: Record<string, unknown>, warnings: string[]): Record<string, unknown> {
  const byLower = new Map(MULTUS_KEYS.map((key) => [key.toLowerCase(), key]));
  const wire: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(raw)) {
    const canonical = MULTUS_KEYS.includes(key) ? key : byLower.get(key.toLowerCase());
    if (canonical === undefined) continue; // compat: unknown keys are ignored (§1.2)
    if (canonical !== key) warnings.push(`config key "${key}" read as "${canonical}"; spell it "${canonical}"`);
    wire[canonical] = value;
  }
  return wire;
}

/** Parses the multus config from stdin: defaults (§1.2), key types, the rules of §1.3, the delegates. */
export function parseMultusConf(bytes: Buffer | string): MultusConf {
  const raw = decodeObject(bytes, 'multus config');
  const warnings: string[] = [];
  const wire = foldKeys(raw, warnings);
  const identity = parseIdentity(wire);
  const paths = parsePaths(wire);
  const selection = parseSelection(wire);
  const logging = parseLogging(wire, warnings);
  const runtime = parseRuntime(wire);
  const rawDelegates = getKey(wire, 'delegates', OBJECTS) ?? [];
  if (rawDelegates.length === 0 && selection.clusterNetwork === '') {
    throw invalid('at least one delegate or clusterNetwork must be specified: add a `delegates` array or set `clusterNetwork`');
  }
  // compat: with clusterNetwork set, `delegates` is ignored, not even parsed (§1.3 rule 7).
  const delegates = selection.clusterNetwork === '' ? parseDelegates(rawDelegates) : [];
  return { ...identity, ...paths, delegates, ...selection, ...logging, ...runtime, warnings, raw };
}

function parseIdentity(wire: Record<string, unknown>): Pick<MultusConf, 'name' | 'type' | 'cniVersion'> {
  // skel: a missing (or empty) cniVersion means 0.1.0.
  const cniVersion = getKey(wire, 'cniVersion', STRING) || '0.1.0';
  if (!isSupportedVersion(cniVersion)) {
    throw new CniError(
      CniCode.IncompatibleVersion,
      `unsupported cniVersion "${cniVersion}" in the multus config: use one of ${SUPPORTED_VERSIONS.join(', ')}`,
    );
  }
  return { name: getKey(wire, 'name', STRING) ?? '', type: getKey(wire, 'type', STRING) ?? '', cniVersion };
}

function parsePaths(wire: Record<string, unknown>): Pick<MultusConf, 'kubeconfig' | 'confDir' | 'cniDir' | 'binDir'> {
  // An empty directory would mean "the current directory" of whatever process runs us: take the default.
  return {
    kubeconfig: getKey(wire, 'kubeconfig', STRING) ?? '',
    confDir: getKey(wire, 'confDir', STRING) || '/etc/cni/multus/net.d',
    cniDir: getKey(wire, 'cniDir', STRING) || '/var/lib/cni/multus',
    binDir: getKey(wire, 'binDir', STRING) || '/opt/cni/bin',
  };
}

type SelectionKeys = 'clusterNetwork' | 'defaultNetworks' | 'systemNamespaces' | 'multusNamespace' | 'namespaceIsolation' | 'globalNamespaces';

function parseSelection(wire: Record<string, unknown>): Pick<MultusConf, SelectionKeys> {
  // §1.3 rule 5: comma-separated, each item trimmed; it replaces the default list.
  const global = (getKey(wire, 'globalNamespaces', STRING) ?? '').split(',').map((ns) => ns.trim()).filter((ns) => ns !== '');
  return {
    clusterNetwork: getKey(wire, 'clusterNetwork', STRING) ?? '',
    defaultNetworks: getKey(wire, 'defaultNetworks', NAMES) ?? [],
    systemNamespaces: getKey(wire, 'systemNamespaces', STRINGS) ?? ['kube-system'],
    multusNamespace: getKey(wire, 'multusNamespace', STRING) || 'kube-system',
    namespaceIsolation: getKey(wire, 'namespaceIsolation', BOOLEAN) ?? false,
    globalNamespaces: global.length > 0 ? global : ['default'],
  };
}

type LoggingKeys = 'logFile' | 'logLevel' | 'logToStderr' | 'logOptions';

function parseLogging(wire: Record<string, unknown>, warnings: string[]): Pick<MultusConf, LoggingKeys> {
  const options = getKey(wire, 'logOptions', OBJECT);
  return {
    logFile: getKey(wire, 'logFile', STRING) ?? '',
    logLevel: parseLogLevel(getKey(wire, 'logLevel', STRING) ?? '', warnings),
    logToStderr: getKey(wire, 'logToStderr', BOOLEAN) ?? true,
    logOptions: options === undefined ? undefined : parseLogOptions(options),
  };
}

/** §11: case-insensitive; empty means panic; an unknown level is reported and panic is kept. */
function parseLogLevel(value: string, warnings: string[]): LogLevel {
  const level = LOG_LEVELS.find((l) => l === value.toLowerCase());
  if (level !== undefined) return level;
  if (value !== '') warnings.push(`multus logging: cannot set logging level to ${value}`);
  return 'panic';
}

function parseLogOptions(obj: Record<string, unknown>): LogOptions {
  // compat: unknown keys inside logOptions are ignored, as Go's json does.
  const out: LogOptions = {};
  for (const key of ['maxAge', 'maxSize', 'maxBackups'] as const) {
    const value = getKey(obj, key, COUNT, `logOptions.${key}`);
    if (value !== undefined) out[key] = value;
  }
  const compress = getKey(obj, 'compress', BOOLEAN, 'logOptions.compress');
  if (compress !== undefined) out.compress = compress;
  return out;
}

type RuntimeKeys =
  | 'readinessIndicatorFile' | 'readinessBackoff' | 'retryDeleteOnError' | 'auxiliaryCNIChainName'
  | 'runtimeConfig' | 'delegateTimeoutMs' | 'strictCapabilities';

function parseRuntime(wire: Record<string, unknown>): Pick<MultusConf, RuntimeKeys> {
  getKey(wire, 'prevResult', OBJECT); // §1.2: only checked; nothing in the thin plugin uses it
  const backoff = getKey(wire, 'readinessBackoff', OBJECT);
  const timeoutSeconds = getKey(wire, 'delegateTimeoutSeconds', POSITIVE) ?? DEFAULT_DELEGATE_TIMEOUT_SECONDS;
  return {
    readinessIndicatorFile: getKey(wire, 'readinessindicatorfile', STRING) ?? '',
    readinessBackoff: backoff === undefined ? { ...DEFAULT_BACKOFF } : parseBackoff(backoff),
    retryDeleteOnError: getKey(wire, 'retryDeleteOnError', BOOLEAN) ?? false,
    auxiliaryCNIChainName: getKey(wire, 'auxiliaryCNIChainName', STRING) ?? '',
    // Kept whole: Multus keeps only 7 keys (§1.2 quirk); the capability filter per delegate is the planner's.
    runtimeConfig: structuredClone(getKey(wire, 'runtimeConfig', OBJECT) ?? {}),
    delegateTimeoutMs: Math.max(1, Math.round(timeoutSeconds * 1000)),
    strictCapabilities: getKey(wire, 'strictCapabilities', BOOLEAN) ?? false,
  };
}

/** Our own key, so unknown sub-keys are an error (a typo would otherwise silently keep the default). */
function parseBackoff(obj: Record<string, unknown>): BackoffOptions {
  const known = Object.keys(DEFAULT_BACKOFF);
  const unknown = Object.keys(obj).find((key) => !known.includes(key));
  if (unknown !== undefined) {
    throw invalid(`unknown key \`readinessBackoff.${unknown}\`: the keys are ${known.join(', ')}`);
  }
  return {
    initialMs: getKey(obj, 'initialMs', POSITIVE, 'readinessBackoff.initialMs') ?? DEFAULT_BACKOFF.initialMs,
    factor: getKey(obj, 'factor', POSITIVE, 'readinessBackoff.factor') ?? DEFAULT_BACKOFF.factor,
    jitter: getKey(obj, 'jitter', FRACTION, 'readinessBackoff.jitter') ?? DEFAULT_BACKOFF.jitter,
    steps: getKey(obj, 'steps', STEPS, 'readinessBackoff.steps') ?? DEFAULT_BACKOFF.steps,
  };
}

function parseDelegates(rawDelegates: Record<string, unknown>[]): Network[] {
  // compat: Multus numbers delegates from 0 in this message (§1.3 rule 6).
  return rawDelegates.map((delegate, idx) => withContext(`failed to load delegate ${idx} config`, () => parseNetwork(delegate)));
}

// ---------------------------------------------------------------------------------------------------------
// Delegate networks: single-plugin configs and conflists

/** A conflist before its name and version are checked; `plugins` is undefined when the key is absent. */
interface ListHeader {
  name: string;
  cniVersion: string;
  disableCheck: boolean;
  disableGC: boolean;
  loadOnlyInlinedPlugins: boolean;
  plugins: PluginConf[] | undefined;
}

/**
 * Parses one delegate network. An object with a non-empty `type` is a single-plugin config, anything else
 * must be a conflist with `plugins` (Multus LoadDelegateNetConf). `defaultName` fills a missing or empty
 * `name`, in the bytes too (NAD §4.2). A Buffer keeps its bytes unless a name was injected; an object's
 * bytes are its JSON. `source` (a file, a NAD) prefixes every error message.
 */
export function parseNetwork(
  input: Buffer | Record<string, unknown>,
  opts: { defaultName?: string; source?: string } = {},
): Network {
  const parse = (): Network => {
    const isBytes = Buffer.isBuffer(input);
    const decoded = isBytes ? decodeObject(input, 'network config') : structuredClone(input);
    if (!isObject(decoded)) throw invalid('network config must be a JSON object');
    const obj = injectName(decoded, opts.defaultName);
    const bytes = isBytes && obj === decoded ? input : Buffer.from(JSON.stringify(obj));
    if (isSingle(obj)) return validateNetwork(singleNetwork(obj, bytes));
    const header = parseListHeader(obj);
    if (header.plugins === undefined) {
      throw invalid("delegate must have the 'type' or 'plugins' field: set 'type' for one plugin or 'plugins' for a chain");
    }
    return validateNetwork(assembleList(header, obj, bytes, []));
  };
  return opts.source === undefined ? parse() : withContext(opts.source, parse);
}

function injectName(obj: Record<string, unknown>, defaultName: string | undefined): Record<string, unknown> {
  const missing = obj.name === undefined || obj.name === null || obj.name === '';
  return defaultName !== undefined && missing ? { ...obj, name: defaultName } : obj;
}

function isSingle(obj: Record<string, unknown>): boolean {
  return (getKey(obj, 'type', STRING) ?? '') !== '';
}

/** A plugin object's own keys that other modules read: a non-empty `type` and boolean `capabilities`. */
function checkPlugin(obj: Record<string, unknown>, prefix: string, missingType: string): PluginConf {
  if ((getKey(obj, 'type', STRING, `${prefix}type`) ?? '') === '') throw invalid(missingType);
  getKey(obj, 'capabilities', BOOLEAN_MAP, `${prefix}capabilities`);
  return obj as PluginConf;
}

function singleNetwork(obj: Record<string, unknown>, bytes: Buffer): Network {
  const plugin = checkPlugin(obj, '', "missing 'type'");
  return {
    name: getKey(obj, 'name', STRING) ?? '',
    cniVersion: getKey(obj, 'cniVersion', STRING) || '0.1.0', // spec: no cniVersion means 0.1.0
    isList: false,
    // compat: libcni's ConfListFromConf keeps only name, cniVersion and the plugin, so a single config's
    // disableCheck/disableGC never take effect.
    disableCheck: false,
    disableGC: false,
    plugins: [plugin],
    bytes,
  };
}

/** libcni NetworkConfFromBytes: key types, the version, the three flags and the inline plugins. */
function parseListHeader(obj: Record<string, unknown>): ListHeader {
  return {
    name: getKey(obj, 'name', STRING) ?? '',
    cniVersion: listVersion(obj),
    disableCheck: readFlag(obj, 'disableCheck'),
    disableGC: readFlag(obj, 'disableGC'),
    loadOnlyInlinedPlugins: readFlag(obj, 'loadOnlyInlinedPlugins'),
    plugins: obj.plugins === undefined || obj.plugins === null ? undefined : parsePlugins(obj.plugins),
  };
}

/**
 * The list's version: `cniVersion`, or with `cniVersions` (spec 1.1.0) the highest of both that is not newer
 * than the version we implement (libcni); none at all means 0.1.0.
 */
function listVersion(obj: Record<string, unknown>): string {
  const version = getKey(obj, 'cniVersion', STRING) ?? '';
  const versions = getKey(obj, 'cniVersions', STRINGS);
  if (versions === undefined) return version || '0.1.0';
  const usable = [...versions, ...(version === '' ? [] : [version])]
    .filter((v) => compareVersions(v, CURRENT_VERSION) <= 0)
    .sort(compareVersions);
  return usable.at(-1) ?? (version || '0.1.0');
}

function parsePlugins(value: unknown): PluginConf[] {
  if (!Array.isArray(value)) throw invalid('`plugins` must be an array of plugin objects');
  if (value.length === 0) throw invalid('`plugins` must not be empty: list at least one plugin');
  return value.map((plugin: unknown, i) => {
    if (!isObject(plugin)) throw invalid(`\`plugins[${i}]\` must be a JSON object`);
    return checkPlugin(plugin, `plugins[${i}].`, `a plugin delegate must have the 'type' field: \`plugins[${i}]\` has none`);
  });
}

/** The list with `extra` (subdirectory) plugins appended; the bytes are rebuilt only when there are any. */
function assembleList(header: ListHeader, obj: Record<string, unknown>, bytes: Buffer, extra: PluginConf[]): Network {
  const plugins = [...(header.plugins ?? []), ...extra];
  return {
    name: header.name,
    cniVersion: header.cniVersion,
    isList: true,
    disableCheck: header.disableCheck,
    disableGC: header.disableGC,
    plugins,
    bytes: extra.length === 0 ? bytes : Buffer.from(JSON.stringify({ ...obj, plugins })),
  };
}

/** What libcni checks before it runs a network: the name (ValidateNetworkName) and a version we speak. */
function validateNetwork(network: Network): Network {
  if (network.name === '') throw invalid('missing network name: set "name"');
  if (!VALID_NAME.test(network.name)) {
    throw invalid(`invalid characters found in network name "${network.name}": ${VALID_NAME_HINT}`);
  }
  if (!isSupportedVersion(network.cniVersion)) {
    throw new CniError(
      CniCode.IncompatibleVersion,
      `network "${network.name}" has unsupported cniVersion "${network.cniVersion}": use one of ${SUPPORTED_VERSIONS.join(', ')}`,
    );
  }
  return network;
}

/** A `.conf`/`.json` file's bytes: a single-plugin config, which must have a `type`. */
function parseConfFile(bytes: Buffer): Network {
  const obj = decodeObject(bytes, 'network config');
  if (!isSingle(obj)) throw invalid("no 'type'; perhaps this is a .conflist?");
  return validateNetwork(singleNetwork(obj, bytes));
}

/** A plugin file of a conflist's subdirectory: one plugin object with a `type`. */
function parsePluginFile(bytes: Buffer): PluginConf {
  return checkPlugin(decodeObject(bytes, 'plugin config'), '', "missing 'type': a plugin file holds one plugin object");
}

// ---------------------------------------------------------------------------------------------------------
// File wrappers: read, then delegate to the parsers above

/** Go's filepath.Ext: from the last dot of the base name (so ".conf" is a .conf file; Node says ""). */
function extOf(file: string): string {
  const base = file.slice(file.lastIndexOf('/') + 1);
  const dot = base.lastIndexOf('.');
  return dot < 0 ? '' : base.slice(dot);
}

function isNotFound(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

function ioError(err: unknown, path: string, what: string): CniError {
  if (isNotFound(err)) return new CniError(CniCode.InvalidConfig, `${what} ${path} does not exist`, { cause: err });
  return new CniError(CniCode.IoFailure, `cannot read ${what} ${path}: ${messageOf(err)}`, { cause: err });
}

function readConfigFile(path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw ioError(err, path, 'CNI config file');
  }
}

/** libcni ConfFiles: non-directory entries of `dir` with one of `exts`, in lexical order; no dir → none. */
function listConfFiles(dir: string, exts: readonly string[]): string[] {
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch (err) {
    if (isNotFound(err)) return [];
    throw ioError(err, dir, 'directory');
  }
  return entries
    .filter((e) => !e.isDirectory() && exts.includes(extOf(e.name)))
    .map((e) => e.name)
    .sort()
    .map((name) => join(dir, name));
}

/**
 * libcni NetworkConfFromFile: the list plus every `*.conf` in `<dir>/<name>/` unless loadOnlyInlinedPlugins.
 * Not yet validated (name, version): findNetworkInDir loads every conflist but validates only its match.
 */
function readConfList(path: string, bytes: Buffer): Network {
  return withContext(`error loading CNI conflist file ${path}`, () => {
    const obj = decodeObject(bytes, 'conflist');
    const header = parseListHeader(obj);
    if (header.loadOnlyInlinedPlugins && header.plugins === undefined) {
      throw invalid("`loadOnlyInlinedPlugins` is true but there is no 'plugins' array: add one");
    }
    // The name becomes a path: only a valid one (no '/', no '..', not empty) is looked up.
    const subdir = join(dirname(path), header.name);
    const useSubdir = !header.loadOnlyInlinedPlugins && VALID_NAME.test(header.name);
    const extra = useSubdir ? readSubdirPlugins(subdir) : [];
    if (header.plugins === undefined && extra.length === 0) {
      throw invalid(`no plugins: add a 'plugins' array or *.conf plugin files in ${subdir}/`);
    }
    return assembleList(header, obj, bytes, extra);
  });
}

function readSubdirPlugins(dir: string): PluginConf[] {
  return listConfFiles(dir, ['.conf']).map((file) =>
    withContext(`error loading plugin config file ${file}`, () => parsePluginFile(readConfigFile(file))),
  );
}

function validateConfList(path: string, list: Network): Network {
  return withContext(`error loading CNI conflist file ${path}`, () => validateNetwork(list));
}

/** libcni ConfListFromFile for `.conflist`, ConfFromFile for anything else. */
export function loadNetworkFile(path: string): Network {
  const bytes = readConfigFile(path);
  if (extOf(path) === '.conflist') return validateConfList(path, readConfList(path, bytes));
  return withContext(`error loading CNI config file ${path}`, () => parseConfFile(bytes));
}

/** §4.5 path form: a directory yields its first config file, a file is loaded as it is. */
export function loadNetworkPath(path: string): Network {
  let isDirectory: boolean;
  try {
    isDirectory = statSync(path).isDirectory();
  } catch (err) {
    throw ioError(err, path, 'network path');
  }
  if (!isDirectory) return loadNetworkFile(path);
  const files = listConfFiles(path, NETWORK_FILE_EXTS);
  // compat: the directory needs a .conf or .conflist, but the first of .conf/.json/.conflist is used (§4.5).
  if (!files.some((file) => extOf(file) !== '.json')) {
    throw invalid(`no .conf or .conflist file in directory ${path}: put the network's config there`);
  }
  return loadNetworkFile(files[0]!);
}

/**
 * §4.2: the config named `name` among the `.conf`/`.json`/`.conflist` files directly in `dir`, in lexical
 * order. compat: a file that cannot be parsed before the match aborts the search, as in Multus.
 */
export function findNetworkInDir(dir: string, name: string): Network {
  const files = listConfFiles(dir, NETWORK_FILE_EXTS);
  if (files.length === 0) {
    throw invalid(`no networks found in ${dir}: add a .conf, .json or .conflist file with "name": "${name}"`);
  }
  for (const file of files) {
    const network = matchNetworkFile(file, name);
    if (network !== undefined) return network;
  }
  throw invalid(`no network named "${name}" in ${dir}: add a .conf, .json or .conflist file with "name": "${name}"`);
}

function matchNetworkFile(file: string, name: string): Network | undefined {
  const bytes = readConfigFile(file);
  if (extOf(file) === '.conflist') {
    const list = readConfList(file, bytes);
    return list.name === name ? validateConfList(file, list) : undefined;
  }
  const context = `error loading CNI config file ${file}`;
  const obj = withContext(context, () => decodeObject(bytes, 'network config'));
  return obj.name === name ? withContext(context, () => parseConfFile(bytes)) : undefined;
}

// ---------------------------------------------------------------------------------------------------------
// clusterNetwork and defaultNetworks without Kubernetes

export interface ResolveOptions {
  /** The pod's namespace; defaultNetworks are skipped for pods in `systemNamespaces`. */
  podNamespace?: string;
  /** Resolve only the cluster network (STATUS and GC have no pod, §4.5). */
  clusterOnly?: boolean;
  /** NAD lookup (Kubernetes), tried first for values without `/`. */
  lookup?: NetworkLookup;
}

/**
 * The networks every pod gets: `delegates` when clusterNetwork is empty, else clusterNetwork and then each
 * defaultNetworks entry (§4.5). Fixes the §4.5 quirk: a path, or a config name in confDir, works without a
 * kube client. Unlike Multus, a clusterNetwork failure keeps its cause in the message.
 */
export function resolveStaticNetworks(conf: MultusConf, opts: ResolveOptions = {}): StaticNetwork[] {
  if (conf.clusterNetwork === '') return conf.delegates.map((network) => ({ network, displayName: network.name }));
  const networks = [resolveNetworkRef(conf, conf.clusterNetwork, 'clusterNetwork', opts.lookup)];
  const systemPod = opts.podNamespace !== undefined && conf.systemNamespaces.includes(opts.podNamespace);
  if (opts.clusterOnly === true || systemPod) return networks;
  for (const value of conf.defaultNetworks) {
    networks.push(resolveNetworkRef(conf, value, 'defaultNetwork', opts.lookup));
  }
  return networks;
}

function resolveNetworkRef(conf: MultusConf, value: string, role: string, lookup: NetworkLookup | undefined): StaticNetwork {
  return withContext(`failed to get ${role} "${value}"`, () => {
    // compat: any value with a '/' is a path, so "ns/name" is not a NAD reference (§4.5).
    if (value.includes('/')) {
      const network = loadNetworkPath(value);
      return { network, displayName: network.name };
    }
    const found = lookup?.(value);
    if (found !== undefined) return found;
    const network = findNetworkInDir(conf.confDir, value);
    return { network, displayName: network.name };
  });
}
