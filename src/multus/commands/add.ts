/**
 * commands/add.ts: CNI ADD (orchestration).
 *
 * Reads as the list of steps in docs/design.md (the front door, host/prepare.ts `prepare()`, has already decoded
 * CNI_ARGS into the call context and waited for the default network): look the pod up, resolve the delegates (config, NADs, annotations) and the
 * auxiliary chain, plan the attachments (all validation before anything runs), save the scratch cache, add each
 * attachment in order (or, with parallelAttachments, several at once: docs/behaviour.md#parallel-attachments), move
 * the default routes once every attachment is added, tell Kubernetes what was attached, and return the cluster
 * network's result in the multus config's cniVersion. Any failure after the first
 * attachment rolls back every attachment made so far (docs/behaviour.md#rollback), so no interface or IP is left
 * behind. Each attachment's AddedInterface event is posted as soon as it is added, while the next one runs, and the
 * ADD returns (or fails) only once every event it posted is done (docs/behaviour.md#events).
 */
import { eventsBeforeFirstError, gatherInputs, planAdd } from '../plan-add.ts';
import { removeScratchCache, writeScratchCache } from '../scratch-cache.ts';
import { addNetwork, delNetwork } from '../../cni/libcni.ts';
import { missingPluginOf } from '../../cni/exec.ts';
import { readDeviceInfo } from '../../devices/device-info.ts';
import { messageOf, wrapError } from '../../base/errors.ts';
import type { KubeClient, Pod } from '../../k8s/types.ts';
import { buildNetworkStatuses } from '../network-status.ts';
import type { Attachment } from '../attachments.ts';
import { runAttachments } from '../overlap.ts';
import { toCachedDelegate } from '../attachments.ts';
import { applyRoutePlan, updateCachedDefaultRoutes } from '../../routes/netns-routes.ts';
import type { PodLookup } from '../pod-delegates.ts';
import { lookupPod } from '../podnetworks.ts';
import { publishClaimNetworkData } from '../claim-status.ts';
import { publishClaimNetworks, withResourceClaim } from '../claim-attach.ts';
import type { RoutePlan } from '../../routes/routes.ts';
import { addedInterfaceEvents, editNetworkStatus, emitEvents } from '../publish.ts';
import type { CniResult } from '../../cni/result-model.ts';
import type { PluginResult } from '../../cni/result.ts';
import type { CallContext } from '../call-context.ts';
import { copyDeviceInfo, deviceInfoFileOf, podTag, runtimeConfFor } from '../call-context.ts';

export async function cmdAdd(ctx: CallContext): Promise<CniResult> {
  const { sandbox, conf } = ctx;
  const kube = await ctx.kube();
  const lookup = await lookupPod(kube, ctx.sandbox.pod, 'ADD', ctx);
  if (lookup.kind === 'unknown' && kube)
    ctx.log.verbose(`${podTag(ctx)}: ${lookup.reason}: attaching the configured networks only`);
  const call = {
    conf,
    k8s: ctx.sandbox.pod,
    ifName: sandbox.ifName,
    containerId: sandbox.containerId,
    tag: podTag(ctx),
  };
  const plan = planAdd(await gatherInputs(call, lookup, kube, ctx, 'add'));
  if (kube && lookup.kind === 'found') {
    const warnings = eventsBeforeFirstError(plan).map((e) => ({
      type: 'Warning' as const,
      reason: e.reason,
      message: e.message,
    }));
    if (warnings.length > 0) await emitEvents(kube, lookup.pod, warnings, ctx.log);
  }
  if (plan.errors[0]) throw plan.errors[0];
  for (const warning of plan.warnings) ctx.log.warn(warning);
  const { attachments } = plan;
  writeScratchCache(conf.cniDir, sandbox.containerId, attachments.map(toCachedDelegate));
  const events = addedInterfacePoster(kube, lookup, ctx);
  try {
    const results = await addAttachments(ctx, attachments, events.post).catch((e: unknown) =>
      warnMissingPlugin(ctx, kube, lookup, e),
    );
    if (plan.defaultRoutes) await moveDefaultRoutes(ctx, attachments, plan.defaultRoutes);
    if (kube && lookup.kind === 'found') await reportAttachments(ctx, kube, lookup.pod, attachments, results);
    if (kube && lookup.kind === 'found' && conf.publishClaimNetworkData) {
      await publishClaimNetworkData(kube, lookup.pod, sandbox.containerId, attachments, results, ctx.log);
    }
    if (kube) await publishClaimNetworks(kube, attachments, results, ctx.log); // docs/behaviour.md#claim-networks
    return results[0]!.as(conf.cniVersion);
  } finally {
    await events.done();
  }
}

type PostAdded = (attachment: Attachment, result: PluginResult) => Promise<void>;

/**
 * AddedInterface events (docs/behaviour.md#events), posted in order as each attachment is added, as Multus posts
 * each one when its delegate returns. `post` resolves after one turn of the event loop, so the event's request has
 * reached Bun's HTTP thread before the next delegate starts: its round trip goes on beside that delegate's run (after
 * the last delegate, beside the status write), where before they all came after the last delegate
 * (docs/archive/performance.md, "Each event as its attachment is added"). `done()` resolves once every posted event is
 * answered or failed (best effort: emitEvents never rejects); the thin plugin exits right after its answer, so an ADD
 * waits for it, failed or not. An ADD rolled back later keeps the events already posted, as Multus'.
 */
function addedInterfacePoster(
  kube: KubeClient | undefined,
  lookup: PodLookup,
  ctx: CallContext,
): { post: PostAdded; done: () => Promise<void> } {
  let posted = Promise.resolve();
  const post: PostAdded = async (attachment, result) => {
    if (!kube || lookup.kind !== 'found') return;
    const events = addedInterfaceEvents(attachment, result);
    if (events.length === 0) return;
    posted = posted.then(() => emitEvents(kube, lookup.pod, events, ctx.log));
    await new Promise((resolve) => setImmediate(resolve));
  };
  return { post, done: () => posted };
}

/**
 * Each attachment's ADD, in Multus' order or, with parallelAttachments, in the steps of multus/overlap.ts
 * (docs/behaviour.md#parallel-attachments). The first failure (by position) stops new starts; once the running ones
 * are done, every attachment started is rolled back and that failure is the call's error.
 */
async function addAttachments(ctx: CallContext, attachments: Attachment[], added: PostAdded): Promise<PluginResult[]> {
  const post = inOrder(attachments, added);
  const run = await runAttachments(
    attachments,
    { parallel: ctx.conf.parallelAttachments, stopOnFailure: true },
    async (i) => {
      const attachment = attachments[i]!;
      copyDeviceInfo(ctx, attachment);
      const result = await addNetwork(attachment.network, runtimeConfFor(ctx, attachment, 'ADD'), ctx);
      await post(i, result);
      return result;
    },
  );
  const failed = run.failures[0];
  if (!failed) return run.outcomes.flatMap((o) => (o.kind === 'ok' ? [o.value] : [])); // all of them: none failed
  await rollback(
    ctx,
    attachments.filter((_, i) => run.outcomes[i]!.kind !== 'not-run'),
  );
  const name = attachments[failed.index]!.network.name;
  throw wrapError(failed.error, `${podTag(ctx, name)}: error adding container to network "${name}"`);
}

/**
 * `added` of each attachment in the list's order, whatever order they finish in: an attachment's event waits for
 * the ones before it (docs/behaviour.md#events); serial calls post each at once, as before.
 */
function inOrder(attachments: Attachment[], added: PostAdded): (index: number, result: PluginResult) => Promise<void> {
  const done: (PluginResult | undefined)[] = [];
  let next = 0;
  return async (index, result) => {
    done[index] = result;
    while (done[next] !== undefined) {
      const i = next++;
      await added(attachments[i]!, done[i]!);
    }
  };
}

/**
 * A delegate's plugin missing from the bin dirs (Multus #1413, docs/behaviour.md#missing-plugin): beside the error the
 * runtime reports, a warning in multus' log and a Warning event on the pod that say where the plugin must go. Rethrows.
 */
async function warnMissingPlugin(
  ctx: CallContext,
  kube: KubeClient | undefined,
  pod: PodLookup,
  e: unknown,
): Promise<never> {
  const missing = missingPluginOf(e);
  if (missing) {
    const msg =
      `CNI plugin "${missing.pluginType}" is not in ${missing.dirs.join(', ')} on this node: install it there ` +
      '(multus runs the plugins it is given, it ships none; a resident daemon without chrootDir looks in its own container)';
    ctx.log.warn(`${podTag(ctx)}: ${msg}`);
    if (kube && pod.kind === 'found')
      await emitEvents(kube, pod.pod, [{ type: 'Warning', reason: 'PluginNotFound', message: msg }], ctx.log);
  }
  throw e;
}

/**
 * `default-route` (docs/behaviour.md#default-route): the pod's default route of each requested family goes via the
 * requested gateway only;
 * the libcni result caches of the attachments whose routes changed are rewritten so CHECK and DEL agree with
 * the namespace. A failure rolls the whole ADD back (Multus leaves the attachments behind).
 */
async function moveDefaultRoutes(ctx: CallContext, attachments: Attachment[], plan: RoutePlan[]): Promise<void> {
  try {
    await applyRoutePlan(ctx.sandbox.netns, plan, ctx.seams.routes);
    const refs = attachments.map((a) => ({ ifName: a.ifName, networkName: a.network.name }));
    updateCachedDefaultRoutes(ctx.conf.cniDir, ctx.sandbox.containerId, refs, plan);
  } catch (e) {
    await rollback(ctx, attachments);
    throw wrapError(e, `${podTag(ctx)}: error setting the default route`);
  }
}

/** The attachment's device-info (its CNIDeviceInfoFile, when the plugin or the copy wrote one). */
function deviceInfoOf(ctx: CallContext, attachment: Attachment): Record<string, unknown> | undefined {
  const path = deviceInfoFileOf(ctx, attachment);
  if (path === undefined) return undefined;
  const info = readDeviceInfo(path);
  return info.kind === 'ok' ? info.value : undefined;
}

/** network-status; a failed write rolls the whole ADD back (the events already posted stay, as Multus'). */
async function reportAttachments(
  ctx: CallContext,
  kube: KubeClient,
  pod: Pod,
  attachments: Attachment[],
  results: PluginResult[],
): Promise<void> {
  try {
    await writeNetworkStatus(ctx, kube, pod, attachments, results);
  } catch (e) {
    await rollback(ctx, attachments);
    throw wrapError(e, podTag(ctx));
  }
}

function writeNetworkStatus(
  ctx: CallContext,
  kube: KubeClient,
  pod: Pod,
  attachments: Attachment[],
  results: PluginResult[],
): Promise<void> {
  // Pods in systemNamespaces get no network-status (docs/behaviour.md#network-status; Multus compares the pod's *name*
  // there, k8snetworkplumbingwg/multus-cni#1205).
  if (ctx.conf.systemNamespaces.includes(pod.metadata.namespace)) return Promise.resolve();
  const statuses = attachments.flatMap((a, i) =>
    withResourceClaim(a, buildNetworkStatuses(a.displayName, results[i]!, a.isClusterNetwork, deviceInfoOf(ctx, a))),
  );
  return statuses.length > 0 ? editNetworkStatus(kube, pod, () => statuses, ctx.log) : Promise.resolve();
}

/**
 * DEL of the given attachments in reverse (the failed one included: it may have half-configured), in the steps of
 * multus/overlap.ts with parallelAttachments. The scratch cache goes only when every DEL succeeded; otherwise the
 * runtime's DEL still needs it.
 */
async function rollback(ctx: CallContext, attachments: Attachment[]): Promise<void> {
  const run = await runAttachments(attachments, { parallel: ctx.conf.parallelAttachments, reverse: true }, (i) =>
    delNetwork(attachments[i]!.network, runtimeConfFor(ctx, attachments[i]!, 'DEL'), ctx),
  );
  for (const { index, error } of run.failures) {
    const { network, ifName } = attachments[index]!;
    ctx.log.error(`${podTag(ctx)}: rollback of ${network.name}/${ifName} failed: ${messageOf(error)}`);
  }
  if (run.failures.length === 0) removeScratchCache(ctx.conf.cniDir, ctx.sandbox.containerId);
}
