/**
 * multusconf.ts: the 00-multus.conf(list) that Multus' thin entrypoint generates from the master CNI config
 * (pure: master bytes and options in, file name and text out).
 *
 * The text is Multus v4.3.0's template byte for byte (same keys, order, indentation, optional lines), with the
 * master as the one delegate in Go's JSON form (gojson.ts). Differences, each kept on purpose and listed in
 * docs/install.md: the conf dir is written as `confDir` (the key the plugin reads; Multus writes `cniConf`,
 * which nothing reads) with the host's path; a master name, version or kubeconfig path containing `"` or `\`
 * is escaped (Multus writes it raw: invalid JSON); a malformed master is an error, not a panic.
 * `pickMaster` chooses the master among a directory's file names as libcni.ConfFiles + Multus do, never one of
 * the generated files.
 */
import { goMarshal } from './gojson.ts';
import { InstallError, parseCniVersion } from './options.ts';

/** The options that shape the generated file (a subset of InstallOptions, so a shim variant can reuse it). */
export interface MultusConfOptions {
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

export interface GeneratedConf {
  /** `00-multus.conflist` when the version is 1.0.0 or later, else `00-multus.conf` */
  fileName: string;
  text: string;
  /** the version and name written */
  cniVersion: string;
  name: string;
}

/** The name prefix of the generated files, which are never taken as the master. */
export const GENERATED_PREFIX = '00-multus.conf';
export const GENERATED_FILES = ['00-multus.conf', '00-multus.conflist'] as const;

/**
 * The master's file name among `names` (a directory listing): `wanted` when given, else the first name in
 * byte order ending in .conf or .conflist that is not a generated file. `isDir` excludes directories.
 */
export function pickMaster(names: readonly string[], wanted: string, isDir: (name: string) => boolean): string | null {
  if (wanted !== '') return names.includes(wanted) && !isDir(wanted) ? wanted : null;
  const sorted = [...names].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  for (const name of sorted) {
    const ext = name.slice(name.lastIndexOf('.'));
    if (name.lastIndexOf('.') < 0 || (ext !== '.conf' && ext !== '.conflist')) continue;
    if (name.startsWith(GENERATED_PREFIX) || isDir(name)) continue;
    return name;
  }
  return null;
}

function bad(path: string, what: string): never {
  throw new InstallError(`master CNI config ${path}: ${what}`);
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

/** Generates the file for the master at `path` (its bytes `masterText`). Throws InstallError naming the path. */
export function generateMultusConf(masterText: string, path: string, o: MultusConfOptions): GeneratedConf {
  let master: unknown;
  try {
    master = JSON.parse(masterText);
  } catch (e) {
    bad(path, `cannot read master CNI config json: ${(e as Error).message}`);
  }
  if (master === null || typeof master !== 'object' || Array.isArray(master)) bad(path, 'not a JSON object');
  const m = master as Record<string, unknown>;
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
