/**
 * exec.ts: finding and running one plugin binary (I/O), the equivalent of libcni's pkg/invoke.
 *
 * `Exec` is the seam tests replace with a fake. The real implementation spawns the plugin without a shell,
 * writes its stdin, collects stdout and stderr (bounded), kills it after a timeout, and retries
 * "text file busy" (ETXTBSY) like libcni's raw_exec.go: 5 attempts, 1 s apart. It never interprets the
 * output; result.ts does that.
 *
 * Each plugin runs in a process group of its own (so a timeout kills what it started too), which also means
 * nothing else kills that group when we are ended. So every run takes the call's `AbortSignal`: once it is aborted
 * (the plugin's stop signals, cli.ts; the daemon's shutdown after its grace, daemon/main.ts) the running plugin's
 * group is SIGKILLed at once and no plugin is started (StoppingError, code 11). SIGKILL of our own process leaves
 * them: see docs/reliability.md, "Signals end the delegates too".
 *
 * On Bun (build/multus) a plugin is started with `Bun.spawn`, its stdout and stderr written to unnamed files read
 * once it is gone (the thin plugin and the daemon: plugin-output.ts), else (no such file) to pipes read as web
 * streams: node:child_process
 * there is built on Node streams written in JavaScript, which cost a thin call more than everything else it does
 * (docs/archive/performance.md, "Where the thin plugin's time went"). Under Node (the unit tests) node:child_process runs
 * it; both keep the same rules: process group, bounded output, timeout, drain grace, ETXTBSY retry.
 */
import { accessSync, closeSync, constants, openSync, readSync, statSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { sleep } from '../base/sleep.ts';
import type { BunRuntime, BunSubprocess } from '../base/bun.ts';
import { bunRuntime } from '../base/bun.ts';
import { CniCode, CniError } from '../base/errors.ts';
import { closeOutputFiles, openOutputFiles, pipeOf, readBounded, readOutputFile } from './plugin-output.ts';

export interface ExecOutput {
  stdout: Buffer;
  stderr: Buffer;
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
}

/** One start of a plugin. */
export interface ExecOptions {
  path: string;
  stdin: Buffer;
  env: Record<string, string>;
  /** After this long the plugin's group is killed and the output says `timedOut`. */
  timeoutMs: number;
  /** Arguments after the program, and its argv[0] if not `path` (the daemon's chroot wrapper sets both). */
  args?: string[];
  argv0?: string;
  /**
   * A directory only root can write to (the call's cache dir), where the thin plugin puts the plugin's output
   * (plugin-output.ts); unused in the daemon, which never asks for output files.
   */
  outputDir?: string;
  /** The call's cancel signal: once aborted, the plugin's group is killed at once and no plugin is started. */
  signal?: AbortSignal;
}

export interface Exec {
  /** Absolute path of plugin `type` in the first of `dirs` that has it; CniError(7) otherwise. */
  findInPath(type: string, dirs: string[]): string;
  execPlugin(options: ExecOptions): Promise<ExecOutput>;
}

const MAX_OUTPUT_BYTES = 16 * 1024 * 1024;
const TEXT_BUSY_ATTEMPTS = 5;
const TEXT_BUSY_DELAY_MS = 1000;
/** A plugin type names a file in a bin dir: no path separators, no "..". */
const PLUGIN_TYPE = /^[A-Za-z0-9][A-Za-z0-9_.+-]*$/;

export function findInPath(type: string, dirs: string[]): string {
  if (!PLUGIN_TYPE.test(type) || type.includes('..')) {
    throw new CniError(
      CniCode.InvalidConfig,
      `invalid plugin type "${type}": it must be a file name in the CNI bin directories`,
    );
  }
  for (const dir of dirs) {
    if (!isAbsolute(dir)) continue; // never a path relative to the working directory, nor a bare name for PATH
    const candidate = join(dir, type);
    try {
      if (!statSync(candidate).isFile()) continue;
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not in this directory (or not executable): try the next one, as libcni's FindInPath does
    }
  }
  throw new PluginNotFoundError(type, dirs);
}

/** A plugin in none of the bin dirs (libcni's words): ADD also warns about it (docs/behaviour.md#missing-plugin). */
export class PluginNotFoundError extends CniError {
  constructor(
    readonly pluginType: string,
    readonly dirs: readonly string[],
  ) {
    super(CniCode.InvalidConfig, `failed to find plugin "${pluginType}" in path [${dirs.join(' ')}]`, {
      details: 'install the plugin into binDir or a CNI_PATH directory, or fix the delegate\'s "type"',
    });
  }
}
Object.defineProperty(PluginNotFoundError.prototype, 'name', { value: 'PluginNotFoundError', enumerable: false });

/** The PluginNotFoundError `err` is or was caused by (wrapError keeps the cause), if any. */
export function missingPluginOf(err: unknown): PluginNotFoundError | undefined {
  for (let e = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    if (e instanceof PluginNotFoundError) return e;
  }
  return undefined;
}

function collect(stream: NodeJS.ReadableStream, sink: Buffer[], limit: { left: number }): void {
  stream.on('data', (chunk: Buffer) => {
    if (limit.left <= 0) return;
    const part = chunk.length > limit.left ? chunk.subarray(0, limit.left) : chunk;
    limit.left -= part.length;
    sink.push(part);
  });
}

/** After the plugin exited, how long its output may still take to drain from pipes a child left open. */
const DRAIN_GRACE_MS = 200;

/**
 * execve semantics: the kernel runs an ELF binary or a `#!` script and refuses anything else with ENOEXEC, which
 * Go (libcni) reports as "exec format error". Node's spawn goes through execvp, whose ENOEXEC fallback would run
 * such a file with /bin/sh, so a damaged plugin binary would be executed as a shell script: refuse it first.
 */
export function assertExecutableFormat(path: string): void {
  const head = Buffer.alloc(4);
  let n: number;
  let fd: number | undefined;
  try {
    fd = openSync(path, 'r');
    n = readSync(fd, head, 0, 4, 0);
  } catch {
    return; // not readable (execute-only) or gone: let the exec itself report it
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
  const isScript = n >= 2 && head[0] === 0x23 && head[1] === 0x21;
  const isElf = n === 4 && head.equals(Buffer.from([0x7f, 0x45, 0x4c, 0x46]));
  if (!isScript && !isElf) {
    const err = new Error(`fork/exec ${path}: exec format error`) as NodeJS.ErrnoException;
    err.code = 'ENOEXEC';
    throw err;
  }
}

/** One start of a plugin: what execPlugin was given, `args` defaulted. */
type PluginRun = ExecOptions & { args: string[] };

/** Kills `pid`'s group when `signal` aborts (the plugin's output then says SIGKILL); the returned function stops that. */
function killOnAbort(pid: number | undefined, signal: AbortSignal | undefined): () => void {
  if (!signal || pid === undefined) return () => {};
  const kill = () => killGroup(pid);
  if (signal.aborted) kill();
  else signal.addEventListener('abort', kill, { once: true });
  return () => signal.removeEventListener('abort', kill);
}

function runOnce(run: PluginRun): Promise<ExecOutput> {
  assertExecutableFormat(run.path);
  const bun = bunRuntime();
  return bun ? runOnceBun(bun, run) : runOnceNode(run);
}

async function runOnceBun(bun: BunRuntime, run: PluginRun): Promise<ExecOutput> {
  const files = openOutputFiles(run.outputDir);
  try {
    // A process group of its own (detached: a session), so a timeout kills whatever the plugin started too.
    const child = bun.spawn([run.path, ...run.args], {
      argv0: run.argv0, // undefined: the program's path, as for any spawn
      env: run.env,
      stdin: run.stdin,
      stdout: files?.stdout ?? 'pipe',
      stderr: files?.stderr ?? 'pipe',
      detached: true,
    });
    if (files) {
      const timedOut = await awaitExit(child, run);
      const stdout = readOutputFile(files.stdout, MAX_OUTPUT_BYTES);
      return bunOutput(child, stdout, readOutputFile(files.stderr, MAX_OUTPUT_BYTES), timedOut);
    }
    const out = readBounded(pipeOf(child.stdout), MAX_OUTPUT_BYTES);
    const err = readBounded(pipeOf(child.stderr), MAX_OUTPUT_BYTES);
    const timedOut = await awaitExit(child, run);
    // 'exit' came; the pipes close once every holder is gone: wait for that only as long as the drain grace.
    let grace: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all([out.done, err.done]),
      new Promise((resolve) => (grace = setTimeout(resolve, DRAIN_GRACE_MS))),
    ]);
    clearTimeout(grace);
    return bunOutput(child, out.take(), err.take(), timedOut);
  } finally {
    if (files) closeOutputFiles(files);
  }
}

/**
 * Until the plugin exits, or its timeout (true) or the abort of its signal: then its group is killed and its
 * reaping waited for no longer than the drain grace.
 */
async function awaitExit(child: BunSubprocess, { timeoutMs, signal }: PluginRun): Promise<boolean> {
  const pid = child.pid;
  let timedOut = false;
  let grace: NodeJS.Timeout | undefined;
  let gone = (): void => {};
  const killed = new Promise<void>((resolve) => (gone = resolve));
  const kill = () => {
    killGroup(pid);
    grace ??= setTimeout(gone, DRAIN_GRACE_MS);
  };
  const timer = setTimeout(() => {
    timedOut = true;
    kill();
  }, timeoutMs);
  if (signal?.aborted) kill();
  else signal?.addEventListener('abort', kill, { once: true });
  try {
    await Promise.race([child.exited, killed]);
  } finally {
    clearTimeout(timer);
    clearTimeout(grace);
    // The plugin is gone: what it left running in its group (a daemon it started) is not ours to kill.
    signal?.removeEventListener('abort', kill);
  }
  return timedOut;
}

function bunOutput(child: BunSubprocess, stdout: Buffer, stderr: Buffer, timedOut: boolean): ExecOutput {
  const exited = child.exitCode !== null || child.signalCode !== null;
  return { stdout, stderr, exitCode: child.exitCode, signal: exited ? child.signalCode : 'SIGKILL', timedOut };
}

function runOnceNode({ path, stdin, env, timeoutMs, args, argv0, signal }: PluginRun): Promise<ExecOutput> {
  return new Promise((resolve, reject) => {
    // A process group of its own, so a timeout kills whatever the plugin started too. Loaded here: Bun never needs it.
    const { spawn } = process.getBuiltinModule('node:child_process');
    const child = spawn(path, args, { argv0, env, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    const unwatch = killOnAbort(child.pid, signal);
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    collect(child.stdout, out, { left: MAX_OUTPUT_BYTES });
    collect(child.stderr, err, { left: MAX_OUTPUT_BYTES });
    let timedOut = false;
    let settled = false;
    let exit: { code: number | null; signal: string | null } | undefined;
    let drain: NodeJS.Timeout | undefined;
    const finish = () => {
      if (settled || !exit) return;
      settled = true;
      unwatch();
      clearTimeout(timer);
      clearTimeout(drain);
      child.stdout.destroy();
      child.stderr.destroy();
      resolve({
        stdout: Buffer.concat(out),
        stderr: Buffer.concat(err),
        exitCode: exit.code,
        signal: exit.signal,
        timedOut,
      });
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child.pid);
      // The group is gone; do not wait for pipes a stray process might still hold.
      setTimeout(() => {
        exit ??= { code: null, signal: 'SIGKILL' };
        finish();
      }, DRAIN_GRACE_MS);
    }, timeoutMs);
    child.on('error', (e) => {
      unwatch();
      clearTimeout(timer);
      settled = true;
      reject(e);
    });
    // 'exit' fires when the plugin is gone; 'close' only once every holder of its pipes is gone too.
    child.on('exit', (code, sig) => {
      // The plugin is gone: what it left running in its group (a daemon it started) is not ours to kill.
      unwatch();
      exit = { code, signal: sig };
      drain = setTimeout(finish, DRAIN_GRACE_MS);
    });
    child.on('close', finish);
    // A plugin that exits without reading stdin closes the pipe: EPIPE is not our error, its exit status is.
    child.stdin.on('error', () => {});
    child.stdin.end(stdin);
  });
}

/**
 * A call whose signal is aborted starts no plugin: it fails with code 11 (its scratch cache stays for the runtime's
 * DEL), so a rollback cannot start a delegate that outlives the stop that killed the running ones (issue 28).
 */
export class StoppingError extends CniError {
  constructor(path: string) {
    super(CniCode.TryAgainLater, `not starting ${path}: multus-ts is stopping`, {
      details: "the call was cut short by a stop; the runtime's DEL finds what it left in the caches",
    });
  }
}

/**
 * The signals after which `exitOnStopSignals` kills the running delegates: every signal whose default action ends a
 * process and that someone may send (a runtime, kubelet, a shell, an operator). SIGPWR is the engine's own
 * (JavaScriptCore suspends threads with it); the fault signals (SIGSEGV, ...) are the runtime's crash handling.
 */
export const STOP_SIGNALS = [
  'SIGTERM',
  'SIGINT',
  'SIGHUP',
  'SIGQUIT',
  'SIGUSR1',
  'SIGUSR2',
  'SIGALRM',
  'SIGVTALRM',
  'SIGXCPU',
  'SIGXFSZ',
] as const;

/** Linux's numbers of STOP_SIGNALS (node:os has them, but the thin bundle loads no node:os at start: docs/build.md). */
const SIGNAL_NUMBERS: Partial<Record<NodeJS.Signals, number>> = {
  SIGHUP: 1,
  SIGINT: 2,
  SIGQUIT: 3,
  SIGUSR1: 10,
  SIGUSR2: 12,
  SIGALRM: 14,
  SIGTERM: 15,
  SIGXCPU: 24,
  SIGXFSZ: 25,
  SIGVTALRM: 26,
};

/**
 * For a process that serves one call (the thin plugin, passthru): on any of STOP_SIGNALS, abort the call's signal
 * (which kills the running delegate's group, and starts no other), then end by the same signal as before (the
 * listener is gone, so the default action runs). Bun ignores SIGQUIT by default: a process still alive shortly
 * after its own signal exits 128 + the signal's number, as a shell reports a death by that signal.
 */
export function exitOnStopSignals(call: AbortController): void {
  const onSignal = (sig: NodeJS.Signals) => {
    for (const s of STOP_SIGNALS) process.removeListener(s, onSignal);
    call.abort(new Error(`caught ${sig}`));
    process.kill(process.pid, sig);
    setTimeout(() => process.exit(128 + (SIGNAL_NUMBERS[sig] ?? 0)), 100);
  };
  for (const s of STOP_SIGNALS) process.on(s, onSignal);
}

function killGroup(pid: number | undefined): void {
  // kill(-0) would be kill(0): this process's own group (never a delegate's; a spawn's pid is > 1)
  if (pid === undefined || pid <= 1) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

export async function execPlugin(options: ExecOptions): Promise<ExecOutput> {
  const { path, signal } = options;
  for (let attempt = 1; ; attempt++) {
    if (signal?.aborted) throw new StoppingError(path);
    try {
      return await runOnce({ ...options, args: options.args ?? [] });
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      // libcni raw_exec.go: a plugin binary being replaced (upgrade) is briefly "text file busy".
      if (code === 'ETXTBSY' && attempt < TEXT_BUSY_ATTEMPTS) {
        await sleep(TEXT_BUSY_DELAY_MS);
        continue;
      }
      throw new CniError(CniCode.Internal, `failed to execute plugin ${path}: ${(e as Error).message}`, { cause: e });
    }
  }
}

export const realExec: Exec = { findInPath, execPlugin };
