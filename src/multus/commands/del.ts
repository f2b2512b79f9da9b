/**
 * commands/del.ts: CNI DEL (orchestration).
 *
 * Finds every attachment it can know of, from sources merged without duplicates: the scratch cache written
 * at ADD (or, when it is missing or corrupt, what ADD would choose now: the config's delegates and, if the API
 * answers at once, the pod's annotations) and the libcni result caches of this container (which also recover
 * attachments a corrupt scratch cache lost). With a scratch cache no API request is made. Then it
 * deletes all of them in reverse order (with parallelAttachments several at once), keeps going past failures, and
 * returns one error naming each failed attachment (docs/behaviour.md#npwg). A corrupt cache is logged and removed
 * once its attachments are gone, never a silent success (k8snetworkplumbingwg/multus-cni#948, #1087); a corrupt
 * result cache that nothing else explains fails the DEL.
 */
import type { ResultCacheEntry } from '../../cni/result-cache.ts';
import { listResultCaches, resultCachePath } from '../../cni/result-cache.ts';
import type { ReadOutcome } from '../../base/files.ts';
import type { CachedDelegate } from '../scratch-cache.ts';
import { readScratchCacheEntries, removeScratchCache } from '../scratch-cache.ts';
import { sweepCacheTemps } from '../sweep.ts';
import { rmSync } from 'node:fs';
import { parseNetwork } from '../../cni/network.ts';
import { resolveStaticNetworks } from '../conf.ts';
import type { RuntimeConf } from '../../cni/libcni.ts';
import { delNetwork, runtimeConfFromCache, joinErrors } from '../../cni/libcni.ts';
import { removeDeviceInfo } from '../../devices/device-info.ts';
import type { Network } from '../../cni/network.ts';
import { CniCode, CniError, messageOf, wrapError } from '../../base/errors.ts';
import type { Attachment, AttachmentSource, Delegate } from '../attachments.ts';
import { runAttachments } from '../overlap.ts';
import { clearClaimNetworkData } from '../claim-status.ts';
import { clearClaimNetworks } from '../claim-attach.ts';
import { cachedRoles, fromCachedDelegateAt, inheritListVersion, planAttachments } from '../attachments.ts';
import type { CallContext } from '../call-context.ts';
import { podTag, runtimeConfFor } from '../call-context.ts';
import { gatherPodInputs, lookupPod } from '../podnetworks.ts';
import { newSink, planPodDelegates } from '../pod-delegates.ts';

interface Teardown {
  network: Network;
  rt: RuntimeConf;
  /** Its result cache, when the plan's listing read it (delNetwork reads it otherwise). */
  cached?: ReadOutcome<ResultCacheEntry>;
  /** The planned attachment's source; none for one found in a result cache only. */
  source?: AttachmentSource;
}

interface DelPlan {
  teardowns: Teardown[];
  /** The planned attachments (their requests say which came from a DRA claim). */
  attachments: Attachment[];
  /** Corrupt result-cache files, with whether a known attachment accounts for them. */
  corruptResults: { path: string; covered: boolean; error: string }[];
  scratchCorrupt: boolean;
}

export async function cmdDel(ctx: CallContext): Promise<void> {
  const plan = await planTeardowns(ctx);
  const failures = await deleteAll(ctx, plan.teardowns);
  await clearClaims(ctx, plan);
  finishCaches(ctx, plan, failures.length === 0);
  for (const path of sweepCacheTemps(ctx.conf.cniDir)) ctx.log.verbose(`removed ${path}, left by an interrupted write`);
  const unexplained = plan.corruptResults.filter((c) => !c.covered);
  for (const c of unexplained) {
    failures.push(
      new CniError(CniCode.DecodingFailure, `cannot tear down the attachment recorded in ${c.path}: ${c.error}`, {
        details:
          "the file is corrupt and no other cache names its network; check the pod's interfaces, then remove the file",
      }),
    );
  }
  if (failures.length > 0) throw joinErrors(failures);
}

/**
 * Every teardown's DEL, in reverse (with parallelAttachments, in the steps of multus/overlap.ts:
 * docs/behaviour.md#parallel-attachments), past failures; the failures in that order.
 */
async function deleteAll(ctx: CallContext, teardowns: Teardown[]): Promise<CniError[]> {
  const run = await runAttachments(teardowns, { parallel: ctx.conf.parallelAttachments, reverse: true }, async (i) => {
    const { network, rt, cached } = teardowns[i]!;
    await delNetwork(network, rt, ctx, cached);
    removeDeviceInfoOf(ctx, rt);
  });
  return run.failures.map(({ index, error }) => {
    const { network, rt } = teardowns[index]!;
    return wrapError(error, `${podTag(ctx, network.name)}: error deleting ${rt.ifName} of network "${network.name}"`);
  });
}

/** docs/behaviour.md#device-info: the attachment's CNIDeviceInfoFile goes with it (errors only logged). */
function removeDeviceInfoOf(ctx: CallContext, rt: RuntimeConf): void {
  const path = rt.capabilityArgs.CNIDeviceInfoFile;
  if (typeof path !== 'string') return;
  const warning = removeDeviceInfo(path);
  if (warning) ctx.log.verbose(`${podTag(ctx)}: ${warning}`);
}

async function planTeardowns(ctx: CallContext): Promise<DelPlan> {
  const { conf, sandbox } = ctx;
  const scratch = readScratchCacheEntries(conf.cniDir, sandbox.containerId);
  const cached = scratch.kind === 'ok' ? cachedAttachments(ctx, scratch.value) : undefined;
  let attachments: Attachment[];
  if (cached) attachments = cached.attachments;
  else {
    if (scratch.kind === 'corrupt')
      ctx.log.error(
        `${podTag(ctx)}: scratch cache unreadable, using the config's delegates and the result caches: ${scratch.error.msg}`,
      );
    attachments = planAttachments(inheritListVersion(await currentDelegates(ctx), conf.cniVersion), sandbox.ifName);
  }
  // The container's result caches, each read once: a teardown of the plan takes the one at its own path.
  const listed = listResultCaches(conf.cniDir, { containerId: sandbox.containerId });
  const byPath = new Map(listed.map(({ path, outcome }) => [path, outcome]));
  const teardown = (network: Network, rt: RuntimeConf, source?: AttachmentSource): Teardown => {
    const cached = listedCache(byPath, conf.cniDir, network, rt);
    return { network, rt, ...(cached ? { cached } : {}), ...(source ? { source } : {}) };
  };
  const teardowns = attachments.map((a) => teardown(a.network, runtimeConfFor(ctx, a, 'DEL'), a.source));
  const known = new Set(teardowns.map((t) => `${t.network.name}\0${t.rt.ifName}`));
  const corruptResults: DelPlan['corruptResults'] = [];
  for (const { path, outcome } of listed) {
    if (outcome.kind === 'corrupt') {
      const covered = teardowns.some((t) => path.endsWith(`/${t.network.name}-${sandbox.containerId}-${t.rt.ifName}`));
      corruptResults.push({ path, covered, error: outcome.error.msg });
      continue;
    }
    if (outcome.kind !== 'ok') continue;
    const entry = outcome.value;
    if (known.has(`${entry.networkName}\0${entry.ifName}`)) continue;
    try {
      const network = parseNetwork(entry.config);
      teardowns.push(
        teardown(network, { ...runtimeConfFromCache(entry), containerId: sandbox.containerId, netns: sandbox.netns }),
      );
      known.add(`${entry.networkName}\0${entry.ifName}`);
    } catch (e) {
      corruptResults.push({ path, covered: false, error: messageOf(e) });
    }
  }
  const scratchCorrupt = scratch.kind === 'corrupt' || (cached?.skipped ?? 0) > 0;
  return { teardowns, attachments, corruptResults, scratchCorrupt };
}

/**
 * The listing's read of the result cache at the teardown's own path, or undefined: delNetwork then reads that path
 * itself (and reports a name no cache path can have as that attachment's failure).
 */
function listedCache(
  byPath: Map<string, ReadOutcome<ResultCacheEntry>>,
  cniDir: string,
  network: Network,
  rt: RuntimeConf,
): ReadOutcome<ResultCacheEntry> | undefined {
  try {
    return byPath.get(resultCachePath(cniDir, network.name, rt.containerId, rt.ifName));
  } catch {
    return undefined;
  }
}

/**
 * The scratch cache's attachments, each at its place in the list (the place names its interface and its source);
 * an entry that cannot be read is logged and skipped (its result cache still names what it attached), so a bad
 * entry never makes every DEL fail (issue 28; docs/reliability.md). Undefined when no entry is left: then DEL plans
 * as without one.
 */
function cachedAttachments(
  ctx: CallContext,
  read: { entries: (CachedDelegate | undefined)[]; problems: string[] },
): { attachments: Attachment[]; skipped: number } | undefined {
  const problems = [...read.problems];
  const roles = cachedRoles(ctx.conf, ctx.sandbox.pod.podNamespace);
  const placed: { delegate: Delegate; index: number }[] = [];
  read.entries.forEach((entry, index) => {
    if (!entry) return;
    try {
      placed.push({ delegate: fromCachedDelegateAt(entry, index, roles), index });
    } catch (e) {
      problems.push(`delegate ${index}: ${messageOf(e)}`);
    }
  });
  for (const p of problems) ctx.log.error(`${podTag(ctx)}: scratch cache entry skipped: ${p}`);
  if (placed.length === 0 && read.entries.length > 0) return undefined;
  const delegates = placed.map(({ delegate, index }) => ({
    ...delegate,
    request: {
      ...delegate.request,
      ifname: delegate.request.ifname || (index === 0 ? ctx.sandbox.ifName : `net${index}`),
    },
  }));
  const attachments = planAttachments(inheritListVersion(delegates, ctx.conf.cniVersion), ctx.sandbox.ifName);
  return { attachments, skipped: problems.length };
}

/**
 * KEP-4817 (docs/behaviour.md#claim-network-data): this sandbox's claim entries go with it; our driver's claims'
 * entries too unless another pod still uses the claim (docs/behaviour.md#claim-networks); best effort.
 */
async function clearClaims(ctx: CallContext, plan: DelPlan): Promise<void> {
  const other = ctx.conf.publishClaimNetworkData && plan.attachments.some((a) => a.request.claimDevice);
  const ours = plan.attachments.some((a) => a.request.claimNetwork);
  if (!other && !ours) return;
  try {
    const kube = await ctx.kube();
    const pod = ctx.sandbox.pod;
    if (kube && other) await clearClaimNetworkData(kube, ctx.sandbox.containerId, plan.attachments, ctx.log);
    if (kube && ours) await clearClaimNetworks(kube, { name: pod.podName, uid: pod.podUid }, plan.attachments, ctx.log);
  } catch (e) {
    ctx.log.error(`${podTag(ctx)}: cannot remove the claims' network data: ${messageOf(e)}`);
  }
}

/**
 * Without a scratch cache: the delegates ADD would choose now (config, and the pod's annotations when the
 * API answers at once). On DEL nothing here is fatal: what cannot be resolved is logged, and the result
 * caches still name every attachment ADD made.
 */
async function currentDelegates(ctx: CallContext): Promise<Delegate[]> {
  try {
    const kube = await ctx.kube();
    const lookup = await lookupPod(kube, ctx.sandbox.pod, 'DEL', ctx);
    const inputs = await gatherPodInputs(ctx.conf, ctx.sandbox.pod, lookup, kube, ctx, {
      stopEarly: true,
    });
    const sink = newSink();
    const delegates = planPodDelegates(ctx.conf, ctx.sandbox.pod.podNamespace, inputs, sink);
    if (sink.errors[0]) throw sink.errors[0];
    return delegates;
  } catch (e) {
    ctx.log.error(
      `${podTag(ctx)}: cannot resolve the pod's delegates, using the configured ones and the result caches: ${messageOf(e)}`,
    );
  }
  try {
    return resolveStaticNetworks(ctx.conf, { podNamespace: ctx.sandbox.pod.podNamespace });
  } catch (e) {
    ctx.log.error(
      `${podTag(ctx)}: cannot resolve the configured delegates, using the result caches only: ${messageOf(e)}`,
    );
    return [];
  }
}

/**
 * Scratch cache: removed when every DEL succeeded; after failures it is removed too unless retryDeleteOnError is set
 * (docs/behaviour.md#del, compat). Either way the failed attachments keep their result caches, so a retried DEL still
 * finds them. Corrupt result caches that a known attachment accounted for go once it is gone.
 */
function finishCaches(ctx: CallContext, plan: DelPlan, allDeleted: boolean): void {
  if (allDeleted || !ctx.conf.retryDeleteOnError || plan.scratchCorrupt) {
    removeScratchCache(ctx.conf.cniDir, ctx.sandbox.containerId);
  }
  if (!allDeleted) return;
  for (const c of plan.corruptResults) if (c.covered) rmSync(c.path, { force: true });
}
