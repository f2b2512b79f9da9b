/**
 * base/backoff.ts: the backoffs (pure). `backoffSchedule`: a schedule in the style of Kubernetes' `wait.Backoff`,
 * the sleeps between checks, `initialMs * factor^i`, each stretched by up to `jitter` (the readiness wait).
 * `retryDelay`: the wait before the n-th retry of something that keeps failing, doubling up to a cap (the
 * daemon's informer restarts and dynamic-network retries).
 * Tested by test/unit/multus/readiness.test.ts (the readiness schedule), test/unit/install/install-conf.test.ts.
 */
import { CniCode, CniError } from './errors.ts';

/** The time the waits are measured and spent in (real in a Host, fake in tests). */
export interface Clock {
  now(): number;
  sleep(ms: number): Promise<void>;
}

export interface BackoffOptions {
  initialMs: number;
  factor: number;
  jitter: number;
  steps: number;
}

export const DEFAULT_BACKOFF: BackoffOptions = { initialMs: 250, factor: 4, jitter: 0.1, steps: 4 };

function checkOptions(opts: BackoffOptions): void {
  const ok =
    Number.isInteger(opts.steps) &&
    opts.steps >= 0 &&
    Number.isFinite(opts.initialMs) &&
    opts.initialMs >= 0 &&
    Number.isFinite(opts.factor) &&
    opts.factor >= 0 &&
    Number.isFinite(opts.jitter) &&
    opts.jitter >= 0;
  if (!ok) {
    throw new CniError(
      CniCode.InvalidConfig,
      `invalid readiness backoff ${JSON.stringify(opts)}: steps must be a whole number >= 0, initialMs, factor and jitter finite numbers >= 0`,
    );
  }
}

/**
 * The sleeps between checks, in whole milliseconds: delay_i = initialMs * factor^i, jittered as k8s
 * `wait.Jitter` does (d + d * jitter * random()). `random` is injectable so tests get a fixed schedule.
 */
export function backoffSchedule(opts: BackoffOptions, random: () => number = Math.random): number[] {
  checkOptions(opts);
  const schedule: number[] = [];
  for (let i = 0; i < opts.steps; i++) {
    const base = opts.initialMs * opts.factor ** i;
    schedule.push(Math.round(base + base * opts.jitter * random()));
  }
  return schedule;
}

/** The wait before retry `attempt` (1 for the first): `initialMs` doubling per attempt, at most `maxMs`. */
export function retryDelay(attempt: number, opts: { initialMs: number; maxMs: number }): number {
  return Math.min(opts.initialMs * 2 ** Math.max(0, attempt - 1), opts.maxMs);
}
