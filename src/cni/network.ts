/**
 * cni/network.ts: delegate network configs, libcni's NetworkConfigList (pure parsers plus thin file wrappers).
 *
 * `parseNetwork` turns one delegate (a single-plugin config or a conflist) into a `Network`; parsers take bytes
 * or objects and return new values. `loadNetworkFile`, `loadNetworkPath` and `findNetworkInDir` only read files
 * and directories and hand the bytes to the parsers, as libcni's FromBytes/FromFile split does
 * (docs/behaviour.md#delegate-config, "What reaches a delegate").
 * Tested by test/unit/multus/conf.test.ts (parseNetwork, files, conflists), test/unit/multus/nad.test.ts.
 */
import { closeSync, constants, fstatSync, openSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { CniCode, CniError, messageOf } from '../base/errors.ts';
import { BOOLEAN_MAP, STRING, STRINGS, decodeObject, getKey, invalid, readFlag, withContext } from '../base/keys.ts';
import { isObject } from '../base/json.ts';
import { VALID_NAME, VALID_NAME_HINT } from '../base/names.ts';
import {
  CURRENT_VERSION,
  SUPPORTED_VERSIONS,
  compareVersions,
  isSupportedVersion,
  versionOrDefault,
} from '../base/versions.ts';

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

const NETWORK_FILE_EXTS = ['.conf', '.json', '.conflist'];

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
 * Parses one delegate network. An object with a non-empty `type` is a single-plugin config, anything else must be a
 * conflist with `plugins` (Multus LoadDelegateNetConf). `defaultName` fills a missing or empty `name`, in the bytes too
 * (NAD docs/behaviour.md#nad). A Buffer keeps its bytes unless a name was injected; an object's bytes are its JSON.
 * `source` (a file, a NAD) prefixes every error message.
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
    return networkOf(obj, bytes);
  };
  return opts.source === undefined ? parse() : withContext(opts.source, parse);
}

/**
 * A copy of `network` with its config changed by `edit` (libcni's InjectConf, for a whole config or conflist):
 * the config is decoded from the bytes once, `edit` changes that object (or returns another), and the new bytes
 * are encoded once; the new network is read from the object, never decoded again. Every change multus makes to a
 * delegate's config (cni-args, device IDs, the inherited version) goes through here.
 */
export function editNetwork(
  network: Network,
  edit: (conf: Record<string, unknown>) => Record<string, unknown> | void,
): Network {
  const conf = decodeObject(network.bytes, 'network config');
  const edited = edit(conf) ?? conf;
  return networkOf(edited, Buffer.from(JSON.stringify(edited)));
}

/** The network `obj` describes, with `bytes` (its JSON) as the bytes to cache and execute. */
function networkOf(obj: Record<string, unknown>, bytes: Buffer): Network {
  if (isSingle(obj)) return validateNetwork(singleNetwork(obj, bytes));
  const header = parseListHeader(obj);
  if (header.plugins === undefined) {
    throw invalid(
      "delegate must have the 'type' or 'plugins' field: set 'type' for one plugin or 'plugins' for a chain",
    );
  }
  return validateNetwork(assembleList(header, obj, bytes, []));
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
    cniVersion: versionOrDefault(getKey(obj, 'cniVersion', STRING)),
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
  if (versions === undefined) return versionOrDefault(version);
  const usable = [...versions, ...(version === '' ? [] : [version])]
    .filter((v) => compareVersions(v, CURRENT_VERSION) <= 0)
    .sort(compareVersions);
  return usable.at(-1) ?? versionOrDefault(version);
}

function parsePlugins(value: unknown): PluginConf[] {
  if (!Array.isArray(value)) throw invalid('`plugins` must be an array of plugin objects');
  if (value.length === 0) throw invalid('`plugins` must not be empty: list at least one plugin');
  return value.map((plugin: unknown, i) => {
    if (!isObject(plugin)) throw invalid(`\`plugins[${i}]\` must be a JSON object`);
    return checkPlugin(
      plugin,
      `plugins[${i}].`,
      `a plugin delegate must have the 'type' field: \`plugins[${i}]\` has none`,
    );
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

/** A config file is a regular file of at most this many bytes (as stdin's cap, cni/request.ts). */
const MAX_CONFIG_FILE_BYTES = 1024 * 1024;

/**
 * A config file's bytes: a regular file only (a device such as /dev/zero, or a FIFO, is refused before it is read)
 * and at most MAX_CONFIG_FILE_BYTES (docs/reliability.md, "Config files are read with a bound").
 */
function readConfigFile(path: string): Buffer {
  let fd: number | undefined;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
    const st = fstatSync(fd);
    // a directory is read as libcni does (EISDIR, an I/O failure); a device, FIFO or socket is never read
    if (!st.isFile() && !st.isDirectory()) {
      throw invalid(`CNI config file ${path} is not a regular file: point the config at a file`);
    }
    if (st.size > MAX_CONFIG_FILE_BYTES) {
      throw invalid(`CNI config file ${path} is ${st.size} bytes, over the ${MAX_CONFIG_FILE_BYTES} a config may have`);
    }
    return readFileSync(fd);
  } catch (err) {
    if (err instanceof CniError) throw err;
    throw ioError(err, path, 'CNI config file');
  } finally {
    if (fd !== undefined) closeSync(fd);
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

/** docs/behaviour.md#cluster-network path form: a directory yields its first config file, a file is loaded as it is. */
export function loadNetworkPath(path: string): Network {
  let isDirectory: boolean;
  try {
    isDirectory = statSync(path).isDirectory();
  } catch (err) {
    throw ioError(err, path, 'network path');
  }
  if (!isDirectory) return loadNetworkFile(path);
  const files = listConfFiles(path, NETWORK_FILE_EXTS);
  // compat: the directory needs a .conf or .conflist, but the first of .conf/.json/.conflist is used
  // (docs/behaviour.md#cluster-network).
  if (!files.some((file) => extOf(file) !== '.json')) {
    throw invalid(`no .conf or .conflist file in directory ${path}: put the network's config there`);
  }
  return loadNetworkFile(files[0]!);
}

/**
 * docs/behaviour.md#nad: the config named `name` among the `.conf`/`.json`/`.conflist` files directly in `dir`, in
 * lexical order. compat: a file that cannot be parsed before the match aborts the search, as in Multus.
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
