/**
 * base/file-lock.ts: an exclusive lock named by a path, for one container's calls (issue 28: a DEL during a slow
 * ADD of the same container used to return first and leave what the ADD made).
 *
 * The lock is a unix socket bound in the abstract namespace under a name made from the path (`lockName`): one
 * socket of a name at a time can be bound, and the kernel frees the name when its holder closes it or dies
 * (SIGKILL included), so a killed call never leaves a lock behind, and no file is made (none is left beside the
 * caches for a roll back to Go Multus to find). A second call of the same process meets the name taken as one of
 * another process does. Why not flock(2): Bun's API has none, and its FFI, which could call it, needs the JIT,
 * which the thin plugin runs without (docs/archive/performance.md, "The thin plugin without the JIT"); binding costs
 * ~0.1 ms, SQLite's record locks (tried) ~1.5 ms and 2 MiB per call.
 *
 * The abstract namespace is the network namespace's: every call of a node runs in the host's (the runtime's exec,
 * the daemon's hostNetwork pod). Any process there may bind a name, root or not: a name held by a process that
 * is not root's is not honoured, and the call goes on without the lock (as on a file system that takes no new
 * file), so that nobody but root can hold a container's calls back (the holder is looked up in /proc/net/unix
 * and /proc/<pid>/fd, on contention only). Waiting polls (every 20 ms plus up to 10 ms at random, so that two
 * waiters do not keep meeting), so the event loop keeps running (timeouts, signals). Without Bun (the sources
 * under Node) there is no lock.
 */
import { readFileSync, readdirSync, readlinkSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import type { BunRuntime } from './bun.ts';
import { bunRuntime } from './bun.ts';
import { sleep } from './sleep.ts';

const POLL_MS = 20;
const JITTER_MS = 10;
const PREFIX = 'multus-ts.lock.';

export interface FileLock {
  release(): void;
}

const NO_LOCK: FileLock = { release() {} };

/** The socket name of `path`'s lock: two 64-bit hashes of its absolute form (printable, well under 107 bytes). */
export function lockName(bun: Pick<BunRuntime, 'hash'>, path: string): string {
  const abs = resolve(path);
  const h = (seed: number) => BigInt(bun.hash(abs, seed)).toString(16).padStart(16, '0');
  return `${PREFIX}${h(1)}${h(2)}`;
}

/** Takes the lock of `path` (no file is made); 'timeout' when it stayed held for `waitMs`. */
export async function lockFile(path: string, waitMs: number): Promise<FileLock | 'timeout'> {
  const bun = bunRuntime();
  if (!bun?.listen) return NO_LOCK;
  const name = lockName(bun, path);
  const deadline = Date.now() + waitMs;
  let rootHolder: string | undefined; // the socket inode of a holder found to be root's
  for (;;) {
    const got = tryBind(bun, name);
    if (got) return got;
    const inode = socketInode(name);
    if (inode !== undefined && inode !== rootHolder) {
      const uid = ownerUid(inode);
      if (uid !== undefined && uid !== 0) return NO_LOCK; // held by a user: not honoured (see above)
      rootHolder = inode; // root's, or not to be found (another PID namespace): waited for
    }
    if (Date.now() >= deadline) return 'timeout';
    await sleep(POLL_MS + Math.random() * JITTER_MS);
  }
}

function tryBind(bun: BunRuntime, name: string): FileLock | undefined {
  let server;
  try {
    // a connection (nobody needs one) is closed at once
    server = bun.listen({ unix: `\0${name}`, socket: { open: (s) => s.end(), data() {} } });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EADDRINUSE') return undefined;
    throw e;
  }
  let open = true;
  return {
    release() {
      if (!open) return;
      open = false;
      server.stop(true);
    },
  };
}

/** The inode of the socket bound to `name` (/proc/net/unix shows an abstract name with '@'), if any. */
function socketInode(name: string): string | undefined {
  try {
    const line = readFileSync('/proc/net/unix', 'utf8')
      .split('\n')
      .find((l) => l.endsWith(` @${name}`));
    return line?.trim().split(/\s+/)[6];
  } catch {
    return undefined;
  }
}

/** The uid of the process holding socket `inode`, if one can be found in this PID namespace. */
function ownerUid(inode: string): number | undefined {
  const target = `socket:[${inode}]`;
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((p) => /^\d+$/.test(p));
  } catch {
    return undefined;
  }
  for (const pid of pids) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue; // gone, or not ours to read
    }
    for (const fd of fds) {
      try {
        if (readlinkSync(`/proc/${pid}/fd/${fd}`) === target) return statSync(`/proc/${pid}`).uid;
      } catch {
        // closed meanwhile
      }
    }
  }
  return undefined;
}
