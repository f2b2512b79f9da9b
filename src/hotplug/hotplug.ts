/**
 * hotplug.ts: adding one attachment to, or removing one from, a pod sandbox that already runs (docs/hotplug.md).
 *
 * A hot-plugged attachment is owned like one made at pod creation: ADD appends it to the container's scratch
 * cache (before running it, as ADD does), runs it (addNetwork writes its libcni result cache) and adds its
 * entries to the pod's network-status; DEL removes all three. So the runtime's final DEL of the pod finds it in
 * the scratch cache, CHECK checks it and GC counts it, through the daemon or a thin call alike.
 *
 * The planning is pure (`planHotplugAdd`, `planHotplugDel`, the network-status edits); the I/O goes through
 * the existing helpers (scratch cache, addNetwork/delNetwork, the Kubernetes client) and the `SandboxLinks`
 * seam, which lists the interfaces inside the sandbox's netns.
 *
 * Interface names are pinned: every attachment except the cluster network is stored with its interface name
 * (`ifnameRequest`), so removing an attachment never renames the ones after it (names are otherwise given by
 * position, net<i>). The cluster network (the first attachment) cannot be unplugged.
 */
import { CniCode, CniError, messageOf, wrapError } from '../base/errors.ts';
import { addNetwork, checkNetwork, delNetwork } from '../cni/libcni.ts';
import type { PluginResult } from '../cni/result.ts';
import type { KubeClient, Pod } from '../k8s/types.ts';
import { httpStatusOf as apiStatus } from '../k8s/types.ts';
import { listResultCaches } from '../cni/result-cache.ts';
import type { CachedDelegate } from '../multus/scratch-cache.ts';
import { readScratchCache, writeScratchCache } from '../multus/scratch-cache.ts';
import type { CallContext } from '../multus/call-context.ts';
import { copyDeviceInfo, podTag, runtimeConfFor } from '../multus/call-context.ts';
import { buildNetworkStatuses, editStatusEntries } from '../multus/network-status.ts';
import type { Attachment, CachedRoles, Delegate } from '../multus/attachments.ts';
import { fromCachedDelegates, planAttachments, toCachedDelegate } from '../multus/attachments.ts';
import { addedInterfaceEvents, editNetworkStatus, emitEvents, removedInterfaceEvent } from '../multus/publish.ts';
import type { SandboxLinks } from '../routes/nsenter.ts';

// ---------------------------------------------------------------------------------------------------------
// Pure planning.

/** The attachments a scratch cache describes, with their interface names (`clusterIfName` for the first). */
export function cachedAttachments(cached: CachedDelegate[], clusterIfName: string, roles?: CachedRoles): Attachment[] {
  return planAttachments(fromCachedDelegates(cached, roles), clusterIfName);
}

/** Every attachment but the cluster network carries its interface name, so positions no longer matter. */
function pinned(attachments: Attachment[]): CachedDelegate[] {
  return attachments.map((a) =>
    toCachedDelegate(a.isClusterNetwork ? a : { ...a, request: { ...a.request, ifname: a.ifName } }),
  );
}

export interface HotplugAddPlan {
  attachment: Attachment;
  /** The scratch cache with the new attachment appended. */
  cache: CachedDelegate[];
}

/**
 * The new attachment for `delegate` as `ifName`, appended after the cached ones. Refused when the name is
 * taken by a cached attachment or by a link in the sandbox (`links`), before anything runs.
 */
export function planHotplugAdd(
  cached: CachedDelegate[],
  clusterIfName: string,
  delegate: Delegate,
  ifName: string,
  links: string[],
): HotplugAddPlan {
  const existing = cachedAttachments(cached, clusterIfName);
  const owner = existing.find((a) => a.ifName === ifName);
  if (owner) {
    throw new CniError(
      CniCode.InvalidConfig,
      `interface "${ifName}" is already attached to the pod by "${owner.displayName}"`,
      {
        details: 'choose another interface name, or remove that attachment first',
      },
    );
  }
  if (links.includes(ifName)) {
    throw new CniError(CniCode.InvalidConfig, `interface "${ifName}" already exists in the pod's network namespace`, {
      details: 'choose another interface name',
    });
  }
  // planAttachments validates the name and would catch a duplicate again.
  const all = planAttachments(
    [...existing, { ...delegate, request: { ...delegate.request, ifname: ifName } }],
    clusterIfName,
  );
  return { attachment: all[all.length - 1]!, cache: pinned(all) };
}

export interface HotplugDelPlan {
  attachment: Attachment;
  /** The scratch cache without it. */
  cache: CachedDelegate[];
}

/** The cached attachment named `ifName` and the cache without it; undefined when none has that name. */
export function planHotplugDel(
  cached: CachedDelegate[],
  clusterIfName: string,
  ifName: string,
): HotplugDelPlan | undefined {
  const existing = cachedAttachments(cached, clusterIfName);
  const index = existing.findIndex((a) => a.ifName === ifName);
  if (index < 0) return undefined;
  if (index === 0) {
    throw new CniError(
      CniCode.InvalidConfig,
      `interface "${ifName}" is the pod's cluster network and cannot be removed`,
      {
        details: 'the runtime removes it when the pod is deleted',
      },
    );
  }
  const claim = existing[index]!.request.claimNetwork;
  if (claim) {
    throw new CniError(
      CniCode.InvalidConfig,
      `interface "${ifName}" belongs to ResourceClaim ${String(claim.namespace)}/${String(claim.claim)} (request "${String(claim.request)}") and cannot be removed`,
      { details: 'the claim owns it: it is removed when the pod is deleted (docs/behaviour.md#claim-networks)' },
    );
  }
  const rest = existing.filter((_, i) => i !== index);
  return { attachment: existing[index]!, cache: pinned(rest) };
}

// ---------------------------------------------------------------------------------------------------------
// I/O.

export interface HotplugDeps {
  kube: KubeClient;
  links: SandboxLinks;
}

/** The interface name the runtime gave the cluster network: from its result cache, else eth0. */
export function clusterIfNameOf(cniDir: string, containerId: string, cached: CachedDelegate[]): string {
  const [first] = fromCachedDelegates(cached.slice(0, 1));
  if (!first) return 'eth0';
  for (const { outcome } of listResultCaches(cniDir, { containerId })) {
    if (outcome.kind === 'ok' && outcome.value.networkName === first.network.name) return outcome.value.ifName;
  }
  return 'eth0';
}

export function readSandboxCache(ctx: CallContext): CachedDelegate[] {
  const scratch = readScratchCache(ctx.conf.cniDir, ctx.sandbox.containerId);
  if (scratch.kind === 'ok') return scratch.value;
  if (scratch.kind === 'corrupt') {
    throw new CniError(
      CniCode.DecodingFailure,
      `the scratch cache of container ${ctx.sandbox.containerId} is unreadable: ${scratch.error.msg}`,
      {
        details: "nothing was changed; the runtime's DEL of the pod cleans it up",
      },
    );
  }
  throw new CniError(
    CniCode.UnknownContainer,
    `container ${ctx.sandbox.containerId} has no multus scratch cache in ${ctx.conf.cniDir}`,
    {
      details: 'hot-plug needs a pod sandbox that multus added on this node: check CNI_CONTAINERID and the cniDir',
    },
  );
}

/** The pod, required to exist with the request's UID (when the request names one). */
export async function checkedPod(
  kube: KubeClient,
  ctx: CallContext,
  tolerateMissing = false,
): Promise<Pod | undefined> {
  const { podNamespace, podName, podUid } = ctx.sandbox.pod;
  if (!podNamespace || !podName) {
    throw new CniError(
      CniCode.InvalidEnv,
      'CNI_ARGS must name the pod: K8S_POD_NAMESPACE=<ns>;K8S_POD_NAME=<name>;K8S_POD_UID=<uid>',
    );
  }
  let pod: Pod;
  try {
    pod = await kube.getPod(podNamespace, podName);
  } catch (e) {
    if (apiStatus(e) === 404) {
      if (tolerateMissing) return undefined;
      throw new CniError(CniCode.InvalidConfig, `pod ${podNamespace}/${podName} does not exist`, {
        details: 'check K8S_POD_NAMESPACE and K8S_POD_NAME',
      });
    }
    throw wrapError(e, `cannot read pod ${podNamespace}/${podName}`, CniCode.TryAgainLater);
  }
  if (podUid && pod.metadata.uid !== podUid) {
    throw new CniError(
      CniCode.InvalidConfig,
      `expected pod ${podNamespace}/${podName} UID "${podUid}" but got "${pod.metadata.uid}" from Kube API`,
      {
        details: 'the pod was recreated: the request is for a sandbox that no longer belongs to it',
      },
    );
  }
  return pod;
}

/**
 * Hot-plug ADD of `delegate` as `ctx.sandbox.ifName`. Anything failing after the cache was written is rolled back
 * (the delegate's DEL, the old cache restored), so a refused or failed request leaves the pod as it was.
 */
export async function hotplugAdd(
  ctx: CallContext,
  pod: Pod,
  delegate: Delegate,
  deps: HotplugDeps,
): Promise<PluginResult> {
  const cached = readSandboxCache(ctx);
  const clusterIfName = clusterIfNameOf(ctx.conf.cniDir, ctx.sandbox.containerId, cached);
  const links = await deps.links.names(ctx.sandbox.netns);
  const plan = planHotplugAdd(cached, clusterIfName, delegate, ctx.sandbox.ifName, links);
  const { attachment } = plan;
  const name = attachment.network.name;
  writeScratchCache(ctx.conf.cniDir, ctx.sandbox.containerId, plan.cache);
  const rollback = async (): Promise<void> => {
    try {
      await delNetwork(attachment.network, runtimeConfFor(ctx, attachment, 'DEL'), ctx);
      writeScratchCache(ctx.conf.cniDir, ctx.sandbox.containerId, cached);
    } catch (e) {
      // The attachment stays in the cache, so the pod's DEL still removes it.
      ctx.log.error(`${podTag(ctx)}: rollback of ${name}/${attachment.ifName} failed: ${messageOf(e)}`);
    }
  };
  let result: PluginResult;
  try {
    copyDeviceInfo(ctx, attachment);
    result = await addNetwork(attachment.network, runtimeConfFor(ctx, attachment, 'ADD'), ctx);
  } catch (e) {
    await rollback();
    throw wrapError(e, `${podTag(ctx, name)}: error adding container to network "${name}"`);
  }
  if (!ctx.conf.systemNamespaces.includes(pod.metadata.namespace)) {
    try {
      const entries = buildNetworkStatuses(attachment.displayName, result, false);
      await editNetworkStatus(
        deps.kube,
        pod,
        (current) => editStatusEntries(current, { remove: [attachment.ifName], add: entries }),
        ctx.log,
      );
    } catch (e) {
      await rollback();
      throw wrapError(e, podTag(ctx));
    }
  }
  await emitEvents(deps.kube, pod, addedInterfaceEvents(attachment, result), ctx.log);
  return result;
}

/**
 * Hot-unplug DEL of the attachment named `ctx.sandbox.ifName`. Not in the cache: `fallback` (the request's own
 * config) is deleted when given (an attachment someone else made), else nothing to do. The cache and the
 * status change only once the delegate's DEL succeeded; a failed DEL keeps both, so a retry still finds it.
 */
export async function hotplugDel(
  ctx: CallContext,
  pod: Pod | undefined,
  fallback: Delegate | undefined,
  deps: HotplugDeps,
): Promise<void> {
  const cached = readSandboxCache(ctx);
  const clusterIfName = clusterIfNameOf(ctx.conf.cniDir, ctx.sandbox.containerId, cached);
  const plan = planHotplugDel(cached, clusterIfName, ctx.sandbox.ifName);
  if (!plan) {
    if (!fallback) return ctx.log.verbose(`${podTag(ctx)}: no attachment ${ctx.sandbox.ifName} to remove`);
    const [attachment] = planAttachments(
      [{ ...fallback, request: { ...fallback.request, ifname: ctx.sandbox.ifName } }],
      clusterIfName,
    );
    await delNetwork(attachment!.network, runtimeConfFor(ctx, attachment!, 'DEL'), ctx);
    return;
  }
  const { attachment } = plan;
  const name = attachment.network.name;
  try {
    await delNetwork(attachment.network, runtimeConfFor(ctx, attachment, 'DEL'), ctx);
  } catch (e) {
    throw wrapError(e, `${podTag(ctx, name)}: error deleting ${attachment.ifName} of network "${name}"`);
  }
  writeScratchCache(ctx.conf.cniDir, ctx.sandbox.containerId, plan.cache);
  if (!pod) return;
  if (!ctx.conf.systemNamespaces.includes(pod.metadata.namespace)) {
    await editNetworkStatus(
      deps.kube,
      pod,
      (current) => editStatusEntries(current, { remove: [attachment.ifName], add: [] }),
      ctx.log,
    );
  }
  await emitEvents(deps.kube, pod, [removedInterfaceEvent(attachment.ifName, attachment.displayName)], ctx.log);
}

/** Hot-plug CHECK of the cached attachment named `ctx.sandbox.ifName`. */
export async function hotplugCheck(ctx: CallContext): Promise<void> {
  const cached = readSandboxCache(ctx);
  const clusterIfName = clusterIfNameOf(ctx.conf.cniDir, ctx.sandbox.containerId, cached);
  const attachment = cachedAttachments(cached, clusterIfName).find((a) => a.ifName === ctx.sandbox.ifName);
  if (!attachment) {
    throw new CniError(CniCode.InvalidConfig, `the pod has no attachment named "${ctx.sandbox.ifName}"`, {
      details: 'name an interface that was added to the pod',
    });
  }
  try {
    await checkNetwork(attachment.network, runtimeConfFor(ctx, attachment, 'CHECK'), ctx);
  } catch (e) {
    throw wrapError(e, `${podTag(ctx, attachment.network.name)}: error checking ${attachment.ifName}`);
  }
}
