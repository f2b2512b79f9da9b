/**
 * base/files.ts: files written atomically and read without surprises (I/O).
 *
 * `writeFileAtomic` (temp file in the same directory, fsync, rename; 0600 files, 0700 directories) is how every
 * cache and log file is written, so a crash leaves the old file or the new one, never a partial one. `readOutcome`
 * reads and decodes one file and tells missing from corrupt; `assertSafeComponent` keeps names used as a path
 * component from escaping their directory.
 */
import {
  close,
  closeSync,
  constants,
  fchmodSync,
  fstatSync,
  fsync,
  fsyncSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { CniCode, CniError, messageOf } from './errors.ts';

export type ReadOutcome<T> = { kind: 'ok'; value: T } | { kind: 'missing' } | { kind: 'corrupt'; error: CniError };

let tempCounter = 0;

/**
 * The most a temp name adds to the file name it stands for: `.` before it, `.tmp-<pid>-<time>-<counter>-<random>`
 * after it (pid up to 7 digits, time 8, counter up to 8, random 6), rounded up: a name that fits only without it
 * cannot be written atomically.
 */
export const TEMP_NAME_EXTRA = 40;

/** Temp files start with '.', which no libcni network name can (it must start alphanumeric), so scans skip them. */
function tempPathFor(path: string): string {
  tempCounter += 1;
  const unique = `${process.pid}-${Date.now().toString(36)}-${tempCounter}-${Math.random().toString(36).slice(2, 8)}`;
  return join(dirname(path), `.${basename(path)}.tmp-${unique}`);
}

export function isTempName(name: string): boolean {
  return name.startsWith('.');
}

/** How `writeFileAtomic` makes the new contents durable (docs/reliability.md, "Which cache writes are fsynced"). */
export type Durability = 'fsync' | 'background' | 'none';

/** Background fsyncs not finished yet, by directory; each settles with its error, if any (never rejects). */
const syncing = new Map<string, Set<Promise<Error | undefined>>>();

/**
 * Where 'background' fsyncs run: on the runtime's worker threads ('thread', the default: the daemon, whose event loop
 * serves many calls), or on this thread when `runDeferredSyncs` is called ('deferred': a process that serves one
 * call, where starting the worker threads costs more than the fsync; docs/reliability.md).
 */
let backgroundMode: 'thread' | 'deferred' = 'thread';
const deferred: { path: string; fd: number }[] = [];

/** From now on 'background' fsyncs wait for `runDeferredSyncs` (or `backgroundSyncs`) and run on this thread. */
export function deferBackgroundSyncs(): void {
  backgroundMode = 'deferred';
}

function pendingIn(dir: string): Set<Promise<Error | undefined>> {
  const set = syncing.get(dir) ?? new Set();
  syncing.set(dir, set);
  return set;
}

function syncInBackground(path: string, fd: number): void {
  if (backgroundMode === 'deferred') {
    deferred.push({ path, fd });
    return;
  }
  const set = pendingIn(dirname(path));
  const done: Promise<Error | undefined> = new Promise((resolve) =>
    fsync(fd, (err) => close(fd, () => resolve(err ? new Error(`fsync of ${path}: ${err.message}`) : undefined))),
  );
  set.add(done);
  // A failure stays until a wait reported it: a delegate slower than the disk must not let it go unseen.
  void done.then((err) => err || set.delete(done));
}

/**
 * Runs the deferred fsyncs now, on this thread (libcni.ts calls it once a plugin was started, so they overlap its
 * run); their errors are kept for `backgroundSyncs`.
 */
export function runDeferredSyncs(): void {
  for (const { path, fd } of deferred.splice(0)) {
    let error: Error | undefined;
    try {
      fsyncSync(fd);
    } catch (e) {
      error = new Error(`fsync of ${path}: ${messageOf(e)}`);
    }
    ignoreErrors(() => closeSync(fd));
    if (error) pendingIn(dirname(path)).add(Promise.resolve(error));
  }
}

/**
 * Waits for the background fsyncs of files in `dir` (writeFileAtomic with 'background'; deferred ones run now);
 * throws a CniError when one failed, as a synchronous fsync would have, also one that failed before this wait. A
 * failure is reported to the waits already waiting for it, or else to the next one, then forgotten: in the
 * daemon, whose calls share the cache dir, that may be another container's ADD than the one that wrote the file
 * (the disk is the node's; docs/reliability.md).
 */
export async function backgroundSyncs(dir: string): Promise<void> {
  runDeferredSyncs();
  const set = syncing.get(dir);
  const pending = [...(set ?? [])];
  const errors = await Promise.all(pending);
  pending.forEach((p, i) => errors[i] && set?.delete(p)); // reported: forgotten
  const err = errors.find((e) => e !== undefined);
  if (err) throw new CniError(CniCode.IoFailure, `${err.message}; check the disk`, { cause: err });
}

/**
 * Write `data` so readers see either the old file or the complete new one: temp file in the same directory,
 * fsync, rename. Parent directories are created 0700; the file gets `mode` exactly (fchmod, so umask cannot
 * widen or narrow it). The directory itself is not fsynced: after a power loss the file may be missing, never
 * partial. `durable` (docs/reliability.md, "Which cache writes are fsynced"): 'fsync' (the default) as above;
 * 'background' renames first and fsyncs while the caller goes on (`backgroundSyncs(dir)` waits for it; in a
 * process that called `deferBackgroundSyncs`, at `runDeferredSyncs` or `backgroundSyncs`), so a
 * process crash still leaves the old file or the complete new one and only a power loss before the fsync ends can
 * leave the new name empty; 'none' never fsyncs, for a file whose emptiness after a power loss its reader covers.
 */
export function writeFileAtomic(
  path: string,
  data: string | Buffer,
  mode = 0o600,
  { durable = 'fsync' }: { durable?: Durability } = {},
): void {
  let temp: string | undefined;
  let fd: number | undefined;
  try {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    temp = tempPathFor(path);
    fd = openSync(temp, 'wx', mode);
    fchmodSync(fd, mode);
    const buf = typeof data === 'string' ? Buffer.from(data) : data;
    for (let off = 0; off < buf.length;) off += writeSync(fd, buf, off, buf.length - off);
    if (durable === 'fsync') fsyncSync(fd);
    if (durable !== 'background') {
      closeSync(fd);
      fd = undefined;
    }
    renameSync(temp, path);
    if (fd !== undefined) syncInBackground(path, fd);
    fd = undefined;
  } catch (err) {
    if (fd !== undefined) ignoreErrors(() => closeSync(fd!));
    if (temp !== undefined) ignoreErrors(() => unlinkSync(temp!));
    throw new CniError(
      CniCode.IoFailure,
      `cannot write ${path}: ${messageOf(err)}; check that its directory is writable and the disk is not full`,
      { cause: err },
    );
  }
}

function ignoreErrors(fn: () => void): void {
  try {
    fn();
  } catch {
    // best-effort cleanup after the real error, which is the one reported
  }
}

/** A value used as one file-name component must not escape or alias its directory. */
export function assertSafeComponent(value: string, what: string): void {
  if (value === '' || value === '.' || value === '..' || value.includes('/') || value.includes('\0')) {
    throw new CniError(
      CniCode.InvalidEnv,
      `${what} ${JSON.stringify(value)} cannot be used in a cache file name: it must not be empty, "." or "..", or contain "/" or NUL`,
    );
  }
}

export function isMissingError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  // A name longer than NAME_MAX cannot exist, so such a file is missing, not unreadable.
  return code === 'ENOENT' || code === 'ENOTDIR' || code === 'ENAMETOOLONG';
}

/** The file-system calls `removeIfPresent` makes (tests inject failures). */
export interface RemoveFs {
  unlinkSync(path: string): void;
  lstatSync(path: string): unknown;
}

const realRemoveFs: RemoveFs = { unlinkSync, lstatSync };

/**
 * Remove `path`; a missing file is not an error. On a read-only file system unlink reports EROFS even for a
 * file that does not exist, so a failed unlink is checked again with lstat: absent is absent, whatever the errno.
 */
export function removeIfPresent(path: string, fs: RemoveFs = realRemoveFs): void {
  try {
    fs.unlinkSync(path);
  } catch (err) {
    if (isMissingError(err) || isAbsent(path, fs)) return;
    throw new CniError(
      CniCode.IoFailure,
      `cannot remove ${path}: ${messageOf(err)}; check the permissions of its directory`,
      { cause: err },
    );
  }
}

function isAbsent(path: string, fs: RemoveFs): boolean {
  try {
    fs.lstatSync(path);
    return false;
  } catch (err) {
    return isMissingError(err);
  }
}

/**
 * Reads one cache file without following a symbolic link (O_NOFOLLOW) and only if it is a regular file: a link
 * or a device planted in a cache directory must not make DEL run a delegate defined elsewhere; undefined for a file
 * that belongs to another user than root (or us).
 */
function readRegularFile(path: string): Buffer | undefined {
  const fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new Error('not a regular file');
    // a file another user planted is not a cache of ours: as if it were not there (issue 28)
    if (st.uid !== 0 && st.uid !== (process.geteuid?.() ?? 0)) return undefined;
    return readFileSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Read and decode one cache file; a file that exists but cannot be read or decoded is `corrupt`, never `missing`. */
export function readOutcome<T>(path: string, what: string, decode: (bytes: Buffer) => T): ReadOutcome<T> {
  let bytes: Buffer | undefined;
  try {
    bytes = readRegularFile(path);
    if (bytes === undefined) return { kind: 'missing' };
  } catch (err) {
    if (isMissingError(err)) return { kind: 'missing' };
    const reason = (err as { code?: unknown }).code === 'ELOOP' ? 'it is a symbolic link' : messageOf(err);
    const msg = `cannot read ${what} ${path}: ${reason}; a cache file must be a regular file readable by root`;
    return { kind: 'corrupt', error: new CniError(CniCode.IoFailure, msg, { cause: err }) };
  }
  try {
    return { kind: 'ok', value: decode(bytes) };
  } catch (err) {
    const code = err instanceof CniError ? err.code : CniCode.DecodingFailure;
    const msg = `corrupt ${what} ${path}: ${messageOf(err)} (remove the file if its container is gone)`;
    return { kind: 'corrupt', error: new CniError(code, msg, { cause: err }) };
  }
}

/** `.<name>.tmp-<pid>-...`, as `tempPathFor` names them. */
const TEMP_NAME = /^\..+\.tmp-(\d+)-/;
/** A temp file this old is removed whoever wrote it: no atomic write takes a minute. */
export const TEMP_MAX_AGE_MS = 10 * 60_000;

export interface SweepDeps {
  now(): number;
  /** Whether a process with this pid exists (signal 0). */
  alive(pid: number): boolean;
}

const realSweepDeps: SweepDeps = {
  now: () => Date.now(),
  alive(pid) {
    try {
      process.kill(pid, 0);
      return true;
    } catch (err) {
      return (err as { code?: unknown }).code === 'EPERM';
    }
  },
};

/**
 * Removes the temp files an interrupted `writeFileAtomic` left in `dir` (killed between open and rename): those
 * whose writer process is gone, and any older than TEMP_MAX_AGE_MS. Another live writer's temp file is never
 * touched. Writers share one pid namespace (the runtime runs the plugin on the host; docs/reliability.md).
 * Best effort: returns what it removed, never throws.
 */
export function sweepTempFiles(dir: string, deps: SweepDeps = realSweepDeps): string[] {
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => TEMP_NAME.test(n));
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    const path = join(dir, name);
    try {
      const st = lstatSync(path);
      if (!st.isFile() && !st.isSymbolicLink()) continue;
      const pid = Number(TEMP_NAME.exec(name)![1]);
      const age = deps.now() - st.mtimeMs;
      // Our own pid: a write is synchronous, so none is in progress now; still keep it to the age rule.
      const writerGone = pid !== process.pid && !deps.alive(pid);
      const stale = age > TEMP_MAX_AGE_MS || writerGone;
      if (!stale) continue;
      unlinkSync(path);
      removed.push(path);
    } catch {
      // gone meanwhile, or not removable (read-only): nothing to do
    }
  }
  return removed;
}
