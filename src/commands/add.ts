/**
 * commands/add.ts: CNI ADD (orchestration).
 *
 * Reads as the list of steps in docs/design.md: parse CNI_ARGS, wait for the default network, resolve the
 * delegates, plan the attachments (all validation before anything runs), save the scratch cache, add each
 * attachment in order, and return the cluster network's result in the multus config's cniVersion.
 * The first failure rolls back every attachment made so far (§8.3), so no interface or IP is left behind.
 */
import { removeScratchCache, writeScratchCache } from '../cache.ts';
import type { MultusConf } from '../conf.ts';
import { resolveStaticNetworks } from '../conf.ts';
import { addNetwork, delNetwork } from '../delegate.ts';
import { messageOf, wrapError } from '../errors.ts';
import type { Attachment } from '../plan.ts';
import { planAttachments, toCachedDelegate } from '../plan.ts';
import type { CniRequest } from '../request.ts';
import type { CniResult } from '../result.ts';
import { convertResult, normalizeResult } from '../result.ts';
import type { CallContext, CommandDeps } from './context.ts';
import { callContext, runtimeConfFor, waitUntilReady } from './context.ts';

export async function cmdAdd(req: CniRequest, conf: MultusConf, deps: CommandDeps): Promise<CniResult> {
  const ctx = callContext(req, conf, deps);
  await waitUntilReady(conf, deps);
  const delegates = resolveStaticNetworks(conf, { podNamespace: ctx.k8s.podNamespace });
  const attachments = planAttachments(
    delegates.map((d) => ({ ...d, request: {} })),
    req.ifName,
  );
  writeScratchCache(conf.cniDir, req.containerId, attachments.map(toCachedDelegate));
  const results = await addAttachments(ctx, attachments);
  return normalizeResult(convertResult(results[0]!, conf.cniVersion));
}

async function addAttachments(ctx: CallContext, attachments: Attachment[]): Promise<CniResult[]> {
  const results: CniResult[] = [];
  for (const [index, attachment] of attachments.entries()) {
    try {
      results.push(await addNetwork(attachment.network, runtimeConfFor(ctx, attachment, 'ADD'), ctx.net));
    } catch (e) {
      await rollback(ctx, attachments.slice(0, index + 1));
      const name = attachment.network.name;
      throw wrapError(e, `[${ctx.pod}:${name}]: error adding container to network "${name}"`);
    }
  }
  return results;
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
      ctx.net.log.error(`[${ctx.pod}]: rollback of ${attachment.network.name}/${attachment.ifName} failed: ${messageOf(e)}`);
    }
  }
  if (clean) removeScratchCache(ctx.conf.cniDir, ctx.req.containerId);
}
