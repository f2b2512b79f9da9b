/**
 * A short soak in CI (root): 100 ADD/DEL cycles through build/multus with real plugins, a fifth of the ADDs
 * killed with SIGKILL at a random point and followed by the runtime's DEL (scripts/soak.mjs). Nothing may be
 * left: no link, bridge port, host-local IP, cache or temp file, netns, plugin process or fd. The seed is fixed
 * so a failure replays with `npm run soak -- --cycles 100 --kill-rate 0.2 --seed 12`.
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

describe.runIf(ok && existsSync(MULTUS_BIN))('soak', () => {
  it('100 cycles with kill rate 0.2 leave nothing behind', () => {
    const r = spawnSync(
      process.execPath,
      [join(REPO_ROOT, 'scripts/soak.mjs'), '--cycles', '100', '--kill-rate', '0.2', '--seed', '12'],
      {
        encoding: 'utf8',
        timeout: 900_000,
      },
    );
    const report = JSON.parse(r.stdout.trim().split('\n').pop() ?? '{}') as Record<string, unknown>;
    expect(report).toMatchObject({
      cycles: 100,
      failures: 0,
      left: { links: [], bridgePorts: [], ips: [], cacheFiles: [], tempFiles: [], netns: [], processes: [], fds: 0 },
    });
    expect(report.kills as number).toBeGreaterThan(5);
    expect(r.status).toBe(0);
  }, 900_000);
});
