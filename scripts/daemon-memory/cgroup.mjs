/**
 * daemon-memory's cgroup (scripts/daemon-memory.mjs): a memory cgroup of the daemon's own, cgroup v1's memory
 * controller or v2, as containerd makes a container's; with a CPU quota when asked, as a container's CPU limit.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Makes the cgroup: `limitMib` its memory limit, `cpuMilli` thousandths of a CPU its quota (0: none). */
export function memoryCgroup(/** @type {number} */ limitMib, /** @type {number} */ cpuMilli) {
  const name = `multus-memory-${process.pid}`;
  const v1 = existsSync('/sys/fs/cgroup/memory/cgroup.procs');
  const dir = v1 ? `/sys/fs/cgroup/memory/${name}` : `/sys/fs/cgroup/${name}`;
  mkdirSync(dir);
  if (limitMib) writeFileSync(join(dir, v1 ? 'memory.limit_in_bytes' : 'memory.max'), String(limitMib << 20));
  // a CPU quota of cpuMilli thousandths of a CPU per 100 ms period (cgroup v1's cpu controller, or v2's cpu.max)
  // (v1: a cgroup of its own to join too, cpuDir; v2: the same cgroup)
  const cpuDir = cpuMilli && v1 ? `/sys/fs/cgroup/cpu/${name}` : '';
  if (cpuDir) {
    mkdirSync(cpuDir);
    writeFileSync(join(cpuDir, 'cpu.cfs_period_us'), '100000');
    writeFileSync(join(cpuDir, 'cpu.cfs_quota_us'), String(cpuMilli * 100));
  } else if (cpuMilli) writeFileSync(join(dir, 'cpu.max'), `${cpuMilli * 100} 100000`);
  const read = (f) => readFileSync(join(dir, f), 'utf8');
  const mib = (b) => Math.round((Number(b) / 1048576) * 10) / 10;
  return {
    dir,
    resetPeak: () => writeFileSync(join(dir, v1 ? 'memory.max_usage_in_bytes' : 'memory.peak'), v1 ? '0' : 'reset\n'),
    figures() {
      const stat = Object.fromEntries(
        read('memory.stat')
          .trim()
          .split('\n')
          .map((l) => l.split(' ')),
      );
      const events = read(v1 ? 'memory.oom_control' : 'memory.events');
      return {
        usage: mib(read(v1 ? 'memory.usage_in_bytes' : 'memory.current')),
        peak: mib(read(v1 ? 'memory.max_usage_in_bytes' : 'memory.peak')),
        anon: mib(v1 ? stat.total_rss : stat.anon),
        file: mib(v1 ? stat.total_cache : stat.file),
        oom_kills: Number(/oom_kill (\d+)/.exec(events)?.[1] ?? 0),
      };
    },
    remove() {
      for (const d of [dir, cpuDir].filter(Boolean)) {
        for (let i = 0; i < 50; i++) {
          try {
            rmdirSync(d);
            break;
          } catch {
            spawnSync('sleep', ['0.1']);
          }
        }
      }
    },
    cpuDir,
  };
}
