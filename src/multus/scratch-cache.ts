/**
 * multus/scratch-cache.ts: Multus' scratch cache, `<cniDir>/<containerID>` (I/O, with pure codecs).
 *
 * The JSON array Go Multus marshals from its delegate list (docs/behaviour.md, "Caches"), so either
 * implementation can DEL what the other ADDed, including the older double-encoded conflist layout.
 */
import { lstatSync } from 'node:fs';
import { join } from 'node:path';
import { CniCode, CniError } from '../base/errors.ts';
import type { ReadOutcome } from '../base/files.ts';
import { assertSafeComponent, readOutcome, removeIfPresent, writeFileAtomic } from '../base/files.ts';
import type { Json } from '../base/json.ts';
import type { AttachmentField, AttachmentRequest, FieldKind } from './fields.ts';
import { ATTACHMENT_FIELDS, isRequested } from './fields.ts';
import {
  corrupt,
  goJson,
  isObject,
  parseJson,
  parseJsonObject,
  readArray,
  readBase64,
  readBool,
  readObject,
  readString,
  readStringArray,
  sortKeys,
  sortKeysDeep,
} from '../base/json.ts';

/** One attachment as the scratch cache records it: its network's bytes, its name and its requests. */
export interface CachedDelegate {
  bytes: Buffer;
  name: string;
  isList: boolean;
  request: AttachmentRequest;
  /**
   * Go Multus' gateway filter flags (its default-route handling), as read from a file it wrote; we never set
   * them (routes/ moves default routes instead), and write false when absent.
   */
  isFilterV4Gateway?: boolean;
  isFilterV6Gateway?: boolean;
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
  putFields(out, d.request, 'head');
  out.IsFilterV4Gateway = d.isFilterV4Gateway ?? false;
  out.IsFilterV6Gateway = d.isFilterV6Gateway ?? false;
  putFields(out, d.request, 'tail');
  out.Bytes = d.bytes.toString('base64');
  // Multus quirk fixed (docs/behaviour.md#scratch-cache): Go Multus does not persist these, so a cached DEL lost them.
  putFields(out, d.request, 'extension');
  return out;
}

/** Go's `omitempty` for the fields of one slot; default-route is a pointer in Go, omitted only when nil. */
function putFields(out: Json, request: AttachmentRequest, slot: AttachmentField['cacheSlot']): void {
  for (const field of ATTACHMENT_FIELDS) {
    const value = request[field.key];
    if (field.cacheSlot === slot && isRequested(field, value)) out[field.cacheKey] = value;
  }
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

/**
 * For DEL: the file must be a JSON array (else it is corrupt as a whole), but an entry that cannot be decoded is
 * left out (`undefined` at its place, so the others keep their positions, which name their interfaces) and
 * reported, instead of failing every DEL (issue 28; docs/reliability.md).
 */
export function decodeScratchCacheEntries(bytes: Buffer | string): {
  entries: (CachedDelegate | undefined)[];
  problems: string[];
} {
  const value = parseJson(bytes, 'Multus scratch cache');
  if (!Array.isArray(value)) throw corrupt('Multus scratch cache', 'expected a JSON array of delegates');
  const problems: string[] = [];
  const entries = value.map((v, i) => {
    try {
      return decodeDelegate(v, i);
    } catch (e) {
      problems.push(e instanceof Error ? e.message : String(e));
      return undefined;
    }
  });
  return { entries, problems };
}

function decodeDelegate(v: unknown, index: number): CachedDelegate {
  const ctx = `Multus scratch cache delegate ${index}`;
  if (!isObject(v)) throw corrupt(ctx, 'expected a JSON object');
  const conf = readObject(v, 'Conf', ctx) ?? {};
  const confList = readObject(v, 'ConfList', ctx) ?? {};
  const isList = (readArray(confList, 'plugins', `${ctx} ConfList`) ?? []).length > 0;
  return {
    bytes: delegateBytes(v, isList ? confList : conf, ctx),
    name: readString(v, 'Name', ctx),
    isList,
    request: readFields(v, ctx),
    isFilterV4Gateway: readBool(v, 'IsFilterV4Gateway', ctx),
    isFilterV6Gateway: readBool(v, 'IsFilterV6Gateway', ctx),
  };
}

const READERS: Record<FieldKind, (o: Json, key: string, ctx: string) => unknown> = {
  string: readString,
  strings: readStringArray,
  object: readObject,
  objects: readArray,
};

function readFields(v: Json, ctx: string): AttachmentRequest {
  const request: Record<string, unknown> = {};
  for (const field of ATTACHMENT_FIELDS) {
    const value = READERS[field.kind](v, field.cacheKey, ctx);
    if (isRequested(field, value)) request[field.key] = value;
  }
  return request as AttachmentRequest;
}

function delegateBytes(v: Json, fallback: Json, ctx: string): Buffer {
  const housekeeping = readBase64(v, 'Bytes', ctx);
  const legacy = readObject(v, 'CNINetworkConfigList', ctx);
  if (legacy !== undefined && hasLosslessPlugins(legacy, ctx)) return restoreLosslessBytes(legacy, housekeeping, ctx);
  if (housekeeping !== undefined && housekeeping.length > 0) return housekeeping;
  return Buffer.from(goJson(fallback));
}

// Go Multus releases before k8snetworkplumbingwg/multus-cni#1521 cached conflists twice: `CNINetworkConfigList`
// (libcni's list with
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
    throw corrupt(
      ctx,
      `plugin count differs between CNINetworkConfigList (${plugins.length}) and Bytes (${lossy.length})`,
    );
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

/**
 * A container ID may name a directory of the cache dir (`results`, or one an operator made): that is not a scratch
 * cache. Reading finds none, removing leaves the directory, writing is refused before any delegate runs, saying so
 * (issue 28; Go Multus fails such an ADD and every DEL with EISDIR).
 */
function isDirectory(path: string): boolean {
  try {
    return lstatSync(path).isDirectory();
  } catch {
    return false;
  }
}

export function readScratchCache(cniDir: string, containerId: string): ReadOutcome<CachedDelegate[]> {
  if (isDirectory(scratchCachePath(cniDir, containerId))) return { kind: 'missing' };
  return readOutcome(scratchCachePath(cniDir, containerId), 'Multus scratch cache', decodeScratchCache);
}

/** `readScratchCache` for DEL: bad entries left out and reported (decodeScratchCacheEntries). */
export function readScratchCacheEntries(
  cniDir: string,
  containerId: string,
): ReadOutcome<ReturnType<typeof decodeScratchCacheEntries>> {
  if (isDirectory(scratchCachePath(cniDir, containerId))) return { kind: 'missing' };
  return readOutcome(scratchCachePath(cniDir, containerId), 'Multus scratch cache', decodeScratchCacheEntries);
}

/**
 * Renamed into place before any delegate runs (a kill -9 leaves it for DEL); fsynced in the background while the
 * first delegate runs: the first result cache is written only once that fsync ended (libcni.ts' addNetwork), so a
 * result cache that a power loss left empty always has a durable scratch cache naming its attachment
 * (docs/reliability.md, "Which cache writes are fsynced"). A container ID naming a directory there is refused.
 */
export function writeScratchCache(cniDir: string, containerId: string, delegates: CachedDelegate[]): void {
  const path = scratchCachePath(cniDir, containerId);
  // `results` is the result caches' directory even before it exists
  if (isDirectory(path) || containerId === 'results') {
    throw new CniError(
      CniCode.InvalidEnv,
      `container ID "${containerId}" names the directory ${path}: multus-ts keeps its scratch cache for a container in a file of that name`,
      { details: 'this container cannot be served with this cniDir: use another container ID (or another cniDir)' },
    );
  }
  writeFileAtomic(path, encodeScratchCache(delegates), 0o600, { durable: 'background' });
}

export function removeScratchCache(cniDir: string, containerId: string): void {
  if (isDirectory(scratchCachePath(cniDir, containerId))) return;
  removeIfPresent(scratchCachePath(cniDir, containerId));
}
