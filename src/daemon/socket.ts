/**
 * daemon/socket.ts: the unix socket's file (I/O): directory 0700, a stale socket removed, socket 0600.
 *
 * A socket file that still answers belongs to a running daemon: start-up fails rather than steal it. One that
 * refuses connections is left over from a daemon that died, and is removed. The directory (and those above it) must
 * be root's alone, and a socket file of another user is never used or removed: start-up fails (issue 28). Once
 * listening, the shim's marker `multus.shim-gave-up` (a shim waited for a daemon in vain, shim/wait.go) is removed:
 * shims wait again.
 * Tested by test/unit/daemon/server.test.ts, test/daemon/process.test.ts (modes, non-root refused),
 * test/shim/peer.test.ts (another user's socketDir and socket).
 */
import { chmodSync, lstatSync, mkdirSync, rmSync, unlinkSync } from 'node:fs';
import type { Server } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { securePrivateDir } from '../base/private-dir.ts';

export const SOCKET_NAME = 'multus.sock';
/** shim/wait.go's marker: while it is there, a shim that cannot connect falls back without waiting. */
export const SHIM_GAVE_UP = 'multus.shim-gave-up';

export function socketPath(socketDir: string): string {
  return join(socketDir, SOCKET_NAME);
}

function answers(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(path);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

export async function listenUnix(server: Server, socketDir: string): Promise<string> {
  // root's alone (issue 28): else another user could plant a socket the shim would send root's calls to
  securePrivateDir(socketDir, 'socketDir');
  mkdirSync(socketDir, { recursive: true, mode: 0o700 });
  chmodSync(socketDir, 0o700);
  const path = socketPath(socketDir);
  let exists = false;
  try {
    const st = lstatSync(path);
    if (!st.isSocket()) throw new Error(`${path} exists and is not a socket: remove it or choose another socketDir`);
    if (st.uid !== (process.geteuid?.() ?? 0)) {
      throw new Error(`${path} belongs to uid ${st.uid}, not to the daemon's user: it is not ours; remove it`);
    }
    exists = true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  if (exists) {
    if (await answers(path)) throw new Error(`another daemon is serving ${path}: stop it first`);
    unlinkSync(path);
  }
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    // The directory is 0700 already, so nobody else can connect in the moment before the chmod.
    server.listen(path, () => {
      server.off('error', reject);
      resolve();
    });
  });
  chmodSync(path, 0o600);
  rmSync(join(socketDir, SHIM_GAVE_UP), { force: true });
  return path;
}

export function removeSocket(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // already gone
  }
}
