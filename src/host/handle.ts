/**
 * host/handle.ts: one CNI request in, one answer out: `handle(host, { env, stdin })`.
 *
 * The thin executable calls it once; the resident daemon calls it for every request it serves; the protocol
 * tests call it in-process. The steps: the command from CNI_COMMAND, the request (skel's env, config and
 * version rules, cni/request.ts), the multus config, then the front door every call goes through (host/prepare.ts:
 * the request's logger, the netns rule, the cache dir's owner, the call context, the readiness rule), then the
 * command, under the container's lock for ADD, CHECK and DEL. Every failure becomes a CNI error JSON on stdout with exit code 1; anything that is not a
 * CniError is code 999 and its stack goes to the log, never to stdout. Results and errors are printed indented
 * by 4 spaces, as skel prints them.
 */
import type { CniError } from '../base/errors.ts';
import { isCniError, toCniError } from '../base/errors.ts';
import { parseCniArgs, parseK8sArgs } from '../cni/cniargs.ts';
import type { Exec } from '../cni/exec.ts';
import type { Logger } from '../base/log.ts';
import { silentLogger } from '../base/log.ts';
import { CURRENT_VERSION } from '../base/versions.ts';
import type { CniRequest, Env, RequestCommand } from '../cni/request.ts';
import { aboutText, parseCommand, parseRequest, versionInfo } from '../cni/request.ts';
import { cmdAdd } from '../multus/commands/add.ts';
import { cmdCheck } from '../multus/commands/check.ts';
import type { CallContext, DoorInput } from '../multus/call-context.ts';
import { cmdDel } from '../multus/commands/del.ts';
import { cmdGc } from '../multus/commands/gc.ts';
import { cmdStatus } from '../multus/commands/status.ts';
import type { MultusConf } from '../multus/conf.ts';
import { parseMultusConf } from '../multus/conf.ts';
import type { Host } from './host.ts';
import { prepare } from './prepare.ts';

export const VERSION = '0.1.0';

/** One CNI call as a process edge hands it in: the thin plugin's own environment, or a daemon request's. */
export interface CniCall {
  env: Env;
  stdin: Buffer;
  /** Set by the process edge when a CNI_* variable held bytes `env` cannot carry (host/raw-env.ts). */
  envProblem?: CniError;
  /** The call's cancel signal: aborted, its running delegate is killed and no other started (cni/exec.ts). */
  signal?: AbortSignal;
  /** This call's own exec instead of the host's (the daemon's `delegateExec: "caller"`: daemon/caller-exec.ts). */
  exec?: Exec;
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

/** The dispatch table, one command per row (skel's CNIFuncs); each command's netns and readiness rules are prepare()'s. */
const COMMANDS: Readonly<Record<RequestCommand, (ctx: CallContext) => Promise<unknown>>> = {
  ADD: cmdAdd,
  DEL: cmdDel,
  CHECK: cmdCheck,
  STATUS: cmdStatus,
  GC: cmdGc,
};

export async function handle(host: Host, call: CniCall): Promise<CniAnswer> {
  let cniVersion = CURRENT_VERSION;
  let conf: MultusConf | undefined;
  try {
    const command = parseCommand(call.env);
    if (command === '') return { exitCode: 0, stdout: '', stderr: aboutText(VERSION), cniVersion };
    if (command === 'VERSION') {
      const info = versionInfo(); // skel prints the VERSION reply compact
      return { exitCode: 0, stdout: JSON.stringify(info) + '\n', stderr: '', result: info, cniVersion };
    }
    const req = parseRequest(command, call.env, call.stdin);
    cniVersion = req.cniVersion;
    conf = parseMultusConf(req.config);
    const input = doorInputOf(req, conf, call.env);
    if (call.envProblem) input.envProblem = call.envProblem;
    if (call.signal) input.signal = call.signal;
    if (call.exec) input.exec = call.exec;
    return answer(await prepare(host, input, COMMANDS[command]), cniVersion);
  } catch (e) {
    const error = toCniError(e);
    const log: Logger = conf ? host.logger(conf) : silentLogger;
    log.error(`${error.msg}${error.details ? ` (${error.details})` : ''}`);
    if (!isCniError(e) && e instanceof Error && e.stack) log.debug(e.stack);
    return { exitCode: 1, stdout: pretty(error.toJSON(cniVersion)), stderr: '', error, cniVersion };
  }
}

/**
 * The CNI door's edge: the checked CNI_* variables as the typed input every door hands `prepare()`, CNI_ARGS parsed
 * here once (the pod's keys, and the other pairs, which go on to each delegate).
 */
export function doorInputOf(req: CniRequest, conf: MultusConf, env: Env): DoorInput {
  const runtimePairs = parseCniArgs(req.args);
  const pod = parseK8sArgs(runtimePairs);
  return {
    op: req.command,
    sandbox: { containerId: req.containerId, netns: req.netns, ifName: req.ifName, pod },
    conf,
    env,
    pluginPath: req.path,
    runtimePairs,
    netnsOverride: req.netnsOverride,
  };
}

function answer(result: unknown, cniVersion: string): CniAnswer {
  if (result === undefined) return { exitCode: 0, stdout: '', stderr: '', cniVersion };
  return { exitCode: 0, stdout: pretty(result), stderr: '', result, cniVersion };
}

/** compat: skel prints results and errors indented by 4 spaces (types.prettyPrint). */
function pretty(value: unknown): string {
  return JSON.stringify(value, null, 4) + '\n';
}
