/**
 * main.ts: the process edge (I/O). The only reader of process.env, stdin and argv, and the only writer of
 * stdout and the exit code.
 *
 * `main(io)` parses the request (skel rules), loads the multus config, builds the logger and the command's
 * dependencies, dispatches, and prints the result or a CNI error: `{cniVersion, code, msg, details}` on
 * stdout with exit status 1. Anything that is not a CniError becomes code 999; its stack goes to the log,
 * never to stdout.
 */
import { basename } from 'node:path';
import { passthru } from '../multus/auxchain.ts';
import { cmdAdd } from '../multus/commands/add.ts';
import { cmdCheck } from '../multus/commands/check.ts';
import type { CommandDeps } from '../multus/commands/context.ts';
import { cmdDel } from '../multus/commands/del.ts';
import { cmdGc } from '../multus/commands/gc.ts';
import { cmdStatus } from '../multus/commands/status.ts';
import type { MultusConf } from '../multus/conf.ts';
import { parseMultusConf } from '../multus/conf.ts';
import { CniCode, CniError, isCniError, messageOf } from '../base/errors.ts';
import { realExec } from '../cni/exec.ts';
import type { Logger } from '../base/log.ts';
import { createLogger, silentLogger } from '../base/log.ts';
import type { KubeClient } from '../k8s/client.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { checkNetns } from '../cni/netns.ts';
import { realReadinessDeps } from '../multus/readiness.ts';
import type { CniRequest } from '../cni/request.ts';
import { aboutText, formatVersionInfo, parseCommand, parseRequest } from '../cni/request.ts';
import { CURRENT_VERSION } from '../base/versions.ts';

export const VERSION = '0.1.0';

export interface Io {
  env: Record<string, string | undefined>;
  /** The name the executable was run as: installed as `passthru`, it is the passthru plugin (§14.2). */
  argv0: string;
  argv: string[];
  readStdin(): Promise<Buffer>;
  writeStdout(s: string): void;
  writeStderr(s: string): void;
}

export async function main(io: Io): Promise<number> {
  if (io.argv.includes('-version') || io.argv.includes('--version') || io.argv.includes('-v')) {
    io.writeStdout(`multus-ts: version:${VERSION}, cni:${CURRENT_VERSION}\n`);
    return 0;
  }
  let cniVersion = CURRENT_VERSION;
  let log: Logger = silentLogger;
  try {
    const command = parseCommand(io.env);
    if (basename(io.argv0) === 'passthru' && command !== '') {
      const out = passthru(command, command === 'VERSION' ? Buffer.alloc(0) : await io.readStdin());
      if (out) io.writeStdout(out + '\n');
      return 0;
    }
    if (command === '') {
      io.writeStderr(aboutText(VERSION));
      return 0;
    }
    if (command === 'VERSION') {
      io.writeStdout(formatVersionInfo() + '\n');
      return 0;
    }
    const req = parseRequest(command, io.env, await io.readStdin());
    cniVersion = req.cniVersion;
    const conf = parseMultusConf(req.stdin);
    log = createLogger({ level: conf.logLevel, logFile: conf.logFile || undefined, logToStderr: conf.logToStderr, logOptions: conf.logOptions }, { writeStderr: io.writeStderr });
    for (const warning of conf.warnings) log.warn(warning);
    const deps: CommandDeps = {
      exec: realExec,
      log,
      readiness: realReadinessDeps,
      env: io.env,
      kube: (c) => connectKube(c, io.env, log),
      clock: { now: () => Date.now(), sleep: (ms) => sleep(ms) },
    };
    const output = await dispatch(req, conf, deps);
    // compat: skel prints results and errors indented by 4 spaces (types.prettyPrint).
    if (output !== undefined) io.writeStdout(JSON.stringify(output, null, 4) + '\n');
    return 0;
  } catch (e) {
    const error = isCniError(e) ? e : new CniError(CniCode.Internal, messageOf(e), { cause: e });
    log.error(`${error.msg}${error.details ? ` (${error.details})` : ''}`);
    if (!isCniError(e) && e instanceof Error && e.stack) log.debug(e.stack);
    io.writeStdout(JSON.stringify(error.toJSON(cniVersion), null, 4) + '\n');
    return 1;
  }
}

async function dispatch(req: CniRequest, conf: MultusConf, deps: CommandDeps): Promise<unknown> {
  deps.log.verbose(`${req.command} containerId=${req.containerId} netns=${req.netns} ifname=${req.ifName} args=${req.args}`);
  checkNetns(req);
  switch (req.command) {
    case 'ADD':
      return cmdAdd(req, conf, deps);
    case 'DEL':
      return cmdDel(req, conf, deps);
    case 'CHECK':
      return cmdCheck(req, conf, deps);
    case 'STATUS':
      return cmdStatus(req, conf, deps);
    case 'GC':
      return cmdGc(req, conf, deps);
  }
}

/**
 * The Kubernetes client, only when the config names a kubeconfig or the in-cluster service environment is
 * set (§1.2). k8s.ts is imported here, on demand, so delegates-only calls never load it.
 */
async function connectKube(conf: MultusConf, env: Record<string, string | undefined>, log: Logger): Promise<KubeClient | undefined> {
  if (!conf.kubeconfig && !(env.KUBERNETES_SERVICE_HOST && env.KUBERNETES_SERVICE_PORT)) return undefined;
  const { loadKubeClient } = await import('../k8s/client.ts');
  return loadKubeClient({ kubeconfig: conf.kubeconfig, env, log });
}

function readAll(stream: NodeJS.ReadableStream): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => resolve(Buffer.concat(chunks)));
    stream.on('error', (e) => reject(new CniError(CniCode.IoFailure, `failed to read the network config from stdin: ${e.message}`)));
  });
}

/** The executable's entry: wire `main` to the real process. Not run when imported by tests. */
export function run(): void {
  const io: Io = {
    env: process.env,
    argv0: process.argv0,
    argv: process.argv.slice(2),
    readStdin: () => readAll(process.stdin),
    writeStdout: (s) => process.stdout.write(s),
    writeStderr: (s) => process.stderr.write(s),
  };
  main(io).then(
    (code) => {
      process.exitCode = code;
    },
    () => {
      process.exitCode = 1;
    },
  );
}
