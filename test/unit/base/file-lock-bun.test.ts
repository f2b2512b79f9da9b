/**
 * base/file-lock.ts on Bun (its lock is a unix socket name in the abstract namespace; under Node there is none):
 * each case runs in test/helpers/bun-driver.ts under the pinned Bun. A second call of the same process waits for
 * the first (the daemon serves many calls), a lock held by another process holds until that process ends (killed
 * too), no file is made, and a name taken by a user that is not root holds nobody back.
 */
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { bunPath, haveBun, onBun } from '../../helpers/bun-run.ts';
import { fileExists, isRoot, needs } from '../../helpers/skip.ts';

const dir = mkdtempSync(join(tmpdir(), 'mts-lock-bun-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const DRIVER = resolve(import.meta.dirname, '../../helpers/bun-driver.ts');

/** Another process holding the lock of `path` until killed (`argv` before the driver: e.g. setpriv). */
function holder(request: Record<string, unknown>, argv: string[] = []) {
  const cmd = [...argv, bunPath()!, DRIVER];
  const child = spawn(cmd[0]!, cmd.slice(1), { env: { PATH: '/usr/bin:/bin' }, stdio: ['pipe', 'pipe', 'inherit'] });
  child.stdin.end(JSON.stringify({ holdMs: 30_000, ...request }));
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
  it('a second lock of the same path in the same process waits; once the first is released it is free', async () => {
    const path = join(dir, 'cni', '.lock-a');
    expect(await onBun({ op: 'lock', path, waitMs: 300 })).toEqual({ first: 'held', second: 'timeout', third: 'held' });
    expect(existsSync(join(dir, 'cni'))).toBe(false); // no file, no directory
  });

  it.each([false, true])(
    "another process's lock holds until that process is killed (a try of its own meanwhile: %s)",
    async (probeHere) => {
      const path = join(dir, `.lock-b-${probeHere}`);
      const h = holder({ op: 'hold', path, probeHere });
      try {
        expect(await h.held).toBe(true);
        expect(await onBun({ op: 'lock', path, waitMs: 300 })).toEqual({ first: 'timeout' });
      } finally {
        h.kill();
      }
      await h.closed;
      expect(await onBun({ op: 'lock', path, waitMs: 300 })).toMatchObject({ first: 'held', second: 'timeout' });
      expect(readdirSync(dir)).toEqual([]); // killed while holding it: nothing left behind
    },
  );

  it.runIf(needs(isRoot(), fileExists('/usr/bin/setpriv', 'setpriv (util-linux)')))(
    'a name taken by a user that is not root is not honoured: the call goes on at once',
    async () => {
      chmodSync(dir, 0o755); // the driver run as nobody reads nothing here; the pinned Bun must be reachable
      const path = join(dir, '.lock-c');
      const squatter = holder({ op: 'squat', path }, ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups']);
      try {
        expect(await squatter.held).toBe(true);
        // no lock at all while the user holds the name (as on a file system that takes no new file)
        expect(await onBun({ op: 'lock', path, waitMs: 3000 })).toEqual({
          first: 'held',
          second: 'held',
          third: 'held',
        });
      } finally {
        squatter.kill();
      }
      await squatter.closed;
    },
  );
});
