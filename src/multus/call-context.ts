/**
 * call-context.ts: what every command is given and what it derives once per call (pure, except the
 * readiness helpers, which go through injected deps).
 *
 * A command is `cmdX(ctx)`: no process globals, so a resident daemon can call it per request. `CallContext`
 * (built by host/prepare.ts, the one front door) gathers the request, the multus config, the parsed CNI_ARGS,
 * the logger, the seams and the settings every delegate call shares; `runtimeConfFor` turns an attachment into
 * libcni's RuntimeConf with its own copy of runtimeConfig.
 * Tested by test/unit/multus/commands.test.ts, test/unit/multus/kube-commands.test.ts.
 */
import { isAbsolute } from 'node:path';
import type { ArgPairs, K8sArgs } from '../cni/cniargs.ts';
import { podRef } from '../cni/cniargs.ts';
import type { CniError } from '../base/errors.ts';
import type { MultusConf } from './conf.ts';
import type { NetworkDeps, RuntimeConf } from '../cni/libcni.ts';
import type { ResourceMapDeps } from '../devices/devices.ts';
import { CNI_DEVINFO_DIR, DP_DEVINFO_DIR } from '../devices/devices.ts';
import { copyDevicePluginInfo, deviceInfoPath } from '../devices/device-info.ts';
import type { Exec } from '../cni/exec.ts';
import type { KubeClient } from '../k8s/types.ts';
import type { Logger } from '../base/log.ts';
import type { NetnsRouteDeps } from '../routes/netns-routes.ts';
import type { Attachment } from './attachments.ts';
import type { Clock } from '../base/backoff.ts';
import type { ClaimNetworkSource } from './claim-attach.ts';
import { capabilityArgsFor, delegateArgsFor } from './attachments.ts';
import type { ReadinessDeps } from './readiness.ts';
import { checkReadinessOnce, waitForReadiness } from './readiness.ts';
import type { Env, RequestCommand } from '../cni/request.ts';

/**
 * The seams of a process, one object for every call it serves (libcni's CNIConfig; host/host.ts `Host` is one):
 * how plugins run, the clock, the readiness waiter, the Kubernetes client of a config, how default routes are
 * changed in a pod's netns, and where device IDs and device-info files are. Tests hand in fakes.
 */
export interface Seams {
  exec: Exec;
  clock: Clock;
  readiness: ReadinessDeps;
  /** The Kubernetes client for a config, or undefined when it names none (loaded only when called). */
  kube(conf: MultusConf, env: Env, log: Logger): Promise<KubeClient | undefined>;
  /** How default routes are changed inside the pod's netns (tests inject a fake runner). */
  routes?: NetnsRouteDeps;
  /** Device sources and device-info directories (tests point them at temp dirs). */
  devices?: DeviceDeps;
  /** The networks of the pod's claims of our DRA driver (the host's: docs/behaviour.md#claim-networks). */
  claimNetworks?: ClaimNetworkSource;
}

export interface DeviceDeps extends ResourceMapDeps {
  cniDevinfoDir?: string;
  dpDevinfoDir?: string;
}

/**
 * The sandbox a call is for, as data (libcni's RuntimeConf): the container, its network namespace, the interface
 * the call is about, and the pod. Each door builds it at its edge (the CNI door from CNI_* and CNI_ARGS,
 * host/handle.ts `doorInputOf`); nothing past the door reads the CNI wire.
 */
export interface Sandbox {
  containerId: string;
  netns: string;
  ifName: string;
  pod: K8sArgs;
}

/** One call as any door hands it in (typed domain data): host/prepare.ts `prepare()` takes it. */
export interface DoorInput {
  op: RequestCommand;
  sandbox: Sandbox;
  conf: MultusConf;
  /** The environment delegates inherit. */
  env: Env;
  /** CNI_PATH's directories (the CNI door); binDir comes first. */
  pluginPath?: string[];
  /** CNI_ARGS' pairs besides the pod's, passed on to each delegate (docs/behaviour.md#cni-args). */
  runtimePairs?: ArgPairs;
  /** CNI_NETNS_OVERRIDE: the caller means the plugin's own network namespace. */
  netnsOverride?: boolean;
  /** Set by the process edge when a CNI_* variable held bytes `env` cannot carry (host/raw-env.ts). */
  envProblem?: CniError;
  /** The call's cancel signal, handed to every delegate it runs (cni/exec.ts). */
  signal?: AbortSignal;
  /** How this call's delegates run, when not by the seams' exec (the daemon's caller mode, daemon/caller-exec.ts). */
  exec?: Exec;
}

/**
 * Everything one call works with, built once by host/prepare.ts: the operation, the sandbox, the multus config,
 * the logger and the seams. Commands take it alone.
 */
export interface CallContext {
  op: RequestCommand;
  sandbox: Sandbox;
  conf: MultusConf;
  runtimePairs: ArgPairs;
  /** "ns/name/uid", for error prefixes as Multus writes them. */
  podRef: string;
  /** The call's one logger (the multus config's). */
  log: Logger;
  /** The process' seams, shared by every call (not copied). */
  seams: Seams;
  /** The Kubernetes client for the call's config, undefined when it names none (loaded on first call). */
  kube(): Promise<KubeClient | undefined>;
  /**
   * What libcni's runs of this call take besides `log` (cni/libcni.ts `NetworkCaller`, which the context is): the
   * plugin dirs, the environment, the deadline, the signal.
   */
  net: NetworkDeps;
  /** Where CNIDeviceInfoFiles are written, and where device plugins leave theirs (docs/behaviour.md#device-info). */
  devinfoDir: string;
  dpDevinfoDir: string;
}

/**
 * binDir, then CNI_PATH: absolute directories only. A relative one would resolve against the runtime's working
 * directory (and `.` made a bare plugin name, which spawn looks up in PATH): skipped with a warning (issue 28).
 */
function pluginDirs(binDir: string, cniPath: string[], log: Logger): string[] {
  const dirs: string[] = [];
  for (const dir of [binDir, ...cniPath]) {
    if (!isAbsolute(dir)) log.warn(`plugin directory "${dir}" (binDir or CNI_PATH) is not absolute: skipped`);
    else if (!dirs.includes(dir)) dirs.push(dir);
  }
  return dirs;
}

/** The call context of a door's input over the process' seams (pure); `log` is the multus config's logger. */
export function callContext(input: DoorInput, seams: Seams, log: Logger): CallContext {
  const { conf, sandbox } = input;
  const baseEnv: Record<string, string> = {};
  for (const [key, value] of Object.entries(input.env)) if (value !== undefined) baseEnv[key] = value;
  return {
    op: input.op,
    sandbox,
    conf,
    runtimePairs: input.runtimePairs ?? [],
    podRef: podRef(sandbox.pod),
    log,
    seams,
    kube: () => seams.kube(conf, input.env, log),
    devinfoDir: seams.devices?.cniDevinfoDir ?? CNI_DEVINFO_DIR,
    dpDevinfoDir: seams.devices?.dpDevinfoDir ?? DP_DEVINFO_DIR,
    net: {
      exec: input.exec ?? seams.exec,
      path: pluginDirs(conf.binDir, input.pluginPath ?? [], log),
      baseEnv,
      cniDir: conf.cniDir,
      timeoutMs: conf.delegateTimeoutMs,
      ...(input.signal ? { signal: input.signal } : {}),
    },
  };
}

/**
 * docs/behaviour.md#device-info: an attachment with a device gets its own CNIDeviceInfoFile path (any runtime value
 * is replaced); undefined for the others.
 */
function ownDeviceInfoFile(ctx: CallContext, attachment: Attachment): string | undefined {
  if (!attachment.request.deviceID || attachment.isClusterNetwork) return undefined;
  return deviceInfoPath(attachment.displayName, ctx.sandbox.containerId, attachment.ifName, ctx.devinfoDir);
}

/** The CNIDeviceInfoFile an attachment's plugins are given: its own, else the runtime's (if any). */
export function deviceInfoFileOf(ctx: CallContext, attachment: Attachment): string | undefined {
  const runtimeValue = ctx.conf.runtimeConfig.CNIDeviceInfoFile;
  return (
    ownDeviceInfoFile(ctx, attachment) ??
    (typeof runtimeValue === 'string' && runtimeValue !== '' ? runtimeValue : undefined)
  );
}

/** docs/behaviour.md#device-info: the device plugin's device-info file, copied to the attachment's CNIDeviceInfoFile before its ADD. */
export function copyDeviceInfo(ctx: CallContext, attachment: Attachment): void {
  const target = deviceInfoFileOf(ctx, attachment);
  const { resourceName, deviceID } = attachment.request;
  if (typeof target !== 'string' || !resourceName || !deviceID) return;
  const warning = copyDevicePluginInfo(resourceName, deviceID, target, ctx.dpDevinfoDir);
  if (warning) ctx.log.verbose(`${podTag(ctx)}: ${warning}`);
}

/** The prefix of a call's messages, as Multus writes it: `[namespace/name/uid]` or `[namespace/name/uid:network]`. */
export function podTag(ctx: CallContext, network?: string): string {
  return network === undefined ? `[${ctx.podRef}]` : `[${ctx.podRef}:${network}]`;
}

export function runtimeConfFor(ctx: CallContext, attachment: Attachment, command: string): RuntimeConf {
  const capabilityArgs = capabilityArgsFor(attachment, ctx.conf.runtimeConfig);
  const deviceInfoFile = ownDeviceInfoFile(ctx, attachment);
  if (deviceInfoFile !== undefined) capabilityArgs.CNIDeviceInfoFile = deviceInfoFile;
  return {
    containerId: ctx.sandbox.containerId,
    netns: ctx.sandbox.netns,
    ifName: attachment.ifName,
    args: delegateArgsFor(attachment, ctx.sandbox.pod, ctx.runtimePairs, command),
    capabilityArgs,
  };
}

/** ADD, STATUS and GC wait for the readiness indicator file (docs/behaviour.md#npwg); CHECK does not. */
export async function waitUntilReady(ctx: CallContext): Promise<void> {
  const { conf } = ctx;
  if (conf.readinessIndicatorFile) {
    await waitForReadiness(conf.readinessIndicatorFile, conf.readinessBackoff, ctx.seams.readiness);
  }
}

/** DEL never waits: tearing down must not depend on the default network (docs/behaviour.md#readiness). It only logs. */
export async function noteReadiness(ctx: CallContext): Promise<void> {
  const { conf } = ctx;
  if (conf.readinessIndicatorFile && !(await checkReadinessOnce(conf.readinessIndicatorFile, ctx.seams.readiness))) {
    ctx.log.verbose(`readinessindicatorfile ${conf.readinessIndicatorFile} is missing; deleting anyway`);
  }
}
