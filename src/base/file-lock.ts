/**
 * base/file-lock.ts: an exclusive lock on a file, for one container's calls (issue 28: a DEL during a slow ADD of
 * the same container used to return first and leave what the ADD made).
 *
 * The lock is a POSIX record lock (fcntl), taken by an exclusive transaction of Bun's built-in SQLite on the lock
 * file (an empty file is an empty database; nothing is ever written to it, and its journal is kept in memory):
 * Bun's API has no flock, and its FFI, which could call one, needs the JIT, which the thin plugin runs without
 * (docs/performance.md, "The thin plugin without the JIT"). The kernel releases the lock when its holder dies
 * (SIGKILL included), so a killed call never leaves a lock behind. A record lock belongs to the process, not to
 * the descriptor, and closing any descriptor of the file drops it: so this process never opens a file it holds
 * again (`heldHere`; the daemon serves many calls), and a call of this process waits for another one of the same
 * file as it waits for one of another process.
 *
 * The lock file may be removed by its holder (after every call): a waiter that then gets the lock of the removed
 * file sees that the path names another file (or none) and tries again. Waiting polls (every 20 ms, plus up to
 * 10 ms at random so that two waiters do not keep meeting), so the event loop keeps running (timeouts, signals).
 * Without Bun (the sources under Node) there is no lock. Nor when the lock file cannot be made because the file
 * system takes no new file (read-only, full, over quota): then no other call can write there either, and a DEL
 * must still be served (docs/reliability.md).
 */
import { closeSync, constants, fstatSync, lstatSync, mkdirSync, openSync, unlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { sleep } from './sleep.ts';

const POLL_MS = 20;
const JITTER_MS = 10;
/** Created if missing, never through a symbolic link. */
const OPEN_FLAGS = constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW;

export interface FileLock {
  /** Removes the lock file (while still holding it), then releases. */
  releaseAndRemove(): void;
  release(): void;
}

const NO_LOCK: FileLock = { release() {}, releaseAndRemove() {} };

/** The part of `bun:sqlite` used here. */
interface SqliteDb {
  exec(sql: string): void;
  close(): void;
}
interface BunSqlite {
  Database: new (path: string, options: { readwrite: boolean; create: boolean }) => SqliteDb;
}

let sqlite: BunSqlite | null | undefined;

/** Bun's SQLite, loaded on first use (about 0.4 ms); null under Node. */
function loadSqlite(): BunSqlite | null {
  if (sqlite !== undefined) return sqlite;
  sqlite = null;
  if (!process.versions.bun) return sqlite;
  try {
    sqlite = createRequire(__filename)('bun:sqlite') as BunSqlite;
  } catch {
    // no SQLite
  }
  return sqlite;
}

/** Files (device:inode) this process holds a lock of, and the connection holding it (kept here, so that the garbage
 *  collector cannot close it, and the lock with it, while its FileLock is still to be released). */
const heldHere = new Map<string, SqliteDb>();
const fileKey = (st: { dev: number; ino: number }): string => `${st.dev}:${st.ino}`;

function pathKey(path: string): string | undefined {
  try {
    return fileKey(lstatSync(path));
  } catch {
    return undefined;
  }
}

/** Takes the lock on `path` (made 0600, its directory 0700); 'timeout' when it stayed held for `waitMs`. */
export async function lockFile(path: string, waitMs: number): Promise<FileLock | 'timeout'> {
  const lite = loadSqlite();
  if (!lite) return NO_LOCK;
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const deadline = Date.now() + waitMs;
  for (;;) {
    const got = tryLock(lite, path);
    if (got === 'unwritable') return NO_LOCK;
    if (got === 'moved') continue; // removed by its last holder meanwhile: lock the file that is there now
    if (got !== 'busy') return got;
    if (Date.now() >= deadline) return 'timeout';
    await sleep(POLL_MS + Math.random() * JITTER_MS);
  }
}

/** One attempt, without waiting (nothing here awaits, so no other call of this process runs in between). */
function tryLock(lite: BunSqlite, path: string): FileLock | 'busy' | 'moved' | 'unwritable' {
  const before = pathKey(path);
  if (before !== undefined && heldHere.has(before)) return 'busy';
  const fd = openLockFile(path);
  if (fd === undefined) return 'unwritable';
  const key = fileKey(fstatSync(fd));
  if (heldHere.has(key)) {
    closeSync(fd); // cannot be: the path named another file a moment ago and this process holds this one
    return 'busy';
  }
  let db: SqliteDb | undefined;
  try {
    db = new lite.Database(path, { readwrite: true, create: false });
    // the transaction of an empty database writes its first page (in memory only): its journal stays in memory
    // too, so that a killed holder leaves no `-journal` file beside the lock file
    db.exec('PRAGMA journal_mode=MEMORY');
    db.exec('BEGIN EXCLUSIVE');
  } catch (e) {
    db?.close();
    closeSync(fd);
    if ((e as { code?: string }).code === 'SQLITE_BUSY') return 'busy';
    if (pathKey(path) !== key) return 'moved';
    throw e;
  }
  // SQLite opened the path after this process did: the lock is of `fd`'s file only if the path still names it
  if (pathKey(path) === key) return held(fd, db, path, key);
  db.exec('ROLLBACK');
  db.close();
  closeSync(fd);
  return 'moved';
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

function held(fd: number, db: SqliteDb, path: string, key: string): FileLock {
  heldHere.set(key, db);
  let open = true;
  const release = (): void => {
    if (!open) return;
    open = false;
    try {
      db.exec('ROLLBACK');
    } finally {
      db.close(); // the lock goes with SQLite's descriptor, and with ours (closed last)
      closeSync(fd);
      heldHere.delete(key);
    }
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
