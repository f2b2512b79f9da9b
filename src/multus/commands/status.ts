/**
 * commands/status.ts: CNI STATUS (orchestration, CNI spec 1.1; what it asks and why: docs/behaviour.md#status).
 *
 * Waits for the readiness indicator file, then asks the cluster network (delegates[0], or clusterNetwork resolved as
 * ADD resolves it: a plain name is a NAD first, so only such a config makes an API request) whether it can serve
 * ADD; a delegate's own error (code 50, 51, ... and its message) passes through unchanged, as Multus returns
 * libcni's *types.Error as it is; only a plugin that could not be run gets the network's name as context.
 * A cluster network below 1.1.0 cannot answer STATUS and is taken as ready, as libcni does.
 * Tested by test/unit/multus/commands.test.ts, test/unit/multus/kube-commands.test.ts.
 */
import { clusterNetworkDelegate } from '../podnetworks.ts';
import { PluginNotRunnable, statusNetwork } from '../../cni/libcni.ts';
import { CniError, wrapError } from '../../base/errors.ts';
import type { CallContext } from '../call-context.ts';

export async function cmdStatus(ctx: CallContext): Promise<void> {
  const { conf } = ctx;
  const name = conf.clusterNetwork;
  const kube = name !== '' && !name.includes('/') ? await ctx.kube() : undefined;
  const cluster = await clusterNetworkDelegate(conf, kube);
  if (!cluster) return;
  try {
    await statusNetwork(cluster.network, ctx);
  } catch (e) {
    if (e instanceof CniError && !(e instanceof PluginNotRunnable)) throw e;
    throw wrapError(e, `error in STATUS command for network "${cluster.network.name}"`);
  }
}
