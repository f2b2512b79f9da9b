/** Calls a command the way handle() does: the call context first (host/prepare.ts builds it), then the command. */
import type { CniRequest } from '../../src/cni/request.ts';
import type { CallContext, CommandDeps } from '../../src/multus/commands/context.ts';
import { callContext } from '../../src/multus/commands/context.ts';
import type { MultusConf } from '../../src/multus/conf.ts';

export function withContext(req: CniRequest, conf: MultusConf, deps: CommandDeps): [CallContext<CniRequest>] {
  return [callContext(req, conf, deps)];
}
