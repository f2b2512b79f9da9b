/**
 * multus/attempt.ts: one step of a resolution that ADD stops at and `multus plan` goes past (pure).
 */
import type { CniError } from '../base/errors.ts';
import { toCniError } from '../base/errors.ts';

/** Runs `step`; with `collect` (`multus plan`), an error is handed to it and `fallback` returned instead. */
export async function attempt<T>(
  collect: ((error: CniError) => void) | undefined,
  fallback: T,
  step: () => T | Promise<T>,
): Promise<T> {
  if (!collect) return step();
  try {
    return await step();
  } catch (e) {
    collect(toCniError(e));
    return fallback;
  }
}
