/**
 * commands/check.ts: CNI CHECK (orchestration).
 *
 * Checks every attachment ADD recorded in the scratch cache, in order (with parallelAttachments, several at once:
 * docs/behaviour.md#parallel-attachments), each against its cached result
 * (Multus checks only the static `delegates`, so annotation networks were never checked: docs/compatibility.md).
 * Without a scratch cache it checks the config's delegates. Networks below 0.4.0 cannot CHECK and are
 * skipped. All failures are reported together.
 * Tested by test/unit/multus/commands.test.ts.
 */
import { readScratchCache } from '../scratch-cache.ts';
import { resolveStaticNetworks } from '../conf.ts';
import { checkNetwork, joinErrors } from '../../cni/libcni.ts';
import { wrapError } from '../../base/errors.ts';
import type { Delegate } from '../attachments.ts';
import { cachedRoles, fromCachedDelegates, inheritListVersion, planAttachments } from '../attachments.ts';
import type { CallContext } from '../call-context.ts';
import { podTag, runtimeConfFor } from '../call-context.ts';
import { runAttachments } from '../overlap.ts';

export async function cmdCheck(ctx: CallContext): Promise<void> {
  const { sandbox } = ctx;
  const planned = planAttachments(inheritListVersion(recordedDelegates(ctx), ctx.conf.cniVersion), sandbox.ifName);
  // The auxiliary chain makes no interface of its own (docs/behaviour.md#aux-chain).
  const attachments = planned.filter((a) => a.source !== 'auxiliary');
  // CHECK changes nothing, so with parallelAttachments the cluster network need not go first.
  const run = await runAttachments(
    attachments.map(() => ({})),
    { parallel: ctx.conf.parallelAttachments },
    async (i) => {
      const { network } = attachments[i]!;
      const checked = await checkNetwork(network, runtimeConfFor(ctx, attachments[i]!, 'CHECK'), ctx);
      if (!checked)
        ctx.log.verbose(
          `${podTag(ctx)}: skipped CHECK of ${network.name} (cniVersion ${network.cniVersion} or disableCheck)`,
        );
    },
  );
  const failures = run.failures.map(({ index, error }) => {
    const { network, ifName } = attachments[index]!;
    return wrapError(error, `${podTag(ctx, network.name)}: error checking ${ifName} of network "${network.name}"`);
  });
  if (failures.length > 0) throw joinErrors(failures);
}

function recordedDelegates(ctx: CallContext): Delegate[] {
  const scratch = readScratchCache(ctx.conf.cniDir, ctx.sandbox.containerId);
  if (scratch.kind === 'ok')
    return fromCachedDelegates(scratch.value, cachedRoles(ctx.conf, ctx.sandbox.pod.podNamespace));
  if (scratch.kind === 'corrupt') {
    ctx.log.error(`${podTag(ctx)}: scratch cache unreadable, checking the config's delegates: ${scratch.error.msg}`);
  }
  return resolveStaticNetworks(ctx.conf, { podNamespace: ctx.sandbox.pod.podNamespace });
}
