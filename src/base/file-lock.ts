/**
 * base/file-lock.ts: an exclusive lock on a file (flock(2), through base/libc.ts), for one container's calls
 * (issue 28: a DEL during a slow ADD of the same container used to return first and leave what the ADD made).
 *
 * flock is released by the kernel when its holder dies (SIGKILL included), so a killed call never leaves a lock
 * behind. The lock file may be removed by its holder (DEL, when the container is gone): a waiter that then gets
 * the lock of the removed file sees that the path names another file (or none) and tries again. Waiting polls
 * (LOCK_NB every 20 ms), so the event loop keeps running (timeouts, signals). Without FFI (Node) there is no lock.
 * Nor when the lock file cannot be made because the file system takes no new file (read-only, full, over quota):
 * then no other call can write there either, and a DEL must still be served (docs/reliability.md).
 */
import { closeSync, constants, fstatSync, mkdirSync, openSync, statSync, unlinkSync } from 'node:fs';
import { dirname } from 'node:path';
import { sleep } from './sleep.ts';
import { libc } from './libc.ts';

const LOCK_EX = 2;
const LOCK_NB = 4;
const POLL_MS = 20;
/** Created if missing, never through a symbolic link. */
const OPEN_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW;

export interface FileLock {
  /** Removes the lock file (while still holding it), then releases. */
  releaseAndRemove(): void;
  release(): void;
}

const NO_LOCK: FileLock = { release() {}, releaseAndRemove() {} };

function sameFile(fd: number, path: string): boolean {
  try {
    const a = fstatSync(fd);
    const b = statSync(path);
    return a.dev === b.dev && a.ino === b.ino;
  } catch {
    return false;
  }
}

/** Takes the lock on `path` (made 0600, its directory 0700); 'timeout' when it stayed held for `waitMs`. */
export async function lockFile(path: string, waitMs: number): Promise<FileLock | 'timeout'> {
  const c = libc();
  if (!c) return NO_LOCK;
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const deadline = Date.now() + waitMs;
  for (;;) {
    const fd = openLockFile(path);
    if (fd === undefined) return NO_LOCK;
    if (c.flock(fd, LOCK_EX | LOCK_NB) === 0) {
      if (sameFile(fd, path)) return held(fd, path);
      closeSync(fd); // removed by its last holder meanwhile: lock the file that is there now
      continue;
    }
    closeSync(fd);
    if (Date.now() >= deadline) return 'timeout';
    await sleep(POLL_MS);
  }
}

/** The file system refuses new files: no lock (see above). */
const UNWRITABLE = new Set(['EROFS', 'ENOSPC', 'EDQUOT']);

function openLockFile(path: string): number | undefined {
  try {
    return openSync(path, OPEN_FLAGS, 0o600);
  } catch (e) {
    if (UNWRITABLE.has((e as NodeJS.ErrnoException).code ?? '')) return undefined;
    throw e;
  }
}

function held(fd: number, path: string): FileLock {
  let open = true;
  const release = (): void => {
    if (!open) return;
    open = false;
    closeSync(fd); // closing the last descriptor releases the flock
  };
  return {
    release,
    releaseAndRemove() {
      if (!open) return;
      try {
        unlinkSync(path);
      } catch {
        // already gone
      }
      release();
    },
  };
}
