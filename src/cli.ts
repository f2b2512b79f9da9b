/**
 * cli.ts: the process edge, the bundle's entry. In the plugin roles (the CNI plugin, passthru) the only reader of
 * process.env, stdin and argv, and the only writer of stdout and the exit code; the other roles (roles.ts: the
 * daemon, install, the operator commands) read their own argv and environment in their entry functions.
 *
 * One executable serves every role: run as `passthru` it is the passthru plugin (docs/behaviour.md,
 * "Auxiliary chain"); run as `thin_entrypoint`, `install_multus` or `multus-daemon` (the names of Multus' images)
 * it is that program, with its Go flags (install/entrypoints.ts, in the roles' bundle; docs/install.md);
 * `--version` prints the version; `daemon` runs the resident daemon (docs/resident.md, its
 * own bundle, loaded only for that role), as are `hotplug` and `plan` (docs/hotplug.md); `install` is the
 * DaemonSet entrypoint and `--is-default-ready` the readiness check (docs/install.md; both loaded only in their
 * role); run as `kubectl-multus` it is the kubectl plugin, and `preflight` its swap check, `webhook` the admission
 * webhook (docs/kubectl-multus.md, in the roles' bundle); otherwise it is the CNI plugin and serves one request with `handle()`. As the plugin (and passthru),
 * SIGTERM, SIGINT and SIGHUP kill the running delegates' process groups before the process ends
 * (docs/reliability.md, "Signals end the delegates too").
 */
import { basename } from 'node:path';
import { callerEnv } from './base/caller-env.ts';
import { deferBackgroundSyncs } from './base/files.ts';
import { CniCode, CniError, messageOf, toCniError } from './base/errors.ts';
import { CURRENT_VERSION } from './base/versions.ts';
import { exitOnStopSignals } from './cni/exec.ts';
import { useOutputFiles } from './cni/plugin-output.ts';
import { MAX_STDIN_BYTES, parseCommand, stdinTooLarge } from './cni/request.ts';
import { VERSION, handle } from './host/handle.ts';
import { createHost } from './host/host.ts';
import { findNonUtf8CniVar, readRawEnviron } from './host/raw-env.ts';
import { readAll, writeAll } from './host/stdio.ts';
import { loadDaemonModule } from './load-roles.ts';
import { PASSTHRU_ABOUT, passthru } from './multus/auxchain.ts';

/** stdin to its end by read(2) on fd 0 (host/stdio.ts), at most MAX_STDIN_BYTES: more is refused (code 6) unread. */
async function readStdin(): Promise<Buffer> {
  let data: Buffer | undefined;
  try {
    data = await readAll(0, MAX_STDIN_BYTES);
  } catch (e) {
    throw new CniError(CniCode.IoFailure, `failed to read the network config from stdin: ${messageOf(e)}`);
  }
  if (!data) throw stdinTooLarge();
  return data;
}

/**
 * stdout that cannot be written (a closed pipe, a full disk): one line on stderr, exit 1, no stack. What the call
 * did stays as it is; the runtime sees the failure and sends DEL (docs/reliability.md).
 */
let outputFailed = false;
function writeOut(s: string): void {
  if (outputFailed) return;
  try {
    writeAll(1, s, { quietEpipe: false });
  } catch (e) {
    outputFailed = true;
    writeErr(`multus: cannot write the answer to stdout: ${messageOf(e)}\n`);
  }
}
function writeErr(s: string): void {
  try {
    writeAll(2, s);
  } catch {
    // stderr is gone too: nothing left to tell
  }
}
// The caller's time zone for the log's stamps, as Go Multus honours TZ (docs/behaviour.md#logging): the launcher
// hides it from Bun's start-up with every other variable (base/caller-env.ts); Bun applies TZ set at run time.
const callerTz = callerEnv(process.env).TZ;
if (callerTz !== undefined && process.env.TZ !== callerTz) process.env.TZ = callerTz;

/** The passthru plugin: the same executable installed (or linked) as `passthru`. */
async function runPassthru(): Promise<number> {
  const command = parseCommand(callerEnv(process.env));
  if (command === '') {
    writeErr(PASSTHRU_ABOUT); // Multus' passthru is skel's plugin: its about text on stderr, exit 0
    return 0;
  }
  const out = passthru(command, command === 'VERSION' ? Buffer.alloc(0) : await readStdin());
  if (out) writeOut(out + '\n');
  return 0;
}

async function runPlugin(signal: AbortSignal): Promise<number> {
  // One call: the scratch cache's fsync runs while its first delegate does (base/files.ts), and the delegates'
  // output goes to unnamed files read once each is gone (cni/plugin-output.ts): no worker thread, fewer of Bun's
  // pages (docs/archive/performance.md, "A plugin's output in files, and no worker threads").
  deferBackgroundSyncs();
  useOutputFiles();
  const host = createHost({ writeStderr: writeErr });
  try {
    const env = callerEnv(process.env);
    const command = env.CNI_COMMAND;
    // VERSION and the about text need no stdin (a runtime may not close it).
    const stdin = command && command !== 'VERSION' ? await readStdin() : Buffer.alloc(0);
    const raw = command && command !== 'VERSION' ? readRawEnviron() : undefined;
    const envProblem = raw && findNonUtf8CniVar(raw);
    const answer = await handle(host, { env, stdin, signal, ...(envProblem ? { envProblem } : {}) });
    if (answer.stderr) writeErr(answer.stderr);
    if (answer.stdout) writeOut(answer.stdout);
    return answer.exitCode;
  } finally {
    host.close();
  }
}

/** Names of Multus' programs, served by the roles' bundle (install/entrypoints.ts, docs/install.md). */
const MULTUS_NAMES = new Set(['thin_entrypoint', 'install_multus', 'multus-daemon']);

/** Serves the role the executable is run in (its name and argv). */
async function runRole(args: string[]): Promise<number> {
  const name = basename(process.argv0);
  // Go's flag package stops at "--": what follows is no flag (`multus -- -version` is the plugin, as in Go)
  const argv = args.includes('--') ? args.slice(0, args.indexOf('--')) : args;
  if (MULTUS_NAMES.has(name)) return (await loadDaemonModule()).runEntrypoint(name, process.argv0, argv);
  if (argv[0] === 'daemon') {
    try {
      return await (await loadDaemonModule()).runDaemon(argv.slice(1));
    } catch (e) {
      writeErr(`multus daemon: ${messageOf(e)}\n`);
      return 1;
    }
  }
  if (name === 'kubectl-multus' || argv[0] === 'preflight') {
    // the kubectl plugin and `multus preflight`, in the roles' bundle (docs/kubectl-multus.md)
    return (await loadDaemonModule()).runKubectlMultus(argv);
  }
  if (argv[0] === 'webhook') return (await loadDaemonModule()).runWebhook(argv.slice(1));
  if (argv[0] === 'hotplug' || argv[0] === 'plan') {
    // operator commands, in the daemon's bundle (docs/hotplug.md)
    try {
      const mod = await loadDaemonModule();
      return await (argv[0] === 'plan' ? mod.runPlanCli(argv.slice(1)) : mod.runHotplugCli(argv.slice(1)));
    } catch (e) {
      writeErr(`multus ${argv[0]}: ${messageOf(e)}\n`);
      return 2;
    }
  }
  if (argv.includes('-version') || argv.includes('--version') || argv.includes('-v')) {
    writeOut(`multus-ts: version:${VERSION}, cni:${CURRENT_VERSION}\n`);
    return 0;
  }
  if (argv[0] === 'install') return (await loadDaemonModule()).installMain(argv.slice(1));
  if (argv.includes('--is-default-ready')) return (await loadDaemonModule()).readyMain(argv);
  if (name !== 'passthru' && argv.some((a) => a.startsWith('-'))) {
    // Multus' plugin parses Go flags (runtimes pass none): -h, or an unknown flag, is answered as Go does
    const code = await (await loadDaemonModule()).runEntrypoint('multus', process.argv0, argv);
    if (code >= 0) return code;
  }
  // the call's one cancel signal: a stop signal aborts it, which kills the running delegate (cni/exec.ts)
  const call = new AbortController();
  exitOnStopSignals(call);
  if (name === 'passthru') {
    const code = await runPassthru();
    if (code >= 0) exitNow(code);
  }
  return exitNow(await runPlugin(call.signal));
}

/**
 * Ends a CNI call's process as soon as its answer is written (synchronously, host/stdio.ts): Bun's own end of a
 * process, the event loop drained and the VM torn down, costs a call ~4 ms of CPU and on a busy node much more
 * wall time (docs/archive/performance.md, "Where the thin plugin's time went"). Nothing is left to do by then: no
 * delegate runs, the logs are written, kept-alive API connections need no goodbye.
 */
function exitNow(code: number): never {
  process.exit(outputFailed ? 1 : code);
}

runRole(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = outputFailed ? 1 : code;
  },
  (e: unknown) => {
    // handle() answers every request failure itself; this is a failure of the process edge (stdin, stdout).
    const error = toCniError(e);
    writeOut(JSON.stringify(error.toJSON(CURRENT_VERSION), null, 4) + '\n');
    process.exit(1);
  },
);
