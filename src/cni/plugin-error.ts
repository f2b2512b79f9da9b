/**
 * cni/plugin-error.ts: a failing plugin's output as a CniError (pure), as libcni's pluginErr does: the plugin's
 * own CNI error JSON when it printed one (its code kept), else the exit status and the tail of stderr.
 * Tested by test/unit/cni/result.test.ts (parsePluginError).
 */
import { CniCode, CniError } from '../base/errors.ts';
import { isObject as isObj } from '../base/json.ts';
import { quote } from './result.ts';

export interface PluginOutput {
  stdout: Buffer;
  stderr: Buffer;
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  timeoutMs?: number;
  plugin: string;
}

const STDERR_TAIL_BYTES = 2048;
const MAX_STDERR_IN_MSG = 512;

/** The last ~2 KiB of stderr, trimmed; "" when stderr is blank. */
function stderrTail(stderr: Buffer): string {
  const cut = stderr.length > STDERR_TAIL_BYTES;
  // Cutting bytes may split a UTF-8 sequence: drop the replacement characters that leaves at the start.
  const text = stderr.subarray(cut ? stderr.length - STDERR_TAIL_BYTES : 0).toString('utf8');
  const tail = (cut ? text.replace(/^\uFFFD+/, '') : text).trim();
  return tail === '' ? '' : `${cut ? '…' : ''}${tail}`;
}

function exitStatus(out: PluginOutput): string {
  return out.exitCode === null ? 'exit status unknown' : `exit status ${out.exitCode}`;
}

/** `{code, msg?, details?}` with a non-negative integer code: a CNI error as skel prints it. */
function parseCniErrorJson(text: string, plugin: string): { code: number; msg: string; details?: string } | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (!isObj(value)) return null;
  const { code, msg, details } = value;
  if (typeof code !== 'number' || !Number.isSafeInteger(code) || code < 0) return null;
  if ((msg !== undefined && typeof msg !== 'string') || (details !== undefined && typeof details !== 'string')) {
    return null;
  }
  const message = msg || `plugin ${plugin} failed with error code ${code} and no message`;
  return { code, msg: message, details: details || undefined };
}

function describeFailure(out: PluginOutput): { code: number; msg: string; details?: string } {
  const internal = (msg: string) => ({ code: CniCode.Internal, msg });
  const p = out.plugin;
  if (out.timedOut) {
    const within = out.timeoutMs === undefined ? 'in time' : `within ${Number((out.timeoutMs / 1000).toFixed(3))}s`;
    return internal(`plugin ${p} did not finish ${within} and was killed`);
  }
  if (out.signal) return internal(`plugin ${p} was killed by signal ${out.signal}`);
  const stdout = out.stdout.toString('utf8').trim();
  if (stdout === '') {
    const stderr = out.stderr.toString('utf8').trim();
    if (stderr === '') return internal(`plugin ${p} failed with no error message (${exitStatus(out)})`);
    const shown = stderr.length > MAX_STDERR_IN_MSG ? `${stderr.slice(0, MAX_STDERR_IN_MSG)}…` : stderr;
    return internal(`plugin ${p} failed: ${shown}`);
  }
  const cniError = parseCniErrorJson(stdout, p);
  return cniError ?? internal(`plugin ${p} failed and its output is not a CNI error: ${quote(stdout)}`);
}

/**
 * The CniError for a plugin that failed (non-zero exit, signal or timeout), after libcni's pluginErr: a CNI
 * error on stdout keeps its code, msg and details; anything else is 999 saying what happened. The tail of
 * stderr, when there is one, is appended to `details`.
 */
export function parsePluginError(out: PluginOutput): CniError {
  const { code, msg, details } = describeFailure(out);
  const tail = stderrTail(out.stderr);
  const stderrPart = tail === '' ? undefined : `stderr: ${tail}`;
  const joined = [details, stderrPart].filter((d) => d !== undefined && d !== '').join('; ');
  return new CniError(code, msg, joined === '' ? {} : { details: joined });
}
