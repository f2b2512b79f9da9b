/**
 * commands/gc.ts: CNI GC (orchestration, CNI spec 1.1).
 *
 * The runtime names the attachments of the multus network that are still valid (`cni.dev/valid-attachments`,
 * by container ID). Every delegate attachment in multus' own result cache that belongs to another container is
 * stale: it is deleted with the config and arguments recorded at ADD, then the attachments that container's
 * scratch cache lists without a result cache (an ADD cut short after a plugin may have reserved something), and
 * that container's scratch cache goes with them. Then every configured or cached network gets GC with its own
 * attachments that are still valid, and temp files of interrupted writes are swept. Multus declares every cached
 * entry valid, so its cache only grows (k8snetworkplumbingwg/multus-cni#1488); without the runtime's list nothing
 * is deleted (conservative). Failures are collected, never stop the sweep.
 * Tested by test/unit/multus/commands.test.ts, test/unit/multus/reliability.test.ts.
 */
import type { ResultCacheEntry } from '../../cni/result-cache.ts';
import { listResultCaches } from '../../cni/result-cache.ts';
import { readScratchCache, removeScratchCache } from '../scratch-cache.ts';
import { fromCachedDelegates, planAttachments } from '../attachments.ts';
import { parseNetwork } from '../../cni/network.ts';
import { resolveStaticNetworks } from '../conf.ts';
import type { GcAttachment } from '../../cni/libcni.ts';
import { delNetwork, runtimeConfFromCache, gcNetwork, joinErrors } from '../../cni/libcni.ts';
import { CniCode, CniError, messageOf, wrapError } from '../../base/errors.ts';
import type { Network } from '../../cni/network.ts';
import { sweepCacheTemps } from '../sweep.ts';
import type { Delegate } from '../attachments.ts';
import type { CallContext } from '../call-context.ts';

export async function cmdGc(ctx: CallContext): Promise<void> {
  const { conf } = ctx;
  const valid = parseValidAttachments(conf.raw);
  const failures: CniError[] = [];
  if (valid) await deleteStale(ctx, new Set(valid.map((a) => a.containerID)), failures);
  for (const path of sweepCacheTemps(conf.cniDir)) ctx.log.verbose(`removed ${path}, left by an interrupted write`);
  for (const { network, attachments } of gcTargets(ctx, valid, failures)) {
    try {
      await gcNetwork(network, attachments, ctx);
    } catch (e) {
      failures.push(wrapError(e, `GC of network "${network.name}"`));
    }
  }
  if (failures.length > 0) throw joinErrors(failures);
}

/**
 * Every network that is configured (cluster and default networks, or the delegates) or has cached attachments
 * (NAD networks, delegates since removed from the config), each with its own still-valid attachments, so each
 * plugin can collect what it holds for attachments multus-ts never recorded. A configured network's current
 * config wins over a cached one of the same name.
 */
function gcTargets(ctx: CallContext, valid: GcAttachment[] | undefined, failures: CniError[]) {
  const targets = new Map<string, { network: Network; attachments: GcAttachment[] }>();
  for (const { network } of configuredNetworks(ctx, failures)) {
    if (!targets.has(network.name)) targets.set(network.name, { network, attachments: [] });
  }
  const validIds = valid && new Set(valid.map((a) => a.containerID));
  const entries = listResultCaches(ctx.conf.cniDir).flatMap(({ outcome }) =>
    outcome.kind === 'ok' ? [outcome.value] : [],
  );
  for (const e of entries) {
    if (!e.networkName || !e.containerId || !e.ifName || (validIds && !validIds.has(e.containerId))) continue;
    let target = targets.get(e.networkName);
    if (!target) {
      try {
        target = { network: parseNetwork(e.config), attachments: [] };
      } catch (err) {
        ctx.log.error(`GC skips network "${e.networkName}": its cached config is unusable: ${messageOf(err)}`);
        continue;
      }
      targets.set(e.networkName, target);
    }
    target.attachments.push({ containerID: e.containerId, ifname: e.ifName });
  }
  return [...targets.values()];
}

function parseValidAttachments(config: Record<string, unknown>): GcAttachment[] | undefined {
  const key = ['cni.dev/valid-attachments', 'cni.dev/attachments'].find((k) => Object.hasOwn(config, k));
  if (key === undefined) return undefined;
  const list = config[key];
  // libcni sends null when the runtime has no valid attachment on the network (a nil Go slice: CRI-O's GC on
  // start with no pods): an empty list, as a Go plugin reads it (docs/archive/kubernetes-tests.md, "CRI-O")
  if (list === null) return [];
  if (!Array.isArray(list) || !list.every((a) => a && typeof a === 'object' && typeof a.containerID === 'string')) {
    throw new CniError(
      CniCode.InvalidConfig,
      '"cni.dev/valid-attachments" must be a list of {"containerID", "ifname"} objects',
    );
  }
  return list as GcAttachment[];
}

async function deleteStale(ctx: CallContext, validIds: Set<string>, failures: CniError[]): Promise<void> {
  const stale = new Map<string, { entries: ResultCacheEntry[]; ok: boolean }>();
  for (const { path, outcome } of listResultCaches(ctx.conf.cniDir)) {
    if (outcome.kind !== 'ok' || validIds.has(outcome.value.containerId) || !outcome.value.containerId) continue;
    const entry = outcome.value;
    const container = stale.get(entry.containerId) ?? { entries: [], ok: true };
    stale.set(entry.containerId, container);
    container.entries.push(entry);
    try {
      await delNetwork(parseNetwork(entry.config), runtimeConfFromCache(entry), ctx);
    } catch (e) {
      container.ok = false;
      failures.push(wrapError(e, `failed to delete stale attachment ${entry.containerId} ${entry.ifName} (${path})`));
    }
  }
  for (const [id, container] of stale) {
    if (!(await deleteUnrecorded(ctx, id, container.entries, failures)) || !container.ok) continue;
    removeScratchCache(ctx.conf.cniDir, id);
  }
}

/**
 * The attachments of a stale container that its scratch cache lists but no result cache records: an ADD cut
 * short (killed, timed out) after the scratch cache was written, whose plugin may hold something already (an
 * IPAM reservation). Each gets its DEL with the container's netns and arguments from its other attachments'
 * caches. Returns false when one of them failed (the scratch cache then stays, for the next GC or the DEL).
 */
async function deleteUnrecorded(
  ctx: CallContext,
  id: string,
  entries: ResultCacheEntry[],
  failures: CniError[],
): Promise<boolean> {
  const scratch = readScratchCache(ctx.conf.cniDir, id);
  if (scratch.kind !== 'ok' || !entries[0]) return true;
  const delegates = fromCachedDelegates(scratch.value);
  const clusterIfName = entries.find((e) => e.networkName === delegates[0]?.network.name)?.ifName ?? 'eth0';
  const recorded = new Set(entries.map((e) => `${e.networkName}\0${e.ifName}`));
  let ok = true;
  let attachments;
  try {
    attachments = planAttachments(delegates, clusterIfName);
  } catch (e) {
    failures.push(wrapError(e, `the scratch cache of stale container ${id} is unusable`));
    return false;
  }
  for (const a of attachments) {
    if (recorded.has(`${a.network.name}\0${a.ifName}`)) continue;
    const rt = { ...runtimeConfFromCache(entries[0]), ifName: a.ifName, capabilityArgs: {} };
    try {
      await delNetwork(a.network, rt, ctx);
    } catch (e) {
      ok = false;
      failures.push(wrapError(e, `failed to delete stale attachment ${id} ${a.ifName} (an ADD cut short)`));
    }
  }
  return ok;
}

/**
 * The cluster network must resolve (a failure is reported, as before). Default networks are usually NADs, which
 * GC has no pod to look up with: when they do not resolve from files, they are reached through their cached
 * attachments only.
 */
function configuredNetworks(ctx: CallContext, failures: CniError[]): Delegate[] {
  try {
    return resolveStaticNetworks(ctx.conf);
  } catch (e) {
    ctx.log.verbose(`GC: default networks not resolvable from files (${messageOf(e)}); using their caches`);
  }
  try {
    return resolveStaticNetworks(ctx.conf, { clusterOnly: true });
  } catch (e) {
    failures.push(wrapError(e, 'GC cannot resolve the cluster network'));
    return [];
  }
}
