/**
 * The build's smoke test (scripts/build-steps/smoke.mjs) leaves nothing in the temp dir, passed or failed: a failure
 * used to end the process inside its `try`, so the copy of the executable (110 MiB and the Bun executable it
 * extracted) stayed behind. Each case runs smokeTest in a node of its own with TMPDIR a fresh directory.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

const SMOKE = join(import.meta.dirname, '../../../scripts/build-steps/smoke.mjs');
let dir: string;
let tmp: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'smoke-test-'));
  tmp = join(dir, 'tmp'); // TMPDIR of the smoke test; the executable is beside it
  mkdirSync(tmp);
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** smokeTest(exe) in its own process, TMPDIR = tmp; exe is `text`, executable. */
function smoke(text: string): { status: number | null; stderr: string; left: string[] } {
  const exe = join(dir, 'exe');
  writeFileSync(exe, text);
  chmodSync(exe, 0o755);
  const code = `import(${JSON.stringify(SMOKE)}).then((m) => m.smokeTest(${JSON.stringify(exe)}))`;
  const r = spawnSync(process.execPath, ['-e', code], { env: { ...process.env, TMPDIR: tmp }, encoding: 'utf8' });
  return { status: r.status, stderr: r.stderr, left: readdirSync(tmp) };
}

describe('the build smoke test', () => {
  it('passes an executable that answers VERSION, and removes its copy', () => {
    const r = smoke(`#!/bin/sh\necho '{"cniVersion":"1.0.0","supportedVersions":["1.0.0"]}'\n`);
    expect(r.stderr).toContain('smoke test: VERSION from a copy');
    expect(r.status).toBe(0);
    expect(r.left).toEqual([]);
  });

  it.each([
    ['an executable that exits 3', '#!/bin/sh\nexit 3\n', 'exited 3'],
    ['a file that cannot be executed', 'not a program\n', 'smoke test (env -i CNI_COMMAND=VERSION'],
  ])('fails %s, and removes its copy first', (_what, text, why) => {
    const r = smoke(text);
    expect(r.stderr).toContain('build: FAILED: smoke test');
    expect(r.stderr).toContain(why);
    expect(r.status).toBe(1);
    expect(r.left).toEqual([]);
  });
});
