/**
 * daemon/memory.ts: when the daemon collects its garbage (I/O: the runtime's collector).
 *
 * JavaScriptCore collects when its heap has grown by a fraction of itself, and the allocators keep freed pages for
 * reuse: through a stream of calls the daemon's own memory grows by 10-15 MiB, and after a burst it stays at the
 * burst's size until the next one (docs/resident.md, "Memory"). A full collection alone gives little of it back;
 * Bun's shrink after it does, but it also throws away the code it generated (bytecode, since the daemon runs without
 * the compilers: docs/build.md), which the next requests generate again.
 * So the daemon collects and shrinks (`collect`):
 * - while requests flow, on growth, as Go's GOGC does, of what its container is charged for: when a request ends
 *   and the process's anonymous memory has grown by `growth` times its size after the last collection, and by
 *   `minGrowthBytes` at least. Never on a clock: once a second while busy cost the daemon 20-70 ms of CPU a
 *   second, half of Multus' 0.1 CPU (docs/archive/performance.md, "The daemon's CPU under load");
 * - at rest, once no request has been pending for `idleMs` after one ended, then `atRest` (the daemon unmaps the
 *   file pages it no longer uses, daemon/pages.ts); armed by a request's end or by `restSoon()`, which the daemon
 *   calls once ready, after the node's pod events and after a /metrics scrape. `atRest` never runs on the busy
 *   path, where those pages are in use;
 * - and again at rest, without a collection, when the file pages have grown back by `regrowBytes` since: the
 *   daemon reads its file-backed pages (/proc/self/statm, one small read) `settleMs` after the drop, when its
 *   collector's threads have mapped code back, then every `recheckMs`. Code also runs without a request: the
 *   watches' bookmarks (about once a minute each), a connection's close, the runtime's timers (docs/archive/performance.md,
 *   "The daemon at rest stays at rest", "The second drop after the idle collection"). Stopped by the next request,
 *   armed again by the next collection at rest.
 * Under Node (tests) there is no `Bun` and nothing is collected.
 *
 * Also the memory limit of the daemon's cgroup (its container's), which sets how many delegates run at once when
 * the config does not say (daemon/exec.ts boundedExec).
 */
import { readFileSync } from 'node:fs';
import type { RequestQueue } from './queue.ts';

interface BunMemory {
  gc(force: boolean): void;
  shrink?(): void;
}

/** The runtime's full collection and shrink, or nothing outside Bun. */
export function runtimeCollect(): void {
  const bun = (globalThis as { Bun?: BunMemory }).Bun;
  if (!bun) return;
  bun.gc(true);
  bun.shrink?.();
}

const readStatm = (): string => readFileSync('/proc/self/statm', 'utf8');

/** This process's anonymous resident memory in bytes (/proc/self/statm: resident less file-backed), 0 if unknown. */
export function anonBytes(read: () => string = readStatm): number {
  try {
    const [, resident, shared] = read().split(' ').map(Number);
    return Math.max(0, (resident! - shared!) * 4096) || 0;
  } catch {
    return 0;
  }
}

/** This process's file-backed resident memory in bytes (/proc/self/statm's shared pages), 0 if unknown. */
export function fileBytes(read: () => string = readStatm): number {
  try {
    return Math.max(0, Number(read().split(' ')[2]) * 4096) || 0;
  } catch {
    return 0;
  }
}

export interface CollectOptions {
  /** A full collection and the shrink. */
  collect?: () => void;
  /** The process's anonymous memory now (bytes). */
  anon?: () => number;
  /** After the idle collection (not the busy one), and on `restSoon()`'s. */
  atRest?: () => void;
  /** After a request ends with none pending for this long: one collection. */
  idleMs?: number;
  /** While busy: one collection when anon has grown by this fraction of its size after the last (GOGC / 100). */
  growth?: number;
  /** ... and by this many bytes at least. */
  minGrowthBytes?: number;
  /** The process's file-backed memory now (bytes). */
  file?: () => number;
  /** At rest, after `atRest`: how often the file pages are read, and `atRest` again once they grew by `regrowBytes`. */
  recheckMs?: number;
  /** At rest: the first read of the file pages, this long after the drop that follows the idle collection. */
  settleMs?: number;
  regrowBytes?: number;
}

/** The queue with its collections; `restSoon()` arms the idle one without a request (the daemon is ready). */
export interface CollectingQueue extends RequestQueue {
  restSoon(): void;
  /** Clears the idle timer. */
  stop(): void;
}

/**
 * Defaults: half again (the daemon's anon at rest is 9-12 MiB, docs/resident.md "Memory"), 6 MiB at least: under
 * Multus' 50Mi the daemon stays near 20 MiB, and a stream of requests that allocates without growing costs nothing.
 */
const GROWTH = 0.5;
const MIN_GROWTH_BYTES = 6 << 20;
/** Code run at rest maps back 1-5 MiB of the executable at a time (docs/archive/performance.md): checked every 10 s. */
const RECHECK_MS = 10_000;
/**
 * A second after the drop that follows a collection the daemon has 14-15 MiB of file pages mapped again, after a
 * drop alone 9-12 (its collector's threads are among what faults them in): the first check comes this soon
 * (docs/archive/performance.md, "The second drop after the idle collection").
 */
const SETTLE_MS = 1000;
const REGROW_BYTES = 1 << 20;

/** The queue, with `collect` and `atRest` called as above. */
export function collectGarbage(queue: RequestQueue, o: CollectOptions = {}): CollectingQueue {
  const { collect = runtimeCollect, anon = anonBytes, atRest = () => {}, file = fileBytes } = o;
  const { idleMs = 1000, growth = GROWTH, minGrowthBytes = MIN_GROWTH_BYTES } = o;
  const { recheckMs = RECHECK_MS, settleMs = SETTLE_MS, regrowBytes = REGROW_BYTES } = o;
  let timer: NodeJS.Timeout | undefined;
  let recheck: NodeJS.Timeout | undefined;
  const stopRecheck = (): void => {
    if (recheck) clearTimeout(recheck);
    recheck = undefined;
  };
  /**
   * `atRest`, then again whenever the file pages have grown back by `regrowBytes` with no request pending: checked
   * `settleMs` after the drop, then every `recheckMs`.
   */
  const rest = (): void => {
    stopRecheck();
    atRest();
    if (!o.atRest) return; // nothing to give back
    let after = file();
    const check = (): void => {
      recheck = setTimeout(check, recheckMs);
      recheck.unref?.();
      if (queue.pending() !== 0) return;
      const now = file();
      if (now - after >= regrowBytes) {
        atRest();
        after = file();
      } else after = Math.min(after, now);
    };
    recheck = setTimeout(check, settleMs);
    recheck.unref?.();
  };
  let base = anon(); // after the last collection (or lower, when the allocators gave pages back on their own)
  const collectNow = (): void => {
    collect();
    base = anon();
  };
  const restSoon = (): void => {
    if (timer) clearTimeout(timer);
    timer = setTimeout(() => {
      timer = undefined;
      if (queue.pending() !== 0) return;
      collectNow();
      rest();
    }, idleMs);
    timer.unref?.();
  };
  const ended = (): void => {
    const now = anon();
    if (now - base >= Math.max(base * growth, minGrowthBytes)) collectNow();
    else base = Math.min(base, now);
    restSoon();
  };
  return {
    run<T>(key: string, fn: () => Promise<T>): Promise<T> {
      stopRecheck(); // busy: the pages are in use
      const result = queue.run(key, fn);
      void result.then(ended, ended);
      return result;
    },
    pending: () => queue.pending(),
    idle: () => queue.idle(),
    keys: () => queue.keys(),
    restSoon,
    stop() {
      if (timer) clearTimeout(timer);
      timer = undefined;
      stopRecheck();
    },
  };
}

// ---------------------------------------------------------------------------------------------------------------
// The memory limit, and the delegates at once it allows

/** Below this memory limit the daemon runs few delegates at once by default. */
const SMALL_LIMIT_MIB = 256;
/** At most this many delegates at once under a small limit. */
const MOST_UNDER_A_SMALL_LIMIT = 4;
/**
 * What a small limit must keep for other than delegates: the daemon's own pages (20-30 MiB in a burst) and the
 * kernel memory of the pods' interfaces its delegates create, charged to its container until the pods go (~0.1
 * MiB per pod with three: 13-18 MiB at 100 pods; docs/archive/performance.md "Density at N = 100 after the merges").
 */
const KEPT_FOR_DAEMON_AND_LINKS_MIB = 40;
/** One delegate running: a Go plugin and its IPAM child, ~2 MiB of their own plus page tables and stacks. */
const PER_DELEGATE_MIB = 5;

/**
 * The memory limit of this process's memory cgroup in MiB (cgroup v1 `memory.limit_in_bytes` or v2 `memory.max`,
 * at the cgroup's path or, inside a container's cgroup namespace, at the root), or undefined when unlimited or
 * unknown. `read` is for tests.
 */
export function memoryLimitMib(read: (path: string) => string = (p) => readFileSync(p, 'utf8')): number | undefined {
  const attempt = (path: string): string | undefined => {
    try {
      return read(path).trim();
    } catch {
      return undefined;
    }
  };
  const lines = (attempt('/proc/self/cgroup') ?? '').split('\n');
  const v1 = lines.find((l) => /^\d+:([^:]*,)?memory(,[^:]*)?:/.test(l))?.split(':')[2];
  const v2 = lines.find((l) => l.startsWith('0::'))?.slice(3);
  const candidates = [
    ...(v1 !== undefined
      ? [`/sys/fs/cgroup/memory${v1}/memory.limit_in_bytes`, '/sys/fs/cgroup/memory/memory.limit_in_bytes']
      : []),
    ...(v2 !== undefined ? [`/sys/fs/cgroup${v2}/memory.max`, '/sys/fs/cgroup/memory.max'] : []),
  ];
  for (const c of candidates) {
    const v = attempt(c.replace('//', '/'));
    if (v === undefined) continue;
    const bytes = Number(v); // "max" (v2) or a huge number (v1): unlimited
    return Number.isFinite(bytes) && bytes < 2 ** 50 ? Math.floor(bytes / 1048576) : undefined;
  }
  return undefined;
}

/**
 * `delegateConcurrency` when the config does not set it: under a small memory limit what the limit leaves above
 * the daemon and the pods' links, PER_DELEGATE_MIB each, 1 to 4 (Multus' 50Mi: 2); else no limit (0).
 */
export function defaultDelegateConcurrency(limitMib: number | undefined): number {
  if (limitMib === undefined || limitMib >= SMALL_LIMIT_MIB) return 0;
  const fit = Math.floor((limitMib - KEPT_FOR_DAEMON_AND_LINKS_MIB) / PER_DELEGATE_MIB);
  return Math.min(MOST_UNDER_A_SMALL_LIMIT, Math.max(1, fit));
}
