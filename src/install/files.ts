/**
 * files.ts: the installer's file I/O edge: atomic writes and copies (temp file in the same directory, fsync,
 * rename), so a runtime never reads a half-written config nor execs a half-written binary.
 */
import { createHash } from 'node:crypto';
import { closeSync, constants, fdatasyncSync, fsyncSync, openSync, readSync, writeSync } from 'node:fs';
import { chmod, link, lstat, mkdir, readFile, readdir, rename, rm, stat, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { writeFileAtomic } from '../base/files.ts';
import { POSIX_FADV_DONTNEED, libc } from '../base/libc.ts';
import { InstallError } from './options.ts';

export function sha256(b: Buffer | string): string {
  return createHash('sha256').update(b).digest('hex');
}

export function errText(e: unknown): string {
  const err = e as NodeJS.ErrnoException;
  return err?.code ? `${err.code}: ${err.message.replace(/^[A-Z]+: /, '')}` : String((e as Error)?.message ?? e);
}

export async function isDir(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isDirectory();
  } catch {
    return false;
  }
}

export async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

/** The file's bytes, or null when it does not exist; other errors are InstallErrors naming the path. */
export async function readIfExists(path: string, what: string): Promise<Buffer | null> {
  try {
    return await readFile(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new InstallError(`cannot read ${what} ${path} (${errText(e)})`);
  }
}

/** Names and kinds of a directory's entries (symlinks followed, as libcni's ReadDir + IsDir see them). */
export async function listDir(dir: string): Promise<{ names: string[]; dirs: Set<string> }> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (e) {
    throw new InstallError(`cannot list ${dir} (${errText(e)}): is the host's CNI config dir mounted there?`);
  }
  const dirs = new Set<string>();
  for (const n of names) {
    try {
      if ((await lstat(join(dir, n))).isDirectory()) dirs.add(n);
    } catch {}
  }
  return { names, dirs };
}

export async function mkdirPrivate(dir: string, why: string): Promise<void> {
  try {
    await mkdir(dir, { recursive: true, mode: 0o700 });
  } catch (e) {
    throw new InstallError(`cannot create ${dir} (${why}): ${errText(e)}`);
  }
}

/**
 * Writes `data` to `path` with base/files.ts' one atomic write (a temp file in the same directory, fsynced,
 * renamed over `path`, `mode` exactly). On failure the temp file is removed and `path` is untouched.
 */
export async function writeAtomic(path: string, data: string | Buffer, mode: number): Promise<void> {
  try {
    writeFileAtomic(path, data, mode);
  } catch (e) {
    const cause = e instanceof Error && e.cause !== undefined ? e.cause : e;
    throw new InstallError(`cannot write ${path} (${errText(cause)}): check that ${dirname(path)} is writable`);
  }
}

/** True when `a` and `b` are the same file (hard links of one inode); false when either is missing. */
export async function sameFile(a: string, b: string): Promise<boolean> {
  try {
    const [x, y] = await Promise.all([stat(a), stat(b)]);
    return x.dev === y.dev && x.ino === y.ino;
  } catch {
    return false;
  }
}

/**
 * Written in pieces this large: the kernel caches a file as it was written, in folios as large as its pieces, and a
 * page fault maps every folio its 64 KiB fault-around window touches, whole. From 1 MiB pieces a thin VERSION
 * peaked at 52 MiB, from 64 KiB pieces at 26, as from disk; and a delegates-only call from such a copy, while it is
 * cached, runs 2-3 ms faster than from disk, a fault mapping one folio instead of sixteen pages. 64 KiB is the
 * window, and the build moves the Bun executable's segments to 64 KiB boundaries in the file
 * (scripts/build-steps/align.mjs; before, its code lay 32 KiB off one and a 64 KiB folio straddled two windows).
 * docs/archive/performance.md, "The installed copy kept in the page cache".
 */
const COPY_PIECE = 64 << 10;

/**
 * Whether the copy named `name` keeps its pages in the page cache, as written (above): the shim, which every call
 * of the resident mode runs. The Bun executable's copy is dropped: kept, a thin call ran 2.6-2.9 ms faster than
 * from disk, but its pages are then charged to the installing container, and under deployments/multus-ts-thin.yml's
 * 150Mi the density runs that followed put thin pods behind Go thin's in three pairs of four (nine of ten at or
 * under before; the cause was not traced). Dropped, the first call reads it from disk and the caller's cgroup holds
 * it. The launcher's file is dropped too: all but its first few MiB are the Bun executable it carries.
 */
function keepsCopyCached(name: string): boolean {
  return name === 'multus-shim';
}

/**
 * While copying, the pages that are not to stay are let go every this many bytes: the page cache is charged to the
 * installing container, and the 230 MB an install reads and writes would otherwise take it to its memory limit
 * (150Mi in deployments/multus-ts-thin.yml) and make the kernel reclaim inside it (docs/archive/performance.md, "The
 * installed copy kept in the page cache").
 */
const DROP_EVERY = 8 << 20;

/** Advises the files' clean, unmapped pages out of the page cache (best effort: nothing without Bun's FFI). */
function dropFromPageCache(...fds: number[]): void {
  const c = libc();
  for (const fd of fds) c?.fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
}

/**
 * Copies `src` to `<destDir>/<name>` (mode 0755) through `<destDir>/<tmpName>` (default `_<name>.new`), then lets
 * the source's pages leave the page cache, and the copy's unless `keepsCopyCached`; best effort,
 * where Bun's FFI is there. Reading the source cached it in the large folios readahead makes, and the resident
 * daemon runs that very file from the image.
 */
export async function copyExecutableAtomic(
  src: string,
  destDir: string,
  name: string,
  tmpName = `_${name}.new`,
): Promise<void> {
  const dest = join(destDir, name);
  const tmp = join(destDir, tmpName);
  let fin = -1;
  let fout = -1;
  try {
    await rm(tmp, { force: true });
    fin = openSync(src, 'r');
    fout = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o700);
    const keep = keepsCopyCached(name);
    const buf = Buffer.allocUnsafe(COPY_PIECE);
    for (let sinceDrop = 0; ;) {
      const n = readSync(fin, buf, 0, buf.length, null);
      if (n === 0) break;
      let off = 0;
      while (off < n) off += writeSync(fout, buf, off, n - off);
      // by bytes since the last drop, not a multiple of DROP_EVERY: a short read must not skip every later drop
      sinceDrop += n;
      if (sinceDrop < DROP_EVERY) continue;
      sinceDrop = 0;
      if (!keep) fdatasyncSync(fout); // clean, so that the advice can drop them
      dropFromPageCache(...(keep ? [fin] : [fout, fin]));
    }
    fsyncSync(fout);
    // clean once fsynced, so the advice drops them; a failure leaves them cached, as any copy's
    dropFromPageCache(...(keep ? [fin] : [fout, fin]));
    closeSync(fout);
    fout = -1;
    await chmod(tmp, 0o755);
    await rename(tmp, dest);
  } catch (e) {
    if (fout >= 0) closeSync(fout);
    await unlink(tmp).catch(() => {});
    throw new InstallError(`cannot copy ${src} to ${dest} (${errText(e)}): check that ${destDir} is writable`);
  } finally {
    if (fin >= 0) closeSync(fin);
  }
}

/**
 * `<destDir>/<name>` as a hard link to `target` (a file in destDir), through `<tmpName>` (default `_<name>.new`)
 * renamed over the old one: the same executable under a second name (the role comes from the name), taking no
 * space.
 */
export async function linkExecutableAtomic(
  target: string,
  destDir: string,
  name: string,
  tmpName = `_${name}.new`,
): Promise<void> {
  const dest = join(destDir, name);
  const tmp = join(destDir, tmpName);
  try {
    await rm(tmp, { force: true });
    await link(target, tmp);
    await rename(tmp, dest);
  } catch (e) {
    await unlink(tmp).catch(() => {});
    throw new InstallError(`cannot link ${dest} to ${target} (${errText(e)}): check that ${destDir} is writable`);
  }
}

/** Removes `path` if it exists; reports other failures. */
export async function removeIfExists(path: string): Promise<boolean> {
  try {
    await unlink(path);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw new InstallError(`cannot remove ${path} (${errText(e)})`);
  }
}

export { basename, join };
