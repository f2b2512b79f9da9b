/**
 * readiness.ts: the backoff schedule, the wait (with fake deps that record checks and sleeps, no real time),
 * the single DEL check, and the real deps against a temp dir.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CniError } from '../../../src/base/errors.ts';
import type { BackoffOptions } from '../../../src/base/backoff.ts';
import type { ReadinessDeps } from '../../../src/multus/readiness.ts';
import { DEFAULT_BACKOFF, backoffSchedule } from '../../../src/base/backoff.ts';
import { checkReadinessOnce, realReadinessDeps, waitForReadiness } from '../../../src/multus/readiness.ts';

/** Fake deps: the file appears on check number `appearsAt` (1-based; Infinity = never). */
function fakeDeps(appearsAt: number): ReadinessDeps & { checks: string[]; sleeps: number[] } {
  const checks: string[] = [];
  const sleeps: number[] = [];
  return {
    checks,
    sleeps,
    async exists(path) {
      checks.push(path);
      return checks.length >= appearsAt;
    },
    async sleep(ms) {
      sleeps.push(ms);
    },
  };
}

const NO_JITTER = (): number => 0;

describe('backoffSchedule', () => {
  it.each<[string, BackoffOptions, () => number, number[]]>([
    ['default, no jitter', DEFAULT_BACKOFF, NO_JITTER, [250, 1000, 4000, 16000]],
    ['default, full jitter', DEFAULT_BACKOFF, () => 1, [275, 1100, 4400, 17600]],
    ['default, half jitter (rounded)', DEFAULT_BACKOFF, () => 0.5, [263, 1050, 4200, 16800]],
    [
      'factor 1 is a fixed interval',
      { initialMs: 1000, factor: 1, jitter: 0, steps: 3 },
      Math.random,
      [1000, 1000, 1000],
    ],
    ['zero steps', { ...DEFAULT_BACKOFF, steps: 0 }, NO_JITTER, []],
  ])('%s', (_name, opts, random, expected) => {
    expect(backoffSchedule(opts, random)).toEqual(expected);
  });

  it('uses Math.random by default, within [d, d + d*jitter]', () => {
    const schedule = backoffSchedule(DEFAULT_BACKOFF);
    expect(schedule).toHaveLength(4);
    [250, 1000, 4000, 16000].forEach((d, i) => {
      expect(schedule[i]).toBeGreaterThanOrEqual(d);
      expect(schedule[i]).toBeLessThanOrEqual(d * 1.1);
    });
  });

  it.each<[BackoffOptions]>([
    [{ ...DEFAULT_BACKOFF, steps: -1 }],
    [{ ...DEFAULT_BACKOFF, steps: 1.5 }],
    [{ ...DEFAULT_BACKOFF, initialMs: Number.NaN }],
    [{ ...DEFAULT_BACKOFF, factor: -2 }],
    [{ ...DEFAULT_BACKOFF, jitter: Number.POSITIVE_INFINITY }],
  ])('rejects %j with code 7', (opts) => {
    expect(() => backoffSchedule(opts, NO_JITTER)).toThrow(
      expect.objectContaining({ code: 7, msg: expect.stringMatching(/^invalid readiness backoff /) }),
    );
  });
});

describe('waitForReadiness', () => {
  const FILE = '/run/multus/../flannel/subnet.env';
  const ABS = '/run/flannel/subnet.env';

  it.each([
    [1, []],
    [2, [250]],
    [3, [250, 1000]],
    [5, [250, 1000, 4000, 16000]],
  ])('file appears on check %i: sleeps %j, then returns', async (appearsAt, sleeps) => {
    const deps = fakeDeps(appearsAt);
    await expect(waitForReadiness(FILE, DEFAULT_BACKOFF, deps, NO_JITTER)).resolves.toBeUndefined();
    expect(deps.sleeps).toEqual(sleeps);
    expect(deps.checks).toEqual(Array(appearsAt).fill(ABS));
  });

  it('times out with code 11 after every check', async () => {
    const deps = fakeDeps(Infinity);
    const err = await waitForReadiness(FILE, DEFAULT_BACKOFF, deps, NO_JITTER).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CniError);
    expect((err as CniError).code).toBe(11);
    expect((err as CniError).msg).toBe(
      'have you checked that your default network is ready? still waiting for readinessindicatorfile @ ' +
        '/run/flannel/subnet.env after 5 checks over 21.25 s',
    );
    expect(deps.sleeps).toEqual([250, 1000, 4000, 16000]);
    expect(deps.checks).toHaveLength(5);
  });

  it('reports the jittered total and a relative path made absolute', async () => {
    const deps = fakeDeps(Infinity);
    const opts = { initialMs: 100, factor: 2, jitter: 0.5, steps: 2 };
    const err = await waitForReadiness('ready.flag', opts, deps, () => 1).catch((e: unknown) => e);
    expect((err as CniError).msg).toBe(
      'have you checked that your default network is ready? still waiting for readinessindicatorfile @ ' +
        `${resolve('ready.flag')} after 3 checks over 0.45 s`,
    );
    expect(deps.sleeps).toEqual([150, 300]);
  });

  it('with zero steps checks once and does not sleep', async () => {
    const deps = fakeDeps(Infinity);
    const err = await waitForReadiness(ABS, { ...DEFAULT_BACKOFF, steps: 0 }, deps).catch((e: unknown) => e);
    expect((err as CniError).msg).toMatch(/ after 1 checks over 0 s$/);
    expect([deps.checks.length, deps.sleeps.length]).toEqual([1, 0]);
  });
});

describe('checkReadinessOnce', () => {
  it.each([
    [1, true],
    [2, false],
  ])('file present from check %i → %s, one check, no sleep', async (appearsAt, expected) => {
    const deps = fakeDeps(appearsAt);
    await expect(checkReadinessOnce('/a/./b', deps)).resolves.toBe(expected);
    expect(deps.checks).toEqual(['/a/b']);
    expect(deps.sleeps).toEqual([]);
  });
});

describe('realReadinessDeps', () => {
  it('exists is true for a file, false for a missing path or one under a file', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'mts-readiness-'));
    try {
      const file = join(dir, 'ready');
      await writeFile(file, '');
      expect(await realReadinessDeps.exists(file)).toBe(true);
      expect(await realReadinessDeps.exists(join(dir, 'missing'))).toBe(false);
      expect(await realReadinessDeps.exists(join(file, 'child'))).toBe(false);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('sleep waits at least the given time', async () => {
    const start = performance.now();
    await realReadinessDeps.sleep(20);
    expect(performance.now() - start).toBeGreaterThanOrEqual(15);
  });
});
