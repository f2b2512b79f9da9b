/**
 * daemon/pages.ts: gives back the file pages the daemon mapped while it started and no longer uses (I/O: madvise
 * through Bun's FFI, /proc/self/smaps). docs/resident.md, "Memory" says what it changes and what it does not.
 *
 * A compiled Bun program maps its 112 MiB executable and touches about half of it while it starts (the runtime's
 * initialisation, the module loader, the bundles' bytecode); those pages stay mapped, and counted in the daemon's
 * RSS, for as long as the process lives, though a daemon at rest runs a small part of that code. `MADV_DONTNEED`
 * on a private file mapping nobody wrote to unmaps its pages and nothing else: they stay in the page cache (charged
 * to whichever cgroup read them first, as before), and the next use of one is a minor fault that maps it again
 * from there. Only mappings that cannot hold the process's own data are touched: private, not writable, backed by a
 * file, and without one anonymous (copied-on-write) page, because DONTNEED would throw such a page's contents away.
 *
 * Loaded by the daemon only (the thin plugin never opens this FFI); under Node (the tests) there is no FFI and
 * nothing is dropped.
 */
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';

/** One mapping of /proc/self/smaps, the fields the choice reads (sizes in KiB). */
export interface Mapping {
  start: number;
  end: number;
  perms: string;
  path: string;
  rssKib: number;
  anonKib: number;
}

/** The mappings of an smaps text. Pure. */
export function parseSmaps(text: string): Mapping[] {
  const out: Mapping[] = [];
  let cur: Mapping | undefined;
  for (const line of text.split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) (\S{4}) \S+ \S+ \d+\s*(.*)$/.exec(line);
    if (head) {
      cur = {
        start: parseInt(head[1]!, 16),
        end: parseInt(head[2]!, 16),
        perms: head[3]!,
        path: head[4]!,
        rssKib: 0,
        anonKib: 0,
      };
      out.push(cur);
      continue;
    }
    const field = /^(Rss|Anonymous):\s+(\d+) kB/.exec(line);
    if (cur && field) cur[field[1] === 'Rss' ? 'rssKib' : 'anonKib'] = Number(field[2]);
  }
  return out;
}

/**
 * The mappings whose resident pages DONTNEED may drop without losing data: private (`p`), not writable, backed by a
 * file (an absolute path, not `[vdso]`), with resident pages and no anonymous one. Pure. A deleted file counts: an
 * upgrade replaces the executable under a running daemon, whose mapping keeps the old file and its pages.
 */
export function droppable(mappings: readonly Mapping[]): Mapping[] {
  return mappings.filter(
    (m) => m.perms[1] !== 'w' && m.perms[3] === 'p' && m.path.startsWith('/') && m.rssKib > 0 && m.anonKib === 0,
  );
}

const MADV_DONTNEED = 4;

type Madvise = (addr: number, length: number, advice: number) => number;

let madviseFn: Madvise | null | undefined;

/** libc's madvise through Bun's FFI, opened on first use; null outside Bun or without FFI. */
function madvise(): Madvise | null {
  if (madviseFn !== undefined) return madviseFn;
  madviseFn = null;
  if (!process.versions.bun) return madviseFn;
  try {
    const ffi = createRequire(__filename)('bun:ffi') as {
      dlopen(path: string, s: Record<string, { args: string[]; returns: string }>): { symbols: { madvise: Madvise } };
    };
    const { symbols } = ffi.dlopen('libc.so.6', { madvise: { args: ['u64', 'u64', 'i32'], returns: 'i32' } });
    madviseFn = (a, l, adv) => symbols.madvise(a, l, adv);
  } catch {
    // no FFI: nothing is dropped
  }
  return madviseFn;
}

/** What one drop did: the resident file pages it unmapped (KiB) in how many mappings. */
export interface Dropped {
  kib: number;
  mappings: number;
}

/** Unmaps the resident pages of the droppable mappings of this process (above); nothing outside Bun. */
export function dropFilePages(read: () => string = () => readFileSync('/proc/self/smaps', 'utf8')): Dropped {
  const advise = madvise();
  if (!advise) return { kib: 0, mappings: 0 };
  let kib = 0;
  let mappings = 0;
  for (const m of droppable(parseSmaps(read()))) {
    if (advise(m.start, m.end - m.start, MADV_DONTNEED) !== 0) continue;
    kib += m.rssKib;
    mappings++;
  }
  return { kib, mappings };
}
