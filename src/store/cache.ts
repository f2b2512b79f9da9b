/**
 * cache.ts: the two on-disk caches and the atomic file write they share (I/O, with pure codecs).
 *
 * The libcni result cache (`<cniDir>/results/<net>-<id>-<if>`) is byte-compatible with containernetworking/cni
 * libcni `cachedInfo` (field-notes §5.4, multus-behaviour §7.3), so Go tools and Go Multus read what we write and
 * we read theirs, including legacy raw-result files. The Multus scratch cache (`<cniDir>/<containerID>`,
 * multus-behaviour §8.1) is the JSON array Go Multus marshals from `[]*DelegateNetConf`, so either implementation
 * can DEL what the other ADDed. `encodeX`/`decodeX` are pure; `readX`/`writeX`/`removeX` are thin wrappers that
 * return a `ReadOutcome` (missing is not corrupt) and write through `writeFileAtomic` (0600 files, 0700 dirs).
 */
import { closeSync, fchmodSync, fsyncSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { CniCode, CniError, messageOf } from '../base/errors.ts';

type Json = Record<string, unknown>;

export type ReadOutcome<T> = { kind: 'ok'; value: T } | { kind: 'missing' } | { kind: 'corrupt'; error: CniError };

// ---------------------------------------------------------------------------------------------------------------
// Atomic writes and path components

let tempCounter = 0;

/** Temp files start with '.', which no libcni network name can (it must start alphanumeric), so scans skip them. */
function tempPathFor(path: string): string {
  tempCounter += 1;
  const unique = `${process.pid}-${Date.now().toString(36)}-${tempCounter}-${Math.random().toString(36).slice(2, 8)}`;
  return join(dirname(path), `.${basename(path)}.tmp-${unique}`);
}

function isTempName(name: string): boolean {
  return name.startsWith('.');
}

/**
 * Write `data` so readers see either the old file or the complete new one: temp file in the same directory,
 * fsync, rename. Parent directories are created 0700; the file gets `mode` exactly (fchmod, so umask cannot
 * widen or narrow it). The directory itself is not fsynced: after a crash the file may be missing, never partial.
 */
export function writeFileAtomic(path: string, data: string | Buffer, mode = 0o600): void {
  let temp: string | undefined;
  let fd: number | undefined;
  try {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    temp = tempPathFor(path);
    fd = openSync(temp, 'wx', mode);
    fchmodSync(fd, mode);
    const buf = typeof data === 'string' ? Buffer.from(data) : data;
    for (let off = 0; off < buf.length; ) off += writeSync(fd, buf, off, buf.length - off);
    fsyncSync(fd);
    closeSync(fd);
    fd = undefined;
    renameSync(temp, path);
  } catch (err) {
    if (fd !== undefined) ignoreErrors(() => closeSync(fd!));
    if (temp !== undefined) ignoreErrors(() => unlinkSync(temp!));
    throw new CniError(CniCode.IoFailure, `cannot write ${path}: ${messageOf(err)}; check that its directory is writable and the disk is not full`, { cause: err });
  }
}

function ignoreErrors(fn: () => void): void {
  try {
    fn();
  } catch {
    // best-effort cleanup after the real error, which is the one reported
  }
}

/** A value used as one file-name component must not escape or alias its directory. */
export function assertSafeComponent(value: string, what: string): void {
  if (value === '' || value === '.' || value === '..' || value.includes('/') || value.includes('\0')) {
    throw new CniError(
      CniCode.InvalidEnv,
      `${what} ${JSON.stringify(value)} cannot be used in a cache file name: it must not be empty, "." or "..", or contain "/" or NUL`,
    );
  }
}

function isMissingError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

function removeIfPresent(path: string): void {
  try {
    unlinkSync(path);
  } catch (err) {
    if (isMissingError(err)) return;
    throw new CniError(CniCode.IoFailure, `cannot remove ${path}: ${messageOf(err)}; check the permissions of its directory`, { cause: err });
  }
}

/** Read and decode one cache file; a file that exists but cannot be read or decoded is `corrupt`, never `missing`. */
function readOutcome<T>(path: string, what: string, decode: (bytes: Buffer) => T): ReadOutcome<T> {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (err) {
    if (isMissingError(err)) return { kind: 'missing' };
    const msg = `cannot read ${what} ${path}: ${messageOf(err)}; check its permissions`;
    return { kind: 'corrupt', error: new CniError(CniCode.IoFailure, msg, { cause: err }) };
  }
  try {
    return { kind: 'ok', value: decode(bytes) };
  } catch (err) {
    const code = err instanceof CniError ? err.code : CniCode.DecodingFailure;
    const msg = `corrupt ${what} ${path}: ${messageOf(err)} (remove the file if its container is gone)`;
    return { kind: 'corrupt', error: new CniError(code, msg, { cause: err }) };
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Go encoding/json compatibility helpers (pure)

/** Go marshals map[string]interface{} with sorted keys, recursively; struct-typed values keep field order. */
function sortKeysDeep(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeysDeep);
  if (!isObject(value)) return value;
  const out: Json = {};
  for (const key of Object.keys(value).sort()) out[key] = sortKeysDeep(value[key]);
  return out;
}

function sortKeys(value: Json): Json {
  const out: Json = {};
  for (const key of Object.keys(value).sort()) out[key] = value[key];
  return out;
}

/** JSON.stringify plus Go's HTML-safe escapes, so our bytes equal Go's for the same value. */
function goJson(value: unknown): string {
  return JSON.stringify(value).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function corrupt(ctx: string, detail: string): CniError {
  return new CniError(CniCode.DecodingFailure, `${ctx}: ${detail}`);
}

function parseJson(bytes: Buffer | string, ctx: string): unknown {
  try {
    return JSON.parse(typeof bytes === 'string' ? bytes : bytes.toString('utf8'));
  } catch (err) {
    throw new CniError(CniCode.DecodingFailure, `${ctx} is not valid JSON: ${messageOf(err)}`, { cause: err });
  }
}

function parseJsonObject(bytes: Buffer | string, ctx: string): Json {
  const value = parseJson(bytes, ctx);
  if (!isObject(value)) throw corrupt(ctx, 'expected a JSON object');
  return value;
}

// Field readers: Go leaves a field at its zero value when the key is absent or null, and fails on a wrong type.

function readString(o: Json, key: string, ctx: string): string {
  const v = o[key];
  if (v === undefined || v === null) return '';
  if (typeof v !== 'string') throw corrupt(ctx, `"${key}" must be a string`);
  return v;
}

function readBool(o: Json, key: string, ctx: string): boolean {
  const v = o[key];
  if (v === undefined || v === null) return false;
  if (typeof v !== 'boolean') throw corrupt(ctx, `"${key}" must be true or false`);
  return v;
}

function readArray(o: Json, key: string, ctx: string): unknown[] | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v)) throw corrupt(ctx, `"${key}" must be an array`);
  return v;
}

function readStringArray(o: Json, key: string, ctx: string): string[] | undefined {
  const v = readArray(o, key, ctx);
  if (v !== undefined && !v.every((s) => typeof s === 'string')) throw corrupt(ctx, `"${key}" must be an array of strings`);
  return v as string[] | undefined;
}

function readObject(o: Json, key: string, ctx: string): Json | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (!isObject(v)) throw corrupt(ctx, `"${key}" must be a JSON object`);
  return v;
}

/** Go's []byte is standard base64 with padding; Buffer.from would silently skip bad characters, so check first. */
function readBase64(o: Json, key: string, ctx: string): Buffer | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string' || v.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(v)) {
    throw corrupt(ctx, `"${key}" must be a base64 string`);
  }
  return Buffer.from(v, 'base64');
}

// ---------------------------------------------------------------------------------------------------------------
// libcni result cache

export interface ResultCacheEntry {
  kind: 'cniCacheV1';
  containerId: string;
  config: Buffer;
  ifName: string;
  networkName: string;
  netns: string;
  cniArgs: [string, string][];
  capabilityArgs: Record<string, unknown>;
  result: Record<string, unknown>;
}

/** libcni getCacheFilePath: `<cacheDir>/results/<networkName>-<containerID>-<ifName>`. */
export function resultCachePath(cniDir: string, networkName: string, containerId: string, ifName: string): string {
  assertSafeComponent(networkName, 'network name');
  assertSafeComponent(containerId, 'container ID');
  assertSafeComponent(ifName, 'interface name');
  return join(cniDir, 'results', `${networkName}-${containerId}-${ifName}`);
}

/**
 * libcni `cachedInfo` as json.Marshal writes it: struct field order, `config` base64, netns/cniArgs/
 * capabilityArgs/result omitted when empty (omitempty), and map values with sorted keys (Go maps).
 */
export function encodeResultCache(e: ResultCacheEntry): string {
  const out: Json = {
    kind: e.kind,
    containerId: e.containerId,
    config: e.config.toString('base64'),
    ifName: e.ifName,
    networkName: e.networkName,
  };
  if (e.netns !== '') out.netns = e.netns;
  if (e.cniArgs.length > 0) out.cniArgs = e.cniArgs;
  if (Object.keys(e.capabilityArgs).length > 0) out.capabilityArgs = sortKeys(e.capabilityArgs);
  if (Object.keys(e.result).length > 0) out.result = sortKeysDeep(e.result);
  return goJson(out);
}

/**
 * The reverse of `encodeResultCache`. A JSON object whose `kind` is not `cniCacheV1` is a legacy cache file
 * holding the raw result (libcni getLegacyCachedResult reads it that way): only `result` is filled, so callers
 * that need an attachment (GC: non-empty containerId and ifName) skip it as libcni GetCachedAttachments does.
 */
export function decodeResultCache(bytes: Buffer | string): ResultCacheEntry {
  const ctx = 'libcni result cache';
  const v = parseJsonObject(bytes, ctx);
  if (v.kind !== 'cniCacheV1') return { ...emptyResultEntry(), result: v };
  return {
    kind: 'cniCacheV1',
    containerId: readString(v, 'containerId', ctx),
    config: readBase64(v, 'config', ctx) ?? Buffer.alloc(0),
    ifName: readString(v, 'ifName', ctx),
    networkName: readString(v, 'networkName', ctx),
    netns: readString(v, 'netns', ctx),
    cniArgs: readArgPairs(v, ctx),
    capabilityArgs: readObject(v, 'capabilityArgs', ctx) ?? {},
    result: readObject(v, 'result', ctx) ?? {},
  };
}

function emptyResultEntry(): ResultCacheEntry {
  return {
    kind: 'cniCacheV1', containerId: '', config: Buffer.alloc(0), ifName: '', networkName: '', netns: '',
    cniArgs: [], capabilityArgs: {}, result: {},
  };
}

/** Go `[][2]string`: each element a pair of strings. */
function readArgPairs(v: Json, ctx: string): [string, string][] {
  const list = readArray(v, 'cniArgs', ctx) ?? [];
  for (const pair of list) {
    if (!Array.isArray(pair) || pair.length !== 2 || typeof pair[0] !== 'string' || typeof pair[1] !== 'string') {
      throw corrupt(ctx, '"cniArgs" must be an array of [key, value] string pairs');
    }
  }
  return list as [string, string][];
}

export function readResultCache(cniDir: string, networkName: string, containerId: string, ifName: string): ReadOutcome<ResultCacheEntry> {
  return readOutcome(resultCachePath(cniDir, networkName, containerId, ifName), 'libcni result cache', decodeResultCache);
}

export function writeResultCache(cniDir: string, e: ResultCacheEntry): void {
  writeFileAtomic(resultCachePath(cniDir, e.networkName, e.containerId, e.ifName), encodeResultCache(e));
}

export function removeResultCache(cniDir: string, networkName: string, containerId: string, ifName: string): void {
  removeIfPresent(resultCachePath(cniDir, networkName, containerId, ifName));
}

/**
 * Every file in `<cniDir>/results`, sorted by name as libcni GetCachedAttachments does; a missing directory is
 * an empty list. With a containerId filter, decoded entries are matched on their `containerId` field (a file
 * name cannot be split reliably: network names may contain '-'); a corrupt file is kept only if its name
 * contains `-<containerId>-`, so the caller can still report or remove it.
 */
export function listResultCaches(cniDir: string, filter: { containerId?: string } = {}): { path: string; outcome: ReadOutcome<ResultCacheEntry> }[] {
  const dir = join(cniDir, 'results');
  let names: string[];
  try {
    names = readdirSync(dir, { withFileTypes: true }).filter((d) => !d.isDirectory() && !isTempName(d.name)).map((d) => d.name);
  } catch (err) {
    if (isMissingError(err)) return [];
    throw new CniError(CniCode.IoFailure, `cannot list ${dir}: ${messageOf(err)}; check its permissions`, { cause: err });
  }
  const wanted = filter.containerId;
  const out: { path: string; outcome: ReadOutcome<ResultCacheEntry> }[] = [];
  for (const name of names.sort()) {
    const path = join(dir, name);
    const outcome = readOutcome(path, 'libcni result cache', decodeResultCache);
    if (wanted !== undefined && wanted !== '') {
      if (outcome.kind === 'ok' && outcome.value.containerId !== wanted) continue;
      if (outcome.kind !== 'ok' && !name.includes(`-${wanted}-`)) continue;
    }
    if (outcome.kind !== 'missing') out.push({ path, outcome });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Multus scratch cache

export interface CachedDelegate {
  bytes: Buffer;
  name: string;
  isList: boolean;
  ifnameRequest: string;
  macRequest: string;
  ipRequest: string[];
  infinibandGUIDRequest: string;
  defaultRoute: string[] | undefined;
  isFilterV4Gateway: boolean;
  isFilterV6Gateway: boolean;
  deviceID: string;
  resourceName: string;
  portMappingsRequest?: unknown[];
  bandwidthRequest?: Record<string, unknown>;
  cniArgsRequest?: Record<string, unknown>;
}

/** Go Multus `filepath.Join(cniDir, containerID)`. */
export function scratchCachePath(cniDir: string, containerId: string): string {
  assertSafeComponent(containerId, 'container ID');
  return join(cniDir, containerId);
}

/**
 * The JSON Go Multus writes for `[]*DelegateNetConf` (pkg/types/types.go): keys in struct order, `omitempty`
 * where the struct has it, `Bytes` base64. Our extensions follow as extra keys that Go ignores.
 */
export function encodeScratchCache(delegates: CachedDelegate[]): string {
  return goJson(delegates.map(encodeDelegate));
}

function encodeDelegate(d: CachedDelegate, index: number): Json {
  const config = parseJsonObject(d.bytes, `delegate ${index} config bytes`);
  const out: Json = {
    Conf: projectPluginConf(config),
    ConfList: d.isList ? projectConfList(config) : {},
    Name: d.name,
  };
  if (d.ifnameRequest !== '') out.ifnameRequest = d.ifnameRequest;
  if (d.macRequest !== '') out.macRequest = d.macRequest;
  if (d.infinibandGUIDRequest !== '') out.infinibandGUIDRequest = d.infinibandGUIDRequest;
  if (d.ipRequest.length > 0) out.ipRequest = d.ipRequest;
  if (d.defaultRoute !== undefined) out['default-route'] = d.defaultRoute; // *[]net.IP: omitted only when nil
  out.IsFilterV4Gateway = d.isFilterV4Gateway;
  out.IsFilterV6Gateway = d.isFilterV6Gateway;
  if (d.deviceID !== '') out.deviceID = d.deviceID;
  if (d.resourceName !== '') out.resourceName = d.resourceName;
  out.Bytes = d.bytes.toString('base64');
  // Multus quirk fixed (§8.1): Go Multus does not persist these, so a cached DEL lost them.
  if (d.portMappingsRequest !== undefined) out.portMappingsRequest = d.portMappingsRequest;
  if (d.bandwidthRequest !== undefined) out.bandwidthRequest = d.bandwidthRequest;
  if (d.cniArgsRequest !== undefined) out.cniArgsRequest = d.cniArgsRequest;
  return out;
}

/**
 * containernetworking/cni v1.3 `types.PluginConf` as its MarshalJSON writes it: only the typed fields, through a
 * map (so keys sorted), `dns` dropped when empty, `ipam` always present. Go Multus fills `Conf` by unmarshalling
 * the delegate bytes into that struct, for conflists too (list-level name and cniVersion).
 */
function projectPluginConf(o: Json): Json {
  const out: Json = {};
  if (isObject(o.capabilities)) {
    const caps = Object.fromEntries(Object.entries(o.capabilities).filter(([, v]) => typeof v === 'boolean'));
    if (Object.keys(caps).length > 0) out.capabilities = sortKeys(caps);
  }
  if (nonEmptyString(o.cniVersion)) out.cniVersion = o.cniVersion;
  const dns = projectDns(o.dns);
  if (dns !== undefined) out.dns = dns;
  out.ipam = isObject(o.ipam) && nonEmptyString(o.ipam.type) ? { type: o.ipam.type } : {};
  if (nonEmptyString(o.name)) out.name = o.name;
  if (isObject(o.prevResult) && Object.keys(o.prevResult).length > 0) out.prevResult = sortKeysDeep(o.prevResult);
  if (nonEmptyString(o.type)) out.type = o.type;
  return out;
}

function projectDns(dns: unknown): Json | undefined {
  if (!isObject(dns)) return undefined;
  const out: Json = {};
  if (nonEmptyString(dns.domain)) out.domain = dns.domain;
  for (const key of ['nameservers', 'options', 'search']) {
    const list = dns[key];
    if (Array.isArray(list) && list.length > 0) out[key] = list;
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

/** `types.NetConfList`: struct order, all fields omitempty, plugins as PluginConf. */
function projectConfList(o: Json): Json {
  const out: Json = {};
  if (nonEmptyString(o.cniVersion)) out.cniVersion = o.cniVersion;
  if (nonEmptyString(o.name)) out.name = o.name;
  if (o.disableCheck === true) out.disableCheck = true;
  if (o.disableGC === true) out.disableGC = true;
  const plugins = Array.isArray(o.plugins) ? o.plugins.filter(isObject).map(projectPluginConf) : [];
  if (plugins.length > 0) out.plugins = plugins;
  return out;
}

function nonEmptyString(v: unknown): v is string {
  return typeof v === 'string' && v !== '';
}

/**
 * Reads files written by Go Multus of any v4 release and by us. `isList` is restored as Go Multus does
 * (`ConfList.plugins` non-empty); a delegate without `Bytes` gets bytes rebuilt from its Conf/ConfList JSON.
 */
export function decodeScratchCache(bytes: Buffer | string): CachedDelegate[] {
  const value = parseJson(bytes, 'Multus scratch cache');
  if (!Array.isArray(value)) throw corrupt('Multus scratch cache', 'expected a JSON array of delegates');
  return value.map(decodeDelegate);
}

function decodeDelegate(v: unknown, index: number): CachedDelegate {
  const ctx = `Multus scratch cache delegate ${index}`;
  if (!isObject(v)) throw corrupt(ctx, 'expected a JSON object');
  const conf = readObject(v, 'Conf', ctx) ?? {};
  const confList = readObject(v, 'ConfList', ctx) ?? {};
  const isList = (readArray(confList, 'plugins', `${ctx} ConfList`) ?? []).length > 0;
  const d: CachedDelegate = {
    bytes: delegateBytes(v, isList ? confList : conf, ctx),
    name: readString(v, 'Name', ctx),
    isList,
    ifnameRequest: readString(v, 'ifnameRequest', ctx),
    macRequest: readString(v, 'macRequest', ctx),
    ipRequest: readStringArray(v, 'ipRequest', ctx) ?? [],
    infinibandGUIDRequest: readString(v, 'infinibandGUIDRequest', ctx),
    defaultRoute: readStringArray(v, 'default-route', ctx),
    isFilterV4Gateway: readBool(v, 'IsFilterV4Gateway', ctx),
    isFilterV6Gateway: readBool(v, 'IsFilterV6Gateway', ctx),
    deviceID: readString(v, 'deviceID', ctx),
    resourceName: readString(v, 'resourceName', ctx),
  };
  const portMappings = readArray(v, 'portMappingsRequest', ctx);
  if (portMappings !== undefined) d.portMappingsRequest = portMappings;
  const bandwidth = readObject(v, 'bandwidthRequest', ctx);
  if (bandwidth !== undefined) d.bandwidthRequest = bandwidth;
  const cniArgs = readObject(v, 'cniArgsRequest', ctx);
  if (cniArgs !== undefined) d.cniArgsRequest = cniArgs;
  return d;
}

function delegateBytes(v: Json, fallback: Json, ctx: string): Buffer {
  const housekeeping = readBase64(v, 'Bytes', ctx);
  const legacy = readObject(v, 'CNINetworkConfigList', ctx);
  if (legacy !== undefined && hasLosslessPlugins(legacy, ctx)) return restoreLosslessBytes(legacy, housekeeping, ctx);
  if (housekeeping !== undefined && housekeeping.length > 0) return housekeeping;
  return Buffer.from(goJson(fallback));
}

// Go Multus releases before multus-cni #1521 cached conflists twice: `CNINetworkConfigList` (libcni's list with
// each plugin's raw bytes) and a lossy `Bytes` marshalled from NetConfList that dropped plugin-specific keys such
// as calico's kubeconfig. Go Multus HEAD rebuilds Bytes from the raw plugins and keeps only the runtime keys
// Multus injected (deviceID, pciBusID, args.cni) from the lossy copy (types/conf.go DelegateNetConf.UnmarshalJSON).

function hasLosslessPlugins(legacy: Json, ctx: string): boolean {
  const listBytes = readBase64(legacy, 'Bytes', `${ctx} CNINetworkConfigList`);
  const plugins = readArray(legacy, 'Plugins', `${ctx} CNINetworkConfigList`);
  return (listBytes !== undefined && listBytes.length > 0) || (plugins !== undefined && plugins.length > 0);
}

function restoreLosslessBytes(legacy: Json, housekeeping: Buffer | undefined, ctx: string): Buffer {
  const lctx = `${ctx} CNINetworkConfigList`;
  const list = parseJsonObject(readBase64(legacy, 'Bytes', lctx) ?? '', `${lctx} Bytes`);
  list.plugins = (readArray(legacy, 'Plugins', lctx) ?? []).map((p, i) => {
    if (!isObject(p)) throw corrupt(lctx, `plugin ${i} is not a JSON object`);
    return parseJsonObject(readBase64(p, 'Bytes', `${lctx} plugin ${i}`) ?? '', `${lctx} plugin ${i} Bytes`);
  });
  if (housekeeping !== undefined && housekeeping.length > 0) {
    mergeHousekeeping(list, parseJsonObject(housekeeping, `${ctx} Bytes`), ctx);
  }
  return Buffer.from(goJson(sortKeysDeep(list)));
}

function mergeHousekeeping(lossless: Json, housekeeping: Json, ctx: string): void {
  const lossy = readArray(housekeeping, 'plugins', `${ctx} Bytes`) ?? [];
  const plugins = lossless.plugins as Json[];
  if (lossy.length !== plugins.length) {
    throw corrupt(ctx, `plugin count differs between CNINetworkConfigList (${plugins.length}) and Bytes (${lossy.length})`);
  }
  plugins.forEach((plugin, i) => {
    const hk = lossy[i];
    if (!isObject(hk)) throw corrupt(ctx, `Bytes plugin ${i} is not a JSON object`);
    for (const key of ['deviceID', 'pciBusID']) if (key in hk) plugin[key] = hk[key];
    if ('args' in hk) plugin.args = mergeCniArgs(plugin.args, hk.args, `${ctx} Bytes plugin ${i}`);
  });
}

/** Go mergeCNIArgs: the lossless `args` (or {}), with `args.cni` keys from the lossy copy laid over it. */
function mergeCniArgs(lossless: unknown, housekeeping: unknown, ctx: string): Json {
  const args = isObject(lossless) ? { ...lossless } : {};
  if (!isObject(housekeeping)) throw corrupt(ctx, '"args" must be a JSON object');
  if (!('cni' in housekeeping)) return args;
  if (!isObject(housekeeping.cni)) throw corrupt(ctx, '"args.cni" must be a JSON object');
  args.cni = { ...(isObject(args.cni) ? args.cni : {}), ...housekeeping.cni };
  return args;
}

export function readScratchCache(cniDir: string, containerId: string): ReadOutcome<CachedDelegate[]> {
  return readOutcome(scratchCachePath(cniDir, containerId), 'Multus scratch cache', decodeScratchCache);
}

export function writeScratchCache(cniDir: string, containerId: string, delegates: CachedDelegate[]): void {
  writeFileAtomic(scratchCachePath(cniDir, containerId), encodeScratchCache(delegates));
}

export function removeScratchCache(cniDir: string, containerId: string): void {
  removeIfPresent(scratchCachePath(cniDir, containerId));
}
