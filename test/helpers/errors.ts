/**
 * The CniError a call throws (or a promise rejects with), for asserting code and message; a test using these
 * fails when nothing is thrown or when something other than a CniError is.
 */
import { expect } from 'vitest';
import { CniError } from '../../src/base/errors.ts';

export function thrown(fn: () => unknown): CniError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(CniError);
    return err as CniError;
  }
  throw new Error('expected a CniError, nothing was thrown');
}

export async function rejection(p: Promise<unknown>): Promise<CniError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(CniError);
    return err as CniError;
  }
  throw new Error('expected a CniError, the promise resolved');
}
