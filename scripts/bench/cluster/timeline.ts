/**
 * A daemon's start, step by step (docs/archive/performance.md, "A cluster": where the ready time goes), for the cluster
 * bench's restart (mode.ts). All times are on the kernel's boot clock (CLOCK_BOOTTIME, ms since boot), the clock
 * of /proc/<pid>/stat's start time, so that no step carries the 1 s steps of /proc/stat's `btime`:
 * - `fork`: the container's process created (runc's `runc:[2:INIT]`, before the container's set-up: namespaces,
 *   mounts, cgroup), from the kernel's `sched_process_fork` event (µs) or else /proc/<pid>/stat (10 ms ticks);
 * - `exec`: each exec of that process (`sched_process_exec`: runc init -> our launcher -> the Bun executable; Go
 *   Multus' one exec), so that the container's set-up is reported apart from the daemon's own start;
 * - `log`: the daemon's own lines as the container runtime stamped them (the CRI log file under the node's
 *   /var/log/pods, ns stamps: the daemons' own stamps are whole seconds);
 * - `healthz_200`: the first 200 of the bench's poll (measure.ts).
 * The kernel's events come from tracefs, mounted in a mount namespace of the tracer's own (the machine's mounts
 * are not touched), through an instance of its own (its own buffer and filters; removed when the tracer stops).
 * Without tracefs (not root, not built in) there are no fork and exec steps: the rest is reported.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFile, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The boot time in ms since the epoch, to about a ms: the least `Date.now() - /proc/uptime` over a few reads 1 ms
 * apart (uptime is truncated to 10 ms, so each read errs late by 0-10 ms; the least of reads spread over 10 ms
 * errs by at most the 1 ms of Date.now()). /proc/stat's `btime` is whole seconds: up to 1 s late.
 */
export async function bootTimeMs(): Promise<number> {
  let best = Infinity;
  for (let i = 0; i < 30; i++) {
    const up = Number((await readFile('/proc/uptime', 'utf8')).split(' ')[0]);
    best = Math.min(best, Date.now() - up * 1000);
    await sleep(1);
  }
  return best;
}

/** A process's start on the boot clock (ms; 10 ms ticks, the kernel's USER_HZ of 100). */
export async function startTicksMs(pid: number): Promise<number> {
  const s = await readFile(`/proc/${pid}/stat`, 'utf8');
  return Number(s.slice(s.lastIndexOf(')') + 2).split(' ')[19]) * 10;
}

/**
 * The process's CPU so far (user + system, all its threads; 10 ms ticks) and page faults (minor, major): read at
 * the first /healthz 200, what the start cost the machine, which a loaded machine stretches into wall time.
 */
export async function cpuSoFar(pid: number): Promise<{ cpu_ms: number; minflt: number; majflt: number }> {
  const s = await readFile(`/proc/${pid}/stat`, 'utf8');
  const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
  return { cpu_ms: (Number(f[11]) + Number(f[12])) * 10, minflt: Number(f[7]), majflt: Number(f[9]) };
}

interface KernelEvent {
  kind: 'fork' | 'exec';
  pid: number;
  /** boot clock, ms */
  ms: number;
  /** exec: the file; fork: the parent's comm */
  what: string;
}

// One instance of its own; `read` waits on stdin, so the instance is removed when the bench ends it or dies.
const TRACER = `set -e
mount -t tracefs nodev /sys/kernel/tracing
d=/sys/kernel/tracing/instances/mts-bench-$$
mkdir "$d"
stop() { echo 0 > "$d/events/sched/sched_process_exec/enable"; echo 0 > "$d/events/sched/sched_process_fork/enable"; kill "$p" 2>/dev/null || true; rmdir "$d"; }
echo boot > "$d/trace_clock"
echo 'filename ~ "*multus*"' > "$d/events/sched/sched_process_exec/filter"
echo 'parent_comm ~ "runc*"' > "$d/events/sched/sched_process_fork/filter"
echo 1 > "$d/events/sched/sched_process_exec/enable"
echo 1 > "$d/events/sched/sched_process_fork/enable"
cat "$d/trace_pipe" & p=$!
echo tracing >&2
read -r _ || true
stop
`;

const EXEC_RE = /\s(\d+\.\d+): sched_process_exec: filename=(\S+) pid=(\d+)/;
const FORK_RE = /\s(\d+\.\d+): sched_process_fork: comm=(.*) pid=\d+ child_comm=.* child_pid=(\d+)/;

/** The kernel's fork and exec events of container processes while it runs (undefined: tracefs unavailable). */
export class ExecTrace {
  private readonly events: KernelEvent[] = [];
  private constructor(private readonly child: ChildProcess) {
    let rest = '';
    child.stdout!.on('data', (b: Buffer) => {
      const lines = (rest + b.toString()).split('\n');
      rest = lines.pop()!;
      for (const l of lines) this.parse(l);
    });
  }

  static async start(say: (s: string) => void): Promise<ExecTrace | undefined> {
    const child = spawn('unshare', ['-m', '--propagation', 'private', 'sh', '-c', TRACER], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const ok = await new Promise<boolean>((resolve) => {
      let err = '';
      child.stderr!.on('data', (b: Buffer) => {
        err += b.toString();
        if (err.includes('tracing')) resolve(true);
      });
      child.once('error', () => resolve(false));
      child.once('exit', () => {
        if (!err.includes('tracing'))
          say(`no kernel trace of the daemons' fork and exec (${err.trim().slice(0, 200)})`);
        resolve(false);
      });
    });
    return ok ? new ExecTrace(child) : undefined;
  }

  private parse(line: string): void {
    const e = EXEC_RE.exec(line);
    if (e) this.events.push({ kind: 'exec', pid: Number(e[3]), ms: Number(e[1]) * 1000, what: e[2]! });
    const f = FORK_RE.exec(line);
    if (f) this.events.push({ kind: 'fork', pid: Number(f[3]), ms: Number(f[1]) * 1000, what: f[2]! });
  }

  /** The process's fork (if seen) and execs since, in order; `before`: events after it belong to another one. */
  of(pid: number, before = Infinity): { fork?: number; execs: { file: string; ms: number }[] } {
    // PIDs are reused: the last fork of this PID before `before`, and only what followed it
    const mine = this.events.filter((e) => e.pid === pid && e.ms <= before);
    const fork = mine.findLast((e) => e.kind === 'fork')?.ms;
    const since = fork ?? mine.findLast((e) => e.kind === 'exec')?.ms ?? 0;
    const execs = mine.filter((e) => e.kind === 'exec' && e.ms >= since).map((e) => ({ file: e.what, ms: e.ms }));
    return { ...(fork !== undefined ? { fork } : {}), execs };
  }

  /**
   * Other processes' execs within [from, to] of a file in `dir` (the daemon's own directory in its image: a
   * readiness probe's), and how many other `*multus*` execs the machine made meanwhile (other work's load).
   */
  othersBetween(pid: number, dir: string, from: number, to: number) {
    const others = this.events.filter((e) => e.kind === 'exec' && e.pid !== pid && e.ms >= from && e.ms <= to);
    const mine = others.filter((e) => e.what.startsWith(dir));
    return { execs: mine.map((e) => ({ pid: e.pid, file: e.what, ms: e.ms })), elsewhere: others.length - mine.length };
  }

  stop(): void {
    this.child.stdin!.end();
  }
}

/**
 * The lines of the newest CRI log file of `container` in the DaemonSet's pod (`<podLogs>/kube-system_<ds>-*`):
 * each line's runtime stamp on the boot clock and its text.
 */
export async function containerLog(
  podLogs: string,
  ds: string,
  container: string,
  bootMs: number,
): Promise<{ ms: number; text: string }[]> {
  let newest: { path: string; mtime: number } | undefined;
  for (const dir of (await readdir(podLogs).catch(() => [] as string[])).filter((d) =>
    d.startsWith(`kube-system_${ds}-`),
  )) {
    const cdir = join(podLogs, dir, container);
    for (const f of (await readdir(cdir).catch(() => [] as string[])).filter((x) => x.endsWith('.log'))) {
      const mtime = (await stat(join(cdir, f))).mtimeMs;
      if (!newest || mtime > newest.mtime) newest = { path: join(cdir, f), mtime };
    }
  }
  if (!newest) return [];
  const out: { ms: number; text: string }[] = [];
  for (const line of (await readFile(newest.path, 'utf8')).split('\n')) {
    // <RFC3339Nano> <stream> <P|F> <text>
    const m = /^(\S+) (?:stdout|stderr) [PF] (.*)$/.exec(line);
    if (!m) continue;
    const [, stamp, text] = m;
    const frac = /\.(\d+)/.exec(stamp!)?.[1] ?? '';
    const ms = Date.parse(stamp!.replace(/\.\d+/, '')) + Number(`0.${frac || '0'}`) * 1000;
    out.push({ ms: ms - bootMs, text: text!.slice(0, 160) });
  }
  return out;
}

/** The start's steps in ms from the process's creation, rounded to 0.1 ms. */
export function steps(
  t0: number,
  trace: { fork?: number; execs: { file: string; ms: number }[] } | undefined,
  log: { ms: number; text: string }[],
  healthyMs: number,
  others: { pid: number; file: string; ms: number }[] = [],
): { at_ms: number; step: string }[] {
  const r = (ms: number) => Math.round((ms - t0) * 10) / 10;
  const out: { at_ms: number; step: string }[] = [{ at_ms: 0, step: 'process created (runc init)' }];
  for (const e of trace?.execs ?? []) out.push({ at_ms: r(e.ms), step: `exec ${e.file}` });
  for (const e of others) out.push({ at_ms: r(e.ms), step: `another process (${e.pid}): exec ${e.file}` });
  for (const l of log.filter((x) => x.ms >= t0 - 1000 && x.ms <= healthyMs + 1000))
    out.push({ at_ms: r(l.ms), step: `log: ${l.text}` });
  out.push({ at_ms: r(healthyMs), step: 'GET /healthz 200' });
  return out.sort((a, b) => a.at_ms - b.at_ms);
}
