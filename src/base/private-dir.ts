/**
 * base/private-dir.ts: a directory only root may change (I/O: realpath, stat): the cache dir (cniDir) and
 * the daemon's socketDir (issue 28, docs/reliability.md "Directories only root writes to").
 *
 * Each existing directory on the way to it (on the path as given and on its real path) must belong to root (or to
 * the user running us) and must not be writable by group or others, unless its sticky bit is set (/tmp): else
 * another user could swap the directory, or a link in it, for one of their own. The directory itself (and the
 * subdirectories we keep in it) must be writable by its owner alone, sticky bit or not: a shared directory such as
 * /tmp is refused, never changed (a directory we did not make is not ours to chmod: Go Multus leaves it alone,
 * and taking its write bits away would lock every other user out of it). A directory that does not exist yet is
 * made later, 0700.
 */
import { lstatSync, realpathSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

const STICKY = 0o1000;

function owner(): number {
  return process.geteuid?.() ?? 0;
}

/** `dir` and every directory above it, deepest first. */
function lineage(dir: string): string[] {
  const out: string[] = [];
  for (let d = resolve(dir); ; d = dirname(d)) {
    out.push(d);
    if (d === dirname(d)) return out;
  }
}

/** The deepest part of `dir` that exists, resolved, with what lies above it. */
function existingLineage(dir: string): string[] {
  for (const d of lineage(dir)) {
    try {
      return lineage(realpathSync(d));
    } catch {
      // not there yet: look higher up
    }
  }
  return [];
}

export class UnsafeDirError extends Error {}

/** Throws UnsafeDirError when `dir` (or a directory above it) is not root's alone; changes nothing. */
export function securePrivateDir(dir: string, what: string, subdirs: string[] = []): void {
  const me = owner();
  for (const sub of subdirs) checkSubdir(resolve(dir, sub), what, me);
  const seen = new Set<string>();
  // the target by both its names, resolved once per check, not once per directory above it
  const target = resolve(dir);
  const real = safeRealpath(dir);
  for (const d of [...lineage(dir), ...existingLineage(dir)]) {
    if (seen.has(d)) continue;
    seen.add(d);
    let st;
    try {
      st = statSync(d);
    } catch {
      continue; // not made yet
    }
    if (st.uid !== 0 && st.uid !== me) {
      throw new UnsafeDirError(`${what} ${dir}: ${d} belongs to uid ${st.uid}, not root: chown it to root (mode 0700)`);
    }
    const writable = (st.mode & 0o022) !== 0;
    const mode = (st.mode & 0o7777).toString(8);
    const isTarget = d === target || d === real;
    if (writable && isTarget) {
      throw new UnsafeDirError(
        `${what} ${dir} is writable by group or others (mode ${mode}): use a directory of root's alone (mode 0700, e.g. /var/lib/cni/multus), or chmod it go-w`,
      );
    } else if (writable && !(st.mode & STICKY)) {
      throw new UnsafeDirError(
        `${what} ${dir}: ${d} is writable by group or others (mode ${mode}): make it 0755 or use another directory`,
      );
    }
  }
}

/** A directory we keep inside `dir` (the result caches' `results`): a real directory of ours, if there. */
function checkSubdir(path: string, what: string, me: number): void {
  let st;
  try {
    st = lstatSync(path);
  } catch {
    return;
  }
  if (!st.isDirectory()) {
    throw new UnsafeDirError(
      `${what}: ${path} is ${st.isSymbolicLink() ? 'a symbolic link' : 'not a directory'}: remove it`,
    );
  }
  if (st.uid !== 0 && st.uid !== me) {
    throw new UnsafeDirError(`${what}: ${path} belongs to uid ${st.uid}, not root: remove it`);
  }
  if ((st.mode & 0o022) !== 0) {
    throw new UnsafeDirError(
      `${what}: ${path} is writable by group or others (mode ${(st.mode & 0o7777).toString(8)}): chmod it go-w`,
    );
  }
}

function safeRealpath(p: string): string | undefined {
  try {
    return realpathSync(p);
  } catch {
    return undefined;
  }
}
