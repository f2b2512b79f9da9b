/**
 * host/raw-env.ts: finding environment bytes that Node cannot carry (pure, with one reader at the edge).
 *
 * The environment is bytes; Node decodes process.env as UTF-8, replacing each invalid byte with U+FFFD, and
 * child_process encodes every env string back as UTF-8. So a non-UTF-8 byte in a `CNI_*` variable cannot reach
 * a delegate unchanged from JavaScript (Go passes it through). Rather than hand delegates rewritten bytes, the
 * raw environment is checked and the call refused with code 4 naming the variable and the byte
 * (docs/compatibility.md, "Environment bytes").
 * Tested by test/unit/multus/reliability.test.ts (D3), test/fixture/env-bytes.test.ts.
 */
import { readFileSync } from 'node:fs';
import { callerEntry } from '../base/caller-env.ts';
import { CniCode, CniError } from '../base/errors.ts';

/** The first variable whose name starts with `CNI_` and whose value is not valid UTF-8, as a CniError (code 4). */
export function findNonUtf8CniVar(environ: Buffer): CniError | undefined {
  let start = 0;
  while (start < environ.length) {
    let end = environ.indexOf(0, start);
    if (end < 0) end = environ.length;
    const entry = callerEntry(environ.subarray(start, end));
    start = end + 1;
    if (entry.length < 4 || entry.toString('latin1', 0, 4) !== 'CNI_') continue;
    const eq = entry.indexOf(0x3d);
    if (eq < 0) continue;
    const value = entry.subarray(eq + 1);
    const offset = firstInvalidUtf8(value);
    if (offset === undefined) continue;
    const name = entry.toString('latin1', 0, eq);
    const hex = value[offset]!.toString(16).padStart(2, '0');
    return new CniError(CniCode.InvalidEnv, `${name} is not valid UTF-8: byte 0x${hex} at offset ${offset}`, {
      details: `multus-ts cannot pass non-UTF-8 bytes to delegates unchanged; use UTF-8 (or ASCII) in ${name}`,
    });
  }
  return undefined;
}

/** Offset of the first byte that does not belong to a well-formed UTF-8 sequence, or undefined. */
export function firstInvalidUtf8(b: Buffer): number | undefined {
  for (let i = 0; i < b.length;) {
    const c = b[i]!;
    if (c < 0x80) {
      i++;
      continue;
    }
    let n: number;
    let min: number;
    if (c >= 0xc2 && c <= 0xdf) [n, min] = [1, 0x80];
    else if (c >= 0xe0 && c <= 0xef) [n, min] = [2, 0x800];
    else if (c >= 0xf0 && c <= 0xf4) [n, min] = [3, 0x10000];
    else return i;
    let cp = c & (0x3f >> n);
    for (let k = 1; k <= n; k++) {
      const d = b[i + k];
      if (d === undefined || (d & 0xc0) !== 0x80) return i;
      cp = (cp << 6) | (d & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += n + 1;
  }
  return undefined;
}

/** The process's environment as the kernel holds it; undefined where /proc is not available. */
export function readRawEnviron(): Buffer | undefined {
  try {
    return readFileSync('/proc/self/environ');
  } catch {
    return undefined;
  }
}
