/**
 * The bench's process start probe (scripts/bench/artifacts.mjs `processStart`, test/data/bench/start-probe.c):
 * both probes build and exit 0, and the JSON carries one cpuid's time and glibc's start. No time is asserted
 * (figures belong in the bench): only that each figure was measured.
 */
import { spawnSync } from 'node:child_process';
import { arch } from 'node:os';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: artifacts.mjs is plain JavaScript with no declaration file (scripts/tsconfig.json checks it)
import { processStart } from '../../../scripts/bench/artifacts.mjs';
import { needs } from '../../helpers/skip.ts';

const cc = { ok: spawnSync('gcc', ['--version']).status === 0, reason: 'needs gcc (the probe is C)' };
const x64 = { ok: arch() === 'x64', reason: 'needs x86-64 (the probe times the cpuid instruction)' };

describe.runIf(needs(cc, x64))('the process start probe', () => {
  it('builds both probes, runs each to exit 0, and reports cpuid and the two exec times', () => {
    const got = processStart(10);
    expect(got.unavailable).toBeUndefined();
    expect(got.cpuid_us).toBeGreaterThan(0);
    expect(got.glibc_dynamic_ms).toBeGreaterThan(0);
    expect(got.no_libc_ms).toBeGreaterThan(0);
    expect(Number.isFinite(got.glibc_start_ms)).toBe(true);
    expect(got.rounds).toBe(10);
  });
});
