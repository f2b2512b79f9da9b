/**
 * Peak RSS of one process (and its waited-for children), by the best tool this machine has: GNU time's %M, else
 * python3's getrusage around one spawn, else /proc/PID/status VmHWM polled. MULTUS_BENCH_RSS=time|python|proc
 * forces one method (to test the fallbacks).
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RUNTIME_PATH, fail, which } from './common.mjs';

function gnuTimeMeter(gnuTime) {
  const dir = mkdtempSync(join(tmpdir(), 'bench-rss-'));
  const probe = spawnSync(gnuTime, ['-f', '%M', '-o', join(dir, 'rss'), 'true']);
  let ok = false;
  try {
    ok = probe.status === 0 && /^\d+\s*$/.test(readFileSync(join(dir, 'rss'), 'utf8'));
  } catch {}
  rmSync(dir, { recursive: true, force: true });
  if (!ok) return null;
  return {
    method: `GNU time -f %M (${gnuTime}): wait4 ru_maxrss of the process`,
    measure(file, args, env, input) {
      const dir = mkdtempSync(join(tmpdir(), 'bench-rss-'));
      try {
        const o = join(dir, 'rss');
        const r = spawnSync(gnuTime, ['-f', '%M', '-o', o, file, ...args], { env, input, encoding: 'utf8' });
        if (r.status !== 0) fail(`${file} under time exited ${r.status}: ${r.stdout}${r.stderr}`);
        return Number(readFileSync(o, 'utf8').trim().split('\n').pop()) / 1024;
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

function pythonMeter(py) {
  const script =
    'import resource,subprocess,sys\n' +
    'r=subprocess.run(sys.argv[1:],stdin=sys.stdin,stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL)\n' +
    'print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n';
  return {
    method: 'python3 resource.getrusage(RUSAGE_CHILDREN).ru_maxrss around one spawn',
    measure(file, args, env, input) {
      const r = spawnSync(py, ['-c', script, file, ...args], {
        env: { ...env, PATH: RUNTIME_PATH },
        input,
        encoding: 'utf8',
      });
      const [code, kib] = r.stdout.trim().split(' ').map(Number);
      if (r.status !== 0 || code !== 0) fail(`${file} under python3 exited ${code}: ${r.stderr}`);
      return kib / 1024;
    },
  };
}

const procMeter = {
  method: '/proc/PID/status VmHWM polled every 1 ms (may miss the last growth before exit)',
  measure(file, args, env, input) {
    return new Promise((res, rej) => {
      const c = spawn(file, args, { env, stdio: ['pipe', 'ignore', 'ignore'] });
      let peak = 0;
      const poll = () => {
        try {
          const m = /VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${c.pid}/status`, 'utf8'));
          if (m) peak = Math.max(peak, Number(m[1]));
        } catch {}
      };
      const iv = setInterval(poll, 1);
      c.on('error', rej);
      c.on('exit', () => {
        clearInterval(iv);
        res(peak / 1024);
      });
      c.stdin.end(input);
    });
  },
};

/** {method, measure(file, args, env, input) -> MiB (maybe a promise)}. */
export function rssMeter() {
  const want = process.env.MULTUS_BENCH_RSS;
  const gnuTime = ['/usr/bin/time', which('time')].find((p) => p && existsSync(p));
  if (gnuTime && (!want || want === 'time')) {
    const m = gnuTimeMeter(gnuTime);
    if (m) return m;
  }
  const py = which('python3');
  if (py && (!want || want === 'python')) return pythonMeter(py);
  return procMeter;
}
