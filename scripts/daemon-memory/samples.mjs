/**
 * daemon-memory's samples (scripts/daemon-memory.mjs): the daemon's memory from /proc (VmRSS, VmHWM, RssAnon,
 * RssFile, the largest anonymous mappings, the file pages by file), its cgroup's figures, its page faults and CPU
 * time, and with --runtime bun JavaScriptCore's figures, which a preload writes when the daemon gets SIGWINCH.
 */
import { existsSync, readFileSync, readdirSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { fileMappings, sleep } from '../bench/daemons.mjs';

/** Writes the preload that answers SIGWINCH with JavaScriptCore's figures in the file $MEMPROBE_STATS. */
export function writeJscPreload(/** @type {string} */ preload) {
  writeFileSync(
    preload,
    `const fs = require('node:fs');
const jsc = require('bun:jsc');
process.on('SIGWINCH', () => {
  const before = jsc.heapStats();
  Bun.gc(true);
  const h = jsc.heapStats();
  const top = Object.entries(h.objectTypeCounts).sort((a, b) => b[1] - a[1]).slice(0, 12);
  fs.writeFileSync(process.env.MEMPROBE_STATS, JSON.stringify({
    heap_before_gc: before.heapSize, heap: h.heapSize, capacity: h.heapCapacity, extra: h.extraMemorySize,
    objects: h.objectCount, top, usage: process.memoryUsage(), jsc: jsc.memoryUsage() }));
});\n`,
  );
}

/** The daemon's anonymous resident memory by mapping: the largest, with size and permissions (smaps). */
function anonMappings(pid) {
  const out = [];
  let cur;
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ (\d+)\s*(.*)$/.exec(line);
    if (head) {
      cur = {
        size: (parseInt(head[2], 16) - parseInt(head[1], 16)) >> 10,
        perms: head[3],
        name: head[5] || '',
        anon: 0,
      };
      out.push(cur);
    } else if (cur && line.startsWith('Anonymous:')) cur.anon = Number(/(\d+)/.exec(line)[1]);
  }
  const mib = (k) => Math.round((k / 1024) * 10) / 10;
  return out
    .filter((m) => m.anon > 256)
    .sort((a, b) => b.anon - a.anon)
    .slice(0, 8)
    .map((m) => `${mib(m.anon)}/${mib(m.size)} ${m.perms} ${m.name}`.trim());
}

/** Page faults of the daemon so far and its CPU time in ms (/proc/<pid>/stat fields 10, 12, 14 and 15). */
export function faults(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return { minflt: Number(f[7]), majflt: Number(f[9]), cpu_ms: (Number(f[11]) + Number(f[12])) * 10 };
}

/** The CPU time in ms of each of the daemon's threads, by name (threads of one name summed): /proc/<pid>/task. */
export function threadCpu(pid) {
  const out = {};
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const comm = readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim().replace(/\d+$/, 'N');
      const f = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8').split(') ')[1].split(' ');
      out[comm] = (out[comm] ?? 0) + (Number(f[11]) + Number(f[12])) * 10;
    } catch {
      // the thread ended meanwhile
    }
  }
  return out;
}

/** The per-thread CPU of `after` over `before` (threadCpu), the threads that used any. */
export function threadCpuDelta(before, after) {
  const out = {};
  for (const [k, v] of Object.entries(after)) if (v - (before[k] ?? 0) > 0) out[k] = v - (before[k] ?? 0);
  return out;
}

/** A figure of /proc/<pid>/status (in kB) in MiB, one decimal. */
export const kib = (status, k) =>
  Math.round((Number(new RegExp(`${k}:\\s+(\\d+)`).exec(status)?.[1]) / 1024) * 10) / 10;

/**
 * The sampler of `daemon`: `sample(phase)` its figures now. `statsFile`: where the preload writes (runtime bun);
 * `mappings`, `withFileMappings`: add those lists (--mappings, --file-mappings).
 */
export function sampler({ daemon, runtime, statsFile, cg, mappings, withFileMappings }) {
  return async function sample(phase) {
    let jsc;
    if (runtime === 'bun') {
      rmSync(statsFile, { force: true });
      daemon.kill('SIGWINCH');
      for (let i = 0; i < 600 && !existsSync(statsFile); i++) await sleep(50);
      await sleep(50);
      const j = JSON.parse(readFileSync(statsFile, 'utf8'));
      const mib = (x) => Math.round((x / 1048576) * 10) / 10;
      jsc = {
        heap_before_gc: mib(j.heap_before_gc),
        heap_after_gc: mib(j.heap),
        capacity: mib(j.capacity),
        extra: mib(j.extra),
        objects: j.objects,
        top: j.top,
        malloc_current: mib(j.jsc.current),
        malloc_peak: mib(j.jsc.peak),
      };
    }
    const status = readFileSync(`/proc/${daemon.pid}/status`, 'utf8');
    return {
      phase,
      rss: kib(status, 'VmRSS'),
      hwm: kib(status, 'VmHWM'),
      anon: kib(status, 'RssAnon'),
      file: kib(status, 'RssFile'),
      cgroup: cg.figures(),
      sockets: readdirSync(`/proc/${daemon.pid}/fd`).filter((fd) => {
        try {
          return readlinkSync(`/proc/${daemon.pid}/fd/${fd}`).startsWith('socket:');
        } catch {
          return false;
        }
      }).length,
      ...(jsc ? { jsc } : {}),
      ...(mappings ? { mappings: anonMappings(daemon.pid) } : {}),
      ...(withFileMappings ? { file_mappings: fileMappings(daemon.pid) } : {}),
      ...faults(daemon.pid),
      load1: Number(readFileSync('/proc/loadavg', 'utf8').split(' ')[0]),
    };
  };
}
