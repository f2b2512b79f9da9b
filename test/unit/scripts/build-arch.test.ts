/**
 * `npm run build -- --arch amd64|arm64` (scripts/build.mjs, build-steps/arch.mjs): the launcher's fast path is its
 * entry point on amd64 only (launcher/fastpath_amd64.s; Go's own entry on arm64), the arm64 Bun is pinned by
 * version, tarball integrity and binary hash, and an architecture without a Bun is refused before anything is built.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a build step in plain JavaScript, without declarations
import { ARCHES, BUN_ARM64 } from '../../../scripts/build-steps/arch.mjs';
// @ts-expect-error: a build step in plain JavaScript, without declarations
import { entryFlags } from '../../../scripts/build-steps/launcher.mjs';

describe('build --arch', () => {
  it('links the fast path as the entry point on amd64, the Go entry on arm64', () => {
    expect(ARCHES).toEqual(['amd64', 'arm64']);
    expect(entryFlags('amd64')).toEqual(['-E=main.fastEntry']);
    expect(entryFlags('arm64')).toEqual([]);
  });

  it('pins the arm64 Bun: one version in the spec and the revision, the tarball and binary hashes', () => {
    expect(BUN_ARM64.spec).toBe(`@oven/bun-linux-aarch64@${BUN_ARM64.revision.split('+')[0]}`);
    expect(BUN_ARM64.integrity).toMatch(/^sha512-[A-Za-z0-9+/]{86}==$/);
    expect(BUN_ARM64.sha256).toMatch(/^[0-9a-f]{64}$/);
  });

  it('refuses another architecture before building anything', () => {
    const build = join(import.meta.dirname, '../../../scripts/build.mjs');
    const r = spawnSync(process.execPath, [build, '--arch', 'riscv64', '--outdir', '/nonexistent/x'], {
      encoding: 'utf8',
    });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('--arch riscv64: one of amd64, arm64');
  });
});
