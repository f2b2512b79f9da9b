/**
 * daemon/caller-exec.ts: `"delegateExec": "caller"`, the delegates of a call run by the shim that sent it
 * (docs/archive/resident-protocol.md, "Delegates run by the shim"; docs/resident.md).
 *
 * Multus thick forks every delegate inside its daemon's container, so Multus' own 100m / 50Mi limits count the
 * delegates' CPU and memory (Multus #1346, #1144): in the density bench the delegates alone cost 26-32 s of a
 * 0.1-CPU quota per 100 pods (docs/archive/performance.md). With this mode a shim that offers it (the request header
 * `X-Multus-Exec: 1`) gets each exec as a line of the call's streamed answer and runs it itself, in the runtime's
 * cgroup and the host's mount namespace, as the thin plugin and every other CNI plugin run theirs; it posts the
 * outcome to `POST /cni/exec`. The daemon keeps all the rest: lookups, planning, caches, results, rollback.
 *
 * What the shim is asked to run is what the daemon's own exec would run: the plugin path found by `local`'s
 * findInPath (under `chrootDir`, the path inside the root, i.e. the host's), never anything a NAD names; the
 * environment the thin plugin would give it (the shim's own, which its request carries, with the call's CNI_*
 * variables); the delegate timeout, which the shim enforces. Once the shim is gone (its connection closed, or a
 * line cannot be written), an exec it was running ends as a killed plugin and every later one runs in the daemon
 * through `local`, so a rollback or teardown still completes.
 */
import { randomBytes } from 'node:crypto';
import { basename } from 'node:path';
import { CniCode, CniError } from '../base/errors.ts';
import type { Exec, ExecOptions, ExecOutput } from '../cni/exec.ts';
import { StoppingError } from '../cni/exec.ts';
import type { Env } from '../cni/request.ts';

/** The header a shim sends to offer running delegates, and the daemon answers with when it streams (value "1"). */
export const EXEC_HEADER = 'x-multus-exec';

/** How long past its timeout an exec may take to be answered before the daemon counts it as killed. */
const ANSWER_GRACE_MS = 10_000;

/** One exec as the shim answers it (`POST /cni/exec`); stdout and stderr in base64. */
export interface ExecReply {
  call: string;
  id: number;
  stdout?: string;
  stderr?: string;
  exitCode?: number | null;
  signal?: string | null;
  timedOut?: boolean;
  /** The program could not be started (not found, not executable, refused by the shim): it ran nothing. */
  error?: string;
}

export interface CallerChannel {
  /** The call's token, which each of its `POST /cni/exec` names. */
  token: string;
  /** The call's exec: through the shim while it is there, else `local`. */
  exec: Exec;
  /** Hands the shim's answer to its exec; false when it answers nothing waiting. */
  deliver(reply: ExecReply): boolean;
  /** The shim went away: what it runs ends as killed, the rest runs in the daemon. */
  close(): void;
}

export interface CallerChannelOptions {
  /** The daemon's own exec: its findInPath always, its execPlugin once the shim is gone. */
  local: Exec;
  /** Writes one line of the streamed answer; false when the shim is gone. */
  send(line: string): boolean;
  /** The environment the shim sent (its whole own), the base of each delegate's. */
  shimEnv: Env;
  /** Told each exec the shim ran: its plugin's name, the command, seconds and success (the daemon's metrics). */
  ran?(pluginType: string, command: string, seconds: number, ok: boolean): void;
  token?: string;
}

interface Waiting {
  path: string;
  resolve(out: ExecOutput): void;
  reject(e: unknown): void;
}

/** The environment the thin plugin would give the delegate: the shim's, with the call's CNI_* variables. */
export function shimEnvFor(shimEnv: Env, delegateEnv: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(shimEnv)) if (v !== undefined && !k.startsWith('CNI_')) env[k] = v;
  for (const [k, v] of Object.entries(delegateEnv)) if (k.startsWith('CNI_')) env[k] = v;
  return env;
}

function killedOutput(why: string): ExecOutput {
  return { stdout: Buffer.alloc(0), stderr: Buffer.from(why), exitCode: null, signal: 'SIGKILL', timedOut: false };
}

/** What a reply says about the exec (pure). */
export function outputOf(reply: ExecReply, path: string): ExecOutput {
  if (typeof reply.error === 'string') {
    throw new CniError(CniCode.Internal, `failed to execute plugin ${path}: ${reply.error} (run by multus-shim)`);
  }
  return {
    stdout: Buffer.from(reply.stdout ?? '', 'base64'),
    stderr: Buffer.from(reply.stderr ?? '', 'base64'),
    exitCode: typeof reply.exitCode === 'number' ? reply.exitCode : null,
    signal: typeof reply.signal === 'string' ? reply.signal : null,
    timedOut: reply.timedOut === true,
  };
}

export function callerChannel(o: CallerChannelOptions): CallerChannel {
  const token = o.token ?? randomBytes(16).toString('hex');
  const waiting = new Map<number, Waiting>();
  let next = 0;
  let closed = false;

  const close = (): void => {
    if (closed) return;
    closed = true;
    for (const w of waiting.values()) w.resolve(killedOutput('multus-shim went away while running the plugin'));
    waiting.clear();
  };

  function remote(run: ExecOptions): Promise<ExecOutput> {
    const { signal } = run;
    if (signal?.aborted) return Promise.reject(new StoppingError(run.path));
    const id = ++next;
    const line = { call: token, id, path: run.path, env: shimEnvFor(o.shimEnv, run.env), timeoutMs: run.timeoutMs };
    const text = JSON.stringify({ exec: { ...line, stdin: run.stdin.toString('base64') } }) + '\n';
    if (!o.send(text)) {
      close(); // the shim is gone before it got this one: it and the rest run here
      return o.local.execPlugin(run);
    }
    return new Promise<ExecOutput>((resolve, reject) => {
      const timer = setTimeout(
        () => settle(() => resolve(killedOutput('multus-shim did not answer within the delegate timeout'))),
        run.timeoutMs + ANSWER_GRACE_MS,
      );
      const onAbort = () => settle(() => reject(new StoppingError(run.path)));
      const settle = (end: () => void) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        waiting.delete(id);
        end();
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      waiting.set(id, {
        path: run.path,
        resolve: (out) => settle(() => resolve(out)),
        reject: (e) => settle(() => reject(e)),
      });
    });
  }

  async function timed(run: ExecOptions): Promise<ExecOutput> {
    const t = performance.now();
    const out = await remote(run);
    o.ran?.(basename(run.path), run.env.CNI_COMMAND ?? '', (performance.now() - t) / 1000, out.exitCode === 0);
    return out;
  }

  return {
    token,
    exec: {
      findInPath: (type, dirs) => o.local.findInPath(type, dirs),
      execPlugin: (run) => (closed ? o.local.execPlugin(run) : timed(run)),
    },
    deliver(reply) {
      const w = reply.call === token ? waiting.get(reply.id) : undefined;
      if (!w) return false;
      try {
        w.resolve(outputOf(reply, w.path));
      } catch (e) {
        w.reject(e);
      }
      return true;
    },
    close,
  };
}
