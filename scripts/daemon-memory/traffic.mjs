/**
 * daemon-memory's calls (scripts/daemon-memory.mjs): CNI requests to the daemon's socket, as the shim sends them,
 * for pairs of ADD and DEL one after the other, a burst of ADDs at once, and pairs at a steady rate.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { sleep } from '../bench/daemons.mjs';
import { faults, kib, threadCpu, threadCpuDelta } from './samples.mjs';

/** A request to the daemon's socket `sock`: GET without a body, POST with one. */
export function post(sock, path, body) {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: sock, path, method: body === undefined ? 'GET' : 'POST' }, (res) => {
      let text = '';
      res.on('data', (b) => (text += b));
      res.on('end', () => resolve({ status: res.statusCode, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * The calls to the daemon (`daemon.pid` for its CPU) at `sock` with `conf`, for containers in `netns`, delegates in
 * `binDir`, the pods taken in turn from `pods`; `sample` and `cg` for the figures between calls.
 */
export function traffic({ sock, conf, netns, binDir, pods, daemon, sample, cg }) {
  let nextPod = 0;
  const pod = () => pods[nextPod++ % pods.length];
  const call = (command, id, p) =>
    post(
      sock,
      '/cni',
      JSON.stringify({
        env: {
          CNI_COMMAND: command,
          CNI_CONTAINERID: id,
          CNI_NETNS: netns,
          CNI_IFNAME: 'eth0',
          CNI_PATH: binDir,
          CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${p.namespace};K8S_POD_NAME=${p.name};K8S_POD_UID=${p.uid};K8S_POD_INFRA_CONTAINER_ID=${id}`,
        },
        config: Buffer.from(JSON.stringify(conf)).toString('base64'),
      }),
    );

  async function pair() {
    const id = randomBytes(32).toString('hex');
    const p = pod();
    const a = await call('ADD', id, p);
    if (a.status !== 200) throw new Error(`ADD: ${a.status} ${a.text}`);
    const d = await call('DEL', id, p);
    if (d.status !== 200) throw new Error(`DEL: ${d.status} ${d.text}`);
  }

  /** `n` ADDs of different containers at once, then their DELs at once; failures counted; `mid` gets a sample. */
  async function burst(n, mid) {
    const calls = Array.from({ length: n }, (_, i) => ({
      id: randomBytes(32).toString('hex'),
      p: pods[i % pods.length],
    }));
    const cpu0 = faults(daemon.pid).cpu_ms;
    const threads0 = threadCpu(daemon.pid);
    const t0 = performance.now();
    const pending = Promise.all(
      calls.map((c) => call('ADD', c.id, c.p).catch((e) => ({ status: 0, text: e.message }))),
    );
    await sleep(500);
    mid.push(await sample('in the burst (0.5 s)'));
    const adds = await pending;
    const addMs = performance.now() - t0;
    const cpu1 = faults(daemon.pid).cpu_ms;
    const addThreads = threadCpuDelta(threads0, threadCpu(daemon.pid));
    const dels = await Promise.all(
      calls.map((c) => call('DEL', c.id, c.p).catch((e) => ({ status: 0, text: e.message }))),
    );
    const cpu2 = faults(daemon.pid).cpu_ms;
    const failed = [...adds, ...dels].filter((r) => r.status !== 200);
    return {
      n,
      add_seconds: Math.round(addMs / 100) / 10,
      // the daemon's own CPU (utime + stime, 10 ms ticks) through the ADDs and through the DELs
      add_cpu_ms: cpu1 - cpu0,
      del_cpu_ms: cpu2 - cpu1,
      add_cpu_ms_by_thread: addThreads,
      failed: failed.length,
      ...(failed.length ? { example: String(failed[0].text).slice(0, 300) } : {}),
    };
  }

  /** The daemon's CPU ms per second over `seconds`, while `rate` pairs a second are sent (0: at rest). */
  async function cpuAtRate(rate, seconds) {
    const f0 = faults(daemon.pid);
    const t0 = performance.now();
    let sent = 0;
    while (performance.now() - t0 < seconds * 1000) {
      if (rate > 0 && sent < ((performance.now() - t0) / 1000) * rate) {
        sent++;
        await pair();
      } else await sleep(rate > 0 ? Math.min(50, 1000 / rate / 4) : 100);
    }
    const s = (performance.now() - t0) / 1000;
    const cpu = faults(daemon.pid).cpu_ms - f0.cpu_ms;
    const status = readFileSync(`/proc/${daemon.pid}/status`, 'utf8');
    const mem = { rss: kib(status, 'VmRSS'), anon: kib(status, 'RssAnon'), cgroup: cg.figures().usage };
    return {
      rate,
      pairs: sent,
      seconds: Math.round(s * 10) / 10,
      cpu_ms_per_s: Math.round((cpu / s) * 10) / 10,
      ...mem,
    };
  }

  /** At rest, then each rate; the fixed CPU under load and the CPU of a pair from the two extreme rates. */
  async function stream(rates, seconds) {
    const load1 = Number(readFileSync('/proc/loadavg', 'utf8').split(' ')[0]);
    const runs = [];
    for (const r of [0, ...rates]) runs.push(await cpuAtRate(r, seconds));
    const [lo, hi] = [runs[1], runs[runs.length - 1]];
    const slope =
      hi.rate === lo.rate ? 0 : (hi.cpu_ms_per_s - lo.cpu_ms_per_s) / (hi.pairs / hi.seconds - lo.pairs / lo.seconds);
    const fixed = lo.cpu_ms_per_s - slope * (lo.pairs / lo.seconds);
    const round = (x) => Math.round(x * 10) / 10;
    const end = Number(readFileSync('/proc/loadavg', 'utf8').split(' ')[0]);
    return { runs, fixed_ms_per_s: round(fixed), cpu_ms_per_pair: round(slope), load1: [load1, end] };
  }

  /** One pair after `restMs` without a call: its wall time, the daemon's CPU and faults in it. */
  async function pairAfterRest(restMs) {
    await sleep(restMs);
    const f0 = faults(daemon.pid);
    const t0 = performance.now();
    await pair();
    const f1 = faults(daemon.pid);
    const ms = Math.round((performance.now() - t0) * 10) / 10;
    return { ms, cpu_ms: f1.cpu_ms - f0.cpu_ms, minflt: f1.minflt - f0.minflt, majflt: f1.majflt - f0.majflt };
  }

  return { pair, burst, stream, pairAfterRest };
}
