/**
 * informers/retry.ts: when an informer's next watch goes, after a failure (pure, but for the clock's randomness).
 * In the way client-go's reflector and rest client wait, with two things of our own:
 *   - the backoff: 0.8 s doubling to 30 s, each wait stretched by up to 100% (client-go's reflector:
 *     `wait.NewExponentialBackoffManager(800ms, 30s, 2m, 2.0, 1.0)`), so that the nodes whose watches all broke at
 *     the same moment (an API-server restart) come back spread over a whole step, not in waves;
 *   - a refusal that says when to come back (429 or 503 whose Status carries `details.retryAfterSeconds`, as
 *     the API server sends while a resource's watch cache initializes or its priority levels are full) is tried
 *     again after that many seconds, as client-go's rest client honours Retry-After (at most `maxMs`);
 *   - ours: a `ServerGate` shared by the informers of one API server. A refusal that is about the server, not
 *     the resource (no HTTP answer: connection refused or reset; 401, 403 and 503: a server that is not yet
 *     authenticating, authorizing or serving anyone) is probed by ONE informer on its backoff; the others wait
 *     for the gate and go at once when the prober gets any other answer. Each client-go informer pays its own
 *     refusals; behind the gate a node pays one informer's (docs/archive/performance.md, "An API-server restart,
 *     second pass");
 *   - a 429 "storage is (re)initializing" tells that the resource's watch cache is new: the informer's next watch
 *     asks for its initial events (not older than its last resourceVersion) instead of resuming, which that cache
 *     would end by 410 (`newWatchCache`).
 * Tested by test/unit/informers/retry.test.ts.
 */
import { retryDelay } from '../base/backoff.ts';
import { httpStatusOf } from '../k8s/types.ts';

export const INFORMER_BACKOFF = { initialMs: 800, maxMs: 30_000 };

/** Statuses that say the server itself is away or not yet serving anyone (the gate's business). */
const SERVER_WIDE = new Set([0, 401, 403, 503]);

/** The failure is about the API server, not the resource: no HTTP answer, or 401, 403, 503. */
export function serverWide(err: unknown): boolean {
  const status = httpStatusOf(err);
  return status === undefined || SERVER_WIDE.has(status);
}

/**
 * The API server's watch cache of the resource is being built again (429 "storage is (re)initializing": a server
 * that has just started): it will begin after any resourceVersion the informer saw, so a watch resumed from one
 * would be ended at once by 410 Gone. The informer asks for its initial events straight away (a request fewer).
 */
export function newWatchCache(err: unknown): boolean {
  return httpStatusOf(err) === 429 && /storage is \(re\)initializing/.test(String((err as Error | null)?.message));
}

/** The wait before retry `failures` (1 for the first): Retry-After when the refusal carries one, else the backoff. */
export function nextWaitMs(
  err: unknown,
  failures: number,
  backoff: { initialMs: number; maxMs: number },
  random: () => number = Math.random,
): number {
  const status = httpStatusOf(err);
  const after = (err as { retryAfterS?: unknown } | null)?.retryAfterS;
  if ((status === 429 || status === 503) && typeof after === 'number' && after > 0) {
    return Math.min(after * 1000, backoff.maxMs);
  }
  return Math.round(retryDelay(failures, backoff) * (1 + random()));
}

/**
 * One prober while the API server is away or refusing everyone; the other informers wait for its answer.
 * `refused(who)`: who met a server-wide refusal; true when another informer probes already (who must wait: `wait`).
 * `answered()`: an informer got an answer that is not server-wide: the waiters go. `leave(who)`: who stops.
 * A waiter also goes on its own after the longest backoff step (informer.ts), so that a refusal that was about
 * one resource after all (a 403 of RBAC rules that grant NADs and not pods) never keeps the others from syncing.
 */
export class ServerGate {
  private prober: object | undefined;
  private waiters = new Map<object, () => void>();

  refused(who: object): boolean {
    if (this.prober === undefined || this.prober === who) {
      this.prober = who;
      return false;
    }
    return true;
  }

  wait(who: object, go: () => void): void {
    this.waiters.set(who, go);
  }

  /** Who goes on its own (its fallback timer): no longer waiting. */
  forget(who: object): void {
    this.waiters.delete(who);
  }

  answered(): void {
    this.prober = undefined;
    const go = [...this.waiters.values()];
    this.waiters.clear();
    for (const g of go) g();
  }

  leave(who: object): void {
    this.forget(who);
    if (this.prober === who) this.answered(); // a waiter probes in its place
  }
}
