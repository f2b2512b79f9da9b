/**
 * commands/status.ts: CNI STATUS (orchestration, CNI spec 1.1).
 *
 * Waits for the readiness indicator file, then asks the cluster network (delegates[0]) whether it can serve
 * ADD; a delegate's own error code (50, 51, ...) passes through unchanged. A cluster network below 1.1.0
 * cannot answer STATUS and is taken as ready, as libcni does.
 */
import { resolveStaticNetworks } from '../conf.ts';
import { statusNetwork } from '../../cni/libcni.ts';
import { wrapError } from '../../base/errors.ts';
import type { CallContext, CommandDeps } from './context.ts';

export async function cmdStatus(ctx: CallContext, _deps: CommandDeps): Promise<void> {
  const { conf } = ctx;
  const cluster = resolveStaticNetworks(conf, { clusterOnly: true })[0];
  if (!cluster) return;
  try {
    await statusNetwork(cluster.network, ctx.net);
  } catch (e) {
    throw wrapError(e, `error in STATUS command for network "${cluster.network.name}"`);
  }
}
