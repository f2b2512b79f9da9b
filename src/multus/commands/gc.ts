/**
 * commands/gc.ts: CNI GC (orchestration, CNI spec 1.1).
 *
 * The runtime names the attachments of the multus network that are still valid
 * (`cni.dev/valid-attachments`, by container ID). Every delegate attachment in multus' own result cache that
 * belongs to another container is stale: it is deleted with the config and arguments recorded at ADD, and
 * that container's scratch cache goes with it. Then the cluster network gets GC with the attachments it
 * still has. Multus declares every cached entry valid, so its cache only grows (Multus #1488); without the
 * runtime's list nothing is deleted (conservative). Failures are collected, never stop the sweep.
 */
import { listResultCaches } from '../../store/result-cache.ts';
import { removeScratchCache } from '../../store/scratch-cache.ts';
import { parseNetwork } from '../../cni/network.ts';
import { resolveStaticNetworks } from '../conf.ts';
import type { GcAttachment } from '../../cni/delegate.ts';
import { delNetwork, runtimeConfFromCache, gcNetwork, joinErrors } from '../../cni/delegate.ts';
import { CniCode, CniError, wrapError } from '../../base/errors.ts';
import type { CallContext, CommandDeps } from './context.ts';

export async function cmdGc(ctx: CallContext, _deps: CommandDeps): Promise<void> {
  const { req, conf } = ctx;
  const valid = parseValidAttachments(req.config);
  const failures: CniError[] = [];
  if (valid) await deleteStale(ctx, new Set(valid.map((a) => a.containerID)), failures);
  const cluster = resolveStaticNetworks(conf, { clusterOnly: true })[0];
  if (cluster) {
    const remaining = listResultCaches(conf.cniDir)
      .flatMap(({ outcome }) => (outcome.kind === 'ok' ? [outcome.value] : []))
      .filter((e) => e.networkName === cluster.network.name && (!valid || valid.some((a) => a.containerID === e.containerId)))
      .map((e) => ({ containerID: e.containerId, ifname: e.ifName }));
    try {
      await gcNetwork(cluster.network, remaining, ctx.net);
    } catch (e) {
      failures.push(wrapError(e, `GC of network "${cluster.network.name}"`));
    }
  }
  if (failures.length > 0) throw joinErrors(failures);
}

function parseValidAttachments(config: Record<string, unknown>): GcAttachment[] | undefined {
  const list = config['cni.dev/valid-attachments'] ?? config['cni.dev/attachments'];
  if (list === undefined) return undefined;
  if (!Array.isArray(list) || !list.every((a) => a && typeof a === 'object' && typeof a.containerID === 'string')) {
    throw new CniError(CniCode.InvalidConfig, '"cni.dev/valid-attachments" must be a list of {"containerID", "ifname"} objects');
  }
  return list as GcAttachment[];
}

async function deleteStale(ctx: CallContext, validIds: Set<string>, failures: CniError[]): Promise<void> {
  const staleIds = new Set<string>();
  for (const { path, outcome } of listResultCaches(ctx.conf.cniDir)) {
    if (outcome.kind !== 'ok' || validIds.has(outcome.value.containerId) || !outcome.value.containerId) continue;
    const entry = outcome.value;
    try {
      await delNetwork(parseNetwork(entry.config), runtimeConfFromCache(entry), ctx.net);
      staleIds.add(entry.containerId);
    } catch (e) {
      failures.push(wrapError(e, `failed to delete stale attachment ${entry.containerId} ${entry.ifName} (${path})`));
    }
  }
  for (const id of staleIds) removeScratchCache(ctx.conf.cniDir, id);
}
