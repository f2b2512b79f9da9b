/**
 * commands/add.ts: CNI ADD (orchestration).
 *
 * Reads as the list of steps in docs/design.md (handle() has already decoded CNI_ARGS into the call context and
 * waited for the default network): look the pod up, resolve the delegates (config, NADs, annotations) and the
 * auxiliary chain, plan the attachments (all validation before anything runs), save the scratch cache, add each
 * attachment in order, move the default routes, tell Kubernetes what was attached, and return the cluster
 * network's result in the multus config's cniVersion. Any failure after the first
 * attachment rolls back every attachment made so far (docs/behaviour.md#rollback), so no interface or IP is left
 * behind.
 */
import { auxiliaryChain } from '../auxchain.ts';
import { removeScratchCache, writeScratchCache } from '../scratch-cache.ts';
import { assertResultCacheFits } from '../../cni/result-cache.ts';
import { addNetwork, delNetwork } from '../../cni/libcni.ts';
import { copyDevicePluginInfo, readDeviceInfo } from '../../devices/device-info.ts';
import { CniCode, CniError, messageOf, wrapError } from '../../base/errors.ts';
import type { KubeClient, Pod } from '../../k8s/types.ts';
import { buildNetworkStatuses } from '../network-status.ts';
import type { Attachment } from '../plan.ts';
import { inheritListVersion, planAttachments, toCachedDelegate, undeclaredCapabilities } from '../plan.ts';
import { applyRoutePlan, updateCachedDefaultRoutes } from '../../routes/netns-routes.ts';
import { lookupPod, resolvePodDelegates } from '../podnetworks.ts';
import { publishClaimNetworkData } from '../claim-status.ts';
import { planDefaultRoutes } from '../../routes/routes.ts';
import { addedInterfaceEvent, emitEvents, publishNetworkStatus } from '../publish.ts';
import type { CniResult } from '../../cni/result-model.ts';
import { convertResult, normalizeResult, resultInterfaces, resultIps } from '../../cni/result.ts';
import type { CallContext, CommandDeps } from './context.ts';
import { deviceInfoFileOf, podTag, resolveDeps, runtimeConfFor } from './context.ts';

export async function cmdAdd(ctx: CallContext, deps: CommandDeps): Promise<CniResult> {
  const { req, conf } = ctx;
  const kube = await deps.kube(conf);
  const pod = await lookupPod(kube, ctx.k8s, 'ADD', deps);
  if (pod.kind === 'unknown' && kube)
    deps.log.verbose(`${podTag(ctx)}: ${pod.reason}: attaching the configured networks only`);
  const delegates = inheritListVersion(
    await resolvePodDelegates(conf, ctx.k8s, pod, resolveDeps(kube, deps)),
    conf.cniVersion,
  );
  const aux = auxiliaryChain(conf, deps.log);
  if (aux) delegates.push(aux);
  const attachments = planAttachments(delegates, req.ifName);
  checkCapabilities(ctx, attachments);
  for (const a of attachments) assertResultCacheFits(a.network.name, req.containerId, a.ifName);
  writeScratchCache(conf.cniDir, req.containerId, attachments.map(toCachedDelegate));
  const results = await addAttachments(ctx, attachments);
  await moveDefaultRoutes(ctx, attachments, deps);
  if (kube && pod.kind === 'found') await reportAttachments(ctx, kube, pod.pod, attachments, results);
  if (kube && pod.kind === 'found' && conf.publishClaimNetworkData) {
    await publishClaimNetworkData(kube, req.containerId, attachments, results, ctx.net.log);
  }
  return normalizeResult(convertResult(results[0]!, conf.cniVersion));
}

/** A request no plugin can honour: a warning (Multus compatible), or an error with strictCapabilities. */
function checkCapabilities(ctx: CallContext, attachments: Attachment[]): void {
  for (const attachment of attachments) {
    const missing = undeclaredCapabilities(attachment);
    if (missing.length === 0) continue;
    const msg = `${attachment.displayName} requests ${missing.join(', ')} but no plugin of network "${attachment.network.name}" declares ${missing.length > 1 ? 'those capabilities' : 'that capability'}`;
    if (ctx.conf.strictCapabilities)
      throw new CniError(CniCode.InvalidConfig, `${podTag(ctx)}: ${msg} (strictCapabilities)`);
    ctx.net.log.warn(`${podTag(ctx)}: ${msg}; the request is ignored`);
  }
}

async function addAttachments(ctx: CallContext, attachments: Attachment[]): Promise<CniResult[]> {
  const results: CniResult[] = [];
  for (const [index, attachment] of attachments.entries()) {
    try {
      copyDeviceInfo(ctx, attachment);
      results.push(await addNetwork(attachment.network, runtimeConfFor(ctx, attachment, 'ADD'), ctx.net));
    } catch (e) {
      await rollback(ctx, attachments.slice(0, index + 1));
      const name = attachment.network.name;
      throw wrapError(e, `${podTag(ctx, name)}: error adding container to network "${name}"`);
    }
  }
  return results;
}

/**
 * `default-route` (docs/behaviour.md#default-route): the pod's default route of each requested family goes via the
 * requested gateway only;
 * the libcni result caches of the attachments whose routes changed are rewritten so CHECK and DEL agree with
 * the namespace. A failure rolls the whole ADD back (Multus leaves the attachments behind).
 */
async function moveDefaultRoutes(ctx: CallContext, attachments: Attachment[], deps: CommandDeps): Promise<void> {
  const plan = planDefaultRoutes(attachments);
  if (!plan) return;
  try {
    await applyRoutePlan(ctx.req.netns, plan, deps.routes);
    const refs = attachments.map((a) => ({ ifName: a.ifName, networkName: a.network.name }));
    updateCachedDefaultRoutes(ctx.conf.cniDir, ctx.req.containerId, refs, plan);
  } catch (e) {
    await rollback(ctx, attachments);
    throw wrapError(e, `${podTag(ctx)}: error setting the default route`);
  }
}

/** docs/behaviour.md#device-info: the device plugin's device-info file, copied to the attachment's CNIDeviceInfoFile before its ADD. */
function copyDeviceInfo(ctx: CallContext, attachment: Attachment): void {
  const target = deviceInfoFileOf(ctx, attachment);
  const { resourceName, deviceID } = attachment.request;
  if (typeof target !== 'string' || !resourceName || !deviceID) return;
  const warning = copyDevicePluginInfo(resourceName, deviceID, target, ctx.dpDevinfoDir);
  if (warning) ctx.net.log.verbose(`${podTag(ctx)}: ${warning}`);
}

/** The attachment's device-info (its CNIDeviceInfoFile, when the plugin or the copy wrote one). */
function deviceInfoOf(ctx: CallContext, attachment: Attachment): Record<string, unknown> | undefined {
  const path = deviceInfoFileOf(ctx, attachment);
  if (path === undefined) return undefined;
  const info = readDeviceInfo(path);
  return info.kind === 'ok' ? info.value : undefined;
}

/** network-status and AddedInterface events; a failed status write rolls the whole ADD back. */
async function reportAttachments(
  ctx: CallContext,
  kube: KubeClient,
  pod: Pod,
  attachments: Attachment[],
  results: CniResult[],
): Promise<void> {
  // Pods in systemNamespaces get no network-status (docs/behaviour.md#network-status; Multus compares the pod's *name*
  // there, #1205).
  if (!ctx.conf.systemNamespaces.includes(pod.metadata.namespace)) {
    const statuses = attachments.flatMap((a, i) =>
      buildNetworkStatuses(a.displayName, results[i]!, a.isClusterNetwork, deviceInfoOf(ctx, a)),
    );
    try {
      await publishNetworkStatus(kube, pod, statuses, ctx.net.log);
    } catch (e) {
      await rollback(ctx, attachments);
      throw wrapError(e, podTag(ctx));
    }
  }
  const events = attachments.flatMap((a, i) => {
    const ips = resultIps(results[i]!);
    return ips.length > 0 || resultInterfaces(results[i]!).length > 0
      ? [
          addedInterfaceEvent(
            a.ifName,
            ips.map((ip) => ip.address),
            a.displayName,
          ),
        ]
      : [];
  });
  await emitEvents(kube, pod, events, ctx.net.log);
}

/**
 * DEL of the given attachments in reverse (the failed one included: it may have half-configured).
 * The scratch cache goes only when every DEL succeeded; otherwise the runtime's DEL still needs it.
 */
async function rollback(ctx: CallContext, attachments: Attachment[]): Promise<void> {
  let clean = true;
  for (const attachment of [...attachments].reverse()) {
    try {
      await delNetwork(attachment.network, runtimeConfFor(ctx, attachment, 'DEL'), ctx.net);
    } catch (e) {
      clean = false;
      ctx.net.log.error(
        `${podTag(ctx)}: rollback of ${attachment.network.name}/${attachment.ifName} failed: ${messageOf(e)}`,
      );
    }
  }
  if (clean) removeScratchCache(ctx.conf.cniDir, ctx.req.containerId);
}
