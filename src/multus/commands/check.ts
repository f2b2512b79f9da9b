/**
 * commands/check.ts: CNI CHECK (orchestration).
 *
 * Checks every attachment ADD recorded in the scratch cache, in order, each against its cached result
 * (Multus checks only the static `delegates`, so annotation networks were never checked: docs/compatibility.md).
 * Without a scratch cache it checks the config's delegates. Networks below 0.4.0 cannot CHECK and are
 * skipped. All failures are reported together.
 * Tested by test/unit/multus/commands.test.ts.
 */
import { readScratchCache } from '../scratch-cache.ts';
import { resolveStaticNetworks } from '../conf.ts';
import { checkNetwork, joinErrors } from '../../cni/libcni.ts';
import type { CniError } from '../../base/errors.ts';
import { wrapError } from '../../base/errors.ts';
import type { Delegate } from '../attachments.ts';
import { cachedRoles, fromCachedDelegates, inheritListVersion, planAttachments } from '../attachments.ts';
import type { CallContext } from './context.ts';
import { podTag, runtimeConfFor } from './context.ts';

export async function cmdCheck(ctx: CallContext): Promise<void> {
  const { req } = ctx;
  const attachments = planAttachments(inheritListVersion(recordedDelegates(ctx), ctx.conf.cniVersion), req.ifName);
  const failures: CniError[] = [];
  for (const attachment of attachments) {
    const name = attachment.network.name;
    if (attachment.source === 'auxiliary') continue; // it makes no interface of its own (docs/behaviour.md#aux-chain)
    try {
      const checked = await checkNetwork(attachment.network, runtimeConfFor(ctx, attachment, 'CHECK'), ctx.net);
      if (!checked)
        ctx.net.log.verbose(
          `${podTag(ctx)}: skipped CHECK of ${name} (cniVersion ${attachment.network.cniVersion} or disableCheck)`,
        );
    } catch (e) {
      failures.push(wrapError(e, `${podTag(ctx, name)}: error checking ${attachment.ifName} of network "${name}"`));
    }
  }
  if (failures.length > 0) throw joinErrors(failures);
}

function recordedDelegates(ctx: CallContext): Delegate[] {
  const scratch = readScratchCache(ctx.conf.cniDir, ctx.req.containerId);
  if (scratch.kind === 'ok') return fromCachedDelegates(scratch.value, cachedRoles(ctx.conf, ctx.k8s.podNamespace));
  if (scratch.kind === 'corrupt') {
    ctx.net.log.error(
      `${podTag(ctx)}: scratch cache unreadable, checking the config's delegates: ${scratch.error.msg}`,
    );
  }
  return resolveStaticNetworks(ctx.conf, { podNamespace: ctx.k8s.podNamespace });
}
