/**
 * readiness.ts: waiting for the readiness indicator file (pure schedule, injected I/O).
 *
 * Multus polls `readinessindicatorfile` every 1 s for up to 45 s before ADD, STATUS and GC, and checks it
 * once on DEL (docs/behaviour.md#readiness). Here the wait is an exponential backoff in the style of k8s
 * `wait.Backoff` (~0, 0.25, 1.25, 5.25, 21.25 s by default), computed by the pure `backoffSchedule`; the
 * file check and the sleep are `ReadinessDeps`, so tests run without clocks or files and a resident daemon
 * can share the code. A timeout is CniError(11, try again later).
 */
import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import { sleep } from '../base/sleep.ts';
import { CniCode, CniError } from '../base/errors.ts';
import type { BackoffOptions } from '../base/backoff.ts';
import { backoffSchedule } from '../base/backoff.ts';

export interface ReadinessDeps {
  exists(path: string): Promise<boolean>;
  sleep(ms: number): Promise<void>;
}

export const realReadinessDeps: ReadinessDeps = {
  async exists(path) {
    try {
      statSync(path); // sync: a stat takes microseconds, and node:fs/promises is one more built-in to load
      return true;
    } catch {
      // compat: Multus treats any stat error (ENOENT, EACCES, ...) as "not there yet" (`err == nil`).
      return false;
    }
  },
  sleep,
};

/**
 * Checks `file` at once and after each sleep of the schedule; returns as soon as it exists. The path is made
 * absolute and normalised first, as Multus does (`filepath.Abs`), so the message names the path checked.
 */
export async function waitForReadiness(
  file: string,
  opts: BackoffOptions,
  deps: ReadinessDeps,
  random?: () => number,
): Promise<void> {
  const path = resolve(file);
  const schedule = backoffSchedule(opts, random);
  if (await deps.exists(path)) return;
  for (const ms of schedule) {
    await deps.sleep(ms);
    if (await deps.exists(path)) return;
  }
  const totalMs = schedule.reduce((sum, ms) => sum + ms, 0);
  throw new CniError(
    CniCode.TryAgainLater,
    'have you checked that your default network is ready? still waiting for readinessindicatorfile @ ' +
      `${path} after ${schedule.length + 1} checks over ${totalMs / 1000} s`,
  );
}

/** The DEL behaviour: one check, never waits (a missing file is only worth a warning to the caller). */
export async function checkReadinessOnce(file: string, deps: ReadinessDeps): Promise<boolean> {
  return deps.exists(resolve(file));
}
