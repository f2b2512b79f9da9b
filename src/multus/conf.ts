/**
 * conf.ts: Multus' own config (00-multus.conf) and the delegate network configs it runs (pure parsers plus
 * thin file wrappers).
 *
 * `parseMultusConf` turns stdin into a `MultusConf` with the defaults of docs/behaviour.md#conf-keys and the
 * checks of docs/behaviour.md#conf-rules; its `delegates` are parsed by cni/network.ts' `parseNetwork` (a
 * single-plugin config or a conflist, docs/behaviour.md#conf-rules rule 6) into `Network`s, libcni's
 * NetworkConfigList. It never logs: warnings come back as data. `resolveStaticNetworks` picks the cluster and
 * default networks (docs/behaviour.md#cluster-network) through a NAD lookup the caller gives, else a path
 * (cni/network.ts' `loadNetworkPath`) or a config name in confDir (`findNetworkInDir`), as delegates with no
 * selection request.
 *
 * Keys of ours, not in Multus (Multus ignores them, so one 00-multus.conf serves both):
 * | key | type | default | meaning |
 * |---|---|---|---|
 * | `readinessBackoff` | object | `{"initialMs": 250, "factor": 4, "jitter": 0.1, "steps": 4}` | how long to wait for `readinessindicatorfile`: `steps` sleeps (whole number 0..20) of `initialMs * factor^i` ms (numbers > 0), each stretched by up to `jitter` (0..1) |
 * | `delegateTimeoutSeconds` | number, at least 1, at most 2147483 | 60 | a delegate plugin still running after this long is killed |
 * | `strictCapabilities` | boolean | false | stricter runtimeConfig/capabilities handling for delegates (the planner defines it; docs/configuration.md) |
 * | `publishClaimNetworkData` | boolean | false | write an attachment's interface, IPs and MAC into its DRA claim's `status.devices[]` (KEP-4817, docs/behaviour.md#claim-network-data) |
 * | `parallelAttachments` | boolean | false | a pod's attachments at once, bounded, for ADD, DEL and CHECK (docs/behaviour.md#parallel-attachments) |
 * | `draNetworks`, `draDriverName`, `kubeletDir`, `draInlineConfigFromClaims` | | | networks as DRA devices (docs/configuration.md) |
 */
import { isAbsolute } from 'node:path';
import { CniCode, CniError } from '../base/errors.ts';
import { isDns1123Subdomain } from '../base/names.ts';
import {
  BOOLEAN,
  COUNT,
  FRACTION,
  NAMES,
  OBJECT,
  OBJECTS,
  POSITIVE,
  STEPS,
  STRING,
  STRINGS,
  decodeObject,
  getKey,
  invalid,
  withContext,
} from '../base/keys.ts';
import type { Network } from '../cni/network.ts';
import type { AttachmentSource, Delegate } from './attachments.ts';
import { findNetworkInDir, loadNetworkPath, parseNetwork } from '../cni/network.ts';
import { SUPPORTED_VERSIONS, isSupportedVersion, versionOrDefault } from '../base/versions.ts';
import type { LogLevel, LogOptions } from '../base/log.ts';
import type { BackoffOptions } from '../base/backoff.ts';
export type { LogLevel, LogOptions };
import { DEFAULT_BACKOFF } from '../base/backoff.ts';

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
  publishClaimNetworkData: boolean;
  parallelAttachments: boolean;
  /** Networks as DRA devices (docs/configuration.md, docs/behaviour.md#claim-networks). */
  draNetworks: boolean;
  draDriverName: string;
  kubeletDir: string;
  draInlineConfigFromClaims: boolean;
  /** Things the caller should log, e.g. an unknown log level. */
  warnings: string[];
  /** The decoded stdin, untouched. */
  raw: Record<string, unknown>;
}

/**
 * The seam for Kubernetes: tried first for a clusterNetwork/defaultNetworks value without `/`
 * (docs/behaviour.md#cluster-network step 1,
 * NAD `<multusNamespace>/<value>`). Return undefined to fall back to a config of that name in confDir; throw
 * (a CniError) to fail the call. It is synchronous: fetch the NADs first, then answer from what was fetched.
 */
export type NetworkLookup = (name: string) => Delegate | undefined;

const DEFAULT_DELEGATE_TIMEOUT_SECONDS = 60;

const LOG_LEVELS: readonly LogLevel[] = ['panic', 'error', 'verbose', 'debug'];

// ---------------------------------------------------------------------------------------------------------
// 00-multus.conf

export const MULTUS_KEYS: readonly string[] = [
  'name',
  'type',
  'cniVersion',
  'kubeconfig',
  'confDir',
  'cniDir',
  'binDir',
  'delegates',
  'clusterNetwork',
  'defaultNetworks',
  'systemNamespaces',
  'multusNamespace',
  'logFile',
  'logLevel',
  'logToStderr',
  'logOptions',
  'readinessindicatorfile',
  'namespaceIsolation',
  'globalNamespaces',
  'retryDeleteOnError',
  'auxiliaryCNIChainName',
  'runtimeConfig',
  'prevResult',
  'readinessBackoff',
  'delegateTimeoutSeconds',
  'strictCapabilities',
  'publishClaimNetworkData',
  'parallelAttachments',
  'draNetworks',
  'draDriverName',
  'kubeletDir',
  'draInlineConfigFromClaims',
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
    if (canonical === undefined) continue; // compat: unknown keys are ignored (docs/behaviour.md#conf-keys)
    if (canonical !== key) warnings.push(`config key "${key}" read as "${canonical}"; spell it "${canonical}"`);
    wire[canonical] = value;
  }
  return wire;
}

/**
 * The multus config: defaults (docs/behaviour.md#conf-keys), key types, the rules of docs/behaviour.md#conf-rules, the
 * delegates. Takes the object the protocol edge already decoded from stdin (`CniRequest.config`), so stdin is decoded
 * once; bytes (a file, a test) are decoded here with this config's own messages.
 */
export function parseMultusConf(input: Record<string, unknown> | Buffer | string): MultusConf {
  const raw = typeof input === 'string' || Buffer.isBuffer(input) ? decodeObject(input, 'multus config') : input;
  const warnings: string[] = [];
  const wire = foldKeys(raw, warnings);
  const identity = parseIdentity(wire);
  const paths = parsePaths(wire);
  const selection = parseSelection(wire);
  const logging = parseLogging(wire, warnings);
  const runtime = parseRuntime(wire);
  const rawDelegates = getKey(wire, 'delegates', OBJECTS) ?? [];
  if (rawDelegates.length === 0 && selection.clusterNetwork === '') {
    throw invalid(
      'at least one delegate or clusterNetwork must be specified: add a `delegates` array or set `clusterNetwork`',
    );
  }
  // compat: with clusterNetwork set, `delegates` is ignored, not even parsed (docs/behaviour.md#conf-rules rule 7).
  const delegates = selection.clusterNetwork === '' ? parseDelegates(rawDelegates) : [];
  return { ...identity, ...paths, delegates, ...selection, ...logging, ...runtime, ...parseDra(wire), warnings, raw };
}

function parseIdentity(wire: Record<string, unknown>): Pick<MultusConf, 'name' | 'type' | 'cniVersion'> {
  const cniVersion = versionOrDefault(getKey(wire, 'cniVersion', STRING));
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

type SelectionKeys =
  | 'clusterNetwork'
  | 'defaultNetworks'
  | 'systemNamespaces'
  | 'multusNamespace'
  | 'namespaceIsolation'
  | 'globalNamespaces';

function parseSelection(wire: Record<string, unknown>): Pick<MultusConf, SelectionKeys> {
  // docs/behaviour.md#conf-rules rule 5: comma-separated, each item trimmed; it replaces the default list.
  const global = (getKey(wire, 'globalNamespaces', STRING) ?? '')
    .split(',')
    .map((ns) => ns.trim())
    .filter((ns) => ns !== '');
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

/** docs/behaviour.md#logging: case-insensitive; empty means panic; an unknown level is reported and panic is kept. */
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
  | 'readinessIndicatorFile'
  | 'readinessBackoff'
  | 'retryDeleteOnError'
  | 'auxiliaryCNIChainName'
  | 'runtimeConfig'
  | 'delegateTimeoutMs'
  | 'strictCapabilities'
  | 'publishClaimNetworkData'
  | 'parallelAttachments';

/** The shortest delegate timeout: a plugin process's start alone takes milliseconds. */
const MIN_DELEGATE_TIMEOUT_SECONDS = 1;

/** The longest delay a timer holds, in whole seconds: 2^31-1 ms. */
const MAX_TIMER_SECONDS = Math.floor(0x7fffffff / 1000);

function parseRuntime(wire: Record<string, unknown>): Pick<MultusConf, RuntimeKeys> {
  getKey(wire, 'prevResult', OBJECT); // docs/behaviour.md#conf-keys: only checked; nothing in the thin plugin uses it
  const backoff = getKey(wire, 'readinessBackoff', OBJECT);
  const timeoutSeconds = getKey(wire, 'delegateTimeoutSeconds', POSITIVE) ?? DEFAULT_DELEGATE_TIMEOUT_SECONDS;
  if (timeoutSeconds < MIN_DELEGATE_TIMEOUT_SECONDS) {
    // issue 51, finding 14: 1e-9 killed every delegate as it started
    throw new CniError(
      CniCode.InvalidConfig,
      `delegateTimeoutSeconds ${timeoutSeconds} is under its minimum, ${MIN_DELEGATE_TIMEOUT_SECONDS}: no delegate starts and ends in less; give at least ${MIN_DELEGATE_TIMEOUT_SECONDS}`,
    );
  }
  if (timeoutSeconds > MAX_TIMER_SECONDS) {
    // a longer delay would fire at once (after 1 ms): every delegate killed as it starts (issue 28)
    throw new CniError(
      CniCode.InvalidConfig,
      `delegateTimeoutSeconds ${timeoutSeconds} is over its maximum, ${MAX_TIMER_SECONDS} (a timer holds at most 2^31-1 ms): give a smaller number`,
    );
  }
  return {
    readinessIndicatorFile: getKey(wire, 'readinessindicatorfile', STRING) ?? '',
    readinessBackoff: backoff === undefined ? { ...DEFAULT_BACKOFF } : parseBackoff(backoff),
    retryDeleteOnError: getKey(wire, 'retryDeleteOnError', BOOLEAN) ?? false,
    auxiliaryCNIChainName: getKey(wire, 'auxiliaryCNIChainName', STRING) ?? '',
    // Kept whole: Multus keeps only 7 keys (docs/behaviour.md#conf-keys quirk); the capability filter per delegate is
    // the planner's.
    runtimeConfig: structuredClone(getKey(wire, 'runtimeConfig', OBJECT) ?? {}),
    delegateTimeoutMs: Math.max(1, Math.round(timeoutSeconds * 1000)),
    strictCapabilities: getKey(wire, 'strictCapabilities', BOOLEAN) ?? false,
    publishClaimNetworkData: getKey(wire, 'publishClaimNetworkData', BOOLEAN) ?? false,
    parallelAttachments: getKey(wire, 'parallelAttachments', BOOLEAN) ?? false,
  };
}

/** The default DRA driver name of our networks (docs/configuration.md). */
export const DEFAULT_DRA_DRIVER_NAME = 'multus.k8s.cni.cncf.io';
const DEFAULT_KUBELET_DIR = '/var/lib/kubelet';
type DraKeys = 'draNetworks' | 'draDriverName' | 'kubeletDir' | 'draInlineConfigFromClaims';

/** The DRA keys: the driver name is a DNS subdomain (it names sockets and a field manager), the directory absolute. */
function parseDra(wire: Record<string, unknown>): Pick<MultusConf, DraKeys> {
  const draDriverName = getKey(wire, 'draDriverName', STRING) || DEFAULT_DRA_DRIVER_NAME;
  if (draDriverName.length > 63 || !isDns1123Subdomain(draDriverName)) {
    throw invalid(
      `draDriverName "${draDriverName}" is not a DNS subdomain of at most 63 characters: use lower case letters, digits, "-" and "." such as "${DEFAULT_DRA_DRIVER_NAME}"`,
    );
  }
  const kubeletDir = getKey(wire, 'kubeletDir', STRING) || DEFAULT_KUBELET_DIR;
  if (!isAbsolute(kubeletDir) || kubeletDir.split('/').includes('..')) {
    throw invalid(`kubeletDir "${kubeletDir}" must be an absolute path without "..", such as "${DEFAULT_KUBELET_DIR}"`);
  }
  return {
    draNetworks: getKey(wire, 'draNetworks', BOOLEAN) ?? false,
    draDriverName,
    kubeletDir,
    draInlineConfigFromClaims: getKey(wire, 'draInlineConfigFromClaims', BOOLEAN) ?? false,
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
  // compat: Multus numbers delegates from 0 in this message (docs/behaviour.md#conf-rules rule 6).
  return rawDelegates.map((delegate, idx) =>
    withContext(`failed to load delegate ${idx} config`, () => parseNetwork(delegate)),
  );
}

// ---------------------------------------------------------------------------------------------------------
// clusterNetwork and defaultNetworks without Kubernetes

export interface ResolveOptions {
  /** The pod's namespace; defaultNetworks are skipped for pods in `systemNamespaces`. */
  podNamespace?: string;
  /** Resolve only the cluster network (STATUS and GC have no pod, docs/behaviour.md#cluster-network). */
  clusterOnly?: boolean;
  /** NAD lookup (Kubernetes), tried first for values without `/`. */
  lookup?: NetworkLookup;
}

/**
 * The networks every pod gets: `delegates` when clusterNetwork is empty, else clusterNetwork and then each
 * defaultNetworks entry (docs/behaviour.md#cluster-network). Fixes the docs/behaviour.md#cluster-network quirk: a path,
 * or a config name in confDir, works without a kube client. Unlike Multus, a clusterNetwork failure keeps its cause in
 * the message.
 */
export function resolveStaticNetworks(conf: MultusConf, opts: ResolveOptions = {}): Delegate[] {
  if (conf.clusterNetwork === '')
    return conf.delegates.map((n, i) => configDelegate(n, i === 0 ? 'cluster' : 'default'));
  const cluster = resolveNetworkRef(conf, conf.clusterNetwork, 'clusterNetwork', opts.lookup);
  const networks: Delegate[] = [{ ...cluster, source: 'cluster' }];
  const systemPod = opts.podNamespace !== undefined && conf.systemNamespaces.includes(opts.podNamespace);
  if (opts.clusterOnly === true || systemPod) return networks;
  for (const value of conf.defaultNetworks) {
    networks.push(resolveNetworkRef(conf, value, 'defaultNetwork', opts.lookup));
  }
  return networks;
}

function resolveNetworkRef(conf: MultusConf, value: string, role: string, lookup: NetworkLookup | undefined): Delegate {
  return withContext(`failed to get ${role} "${value}"`, () => {
    // compat: any value with a '/' is a path, so "ns/name" is not a NAD reference (docs/behaviour.md#cluster-network).
    if (value.includes('/')) return configDelegate(loadNetworkPath(value), 'default');
    return lookup?.(value) ?? configDelegate(findNetworkInDir(conf.confDir, value), 'default');
  });
}

/** A network of the multus config: named by its own name, with no selection request. */
function configDelegate(network: Network, source: AttachmentSource): Delegate {
  return { network, displayName: network.name, request: {}, source };
}
