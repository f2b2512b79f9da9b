/**
 * errors.ts: the one error type that crosses the CNI wire (pure).
 *
 * A `CniError` carries a spec code, a message that says what to fix, optional details and the original
 * error as `cause`. `wrapError` adds context to the message and keeps an existing CNI code, so a
 * delegate's "try again later" (11) still leaves as 11 (Multus flattens it to 999). `toCniError` is the one
 * mapping every edge that answers uses (handle(), cli.ts, the daemon's endpoints, the operator commands): a
 * CniError as it is, anything else code 999; `isCallerFault` is the one rule of which codes blame the request
 * (1-8 but 5). Callers branch on `code`, never on message text.
 */

export const CniCode = Object.freeze({
  IncompatibleVersion: 1,
  UnsupportedField: 2,
  UnknownContainer: 3,
  InvalidEnv: 4,
  IoFailure: 5,
  DecodingFailure: 6,
  InvalidConfig: 7,
  InvalidNetns: 8,
  TryAgainLater: 11,
  PluginNotAvailable: 50,
  PluginNotAvailableLimited: 51,
  Internal: 999,
} as const);

export type CniCodeValue = (typeof CniCode)[keyof typeof CniCode] | number;

export interface CniErrorOptions {
  details?: string;
  cause?: unknown;
}

export class CniError extends Error {
  readonly code: number;
  readonly msg: string;
  readonly details: string | undefined;

  constructor(code: CniCodeValue, msg: string, options: CniErrorOptions = {}) {
    super(msg, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.msg = msg;
    this.details = options.details;
  }

  /** The wire form: `{cniVersion, code, msg, details}` (details omitted when empty). */
  toJSON(cniVersion = '1.1.0'): Record<string, unknown> {
    const out: Record<string, unknown> = { cniVersion, code: this.code, msg: this.msg };
    if (this.details) out.details = this.details;
    return out;
  }
}
Object.defineProperty(CniError.prototype, 'name', { value: 'CniError', enumerable: false });

export function isCniError(value: unknown): value is CniError {
  return value instanceof CniError;
}

/** The message of anything thrown, without a stack. */
export function messageOf(err: unknown): string {
  if (err instanceof CniError) return err.msg;
  if (err instanceof Error) return err.message;
  return String(err);
}

/**
 * Prefix an error's message with `context` ("<context>: <msg>"), keeping a CniError's code and details;
 * anything else becomes `fallbackCode` (999 by default) with the original kept as `cause`.
 */
export function wrapError(err: unknown, context: string, fallbackCode: CniCodeValue = CniCode.Internal): CniError {
  if (err instanceof CniError) {
    return new CniError(err.code, `${context}: ${err.msg}`, { details: err.details, cause: err });
  }
  return new CniError(fallbackCode, `${context}: ${messageOf(err)}`, { cause: err });
}

/** Anything thrown as the CniError it answers with: a CniError as it is, anything else code 999 (kept as `cause`). */
export function toCniError(err: unknown): CniError {
  return err instanceof CniError ? err : new CniError(CniCode.Internal, messageOf(err), { cause: err });
}

/**
 * Codes 1-4 and 6-8 (version, field, container, env, decoding, config, netns) say the request is at fault: the
 * daemon answers them 400 instead of 500, and dynamic networks do not retry them. Code 5, an I/O failure (a full
 * disk, a file that cannot be read), is the node's, not the request's: the same request may succeed later.
 */
export function isCallerFault(code: number): boolean {
  return code >= CniCode.IncompatibleVersion && code <= CniCode.InvalidNetns && code !== CniCode.IoFailure;
}
