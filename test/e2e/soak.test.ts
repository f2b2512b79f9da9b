/**
 * A short soak in CI (root): 100 ADD/DEL cycles through build/multus with real plugins, a fifth of the ADDs
 * killed with SIGKILL at a random point and followed by the runtime's DEL (scripts/soak.mjs). Nothing may be
 * left: no link, bridge port, host-local IP, cache or temp file, netns, plugin process or fd. The seed is fixed
 * so a failure replays with `npm run soak -- --cycles 100 --kill-rate 0.2 --seed 12` (add `--resident` for the
 * second case: the same cycles through build/multus-shim and `build/multus daemon`, the kills hitting the shim,
 * and the daemon still serving at the end).
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { fileExists, isRoot, needs } from '../helpers/skip.ts';
import { MULTUS_BIN, PLUGIN_DIR, REPO_ROOT } from './helpers.ts';

const ok = needs(
  isRoot(),
  fileExists(MULTUS_BIN, 'the built executable (npm run build)'),
  fileExists(join(PLUGIN_DIR, 'macvlan'), 'CNI plugins'),
);

const SHIM_BIN = join(REPO_ROOT, 'build/multus-shim');
const NOTHING_LEFT = {
  links: [],
  bridgePorts: [],
  ips: [],
  cacheFiles: [],
  tempFiles: [],
  netns: [],
  processes: [],
  fds: 0,
};

function soak(extra: string[]): { status: number | null; report: Record<string, unknown>; stderr: string } {
  const r = spawnSync(
    process.execPath,
    [join(REPO_ROOT, 'scripts/soak.mjs'), '--cycles', '100', '--kill-rate', '0.2', '--seed', '12', ...extra],
    { encoding: 'utf8', timeout: 900_000 },
  );
  const report = JSON.parse(r.stdout.trim().split('\n').pop() || '{}') as Record<string, unknown>;
  return { status: r.status, report, stderr: r.stderr };
}

describe.runIf(ok && existsSync(MULTUS_BIN))('soak', () => {
  it('100 cycles with kill rate 0.2 leave nothing behind', () => {
    const { status, report } = soak([]);
    expect(report).toMatchObject({ mode: 'thin', cycles: 100, failures: 0, left: NOTHING_LEFT });
    expect(report.kills as number).toBeGreaterThan(5);
    expect(status).toBe(0);
  }, 900_000);

  const shim = needs(fileExists(SHIM_BIN, 'the native shim build/multus-shim (npm run build with Go)'));
  it.runIf(shim)(
    'the same through the resident daemon (kills hit the shim): nothing left, the daemon still serving',
    () => {
      const { status, report, stderr } = soak(['--resident']);
      expect(report, stderr).toMatchObject({ mode: 'resident', cycles: 100, failures: 0, left: NOTHING_LEFT });
      expect(report.kills as number).toBeGreaterThan(5);
      expect((report.daemon as { serving: boolean }).serving).toBe(true);
      expect(status).toBe(0);
    },
    900_000,
  );
});
