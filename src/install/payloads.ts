/**
 * install/payloads.ts: the Bun executables (`.multus-bun-<id>`) launchers left in a bin dir (docs/build.md, "The
 * launcher"). A launcher (build/multus) carries its Bun executable and a 64-byte trailer at the end of its file
 * (offset, size, SHA-256, magic; launcher/payload.go); `<id>` is the first 16 hex digits of that SHA-256. It writes
 * the file beside itself on its first run and never removes one (another build's launcher in the directory may run
 * it), so each upgrade left one more (~157 MiB). After an install, `prunePayloads` removes those that no launcher
 * in the directory carries: the upgrade path. Pure but for prunePayloads and payloadsBeside.
 */
import { open, readdir, unlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { POSIX_FADV_DONTNEED, libc } from '../base/libc.ts';

const TRAILER_SIZE = 64;
const TRAILER_MAGIC = Buffer.from('multus-ts-bun\x00\x00\x01', 'latin1');
/** A launcher's Bun executable, and the temp file a first run writes it through (a killed one's stays). */
const PAYLOAD = /^\.multus-bun-([0-9a-f]{16})$/;
const PAYLOAD_TEMP = /^\.multus-bun-([0-9a-f]{16})\.tmp(-\d+)?$/;

/** The id of the Bun executable a launcher file carries, from its last 64 bytes; null when it is no launcher. */
export function carriedId(trailer: Buffer): string | null {
  if (trailer.length !== TRAILER_SIZE || !trailer.subarray(48).equals(TRAILER_MAGIC)) return null;
  return trailer.subarray(16, 24).toString('hex');
}

/** What `names` (a bin dir's) holds that no id in `kept` names: payloads and their temp files, in order. */
export function unreferenced(names: readonly string[], kept: ReadonlySet<string>): string[] {
  return names.filter((n) => {
    const id = PAYLOAD.exec(n)?.[1] ?? PAYLOAD_TEMP.exec(n)?.[1];
    return id !== undefined && !kept.has(id);
  });
}

/**
 * The id carried by the regular file `path`, or null (not a launcher, unreadable). The page read leaves the page
 * cache again (best effort, where Bun's FFI is there), as an install's copies do (files.ts): the bin dir's
 * executables are not read into the installing container's memory.
 */
async function idOf(path: string): Promise<string | null> {
  let fh;
  try {
    fh = await open(path, 'r');
    const st = await fh.stat();
    if (!st.isFile() || st.size < TRAILER_SIZE) return null;
    const b = Buffer.alloc(TRAILER_SIZE);
    await fh.read(b, 0, TRAILER_SIZE, st.size - TRAILER_SIZE);
    // whole folios only leave: from the 2 MiB boundary below (the largest folio a read makes) to the end
    libc()?.fadvise(fh.fd, st.size - TRAILER_SIZE - ((st.size - TRAILER_SIZE) % (2 << 20)), 0, POSIX_FADV_DONTNEED);
    return carriedId(b);
  } catch {
    return null;
  } finally {
    await fh?.close();
  }
}

/**
 * Removes from `dir` the Bun executables no launcher there carries (by each regular file's trailer; a symlink's
 * target is a file of its own directory), and their leftover temp files; returns their names. A launcher still
 * running from a file the install replaced keeps its Bun executable open, or runs a copy in memory.
 */
export async function prunePayloads(dir: string): Promise<string[]> {
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch {
    return [];
  }
  const kept = new Set<string>();
  for (const e of entries) {
    if (!e.isFile() || e.name.startsWith('.multus-bun')) continue;
    const id = await idOf(join(dir, e.name));
    if (id) kept.add(id);
  }
  const removed: string[] = [];
  for (const name of unreferenced(
    entries.map((e) => e.name),
    kept,
  )) {
    try {
      await unlink(join(dir, name));
      removed.push(name);
    } catch {
      // gone meanwhile, or not ours to remove: the next install tries again
    }
  }
  return removed;
}

/**
 * The Bun executable the launcher `launcher` carries, when it lies beside it (`.multus-bun-<id>`, by name): what an
 * install copies first (else the launcher's first run writes it). None for another file, or another build's.
 */
export async function payloadsBeside(launcher: string): Promise<string[]> {
  const id = await idOf(launcher);
  if (!id) return [];
  try {
    return (await readdir(dirname(launcher))).filter((n) => n === `.multus-bun-${id}`);
  } catch {
    return [];
  }
}
