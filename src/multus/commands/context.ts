/**
 * commands/context.ts: what every command is given and what it derives once per call (pure, except the
 * readiness helpers, which go through injected deps).
 *
 * A command is `cmdX(ctx)`: no process globals, so a resident daemon can call it per request. `CallContext`
 * (built by host/prepare.ts, the one front door) gathers the request, the multus config, the parsed CNI_ARGS,
 * the logger, the seams and the settings every delegate call shares; `runtimeConfFor` turns an attachment into
 * libcni's RuntimeConf with its own copy of runtimeConfig.
 * Tested by test/unit/multus/commands.test.ts, test/unit/multus/kube-commands.test.ts.
 */
import { isAbsolute } from 'node:path';
import type { ArgPairs, K8sArgs } from '../../cni/cniargs.ts';
import { parseCniArgs, parseK8sArgs, podRef } from '../../cni/cniargs.ts';
import type { MultusConf } from '../conf.ts';
import type { NetworkDeps, RuntimeConf } from '../../cni/libcni.ts';
import type { ResourceMapDeps } from '../../devices/devices.ts';
import { CNI_DEVINFO_DIR, DP_DEVINFO_DIR } from '../../devices/devices.ts';
import { deviceInfoPath } from '../../devices/device-info.ts';
import type { Exec } from '../../cni/exec.ts';
import type { KubeClient, Pod } from '../../k8s/types.ts';
import type { Logger } from '../../base/log.ts';
import type { NetnsRouteDeps } from '../../routes/netns-routes.ts';
import type { Attachment } from '../attachments.ts';
import type { Clock } from '../../base/backoff.ts';
import type { ResolveDeps } from '../podnetworks.ts';
import type { ClaimNetworkSource } from '../claim-attach.ts';
import { emitEvents } from '../publish.ts';
import { capabilityArgsFor, delegateArgsFor } from '../attachments.ts';
import type { ReadinessDeps } from '../readiness.ts';
import { checkReadinessOnce, waitForReadiness } from '../readiness.ts';
import type { CallEnv, Env } from '../../cni/request.ts';

/** What the host gives one call (host/host.ts `commandDeps`): the seams, and the call's logger and environment. */
export interface CommandDeps {
  exec: Exec;
  log: Logger;
  readiness: ReadinessDeps;
  /** The environment delegates inherit (the caller's own, as libcni passes it through). */
  env: Env;
  /** The Kubernetes client for this config, or undefined when it names none (loaded only when called). */
  kube(conf: MultusConf): Promise<KubeClient | undefined>;
  clock: Clock;
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
 * Everything one call works with, built once by host/prepare.ts: the request (`R`: the CNI_* variables of any
 * call, a hot-plug request's too, unless a command needs more), the multus config, the pod it is for, the
 * logger and the seams. Commands take it alone.
 */
export interface CallContext<R extends CallEnv = CallEnv> {
  req: R;
  conf: MultusConf;
  /** The pod the call is for, as CNI_ARGS name it (or as the caller typed it: dynamic networks). */
  k8s: K8sArgs;
  runtimePairs: ArgPairs;
  /** "ns/name/uid", for error prefixes as Multus writes them. */
  podRef: string;
  log: Logger;
  clock: Clock;
  readiness: ReadinessDeps;
  /** The Kubernetes client for the call's config, undefined when it names none (loaded on first call). */
  kube(): Promise<KubeClient | undefined>;
  routes?: NetnsRouteDeps;
  devices?: DeviceDeps;
  claimNetworks?: ClaimNetworkSource;
  net: NetworkDeps;
  /** Where CNIDeviceInfoFiles are written, and where device plugins leave theirs (docs/behaviour.md#device-info). */
  devinfoDir: string;
  dpDevinfoDir: string;
}

/**
 * binDir, then CNI_PATH: absolute directories only. A relative one would resolve against the runtime's working
 * directory (and `.` made a bare plugin name, which spawn looks up in PATH): skipped with a warning (issue 28).
 */
function pluginDirs(binDir: string, cniPath: string[], log: CommandDeps['log']): string[] {
  const dirs: string[] = [];
  for (const dir of [binDir, ...cniPath]) {
    if (!isAbsolute(dir)) log.warn(`plugin directory "${dir}" (binDir or CNI_PATH) is not absolute: skipped`);
    else if (!dirs.includes(dir)) dirs.push(dir);
  }
  return dirs;
}

/** The call context of `req` (pure): CNI_ARGS parsed once, unless the caller hands the pod in as `k8s`. */
export function callContext<R extends CallEnv>(
  req: R,
  conf: MultusConf,
  deps: CommandDeps,
  k8sArgs?: K8sArgs,
  signal?: AbortSignal,
): CallContext<R> {
  const runtimePairs = k8sArgs ? [] : parseCniArgs(req.args);
  const k8s = k8sArgs ?? parseK8sArgs(runtimePairs);
  const baseEnv: Record<string, string> = {};
  for (const [key, value] of Object.entries(deps.env)) if (value !== undefined) baseEnv[key] = value;
  return {
    req,
    conf,
    k8s,
    runtimePairs,
    podRef: podRef(k8s),
    log: deps.log,
    clock: deps.clock,
    readiness: deps.readiness,
    kube: () => deps.kube(conf),
    ...(deps.routes ? { routes: deps.routes } : {}),
    ...(deps.devices ? { devices: deps.devices } : {}),
    ...(deps.claimNetworks ? { claimNetworks: deps.claimNetworks } : {}),
    devinfoDir: deps.devices?.cniDevinfoDir ?? CNI_DEVINFO_DIR,
    dpDevinfoDir: deps.devices?.dpDevinfoDir ?? DP_DEVINFO_DIR,
    net: {
      exec: deps.exec,
      log: deps.log,
      path: pluginDirs(conf.binDir, req.path, deps.log),
      baseEnv,
      cniDir: conf.cniDir,
      timeoutMs: conf.delegateTimeoutMs,
      ...(signal ? { signal } : {}),
    },
  };
}

/**
 * docs/behaviour.md#device-info: an attachment with a device gets its own CNIDeviceInfoFile path (any runtime value
 * is replaced); undefined for the others.
 */
function ownDeviceInfoFile(ctx: CallContext, attachment: Attachment): string | undefined {
  if (!attachment.request.deviceID || attachment.isClusterNetwork) return undefined;
  return deviceInfoPath(attachment.displayName, ctx.req.containerId, attachment.ifName, ctx.devinfoDir);
}

/** The CNIDeviceInfoFile an attachment's plugins are given: its own, else the runtime's (if any). */
export function deviceInfoFileOf(ctx: CallContext, attachment: Attachment): string | undefined {
  const runtimeValue = ctx.conf.runtimeConfig.CNIDeviceInfoFile;
  return (
    ownDeviceInfoFile(ctx, attachment) ??
    (typeof runtimeValue === 'string' && runtimeValue !== '' ? runtimeValue : undefined)
  );
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
    containerId: ctx.req.containerId,
    netns: ctx.req.netns,
    ifName: attachment.ifName,
    args: delegateArgsFor(attachment, ctx.k8s, ctx.runtimePairs, command),
    capabilityArgs,
  };
}

export function resolveDeps(kube: KubeClient | undefined, ctx: CallContext): ResolveDeps {
  return {
    kube,
    log: ctx.log,
    ...(ctx.devices ? { devices: ctx.devices } : {}),
    ...(ctx.claimNetworks ? { claimNetworks: ctx.claimNetworks } : {}),
    warn: (pod: Pod, reason: string, message: string) =>
      kube ? emitEvents(kube, pod, [{ type: 'Warning', reason, message }], ctx.log) : Promise.resolve(),
  };
}

/** ADD, STATUS and GC wait for the readiness indicator file (docs/behaviour.md#npwg); CHECK does not. */
export async function waitUntilReady(ctx: CallContext): Promise<void> {
  const { conf } = ctx;
  if (conf.readinessIndicatorFile) {
    await waitForReadiness(conf.readinessIndicatorFile, conf.readinessBackoff, ctx.readiness);
  }
}

/** DEL never waits: tearing down must not depend on the default network (docs/behaviour.md#readiness). It only logs. */
export async function noteReadiness(ctx: CallContext): Promise<void> {
  const { conf } = ctx;
  if (conf.readinessIndicatorFile && !(await checkReadinessOnce(conf.readinessIndicatorFile, ctx.readiness))) {
    ctx.log.verbose(`readinessindicatorfile ${conf.readinessIndicatorFile} is missing; deleting anyway`);
  }
}
