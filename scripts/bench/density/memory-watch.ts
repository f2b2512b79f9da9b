/**
 * What the density bench watches while a run or a burst goes on (docs/archive/performance.md, "Density at N = 100 inside
 * 100m / 50Mi"): the machine's 1-minute load, and, for the modes with a daemon, its container's memory cgroup
 * every second (usage, anonymous and page cache, the processes in it with their RSS: the daemon and the delegates
 * it runs at that moment) and the kernel's OOM reports for the node's containers (`dmesg --follow-new`, read as
 * they come: the ring buffer of a busy node loses them within the hour). An OOM kill then says which processes
 * held the memory, from the kernel's own task list and from the last samples before it.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import type { Cluster } from '../../../test/k8s/cluster.ts';
import { type Mode, hasDaemon } from './modes.ts';
import { daemonContainerIds } from './node-ops.ts';

const mib = (bytes: number) => Math.round((bytes / 1048576) * 10) / 10;
const read = (f: string) => readFile(f, 'utf8').catch(() => undefined);
const loadNow = async () => Number((await read('/proc/loadavg'))?.split(' ')[0]);

/** One process of the container's cgroup. */
interface Proc {
  name: string;
  rss_mib: number;
  anon_mib: number;
}

/** One sample of the daemon container's memory cgroup. */
interface Sample {
  at_s: number;
  container: string;
  usage_mib: number;
  anon_mib: number;
  cache_mib: number;
  /** kernel memory charged to the cgroup (page tables, stacks, slab: sockets, links, ...), counted in usage too */
  kernel_mib: number;
  oom_kills: number;
  procs: Proc[];
}

/** What was watched: the load, the cgroup's worst sample, the samples before each OOM kill, the kernel's reports. */
export interface Watched {
  load: { start: number; end: number; max: number };
  cgroup?: {
    samples: number;
    max_usage: Sample | undefined;
    max_processes: number;
    before_oom_kill: Sample[];
  };
  kernel_oom_reports?: OomReport[];
}

/** A field of a `key value` file (memory.stat, memory.events, memory.oom_control). */
const field = (s: string, k: string) => Number(new RegExp(`^${k} (\\d+)$`, 'm').exec(s)?.[1] ?? NaN);

async function procOf(pid: string): Promise<Proc | undefined> {
  const s = await read(`/proc/${pid}/status`);
  if (!s) return undefined;
  const kib = (k: string) => Number(new RegExp(`${k}:\\s+(\\d+)`).exec(s)?.[1] ?? 0);
  const name = /^Name:\s+(\S+)/m.exec(s)?.[1] ?? '?';
  return { name, rss_mib: mib(kib('VmRSS') * 1024), anon_mib: mib(kib('RssAnon') * 1024) };
}

/** A sample of container `id`'s memory cgroup (v1 or v2), or undefined when it is gone. */
async function sampleCgroup(id: string, t0: number): Promise<Sample | undefined> {
  const v1 = `/sys/fs/cgroup/memory/k8s.io/${id}`;
  const isV1 = (await read(`${v1}/memory.usage_in_bytes`)) !== undefined;
  const dir = isV1 ? v1 : `/sys/fs/cgroup/k8s.io/${id}`;
  const usage = Number((await read(`${dir}/${isV1 ? 'memory.usage_in_bytes' : 'memory.current'}`))?.trim());
  if (!Number.isFinite(usage)) return undefined;
  const stat = (await read(`${dir}/memory.stat`)) ?? '';
  const events = (await read(`${dir}/${isV1 ? 'memory.oom_control' : 'memory.events'}`)) ?? '';
  const kmem = isV1 ? Number((await read(`${dir}/memory.kmem.usage_in_bytes`))?.trim()) : field(stat, 'kernel');
  const pids = ((await read(`${dir}/cgroup.procs`)) ?? '').split('\n').filter((p) => /^\d+$/.test(p));
  const procs = (await Promise.all(pids.map(procOf))).filter((p): p is Proc => p !== undefined);
  return {
    at_s: Math.round((Date.now() - t0) / 100) / 10,
    container: id.slice(0, 12),
    usage_mib: mib(usage),
    anon_mib: mib(field(stat, isV1 ? 'rss' : 'anon')),
    cache_mib: mib(field(stat, isV1 ? 'cache' : 'file')),
    kernel_mib: mib(kmem),
    oom_kills: field(events, 'oom_kill') || 0,
    procs: procs.sort((a, b) => b.rss_mib - a.rss_mib),
  };
}

/** Starts watching (the cgroup only for modes with a daemon); `stop` ends it and gives what was seen. */
export function watchMemory(cluster: Cluster, mode: Mode): { stop: () => Promise<Watched> } {
  const t0 = Date.now();
  const daemon = hasDaemon(mode);
  const kernel = daemon ? followKernel() : undefined;
  const w = { start: NaN, max: 0, samples: 0, maxProcs: 0, worst: undefined as Sample | undefined };
  const beforeOom: Sample[] = [];
  let last: Sample | undefined;
  let ids: string[] = [];
  let stopped = false;
  const tick = async (k: number) => {
    const load = await loadNow();
    if (Number.isNaN(w.start)) w.start = load;
    w.max = Math.max(w.max, load || 0);
    if (!daemon) return;
    if (k % 5 === 0 || ids.length === 0) ids = await daemonContainerIds(cluster, mode).catch(() => []);
    const s = ids[0] ? await sampleCgroup(ids[0], t0) : undefined;
    if (!s) return void (ids = []);
    w.samples++;
    w.maxProcs = Math.max(w.maxProcs, s.procs.length);
    if (!w.worst || s.usage_mib > w.worst.usage_mib) w.worst = s;
    // an OOM kill since the last sample (the counter rose, or the container is a new one): keep the sample before
    if (last && beforeOom.length < 3 && (s.oom_kills > last.oom_kills || s.container !== last.container))
      beforeOom.push(last);
    last = s;
  };
  const loop = (async () => {
    for (let k = 0; !stopped; k++) {
      await tick(k).catch(() => {});
      await new Promise((r) => setTimeout(r, 1000));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      const reports = kernel ? await kernel.stop() : undefined;
      const end = await loadNow();
      return {
        load: { start: w.start, end, max: Math.max(w.max, end || 0) },
        ...(daemon
          ? {
              cgroup: { samples: w.samples, max_usage: w.worst, max_processes: w.maxProcs, before_oom_kill: beforeOom },
            }
          : {}),
        ...(reports ? { kernel_oom_reports: reports } : {}),
      };
    },
  };
}

/** The kernel's messages from now on (`dmesg --follow-new`); `stop` gives the OOM reports among them. */
function followKernel(): { stop: () => Promise<OomReport[]> } {
  const lines: string[] = [];
  let partial = '';
  let inReport = false;
  let child: ChildProcess | undefined;
  try {
    child = spawn('dmesg', ['--follow-new'], { stdio: ['ignore', 'pipe', 'ignore'] });
    child.on('error', () => {});
    child.stdout?.setEncoding('utf8');
    child.stdout?.on('data', (d: string) => {
      const parts = (partial + d).split('\n');
      partial = parts.pop() ?? '';
      // a busy node logs lines per veth: only the OOM reports' lines are kept, at most 20,000
      for (const l of parts) {
        if (/invoked oom-killer/.test(l)) inReport = true;
        if (inReport && lines.length < 20_000) lines.push(l);
        if (/Killed process \d+/.test(l)) inReport = false;
      }
    });
  } catch {
    child = undefined;
  }
  return {
    async stop() {
      child?.kill('SIGTERM');
      return oomReports(lines);
    },
  };
}

/** One kernel OOM report, as much of it as says where the memory was. */
export interface OomReport {
  memcg: string;
  killed: string;
  usage_kib: number | undefined;
  limit_kib: number | undefined;
  /** the kernel's task list of the cgroup: each process's RSS, its anonymous and file pages, in KiB */
  tasks: { pid: number; name: string; rss_kib: number; anon_kib: number; file_kib: number }[];
  /** the cgroup's memory.stat lines of the report (anon, file, ...) */
  stats: Record<string, number>;
}

const PAGE_KIB = 4;

/**
 * The OOM reports of kernel log lines (pure), at most 5, of memory cgroups under /k8s.io/ (the node's
 * containers): from `invoked oom-killer` to `Killed process`.
 */
export function oomReports(lines: string[]): OomReport[] {
  const out: OomReport[] = [];
  let block: string[] | undefined;
  for (const raw of lines) {
    const l = raw.replace(/^\[[ \d.]+\]\s?/, '');
    if (/invoked oom-killer/.test(l)) block = [];
    if (!block) continue;
    block.push(l);
    if (/Killed process \d+/.test(l)) {
      const r = parseReport(block);
      block = undefined;
      if (r.memcg.startsWith('/k8s.io/') && out.length < 5) out.push(r);
    }
  }
  return out;
}

function parseReport(block: string[]): OomReport {
  const text = block.join('\n');
  const memcg = /oom_memcg=([^,\s]+)/.exec(text)?.[1] ?? '';
  const killed = /Killed process (.*)$/m.exec(text)?.[1] ?? '';
  const usage = /^memory: usage (\d+)kB, limit (\d+)kB/m.exec(text);
  const statsAt = block.findIndex((l) => l.startsWith('Memory cgroup stats for'));
  const tableAt = block.findIndex((l) => l.startsWith('Tasks state'));
  const stats: Record<string, number> = {};
  if (statsAt >= 0)
    for (const l of block.slice(statsAt + 1, tableAt >= 0 ? tableAt : undefined)) {
      const m = /^(\w+)[ :](\d+)$/.exec(l.trim());
      if (m) stats[m[1]!] = Number(m[2]);
    }
  return {
    memcg,
    killed,
    usage_kib: usage ? Number(usage[1]) : undefined,
    limit_kib: usage ? Number(usage[2]) : undefined,
    tasks: tableAt >= 0 ? taskTable(block.slice(tableAt + 1)) : [],
    stats,
  };
}

/** The rows of the kernel's `Tasks state (memory values in pages)` table, by its header's column names. */
function taskTable(rows: string[]): OomReport['tasks'] {
  const header =
    rows[0]
      ?.replace(/\[\s*pid\s*\]/, 'pid')
      .trim()
      .split(/\s+/) ?? [];
  const col = (name: string) => header.indexOf(name);
  const out: OomReport['tasks'] = [];
  for (const row of rows.slice(1)) {
    const m = /^\[\s*(\d+)\]\s+(.*)$/.exec(row.trim());
    if (!m) break;
    const f = ['pid', ...m[2]!.trim().split(/\s+/)];
    const pages = (name: string) => (col(name) >= 0 ? Number(f[col(name)]) * PAGE_KIB : 0);
    out.push({
      pid: Number(m[1]),
      name: f[f.length - 1] ?? '?',
      rss_kib: pages('rss'),
      anon_kib: pages('rss_anon'),
      file_kib: pages('rss_file'),
    });
  }
  return out;
}
