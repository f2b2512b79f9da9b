/**
 * base/file-lock.ts on Bun (its lock is a POSIX record lock taken through Bun's SQLite; under Node there is none):
 * each case runs in test/helpers/bun-driver.ts under the pinned Bun. A second call of the same process waits for
 * the first (the daemon serves many calls), a lock held by another process holds until that process ends (killed
 * too), and the lock file goes with its holder's releaseAndRemove.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { bunPath, haveBun, onBun } from '../../helpers/bun-run.ts';
import { needs } from '../../helpers/skip.ts';

const dir = mkdtempSync(join(tmpdir(), 'mts-lock-bun-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const DRIVER = resolve(import.meta.dirname, '../../helpers/bun-driver.ts');

/** Another process holding the lock of `path` until killed; resolves once it holds it. */
function holder(path: string, probeHere = false) {
  const child = spawn(bunPath()!, [DRIVER], { env: { PATH: '/usr/bin:/bin' }, stdio: ['pipe', 'pipe', 'inherit'] });
  child.stdin.end(JSON.stringify({ op: 'hold', path, holdMs: 30_000, probeHere }));
  const held = new Promise<boolean>((res) => {
    let out = '';
    child.stdout.on('data', (b: Buffer) => {
      out += b;
      if (out.includes('\n')) res(JSON.parse(out.split('\n')[0]!).held === true);
    });
    child.on('close', () => res(false));
  });
  return { held, kill: () => child.kill('SIGKILL'), closed: new Promise((r) => child.on('close', r)) };
}

describe.runIf(needs(haveBun()))('lockFile on Bun', () => {
  it('a second lock of the same file in the same process waits; the first removes its file; then it is free', async () => {
    const path = join(dir, 'locks', '.lock-a');
    const out = await onBun({ op: 'lock', path, waitMs: 300 });
    expect(out).toEqual({ first: 'held', second: 'timeout', removed: true, third: 'held' });
    expect(statSync(join(dir, 'locks')).mode & 0o777).toBe(0o700);
  });

  it.each([false, true])(
    "another process's lock holds until that process is killed (a try of its own meanwhile: %s)",
    async (probeHere) => {
      // a record lock goes when its process closes any descriptor of the file: a second try in the holder's
      // process must not open the file it holds
      const path = join(dir, `.lock-b-${probeHere}`);
      const h = holder(path, probeHere);
      try {
        expect(await h.held).toBe(true);
        expect(await onBun({ op: 'lock', path, waitMs: 300 })).toEqual({ first: 'timeout' });
      } finally {
        h.kill();
      }
      await h.closed;
      // killed while holding it: nothing beside the lock file (SQLite's journal is kept in memory)
      expect(readdirSync(dir).filter((f) => f.startsWith(`.lock-b-${probeHere}`))).toEqual([`.lock-b-${probeHere}`]);
      expect(await onBun({ op: 'lock', path, waitMs: 300 })).toMatchObject({ first: 'held', second: 'timeout' });
    },
  );
});
