/**
 * cni/result-cache.ts: the libcni result cache, `<cniDir>/results/<net>-<id>-<if>` (I/O, with pure codecs).
 *
 * Byte-compatible with libcni's `cachedInfo` (docs/behaviour.md, "Caches"), so Go tools and Go Multus read what
 * we write and we read theirs, including legacy raw-result files. `encode`/`decode` are pure; `read`/`write`/
 * `remove` wrap them: a read returns a `ReadOutcome` (missing is not corrupt), a write goes through
 * `writeFileAtomic`.
 */
import { readdirSync } from 'node:fs';
import { basename, join } from 'node:path';
import { CniCode, CniError, messageOf } from '../base/errors.ts';
import type { ReadOutcome } from '../base/files.ts';
import {
  assertSafeComponent,
  isMissingError,
  isTempName,
  readOutcome,
  removeIfPresent,
  TEMP_NAME_EXTRA,
  writeFileAtomic,
} from '../base/files.ts';
import type { Json } from '../base/json.ts';
import {
  corrupt,
  goJson,
  parseJsonObject,
  readArray,
  readBase64,
  readObject,
  readString,
  sortKeys,
  sortKeysDeep,
} from '../base/json.ts';

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

/** NAME_MAX of Linux file systems: no file name may be longer. */
const NAME_MAX = 255;

/**
 * ADD checks this before any delegate runs: a result cache that cannot be written would fail the ADD after the
 * delegate attached the interface (libcni fails the same way, later).
 */
export function assertResultCacheFits(networkName: string, containerId: string, ifName: string): void {
  const bytes = Buffer.byteLength(basename(resultCachePath('/', networkName, containerId, ifName)));
  if (bytes + TEMP_NAME_EXTRA <= NAME_MAX) return;
  throw new CniError(
    CniCode.InvalidConfig,
    `network name "${networkName.slice(0, 64)}..." is too long: its result cache file name would be ${bytes} bytes ` +
      `and up to ${bytes + TEMP_NAME_EXTRA} while it is written (a temp file, then a rename), at most ${NAME_MAX} ` +
      'allowed; use a shorter network name',
  );
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
    kind: 'cniCacheV1',
    containerId: '',
    config: Buffer.alloc(0),
    ifName: '',
    networkName: '',
    netns: '',
    cniArgs: [],
    capabilityArgs: {},
    result: {},
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

export function readResultCache(
  cniDir: string,
  networkName: string,
  containerId: string,
  ifName: string,
): ReadOutcome<ResultCacheEntry> {
  return readOutcome(
    resultCachePath(cniDir, networkName, containerId, ifName),
    'libcni result cache',
    decodeResultCache,
  );
}

/**
 * Not fsynced, as libcni writes it: after a power loss the file may be empty, and DEL then tears the attachment
 * down from the scratch cache, whose fsync ended before this was written (`backgroundSyncs` in addNetwork;
 * docs/reliability.md, "Which cache writes are fsynced").
 */
export function writeResultCache(cniDir: string, e: ResultCacheEntry): void {
  const path = resultCachePath(cniDir, e.networkName, e.containerId, e.ifName);
  writeFileAtomic(path, encodeResultCache(e), 0o600, { durable: 'none' });
}

export function removeResultCache(cniDir: string, networkName: string, containerId: string, ifName: string): void {
  removeIfPresent(resultCachePath(cniDir, networkName, containerId, ifName));
}

/**
 * Every file in `<cniDir>/results`, sorted by name as libcni GetCachedAttachments does; a missing directory is
 * an empty list. With a containerId filter, only files whose name contains `-<containerId>-` are read (libcni names
 * each `<network>-<containerId>-<ifName>`, so no other file can be this container's): a DEL reads its own few files,
 * not every pod's on the node (docs/archive/performance.md, "A DEL reads its own caches"). Those decoded are then matched on
 * their `containerId` field (a file name cannot be split reliably: network names may contain '-'); a corrupt one is
 * kept, so the caller can still report or remove it.
 */
export function listResultCaches(
  cniDir: string,
  filter: { containerId?: string } = {},
): { path: string; outcome: ReadOutcome<ResultCacheEntry> }[] {
  const dir = join(cniDir, 'results');
  let names: string[];
  try {
    names = readdirSync(dir, { withFileTypes: true })
      .filter((d) => !d.isDirectory() && !isTempName(d.name))
      .map((d) => d.name);
  } catch (err) {
    if (isMissingError(err)) return [];
    throw new CniError(CniCode.IoFailure, `cannot list ${dir}: ${messageOf(err)}; check its permissions`, {
      cause: err,
    });
  }
  const wanted = filter.containerId;
  const out: { path: string; outcome: ReadOutcome<ResultCacheEntry> }[] = [];
  const filtered = wanted !== undefined && wanted !== '';
  for (const name of names.sort()) {
    if (filtered && !name.includes(`-${wanted}-`)) continue;
    const path = join(dir, name);
    const outcome = readOutcome(path, 'libcni result cache', decodeResultCache);
    if (filtered && outcome.kind === 'ok' && outcome.value.containerId !== wanted) continue;
    if (outcome.kind !== 'missing') out.push({ path, outcome });
  }
  return out;
}
