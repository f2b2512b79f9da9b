/**
 * host/prepare.ts: the one front door of every call that runs delegates: `prepare(host, input, run)`.
 *
 * Every door hands in typed domain data, a `DoorInput` (`{op, sandbox: {containerId, netns, ifName, pod}, conf}`,
 * in the spirit of libcni's RuntimeConf; multus/call-context.ts): the CNI door (host/handle.ts: the thin plugin
 * and the daemon's `/cni`) parses the CNI wire at its edge, `POST /delegate` (hotplug/delegate.ts) at its own, and
 * dynamic networks (hotplug/dynamic.ts) build the input from the pod they watch. Each call then gets the same rules
 * in the same order: the request's logger from the multus config, the config's warnings, a CNI_* value Node could
 * not carry (refused but on DEL), the netns rule of the operation, the cache dir's owner and modes (issue 28), the
 * call context, the readiness rule of the operation, and, for ADD, CHECK and DEL, the container's lock around
 * `run` (docs/design.md, "The path of one request"; docs/reliability.md). Namespace isolation, the other rule
 * every door keeps, is multus/pod-delegates.ts `assertIsolation`, with its one message.
 * Tested by test/unit/host/prepare.test.ts, test/unit/host/handle.test.ts (the CNI door),
 * test/unit/hotplug/delegate.test.ts and test/unit/hotplug/dynamic.test.ts (the other two doors).
 */
import { join } from 'node:path';
import { CniCode, CniError } from '../base/errors.ts';
import type { FileLock } from '../base/file-lock.ts';
import { assertSafeComponent } from '../base/files.ts';
import { UnsafeDirError, securePrivateDir } from '../base/private-dir.ts';
import { checkNetns } from '../cni/netns.ts';
import type { RequestCommand } from '../cni/request.ts';
import type { CallContext, DoorInput } from '../multus/call-context.ts';
import { callContext, noteReadiness, waitUntilReady } from '../multus/call-context.ts';
import type { MultusConf } from '../multus/conf.ts';
import type { Host } from './host.ts';

interface OpRule {
  /** ADD, STATUS and GC wait for the readiness indicator file; DEL only notes its absence; CHECK ignores it. */
  readiness: 'wait' | 'note' | 'none';
  /** ADD and CHECK need CNI_NETNS to exist; DEL accepts a namespace that is already gone. */
  netnsMustExist: boolean;
  /** ADD, CHECK and DEL of one container run one at a time, also across processes. */
  locked: boolean;
}

/** One row per operation (the env table and the minimum config versions are cni/request.ts'). */
const RULES: Readonly<Record<RequestCommand, OpRule>> = {
  ADD: { readiness: 'wait', netnsMustExist: true, locked: true },
  DEL: { readiness: 'note', netnsMustExist: false, locked: true },
  CHECK: { readiness: 'none', netnsMustExist: true, locked: true },
  STATUS: { readiness: 'wait', netnsMustExist: false, locked: false },
  GC: { readiness: 'wait', netnsMustExist: false, locked: false },
};

/** Prepares the call (the rules above, in order), then runs `run` over its context, under the container's lock. */
export async function prepare<T>(host: Host, input: DoorInput, run: (ctx: CallContext) => Promise<T>): Promise<T> {
  const { op, conf, sandbox } = input;
  const log = host.logger(conf);
  for (const warning of conf.warnings) log.warn(warning);
  if (input.envProblem && op !== 'DEL') throw input.envProblem;
  // DEL must complete: an ADD with these bytes was refused, so no delegate ever saw them.
  if (input.envProblem) log.error(`${input.envProblem.msg}; DEL goes on with the value as Node decoded it`);
  const rule = RULES[op];
  log.verbose(`${op} containerId=${sandbox.containerId} netns=${sandbox.netns} ifname=${sandbox.ifName}`);
  // on DEL, GC and STATUS a CNI_NETNS that is not a network namespace goes as a missing one (cni/netns.ts)
  const netns = checkNetns({ netns: sandbox.netns, netnsOverride: input.netnsOverride ?? false }, rule.netnsMustExist);
  secureCacheDir(conf.cniDir);
  const checked = { ...input, sandbox: { ...sandbox, netns: netns.netns } };
  const ctx = callContext(checked, host, log);
  if (rule.readiness === 'wait') await waitUntilReady(ctx);
  if (rule.readiness === 'note') await noteReadiness(ctx);
  if (!rule.locked) return run(ctx);
  const lock = await lockContainer(host, conf, sandbox.containerId);
  try {
    return await run(ctx);
  } finally {
    lock.release();
  }
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

/**
 * The container's lock, named by `<cniDir>/.lock-<containerID>` (no file is made: base/file-lock.ts, so none is
 * left beside the scratch cache for a roll back to Go Multus, whose DEL knows nothing of it; finding 5): a DEL that
 * comes while an ADD of the same container runs (in this process or another, through any door) waits for it, for
 * at most delegateTimeoutSeconds, then fails with code 11 for the runtime to retry (issue 28, docs/reliability.md).
 */
async function lockContainer(host: Host, conf: MultusConf, containerId: string): Promise<FileLock> {
  assertSafeComponent(containerId, 'container ID');
  const lock = await host.lock(join(conf.cniDir, `.lock-${containerId}`), conf.delegateTimeoutMs);
  if (lock !== 'timeout') return lock;
  throw new CniError(
    CniCode.TryAgainLater,
    `another call for container ${containerId} is still running after ${conf.delegateTimeoutMs / 1000} s`,
    { details: 'an ADD, CHECK or DEL of the same container holds its lock; retry when it is done' },
  );
}
