/**
 * base/sleep.ts: a promise that resolves after `ms` milliseconds, on the global timer. node:timers/promises does the
 * same but is one more built-in for every call to load at start-up (docs/archive/performance.md).
 */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
