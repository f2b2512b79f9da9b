/**
 * libcni.ts: running one delegate network (a single config or a conflist chain) for ADD, DEL, CHECK,
 * STATUS and GC (I/O), the equivalent of libcni's api.go.
 *
 * A single-plugin config is a chain of one, so there is one code path for both. The per-plugin stdin is
 * built by the pure `buildPluginConfig` (libcni buildOneConfig + injectRuntimeConfig): `name` and
 * `cniVersion` of the network, `prevResult` inside a chain, and a `runtimeConfig` holding only the
 * capabilities the plugin declares, each a deep copy. ADD writes the libcni result cache; DEL and CHECK read
 * it for prevResult (>= 0.4.0) and DEL removes it once every plugin succeeded.
 *
 * Deliberate difference from libcni: DEL keeps going through a chain after a plugin fails (libcni stops), so
 * an IPAM plugin earlier in the chain still releases its address; the errors are joined (docs/compatibility.md).
 * Tested by test/unit/multus/commands.test.ts (chains, prevResult, caches, DEL, GC), test/e2e/ with the real libcni.
 */
import type { RequestCommand } from './request.ts';
import type { ResultCacheEntry } from './result-cache.ts';
import { readResultCache, removeResultCache, writeResultCache } from './result-cache.ts';
import type { ArgPairs } from './cniargs.ts';
import { formatCniArgs } from './cniargs.ts';
import type { Network, PluginConf } from './network.ts';
import { CniCode, CniError, messageOf, toCniError, wrapError } from '../base/errors.ts';
import type { Exec, ExecOutput } from './exec.ts';
import { StoppingError } from './exec.ts';
import type { Logger } from '../base/log.ts';
import type { CniResult } from './result-model.ts';
import { PluginResult, convertResult } from './result.ts';
import { parsePluginError } from './plugin-error.ts';
import { versionAtLeast } from '../base/versions.ts';
import type { ReadOutcome } from '../base/files.ts';
import { backgroundSyncs, runDeferredSyncs } from '../base/files.ts';

/** What libcni calls RuntimeConf: the attachment's identity and the runtime's per-call data. */
export interface RuntimeConf {
  containerId: string;
  netns: string;
  ifName: string;
  args: ArgPairs;
  capabilityArgs: Record<string, unknown>;
}

/** The RuntimeConf an attachment was added with, from its libcni result cache (DEL and GC of what ADD recorded). */
export function runtimeConfFromCache(entry: ResultCacheEntry): RuntimeConf {
  return {
    containerId: entry.containerId,
    netns: entry.netns,
    ifName: entry.ifName,
    args: entry.cniArgs,
    capabilityArgs: entry.capabilityArgs,
  };
}

export interface NetworkDeps {
  exec: Exec;
  /** binDir first, then CNI_PATH: where plugins are looked up, and the CNI_PATH the plugins get. */
  path: string[];
  /** The environment the plugins inherit (libcni passes the process environment through). */
  baseEnv: Record<string, string>;
  cniDir: string;
  timeoutMs: number;
  /** The call's cancel signal (exec.ts): aborted, the running delegate is killed and no other is started. */
  signal?: AbortSignal;
}

/**
 * Who runs a network: its settings (`net`) and its one logger (`log`). A call's context is one
 * (multus/call-context.ts `CallContext`), so the logger is not copied into the settings.
 */
export interface NetworkCaller {
  net: NetworkDeps;
  log: Logger;
}

export function buildPluginConfig(
  network: Network,
  plugin: PluginConf,
  prevResult: CniResult | undefined,
  capabilityArgs: Record<string, unknown>,
  inject: Record<string, unknown> = {},
): Buffer {
  // Serialised at once and never changed: the plugin's keys, prevResult and the capability values are shared,
  // not copied (the attachment's runtimeConfig was copied once, multus/attachments.ts capabilityArgsFor).
  const conf: Record<string, unknown> = { ...plugin, name: network.name, cniVersion: network.cniVersion };
  if (prevResult) conf.prevResult = prevResult;
  const runtimeConfig: Record<string, unknown> = {};
  const declared = plugin.capabilities;
  if (declared && typeof declared === 'object') {
    for (const [capability, enabled] of Object.entries(declared as Record<string, unknown>)) {
      if (enabled === true && capability in capabilityArgs) runtimeConfig[capability] = capabilityArgs[capability];
    }
  }
  if (Object.keys(runtimeConfig).length > 0) conf.runtimeConfig = runtimeConfig;
  Object.assign(conf, inject);
  return Buffer.from(JSON.stringify(conf));
}

function pluginEnv(command: RequestCommand, rt: RuntimeConf | undefined, deps: NetworkDeps): Record<string, string> {
  return {
    ...deps.baseEnv,
    CNI_COMMAND: command,
    CNI_CONTAINERID: rt?.containerId ?? '',
    CNI_NETNS: rt?.netns ?? '',
    CNI_ARGS: rt ? formatCniArgs(rt.args) : '',
    CNI_IFNAME: rt?.ifName ?? '',
    CNI_PATH: deps.path.join(':'),
  };
}

/** The plugin could not be started at all (not found, not executable, not a program): it ran nothing. */
export class PluginNotRunnable extends CniError {
  constructor(cause: unknown) {
    const e = toCniError(cause);
    super(e.code, e.msg, { details: e.details, cause });
  }
}

/** Runs one plugin; returns its stdout on success, throws the plugin's error (its code kept) otherwise. */
async function runPlugin(
  command: RequestCommand,
  plugin: PluginConf,
  stdin: Buffer,
  rt: RuntimeConf | undefined,
  caller: NetworkCaller,
): Promise<Buffer> {
  const { net: deps, log } = caller;
  let path: string;
  try {
    path = deps.exec.findInPath(plugin.type, deps.path);
  } catch (e) {
    throw new PluginNotRunnable(e);
  }
  log.debug(`${command} ${plugin.type} ifname=${rt?.ifName ?? ''} stdin=${stdin.toString()}`);
  let out: ExecOutput;
  try {
    const env = pluginEnv(command, rt, deps);
    const { timeoutMs, cniDir: outputDir, signal } = deps;
    const started = deps.exec.execPlugin({ path, stdin, env, timeoutMs, outputDir, ...(signal ? { signal } : {}) });
    runDeferredSyncs(); // while the plugin runs (the scratch cache's, in the thin plugin: base/files.ts)
    out = await started;
  } catch (e) {
    if (e instanceof StoppingError) throw e; // not run, but not "nothing to undo": the caches stay for DEL
    throw new PluginNotRunnable(e);
  }
  if (out.stderr.length > 0) log.verbose(`${plugin.type} ${command} stderr: ${out.stderr.toString().trimEnd()}`);
  if (out.exitCode === 0 && !out.timedOut) return out.stdout;
  throw parsePluginError({ ...out, plugin: plugin.type, timeoutMs: deps.timeoutMs });
}

function describe(plugin: PluginConf): string {
  return `plugin type="${plugin.type}"${typeof plugin.name === 'string' ? ` name="${plugin.name}"` : ''}`;
}

export async function addNetwork(network: Network, rt: RuntimeConf, caller: NetworkCaller): Promise<PluginResult> {
  let result: PluginResult | undefined;
  for (const plugin of network.plugins) {
    const stdin = buildPluginConfig(network, plugin, result?.raw, rt.capabilityArgs);
    try {
      result = PluginResult.parse(await runPlugin('ADD', plugin, stdin, rt, caller), network.cniVersion);
    } catch (e) {
      throw wrapError(e, `${describe(plugin)} failed (add)`);
    }
  }
  if (!result) throw new CniError(CniCode.InvalidConfig, `network "${network.name}" has no plugins`);
  // The scratch cache's fsync (begun before the first delegate) ends before any result cache exists.
  await backgroundSyncs(caller.net.cniDir);
  writeResultCache(caller.net.cniDir, {
    kind: 'cniCacheV1',
    containerId: rt.containerId,
    config: network.bytes,
    ifName: rt.ifName,
    networkName: network.name,
    netns: rt.netns,
    cniArgs: rt.args,
    capabilityArgs: rt.capabilityArgs,
    result: result.raw,
  });
  return result;
}

/** The attachment's result cache (cni/result-cache.ts). */
function readCacheOf(network: Network, rt: RuntimeConf, net: NetworkDeps): ReadOutcome<ResultCacheEntry> {
  return readResultCache(net.cniDir, network.name, rt.containerId, rt.ifName);
}

/** The cached ADD result converted to the network's version, or undefined (missing, unreadable, < 0.4.0). */
function cachedResult(
  network: Network,
  rt: RuntimeConf,
  log: Logger,
  cached: ReadOutcome<ResultCacheEntry>,
): CniResult | undefined {
  if (!versionAtLeast(network.cniVersion, '0.4.0')) return undefined;
  if (cached.kind === 'missing') return undefined;
  if (cached.kind === 'corrupt') {
    log.error(`ignoring the result cache of ${network.name}/${rt.ifName}: ${cached.error.msg}`);
    return undefined;
  }
  try {
    const raw = cached.value.result;
    const version = typeof raw.cniVersion === 'string' ? raw.cniVersion : network.cniVersion;
    return convertResult({ ...raw, cniVersion: version }, network.cniVersion);
  } catch (e) {
    log.error(`ignoring the result cache of ${network.name}/${rt.ifName}: ${messageOf(e)}`);
    return undefined;
  }
}

/**
 * DEL in reverse chain order. Without a result cache the attachment's ADD never completed; a plugin of it that
 * cannot even be started then ran nothing that DEL could undo, so it is logged and skipped instead of failing
 * every DEL of the pod forever. With a result cache such a plugin is a failure as before. The cache is read once,
 * here, unless the caller read this very file already (DEL's plan lists the container's caches, under its lock).
 */
export async function delNetwork(
  network: Network,
  rt: RuntimeConf,
  caller: NetworkCaller,
  cached: ReadOutcome<ResultCacheEntry> = readCacheOf(network, rt, caller.net),
): Promise<void> {
  const prevResult = cachedResult(network, rt, caller.log, cached);
  const attached = cached.kind !== 'missing';
  const failures: CniError[] = [];
  for (const plugin of [...network.plugins].reverse()) {
    const stdin = buildPluginConfig(network, plugin, prevResult, rt.capabilityArgs);
    try {
      await runPlugin('DEL', plugin, stdin, rt, caller);
    } catch (e) {
      if (!attached && e instanceof PluginNotRunnable) {
        caller.log.error(
          `${describe(plugin)} of ${network.name}/${rt.ifName} cannot run (${e.msg}); no result cache ` +
            'records an attachment, so there is nothing of it to delete',
        );
        continue;
      }
      failures.push(wrapError(e, `${describe(plugin)} failed (delete)`));
    }
  }
  if (failures.length === 0) {
    removeResultCache(caller.net.cniDir, network.name, rt.containerId, rt.ifName);
    return;
  }
  // Keep the result cache: a retried DEL still has prevResult and still finds this attachment.
  throw joinErrors(failures);
}

/** CHECK in chain order with the cached result. Returns false when the network's version cannot CHECK. */
export async function checkNetwork(network: Network, rt: RuntimeConf, caller: NetworkCaller): Promise<boolean> {
  if (!versionAtLeast(network.cniVersion, '0.4.0') || network.disableCheck) return false;
  const prevResult = cachedResult(network, rt, caller.log, readCacheOf(network, rt, caller.net));
  for (const plugin of network.plugins) {
    const stdin = buildPluginConfig(network, plugin, prevResult, rt.capabilityArgs);
    try {
      await runPlugin('CHECK', plugin, stdin, rt, caller);
    } catch (e) {
      throw wrapError(e, `${describe(plugin)} failed (check)`);
    }
  }
  return true;
}

/** STATUS on every plugin (libcni GetStatusNetworkList); a network below 1.1.0 is reported ready. */
export async function statusNetwork(network: Network, caller: NetworkCaller): Promise<void> {
  if (!versionAtLeast(network.cniVersion, '1.1.0')) return;
  for (const plugin of network.plugins) {
    await runPlugin('STATUS', plugin, buildPluginConfig(network, plugin, undefined, {}), undefined, caller);
  }
}

export interface GcAttachment {
  containerID: string;
  ifname: string;
}

/** GC on every plugin, continuing past failures (CNI spec 1.1 GC); below 1.1.0 or disableGC: nothing. */
export async function gcNetwork(network: Network, valid: GcAttachment[], caller: NetworkCaller): Promise<void> {
  if (!versionAtLeast(network.cniVersion, '1.1.0') || network.disableGC) return;
  // libcni sends both keys (containernetworking/cni#1101: the spec first used the wrong name).
  const inject = { 'cni.dev/valid-attachments': valid, 'cni.dev/attachments': valid };
  const failures: CniError[] = [];
  for (const plugin of network.plugins) {
    try {
      await runPlugin('GC', plugin, buildPluginConfig(network, plugin, undefined, {}, inject), undefined, caller);
    } catch (e) {
      failures.push(wrapError(e, `${describe(plugin)} failed (gc)`));
    }
  }
  if (failures.length > 0) throw joinErrors(failures);
}

/** One error for several: the common code when they agree, 999 otherwise; messages joined with "; ". */
export function joinErrors(errors: CniError[]): CniError {
  if (errors.length === 1) return errors[0]!;
  const codes = new Set(errors.map((e) => e.code));
  const code = codes.size === 1 ? errors[0]!.code : CniCode.Internal;
  const details = errors
    .map((e) => e.details)
    .filter(Boolean)
    .join('\n');
  return new CniError(code, errors.map((e) => e.msg).join('; '), details ? { details } : {});
}
