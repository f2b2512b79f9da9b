/**
 * A quiet machine before each measured run (docs/archive/performance.md, "Density"): the runs go A B C D D C B A, and the
 * run after a busy one used to start while the machine still worked off the last node's teardown and the new
 * node's start (1-minute load 13-21 at one mode's start, 1.0 at another's), which decided more of a pod-ready p99
 * than the mode did. So before kube-burner (and before a burst) the bench waits until the CPUs were at least
 * `idleAtLeast` idle over one `windowMs` window, for `maxMs` at most, and records what it waited.
 */
import { readFile } from 'node:fs/promises';

/** Jiffies of all CPUs from /proc/stat's `cpu` line: the total, and the idle part (idle + iowait). */
export function cpuTimes(procStat: string): { total: number; idle: number } | undefined {
  const line = /^cpu\s+(.+)$/m.exec(procStat)?.[1];
  if (!line) return undefined;
  const f = line.trim().split(/\s+/).map(Number);
  if (f.some((x) => !Number.isFinite(x))) return undefined;
  // user nice system idle iowait irq softirq steal [guest guest_nice: already counted in user and nice]
  const [idle, iowait] = [f[3], f[4]];
  if (idle === undefined || iowait === undefined) return undefined;
  return { total: f.slice(0, 8).reduce((s, x) => s + x, 0), idle: idle + iowait };
}

/** The idle share of the CPUs between two samples (0..1); undefined when no time passed. */
export function idleShare(a: { total: number; idle: number }, b: { total: number; idle: number }): number | undefined {
  const dt = b.total - a.total;
  return dt > 0 ? (b.idle - a.idle) / dt : undefined;
}

export interface Quiet {
  /** seconds waited before the machine was quiet (or `maxMs` passed) */
  waited_s: number;
  /** idle share of the last window, in per cent */
  idle_pct: number;
  /** false: `maxMs` passed first, the run started on a busy machine */
  reached: boolean;
  load_1m: number;
}

const sample = async () => cpuTimes(await readFile('/proc/stat', 'utf8'));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function waitQuiet(idleAtLeast = 0.8, windowMs = 10_000, maxMs = 240_000): Promise<Quiet> {
  const t0 = Date.now();
  for (;;) {
    const a = await sample();
    await sleep(windowMs);
    const b = await sample();
    const idle = a && b ? (idleShare(a, b) ?? 0) : 0;
    const reached = idle >= idleAtLeast;
    if (reached || Date.now() - t0 >= maxMs) {
      const load = Number((await readFile('/proc/loadavg', 'utf8')).split(' ')[0]);
      return {
        waited_s: Math.round((Date.now() - t0) / 100) / 10,
        idle_pct: Math.round(idle * 1000) / 10,
        reached,
        load_1m: load,
      };
    }
  }
}
