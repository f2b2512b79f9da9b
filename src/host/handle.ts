/**
 * host/handle.ts: one CNI request in, one answer out: `handle(host, { env, stdin })`.
 *
 * The thin executable calls it once; the resident daemon calls it for every request it serves; the protocol
 * tests call it in-process. The steps: the command from CNI_COMMAND, the request (skel's env, config and
 * version rules, cni/request.ts), the multus config, the request's logger, the netns rule, the readiness rule,
 * then the command. Every failure becomes a CNI error JSON on stdout with exit code 1; anything that is not a
 * CniError is code 999 and its stack goes to the log, never to stdout. Results and errors are printed indented
 * by 4 spaces, as skel prints them.
 */
import { CniCode, CniError, isCniError, toCniError } from '../base/errors.ts';
import type { FileLock } from '../base/file-lock.ts';
import { lockFile } from '../base/file-lock.ts';
import { assertSafeComponent } from '../base/files.ts';
import { UnsafeDirError, securePrivateDir } from '../base/private-dir.ts';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from '../base/log.ts';
import { silentLogger } from '../base/log.ts';
import { CURRENT_VERSION } from '../base/versions.ts';
import { checkNetns } from '../cni/netns.ts';
import type { CniRequest, Command, Env } from '../cni/request.ts';
import { aboutText, parseCommand, parseRequest, versionInfo } from '../cni/request.ts';
import { cmdAdd } from '../multus/commands/add.ts';
import { cmdCheck } from '../multus/commands/check.ts';
import type { CallContext, CommandDeps } from '../multus/commands/context.ts';
import { callContext, noteReadiness, waitUntilReady } from '../multus/commands/context.ts';
import { cmdDel } from '../multus/commands/del.ts';
import { cmdGc } from '../multus/commands/gc.ts';
import { cmdStatus } from '../multus/commands/status.ts';
import type { MultusConf } from '../multus/conf.ts';
import { parseMultusConf } from '../multus/conf.ts';
import { scratchCachePath } from '../multus/scratch-cache.ts';
import type { Host } from './host.ts';
import { commandDeps } from './host.ts';

export const VERSION = '0.1.0';

/** One CNI call as a process edge hands it in: the thin plugin's own environment, or a daemon request's. */
export interface CniCall {
  env: Env;
  stdin: Buffer;
  /** Set by the process edge when a CNI_* variable held bytes `env` cannot carry (host/raw-env.ts). */
  envProblem?: CniError;
}

export interface CniAnswer {
  exitCode: number;
  /** What goes to stdout: `result` or `error` as skel prints them, or nothing. */
  stdout: string;
  /** What goes to stderr besides the log (the about text of an empty CNI_COMMAND). */
  stderr: string;
  /** What the call answered when it succeeded (a result, the VERSION reply), undefined when nothing. */
  result?: unknown;
  /** The CNI error when the call failed (the daemon maps its code to an HTTP status). */
  error?: CniError;
  /** The version the answer is written in: the request's config version, else the current one. */
  cniVersion: string;
}

type RequestCommand = Exclude<Command, 'VERSION'>;

interface CommandRule {
  cmd(ctx: CallContext<CniRequest>, deps: CommandDeps): Promise<unknown>;
  /** ADD, STATUS and GC wait for the readiness indicator file; DEL only notes its absence; CHECK ignores it. */
  readiness: 'wait' | 'note' | 'none';
  /** ADD and CHECK need CNI_NETNS to exist; DEL accepts a namespace that is already gone. */
  netnsMustExist: boolean;
  /** ADD, CHECK and DEL of one container run one at a time, also across processes (lockContainer). */
  locks: boolean;
}

/**
 * The dispatch table, one row per command (skel's CNIFuncs). The env table and the minimum config version of
 * each command are protocol rules and live with the request decoding in cni/request.ts.
 */
const COMMANDS: Readonly<Record<RequestCommand, CommandRule>> = {
  ADD: { cmd: cmdAdd, readiness: 'wait', netnsMustExist: true, locks: true },
  DEL: { cmd: cmdDel, readiness: 'note', netnsMustExist: false, locks: true },
  CHECK: { cmd: cmdCheck, readiness: 'none', netnsMustExist: true, locks: true },
  STATUS: { cmd: cmdStatus, readiness: 'wait', netnsMustExist: false, locks: false },
  GC: { cmd: cmdGc, readiness: 'wait', netnsMustExist: false, locks: false },
};

export async function handle(host: Host, call: CniCall): Promise<CniAnswer> {
  let cniVersion = CURRENT_VERSION;
  let log: Logger = silentLogger;
  try {
    const command = parseCommand(call.env);
    if (command === '') return { exitCode: 0, stdout: '', stderr: aboutText(VERSION), cniVersion };
    if (command === 'VERSION') {
      const info = versionInfo(); // skel prints the VERSION reply compact
      return { exitCode: 0, stdout: JSON.stringify(info) + '\n', stderr: '', result: info, cniVersion };
    }
    const req = parseRequest(command, call.env, call.stdin);
    cniVersion = req.cniVersion;
    const conf = parseMultusConf(req.config);
    log = host.logger(conf);
    for (const warning of conf.warnings) log.warn(warning);
    if (call.envProblem && command !== 'DEL') throw call.envProblem;
    // DEL must complete: an ADD with these bytes was refused, so no delegate ever saw them.
    if (call.envProblem) log.error(`${call.envProblem.msg}; DEL goes on with the value as Node decoded it`);
    return answer(await dispatch(req, conf, commandDeps(host, call.env, log)), cniVersion);
  } catch (e) {
    const error = toCniError(e);
    log.error(`${error.msg}${error.details ? ` (${error.details})` : ''}`);
    if (!isCniError(e) && e instanceof Error && e.stack) log.debug(e.stack);
    return { exitCode: 1, stdout: pretty(error.toJSON(cniVersion)), stderr: '', error, cniVersion };
  }
}

function answer(result: unknown, cniVersion: string): CniAnswer {
  if (result === undefined) return { exitCode: 0, stdout: '', stderr: '', cniVersion };
  return { exitCode: 0, stdout: pretty(result), stderr: '', result, cniVersion };
}

/** compat: skel prints results and errors indented by 4 spaces (types.prettyPrint). */
function pretty(value: unknown): string {
  return JSON.stringify(value, null, 4) + '\n';
}

/** The cache dir is root's alone, or no call touches it (base/private-dir.ts; issue 28). */
function secureCacheDir(cniDir: string, log: Logger): void {
  try {
    const note = securePrivateDir(cniDir, 'cniDir', ['results']);
    if (note) log.warn(note);
  } catch (e) {
    if (!(e instanceof UnsafeDirError)) throw e;
    throw new CniError(CniCode.InvalidConfig, e.message, {
      details: 'the cache dir holds what DEL runs: only root may write to it and to every directory above it',
    });
  }
}

async function dispatch(req: CniRequest, conf: MultusConf, deps: CommandDeps): Promise<unknown> {
  const rule = COMMANDS[req.command as RequestCommand];
  deps.log.verbose(
    `${req.command} containerId=${req.containerId} netns=${req.netns} ifname=${req.ifName} args=${req.args}`,
  );
  const checked = checkNetns(req, rule.netnsMustExist);
  secureCacheDir(conf.cniDir, deps.log);
  const ctx = callContext(checked, conf, deps); // CNI_ARGS are decoded here, before any wait (Multus' order)
  if (rule.readiness === 'wait') await waitUntilReady(conf, deps);
  if (rule.readiness === 'note') await noteReadiness(conf, deps);
  if (!rule.locks) return rule.cmd(ctx, deps);
  const lock = await lockContainer(conf, checked);
  try {
    return await rule.cmd(ctx, deps);
  } finally {
    // the lock file lives as long as the container's scratch cache: it goes after a DEL and a rolled-back ADD
    if (existsSync(scratchCachePath(conf.cniDir, req.containerId))) lock.release();
    else lock.releaseAndRemove();
  }
}

/**
 * The container's lock, `<cniDir>/.lock-<containerID>` (a name no container ID has): a DEL that comes while an ADD
 * of the same container runs (in this process or another) waits for it, for at most delegateTimeoutSeconds, then
 * fails with code 11 for the runtime to retry (issue 28, docs/reliability.md). Removed when the container has no
 * scratch cache after the call (a DEL, an ADD that rolled back).
 */
async function lockContainer(conf: MultusConf, req: CniRequest): Promise<FileLock> {
  assertSafeComponent(req.containerId, 'container ID');
  const lock = await lockFile(join(conf.cniDir, `.lock-${req.containerId}`), conf.delegateTimeoutMs);
  if (lock !== 'timeout') return lock;
  throw new CniError(
    CniCode.TryAgainLater,
    `another call for container ${req.containerId} is still running after ${conf.delegateTimeoutMs / 1000} s`,
    { details: 'an ADD, CHECK or DEL of the same container holds its lock; retry when it is done' },
  );
}
