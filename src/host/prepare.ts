/**
 * host/prepare.ts: the one front door of every call that runs delegates: `prepare(host, call) → CallContext`.
 *
 * The CNI path (host/handle.ts: the thin plugin and the daemon's `/cni`), `POST /delegate` (hotplug/delegate.ts)
 * and dynamic networks (hotplug/dynamic.ts, which hands the pod in typed) all come through here, so each gets the
 * same steps in the same order: the request's logger from the multus config, the config's warnings, a CNI_*
 * value Node could not carry (refused but on DEL), the netns rule of the command, the cache dir's owner and modes
 * (issue 28), the call context (CNI_ARGS parsed once), and the readiness rule of the command (docs/design.md, "The path of one request").
 * Tested by test/unit/host/handle.test.ts (the CNI path), test/unit/hotplug/delegate.test.ts and
 * test/unit/hotplug/dynamic.test.ts (the other two doors).
 */
import { CniCode, CniError } from '../base/errors.ts';
import { UnsafeDirError, securePrivateDir } from '../base/private-dir.ts';
import type { K8sArgs } from '../cni/cniargs.ts';
import { checkNetns } from '../cni/netns.ts';
import type { CallEnv, Env, RequestCommand } from '../cni/request.ts';
import type { CallContext } from '../multus/call-context.ts';
import { callContext, noteReadiness, waitUntilReady } from '../multus/call-context.ts';
import type { MultusConf } from '../multus/conf.ts';
import type { Host } from './host.ts';
import { commandDeps } from './host.ts';

/** A request any door decoded: the command and the checked CNI_* variables (a CniRequest, a DelegateRequest). */
export interface DoorRequest extends CallEnv {
  command: RequestCommand;
}

/** One call as a door hands it in. */
export interface Call<R extends DoorRequest> {
  req: R;
  conf: MultusConf;
  /** The environment delegates inherit. */
  env: Env;
  /** The pod, typed by the caller (dynamic networks); otherwise CNI_ARGS name it. */
  k8s?: K8sArgs;
  /** Set by the process edge when a CNI_* variable held bytes `env` cannot carry (host/raw-env.ts). */
  envProblem?: CniError;
  /** The call's cancel signal, handed to every delegate it runs (cni/exec.ts). */
  signal?: AbortSignal;
}

interface CommandRule {
  /** ADD, STATUS and GC wait for the readiness indicator file; DEL only notes its absence; CHECK ignores it. */
  readiness: 'wait' | 'note' | 'none';
  /** ADD and CHECK need CNI_NETNS to exist; DEL accepts a namespace that is already gone. */
  netnsMustExist: boolean;
}

/** One row per command (the env table and the minimum config versions are cni/request.ts'). */
const RULES: Readonly<Record<RequestCommand, CommandRule>> = {
  ADD: { readiness: 'wait', netnsMustExist: true },
  DEL: { readiness: 'note', netnsMustExist: false },
  CHECK: { readiness: 'none', netnsMustExist: true },
  STATUS: { readiness: 'wait', netnsMustExist: false },
  GC: { readiness: 'wait', netnsMustExist: false },
};

export async function prepare<R extends DoorRequest>(host: Host, call: Call<R>): Promise<CallContext<R>> {
  const { req, conf } = call;
  const log = host.logger(conf);
  for (const warning of conf.warnings) log.warn(warning);
  if (call.envProblem && req.command !== 'DEL') throw call.envProblem;
  // DEL must complete: an ADD with these bytes was refused, so no delegate ever saw them.
  if (call.envProblem) log.error(`${call.envProblem.msg}; DEL goes on with the value as Node decoded it`);
  const rule = RULES[req.command];
  log.verbose(`${req.command} containerId=${req.containerId} netns=${req.netns} ifname=${req.ifName} args=${req.args}`);
  // on DEL, GC and STATUS a CNI_NETNS that is not a network namespace goes as a missing one (cni/netns.ts)
  const checked = checkNetns(req, rule.netnsMustExist);
  secureCacheDir(conf.cniDir);
  // CNI_ARGS are decoded here, before any wait (Multus' order)
  const ctx = callContext(checked, conf, commandDeps(host, call.env, log), call.k8s, call.signal);
  if (rule.readiness === 'wait') await waitUntilReady(ctx);
  if (rule.readiness === 'note') await noteReadiness(ctx);
  return ctx;
}

/** The cache dir is root's alone, or no call touches it (base/private-dir.ts; issue 28, docs/reliability.md). */
function secureCacheDir(cniDir: string): void {
  try {
    securePrivateDir(cniDir, 'cniDir', ['results']);
  } catch (e) {
    if (!(e instanceof UnsafeDirError)) throw e;
    throw new CniError(CniCode.InvalidConfig, e.message, {
      details: 'the cache dir holds what DEL runs: only root may write to it and to every directory above it',
    });
  }
}
