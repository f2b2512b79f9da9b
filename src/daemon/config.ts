/**
 * daemon/config.ts: the resident daemon's config file, daemon-config.json (pure).
 *
 * It takes the keys of Multus thick's daemon-config.json (docs/resident.md lists them) plus every key of
 * 00-multus.conf, so an operator moving from Multus thick keeps the ConfigMap. The 00-multus.conf keys are
 * checked with the same parser a thin call uses (`parseMultusConf`) and kept as `multusKeys`, the keys the
 * generated 00-multus.conf carries. Unknown keys are ignored; a bad value is a `DaemonConfigError` whose one-line
 * message names the key and what to write.
 */
import { isIP } from 'node:net';
import { isAbsolute } from 'node:path';
import { messageOf } from '../base/errors.ts';
import { isObject } from '../base/json.ts';
import { jsonSyntaxMessage } from '../base/json-syntax.ts';
import type { LogLevel } from '../base/log.ts';
import { parseLogLevel } from '../base/log.ts';
import { isSupportedVersion, SUPPORTED_VERSIONS } from '../base/versions.ts';
import { MULTUS_KEYS, parseMultusConf } from '../multus/conf.ts';

/** The 00-multus.conf keys of networks as DRA devices, as the daemon reads them. */
export interface DraSettings {
  networks: boolean;
  driverName: string;
  kubeletDir: string;
  inlineConfigFromClaims: boolean;
}

export const DEFAULT_DAEMON_CONFIG = '/etc/cni/net.d/multus.d/daemon-config.json';

/** Where /metrics listens unless `metricsBindAddress` says otherwise: the node itself. */
export const DEFAULT_METRICS_ADDRESS = '127.0.0.1';

export interface DaemonConfig {
  /** Where multus.sock is created (Multus: `socketDir`, default /run/multus/). */
  socketDir: string;
  /**
   * The directory the shim is told in the generated config (`daemonSocketDir`; unset: socketDir, or none in a
   * container where socketDir is not the host's path, autoconf.ts' `shimSocketDir`).
   */
  daemonSocketDir: string;
  /** true when the config sets daemonSocketDir */
  daemonSocketDirSet: boolean;
  /** Delegates run chrooted there ('' = no chroot). */
  chrootDir: string;
  cniConfigDir: string;
  multusAutoconfigDir: string;
  /** 'auto' (generate 00-multus.conf from the master config) or the path of a config used as is. */
  multusConfigFile: string;
  multusMasterCNI: string;
  forceCNIVersion: boolean;
  overrideNetworkName: boolean;
  /** cniVersion of the generated config ('' = the master config's). */
  cniVersion: string;
  capabilities: Record<string, boolean>;
  readinessIndicatorFile: string;
  logFile: string;
  logLevel: LogLevel;
  logToStderr: boolean;
  /** Requests handled at once (0 = no limit); more wait in a queue. */
  connectionLimit: number;
  /** Prometheus /metrics port (undefined = off). */
  metricsPort: number | undefined;
  /**
   * Our key: the address /metrics listens on, `127.0.0.1` unless set: the series name the node's pods and networks,
   * so other addresses are an explicit choice (`0.0.0.0` or `::` is every address, Multus' `:port`;
   * docs/reliability.md, "Second probe").
   */
  metricsBindAddress: string;
  /** Our key: how long SIGTERM waits for in-flight requests. */
  shutdownGraceMs: number;
  /**
   * Our key (`shutdownDrainSeconds`, default 2): after SIGTERM the daemon keeps serving this long with `/readyz`
   * answering 500 (k8snetworkplumbingwg/multus-cni#1525, after v4.3.0, waits 10 s), so a shim that checked readiness
   * just before is still served.
   */
  shutdownDrainMs: number;
  /**
   * Our key (default false): remove the generated 00-multus.conf when the daemon stops, as Multus thick does.
   * Kept by default, so that while the daemon is down (an upgrade's restart) the shim's thin fallback serves
   * the node's pods with the same config instead of the runtime silently using the default network alone.
   */
  cleanupConfigOnExit: boolean;
  /** The 00-multus.conf keys set in the file, as written (they go into the generated config). */
  multusKeys: Record<string, unknown>;
  /** The DRA keys of those (docs/configuration.md; the driver is served only with `draNetworks`). */
  dra: DraSettings;
  /**
   * Our key (`draMaxNetworkDevices`, default 512, 0-10000): at most this many NADs are published as devices of
   * their own on the node's ResourceSlices (dra/slices.ts); the others are logged (docs/dra-networks.md).
   */
  draMaxNetworkDevices: number;
  /** Our key: follow the networks annotation of running pods (docs/hotplug.md). */
  dynamicNetworks: boolean;
  /** Our key (`dynamicNetworksPollSeconds`, default 5): the resync period (pod informer updates drive it). */
  dynamicNetworksPollMs: number;
  /**
   * Our key: how long the shim waits for the daemon's socket before its thin fallback (0-600 s; the shim's
   * default 30 when unset). Written into the generated 00-multus.conf, which the shim reads (docs/resident.md).
   */
  shimWaitSeconds: number | undefined;
  /**
   * Our key (0 = no limit): delegate processes run at once; more wait. Unset: 4 when the daemon's memory cgroup
   * is limited below 256 MiB, else no limit (daemon/memory.ts): the container's memory limit counts the
   * delegates, and Multus' 50Mi holds the daemon and a few of them (docs/resident.md, "Memory").
   */
  delegateConcurrency: number | undefined;
  /**
   * Our key (`delegateExec`, default "daemon", Multus' way): "caller" lets a shim that offers it run the delegates of
   * its call itself, in the runtime's cgroup and the host's mount namespace (daemon/caller-exec.ts,
   * docs/archive/resident-protocol.md "Delegates run by the shim").
   */
  delegateExec: 'daemon' | 'caller';
  /**
   * Our key (default true): at rest, unmap the file pages of the executable the daemon no longer uses (they stay
   * in the page cache; daemon/pages.ts, docs/resident.md "Memory").
   */
  dropIdleFilePages: boolean;
  /** What the daemon prints at start and goes on: keys Multus too only warns about. */
  warnings: string[];
}

export class DaemonConfigError extends Error {}
Object.defineProperty(DaemonConfigError.prototype, 'name', { value: 'DaemonConfigError', enumerable: false });

function bad(key: string, what: string): DaemonConfigError {
  return new DaemonConfigError(`daemon config: \`${key}\` must be ${what}`);
}

function str(raw: Record<string, unknown>, key: string, fallback: string): string {
  const v = raw[key];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'string') throw bad(key, 'a string');
  return v === '' ? fallback : v;
}

function absPath(raw: Record<string, unknown>, key: string, fallback: string): string {
  const v = str(raw, key, fallback);
  if (v !== '' && (!isAbsolute(v) || v.includes('\0'))) throw bad(key, `an absolute path (got "${v}")`);
  return v;
}

function bool(raw: Record<string, unknown>, key: string): boolean {
  const v = raw[key];
  if (v === undefined || v === null) return false;
  if (typeof v !== 'boolean') throw bad(key, 'true or false');
  return v;
}

function int(raw: Record<string, unknown>, key: string, min: number, max: number): number | undefined {
  const v = raw[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw bad(key, `a whole number from ${min} to ${max}`);
  }
  return v;
}

/** A file name in a directory: no separators, no "..", no NUL. */
const FILE_NAME = /^[A-Za-z0-9_.+-]+$/;

export function parseDaemonConfig(bytes: Buffer | string): DaemonConfig {
  const text = typeof bytes === 'string' ? bytes : bytes.toString('utf8');
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new DaemonConfigError(`daemon config is not valid JSON: ${jsonSyntaxMessage(text)}`);
  }
  if (!isObject(raw)) throw new DaemonConfigError('daemon config must be a JSON object');

  const socketDir = absPath(raw, 'socketDir', '/run/multus/');
  const cniConfigDir = absPath(raw, 'cniConfigDir', '/etc/cni/net.d');
  const multusConfigFile = str(raw, 'multusConfigFile', 'auto');
  if (multusConfigFile !== 'auto' && !isAbsolute(multusConfigFile)) {
    throw bad('multusConfigFile', `"auto" or an absolute path (got "${multusConfigFile}")`);
  }
  const multusMasterCNI = str(raw, 'multusMasterCNI', '');
  if (multusMasterCNI !== '' && (!FILE_NAME.test(multusMasterCNI) || multusMasterCNI.includes('..'))) {
    throw bad('multusMasterCNI', `a file name in multusAutoconfigDir, without "/" (got "${multusMasterCNI}")`);
  }
  const cniVersion = str(raw, 'cniVersion', '');
  if (cniVersion !== '' && !isSupportedVersion(cniVersion)) {
    throw bad('cniVersion', `one of ${SUPPORTED_VERSIONS.join(', ')} (got "${cniVersion}")`);
  }
  const caps = raw.capabilities ?? {};
  if (!isObject(caps) || !Object.values(caps).every((v) => typeof v === 'boolean')) {
    throw bad('capabilities', 'an object of booleans, e.g. {"portMappings": true}');
  }
  const warnings: string[] = [];
  const levelText = str(raw, 'logLevel', '');
  // compat: Multus prints this line and keeps its level (docs/compatibility.md, "Lenient where Multus is")
  const logLevel = levelText === '' ? 'error' : (parseLogLevel(levelText) ?? 'error');
  if (levelText !== '' && parseLogLevel(levelText) === undefined) {
    warnings.push(`multus logging: cannot set logging level to ${levelText}`);
  }
  const metricsBindAddress = str(raw, 'metricsBindAddress', DEFAULT_METRICS_ADDRESS);
  if (isIP(metricsBindAddress) === 0) {
    throw bad(
      'metricsBindAddress',
      `an IP address of the node, such as "127.0.0.1" or "::" (got "${metricsBindAddress}")`,
    );
  }
  const multusKeys = Object.fromEntries(Object.entries(raw).filter(([k]) => MULTUS_KEYS.includes(k)));
  const dra = checkMultusKeys(multusKeys);

  return {
    socketDir,
    daemonSocketDir: absPath(raw, 'daemonSocketDir', socketDir),
    daemonSocketDirSet: typeof raw.daemonSocketDir === 'string',
    chrootDir: absPath(raw, 'chrootDir', ''),
    cniConfigDir,
    multusAutoconfigDir: absPath(raw, 'multusAutoconfigDir', cniConfigDir),
    multusConfigFile,
    multusMasterCNI,
    forceCNIVersion: bool(raw, 'forceCNIVersion'),
    overrideNetworkName: bool(raw, 'overrideNetworkName'),
    cniVersion,
    capabilities: caps as Record<string, boolean>,
    readinessIndicatorFile: absPath(raw, 'readinessindicatorfile', ''),
    logFile: absPath(raw, 'logFile', ''),
    logLevel,
    logToStderr: raw.logToStderr === undefined ? true : bool(raw, 'logToStderr'),
    connectionLimit: int(raw, 'connectionLimit', 1, 1_000_000) ?? 0,
    metricsPort: metricsPort(raw, warnings),
    metricsBindAddress,
    shutdownGraceMs: (int(raw, 'shutdownGraceSeconds', 0, 3600) ?? 30) * 1000,
    shutdownDrainMs: (int(raw, 'shutdownDrainSeconds', 0, 600) ?? 2) * 1000,
    cleanupConfigOnExit: bool(raw, 'cleanupConfigOnExit'),
    multusKeys,
    dra,
    draMaxNetworkDevices: int(raw, 'draMaxNetworkDevices', 0, 10_000) ?? 512,
    dynamicNetworks: bool(raw, 'dynamicNetworks'),
    dynamicNetworksPollMs: (int(raw, 'dynamicNetworksPollSeconds', 1, 3600) ?? 5) * 1000,
    shimWaitSeconds: int(raw, 'shimWaitSeconds', 0, 600),
    delegateConcurrency: int(raw, 'delegateConcurrency', 0, 10_000),
    delegateExec: delegateExec(raw),
    dropIdleFilePages: raw.dropIdleFilePages === undefined ? true : bool(raw, 'dropIdleFilePages'),
    warnings,
  };
}

/** `delegateExec`: "daemon" (unset) or "caller". */
function delegateExec(raw: Record<string, unknown>): 'daemon' | 'caller' {
  const v = str(raw, 'delegateExec', 'daemon');
  if (v !== 'daemon' && v !== 'caller') throw bad('delegateExec', `"daemon" or "caller" (got "${v}")`);
  return v;
}

/**
 * `metricsPort`: a whole number, as Multus' `*int` (anything else fails, as Go's json does); one that is no TCP
 * port is a warning and no /metrics, as Multus logs its listener's error and serves CNI on.
 */
function metricsPort(raw: Record<string, unknown>, warnings: string[]): number | undefined {
  const v = raw.metricsPort;
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v)) throw bad('metricsPort', 'a whole number from 1 to 65535');
  if (v >= 1 && v <= 65535) return v;
  warnings.push(`daemon config: \`metricsPort\` ${v} is not a port from 1 to 65535: /metrics is not served`);
  return undefined;
}

/**
 * The 00-multus.conf keys, checked by the thin parser. The daemon config usually has neither delegates nor
 * clusterNetwork (the master config supplies it), so a stand-in clusterNetwork lets the parser check the rest.
 */
function checkMultusKeys(keys: Record<string, unknown>): DraSettings {
  const probe: Record<string, unknown> = { cniVersion: '1.0.0', ...keys };
  if (!('clusterNetwork' in keys) || !keys.clusterNetwork) probe.clusterNetwork = 'probe';
  try {
    const conf = parseMultusConf(JSON.stringify(probe));
    return {
      networks: conf.draNetworks,
      driverName: conf.draDriverName,
      kubeletDir: conf.kubeletDir,
      inlineConfigFromClaims: conf.draInlineConfigFromClaims,
    };
  } catch (e) {
    throw new DaemonConfigError(`daemon config: ${messageOf(e)}`);
  }
}
