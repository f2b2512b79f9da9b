/**
 * multus/generate-conf.ts: the one generator of the 00-multus.conf(list) a node runs multus with, and the one rule
 * that picks the master (primary) CNI config it is made from (pure: names, master bytes and options in, file name
 * and text out). Both of Multus v4.3.0's modes, each as Multus writes it (docs/install.md, docs/resident.md):
 *
 * - thin (`multus install`, Multus' cmd/thin_entrypoint): type `multus` with the master as the one delegate, the
 *   template byte for byte (same keys, order, indentation, optional lines), the master in Go's JSON form
 *   (base/gojson.ts). Differences, each kept on purpose and listed in docs/install.md: the conf dir is written as
 *   `confDir` (the key the plugin reads; Multus writes `cniConf`, which nothing reads) with the host's path; a
 *   master name, version or kubeconfig path containing `"` or `\` is escaped (Multus writes it raw: invalid JSON);
 *   a malformed master is an error, not a panic.
 * - shim (`multus daemon` with `multusConfigFile: auto`, Multus' pkg/server/config): type `multus-shim`,
 *   `daemonSocketDir`, `clusterNetwork` = the master's path, and every 00-multus.conf key of the daemon config,
 *   so a thin call with the same file behaves like the daemon (the shim's fallback).
 *
 * `pickMaster` is Multus' rule in both modes: the named master when one is given, else the first name in byte
 * order ending in .conf or .conflist that is not a generated file. What counts as generated is the mode's: names
 * starting `00-multus.conf` for thin (getMasterConfigPath), `00-multus` for the shim (findMasterPlugin). Ours, in
 * both modes: a directory is never a master (Multus thick would pick one and fail to read it), and the shim mode
 * also passes over a file that is not a JSON object or is itself a multus config, where Multus' daemon would fail
 * to start (test/unit/multus/generate-conf.test.ts).
 */
import { goMarshal } from '../base/gojson.ts';
import { isObject } from '../base/json.ts';
import { jsonSyntaxMessage } from '../base/json-syntax.ts';

/** A master config that cannot be used; the message names its path. */
export class MasterConfigError extends Error {}
Object.defineProperty(MasterConfigError.prototype, 'name', { value: 'MasterConfigError', enumerable: false });

/** The options that shape the thin file (a subset of install's InstallOptions). */
export interface ThinConfOptions {
  cniVersion: string;
  forceCniVersion: boolean;
  overrideNetworkName: boolean;
  namespaceIsolation: boolean;
  globalNamespaces: string;
  multusLogToStderr: boolean;
  multusLogLevel: string;
  multusLogFile: string;
  additionalBinDir: string;
  /** the conf dir as the plugin on the host sees it; written as `confDir` ("" leaves the line out) */
  multusCniConfDirHost: string;
  readinessIndicatorFile: string;
  multusKubeconfigFileHost: string;
}

/** The options that shape the shim file (a subset of the daemon's DaemonConfig). */
export interface ShimConfOptions {
  /** The daemon config's 00-multus.conf keys, written as they are. */
  multusKeys: Record<string, unknown>;
  cniVersion: string;
  overrideNetworkName: boolean;
  capabilities: Record<string, boolean>;
  /** '' leaves the key out (the shim then uses its default /run/multus/) */
  daemonSocketDir: string;
  /** how long the shim waits for the daemon's socket (shim/wait.go); unset: the shim's default */
  shimWaitSeconds?: number | undefined;
}

export interface GeneratedConf {
  /** thin: `00-multus.conflist` when the version is 1.0.0 or later, else `00-multus.conf`; shim: `00-multus.conf` */
  fileName: string;
  text: string;
  /** the version and name written */
  cniVersion: string;
  name: string;
}

export type ConfMode = 'thin' | 'shim';

/** The files the generator writes, which are never taken as the master. */
export const GENERATED_FILES = ['00-multus.conf', '00-multus.conflist'] as const;
/** The name prefix that is never a master, per mode (Multus': see the header). */
const GENERATED_PREFIX: Record<ConfMode, string> = { thin: '00-multus.conf', shim: '00-multus' };
const MASTER_EXTS = ['.conf', '.conflist'];

export interface MasterPick {
  mode: ConfMode;
  isDir(name: string): boolean;
  /** shim mode: the file's bytes (undefined when unreadable), so what cannot be a master is passed over. */
  read?(name: string): Buffer | undefined;
}

/** Go's filepath.Ext: from the last dot of the name. */
const extOf = (name: string): string => (name.lastIndexOf('.') < 0 ? '' : name.slice(name.lastIndexOf('.')));

/**
 * The master's file name among `names` (a directory listing), or undefined: `wanted` when given, else the first
 * name in byte order ending in .conf or .conflist; never a generated file, a directory, or (with `read`) a file
 * that is not a JSON object or is a multus config.
 */
export function pickMaster(names: readonly string[], wanted: string, pick: MasterPick): string | undefined {
  const byteOrder = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));
  const candidates =
    wanted !== '' ? [wanted] : [...names].sort(byteOrder).filter((n) => MASTER_EXTS.includes(extOf(n)));
  return candidates.find(
    (name) =>
      names.includes(name) &&
      !name.startsWith(GENERATED_PREFIX[pick.mode]) &&
      !pick.isDir(name) &&
      (pick.read === undefined || canBeMaster(pick.read(name))),
  );
}

/** A JSON object that is no multus config of ours or of Multus (so the daemon never picks its own output). */
function canBeMaster(bytes: Buffer | undefined): boolean {
  if (bytes === undefined) return false;
  try {
    const v: unknown = JSON.parse(bytes.toString('utf8'));
    return isObject(v) && v.type !== 'multus' && v.type !== 'multus-shim';
  } catch {
    return false;
  }
}

function bad(path: string, what: string): never {
  throw new MasterConfigError(`master CNI config ${path}: ${what}`);
}

/** The master's capabilities as Multus collects them: every plugin's of a conflist (later wins), or the top's. */
function masterCapabilities(master: Record<string, unknown>, path: string): Record<string, boolean> {
  const caps: Record<string, boolean> = {};
  const add = (c: unknown, where: string): void => {
    if (c === undefined) return;
    if (c === null || typeof c !== 'object' || Array.isArray(c)) bad(path, `${where}capabilities is not an object`);
    for (const [k, v] of Object.entries(c as Record<string, unknown>)) {
      if (typeof v !== 'boolean') bad(path, `${where}capabilities.${k} is not true or false`);
      caps[k] = v;
    }
  };
  if ('plugins' in master) {
    const plugins = master.plugins;
    if (!Array.isArray(plugins)) bad(path, '"plugins" is not a list: fix the file or name another master');
    plugins.forEach((p, i) => {
      if (p === null || typeof p !== 'object' || Array.isArray(p)) bad(path, `plugins[${i}] is not an object`);
      add((p as Record<string, unknown>).capabilities, `plugins[${i}].`);
    });
  } else {
    add(master.capabilities, '');
  }
  return caps;
}

/** A value inside the template's quotes (Multus writes these raw; escaping keeps the file JSON). */
function raw(s: string): string {
  return JSON.stringify(s).slice(1, -1);
}

/** Go's %q for the option values (control characters are refused by the option parser). */
function q(s: string): string {
  return JSON.stringify(s);
}

/**
 * The 00-multus.conf(list) for the master at `path` (its bytes `masterText`), in the mode of `o`. Throws
 * MasterConfigError naming the path.
 */
export function generateMultusConf(
  masterText: string,
  path: string,
  o: ({ mode: 'thin' } & ThinConfOptions) | ({ mode: 'shim' } & ShimConfOptions),
): GeneratedConf {
  const master = parseMaster(masterText, path);
  return o.mode === 'thin' ? thinConf(master, path, o) : shimConf(master, path, o);
}

function parseMaster(masterText: string, path: string): Record<string, unknown> {
  let master: unknown;
  try {
    master = JSON.parse(masterText);
  } catch {
    bad(path, `cannot read master CNI config json: ${jsonSyntaxMessage(masterText)}`);
  }
  if (!isObject(master)) bad(path, 'not a JSON object');
  return master;
}

/** Multus' thin entrypoint's template (createMultusConfig), byte for byte. */
function thinConf(m: Record<string, unknown>, path: string, o: ThinConfOptions): GeneratedConf {
  if (!('cniVersion' in m)) bad(path, 'no "cniVersion": add one (e.g. "1.0.0")');
  let cniVersion: string;
  if (o.forceCniVersion) {
    m.cniVersion = o.cniVersion;
    cniVersion = o.cniVersion;
  } else {
    if (typeof m.cniVersion !== 'string') bad(path, '"cniVersion" is not a string');
    if (o.cniVersion !== '' && m.cniVersion !== o.cniVersion) {
      bad(
        path,
        `Multus cni version is "${o.cniVersion}" while master plugin cni version is "${m.cniVersion}": ` +
          'drop --cni-version or make them equal',
      );
    }
    cniVersion = m.cniVersion;
  }
  let name = 'multus-cni-network';
  if (o.overrideNetworkName) {
    if (!('name' in m)) bad(path, 'no "name" (needed by --override-network-name)');
    if (typeof m.name !== 'string') bad(path, '"name" is not a string');
    name = m.name;
  }
  const caps = masterCapabilities(m, path);

  let lines = '';
  const line = (key: string, value: string): void => {
    lines += `\n        "${key}": ${value},`;
  };
  if (Object.keys(caps).length > 0) line('capabilities', goMarshal(caps));
  if (o.namespaceIsolation) line('namespaceIsolation', 'true');
  if (o.globalNamespaces !== '') line('globalNamespaces', q(o.globalNamespaces));
  if (!o.multusLogToStderr) line('logToStderr', 'false');
  const level = o.multusLogLevel.toLowerCase();
  if (level !== '') line('logLevel', q(level));
  if (o.multusLogFile !== '') line('logFile', q(o.multusLogFile));
  if (o.additionalBinDir !== '') line('binDir', q(o.additionalBinDir));
  if (o.multusCniConfDirHost !== '') line('confDir', q(o.multusCniConfDirHost));
  if (o.readinessIndicatorFile !== '') line('readinessindicatorfile', q(o.readinessIndicatorFile));

  const delegate = goMarshal(m);
  const kubeconfig = raw(o.multusKubeconfigFileHost);
  const version = parseCniVersion(cniVersion);
  const list = version !== null && version[0] >= 1;
  const text = list
    ? `{\n    "cniVersion": "${raw(cniVersion)}",\n    "name": "${raw(name)}",\n    "plugins": [ {\n` +
      `        "type": "multus",${lines}\n        "kubeconfig": "${kubeconfig}",\n        "delegates": [\n` +
      `            ${delegate}\n        ]\n    }]\n}\n`
    : `{\n        "cniVersion": "${raw(cniVersion)}",\n        "name": "${raw(name)}",\n` +
      `        "type": "multus",${lines}\n        "kubeconfig": "${kubeconfig}",\n        "delegates": [\n` +
      `                ${delegate}\n        ]\n}\n`;
  return { fileName: list ? '00-multus.conflist' : '00-multus.conf', text, cniVersion, name };
}

/** Multus' config manager's file for its shim (pkg/server/config generator.go), as JSON. */
function shimConf(master: Record<string, unknown>, path: string, o: ShimConfOptions): GeneratedConf {
  const plugins = Array.isArray(master.plugins) ? master.plugins.filter(isObject) : [master];
  const capabilities: Record<string, boolean> = {};
  for (const p of plugins) {
    if (!isObject(p.capabilities)) continue;
    for (const [k, v] of Object.entries(p.capabilities)) if (v === true) capabilities[k] = true;
  }
  for (const [k, v] of Object.entries(o.capabilities)) if (v) capabilities[k] = true;
  const masterVersion = typeof master.cniVersion === 'string' ? master.cniVersion : '';
  const own = typeof master.name === 'string' && master.name !== '' ? master.name : undefined;
  const name = o.overrideNetworkName && own !== undefined ? own : 'multus-cni-network';
  const cniVersion = o.cniVersion || masterVersion || '1.0.0';
  const out: Record<string, unknown> = {
    ...o.multusKeys,
    cniVersion,
    name,
    type: 'multus-shim',
    // left out when empty: the daemon in Multus' thick manifest (daemon/autoconf.ts shimSocketDir)
    ...(o.daemonSocketDir ? { daemonSocketDir: o.daemonSocketDir } : {}),
    ...(o.shimWaitSeconds === undefined ? {} : { shimWaitSeconds: o.shimWaitSeconds }),
    clusterNetwork: path,
  };
  if (Object.keys(capabilities).length > 0) out.capabilities = capabilities;
  return { fileName: GENERATED_FILES[0], text: JSON.stringify(out, null, 2) + '\n', cniVersion, name };
}

/**
 * A CNI version as three numbers, or null when it is not one; '' is 0.1.0 (libcni's default). Multus' entrypoint
 * reads `--cni-version` and the master's version this way to choose between .conf and .conflist.
 */
export function parseCniVersion(v: string): [number, number, number] | null {
  if (v === '') return [0, 1, 0];
  const parts = v.split('.');
  if (parts.length > 3 || !parts.every((p) => /^[+-]?\d+$/.test(p))) return null;
  const n = parts.map(Number);
  return [n[0]!, n[1] ?? 0, n[2] ?? 0];
}
