/**
 * The resident daemons of the bench's scenarios: multus-ts' `build/multus daemon` with a daemon-config of the
 * scenario's keys, and Go Multus thick's multus-daemon. Each is a child process with its output in a log file
 * (never a pipe: the bench's synchronous loops would not drain it), ready once /healthz on its socket answers
 * 200, stopped with SIGTERM (SIGKILL after 10 s); its RSS from /proc, multus-ts' heap from its /metrics.
 *
 * Go Multus thick's daemon only talks to Kubernetes with the in-cluster configuration (its token and CA at the
 * fixed path /var/run/secrets/kubernetes.io/serviceaccount): it runs in a private mount namespace
 * (`unshare --mount`) with a tmpfs on /run holding the multus service account's token and the test CA, so
 * nothing of the host changes.
 */
import { spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { RUNTIME_PATH } from './common.mjs';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** GET /healthz over the unix socket: the status code, or 0 when nothing answers. */
function healthz(sock) {
  return new Promise((resolve) => {
    const req = request({ socketPath: sock, path: '/healthz', method: 'GET', timeout: 2000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(0));
    req.end();
  });
}

/** A free TCP port on 127.0.0.1 (for the daemon's /metrics). */
function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/** The daemon's V8 heap and RSS from its /metrics (prom-client's default metrics), in MiB. */
export function heapOf(port) {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path: '/metrics', timeout: 5000 }, (res) => {
      let text = '';
      res.on('data', (b) => (text += b));
      res.on('end', () => {
        const v = (name) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
        const mib = (x) => Math.round((x / 1048576) * 100) / 100;
        resolve({
          heap_used_mib: mib(v('nodejs_heap_size_used_bytes')),
          heap_total_mib: mib(v('nodejs_heap_size_total_bytes')),
          external_mib: mib(v('nodejs_external_memory_bytes')),
        });
      });
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve({}));
    req.end();
  });
}

/** VmRSS and VmHWM of a process, and VmRSS's anonymous and file-backed parts, in MiB; null when it is gone. */
export function rssOf(pid) {
  try {
    const s = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kib = (k) => Number(new RegExp(`${k}:\\s+(\\d+)`).exec(s)?.[1] ?? NaN);
    return {
      rss_mib: Math.round((kib('VmRSS') / 1024) * 100) / 100,
      hwm_mib: Math.round((kib('VmHWM') / 1024) * 100) / 100,
      anon_mib: Math.round((kib('RssAnon') / 1024) * 100) / 100,
      file_mib: Math.round((kib('RssFile') / 1024) * 100) / 100,
    };
  } catch {
    return null;
  }
}

/** The daemon's file-backed resident memory by file (smaps: Rss less Anonymous), summed over its mappings. */
export function fileMappings(pid) {
  const byName = new Map();
  let cur;
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ (\d+)\s*(.*)$/.exec(line);
    if (head) {
      const name = `${head[3]} ${head[5] || '[anon]'}`;
      cur = byName.get(name) ?? { name, size: 0, rss: 0, anon: 0, referenced: 0 };
      cur.size += (parseInt(head[2], 16) - parseInt(head[1], 16)) >> 10;
      byName.set(name, cur);
    } else if (cur && line.startsWith('Rss:')) cur.rss += Number(/(\d+)/.exec(line)[1]);
    else if (cur && line.startsWith('Anonymous:')) cur.anon += Number(/(\d+)/.exec(line)[1]);
    else if (cur && line.startsWith('Referenced:')) cur.referenced += Number(/(\d+)/.exec(line)[1]);
  }
  const mib = (k) => Math.round((k / 1024) * 10) / 10;
  return [...byName.values()]
    .filter((m) => m.rss - m.anon > 256)
    .sort((a, b) => b.rss - b.anon - (a.rss - a.anon))
    .slice(0, 8)
    .map((m) => `${mib(m.rss - m.anon)}/${mib(m.size)} (referenced ${mib(m.referenced)}) ${m.name}`);
}

export function tail(file, n = 15) {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-n).join('\n');
  } catch {
    return '(no log)';
  }
}

/** A daemon child process, output to a log file. */
function startDaemon(name, file, args, env, logFile) {
  const fd = openSync(logFile, 'a');
  const child = spawn(file, args, { env, stdio: ['ignore', fd, fd], detached: false });
  closeSync(fd);
  let exit = null;
  child.on('exit', (code, signal) => (exit = signal ?? `code ${code}`));
  child.on('error', (e) => (exit = `not started: ${e.message}`));
  return {
    name,
    child,
    logFile,
    exited: () => exit,
    async ready(sock, timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        if (exit !== null) return `exited (${exit}) before answering /healthz`;
        if ((await healthz(sock)) === 200) return null;
        if (Date.now() > deadline) return `/healthz not 200 within ${timeoutMs} ms`;
        await sleep(100);
      }
    },
    async stop() {
      if (exit !== null) return;
      const done = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await done;
      clearTimeout(t);
    },
    rss: () => rssOf(child.pid),
    fileMappings: () => {
      try {
        return fileMappings(child.pid);
      } catch {
        return [];
      }
    },
    /** VmHWM from now on (proc(5), clear_refs 5): a burst's own high-water, not the start-up's. */
    resetHwm() {
      try {
        writeFileSync(`/proc/${child.pid}/clear_refs`, '5');
      } catch {}
    },
  };
}

/**
 * multus-ts' daemon with a daemon-config of `keys` ({conf: the multus config it serves, daemon: more keys}),
 * in `tmp`, tagged `tag`; `daemons` collects it for the final stop. {daemon, sock} or {error}.
 */
export async function startTsDaemon({ exe, tmp, daemons }, tag, keys, env) {
  const sock = join(tmp, `sock-ts-${tag}`);
  const metricsPort = await freePort();
  const cfgDir = join(tmp, `daemon-ts-${tag}`);
  mkdirSync(cfgDir, { recursive: true, mode: 0o700 });
  const confFile = join(cfgDir, 'multus.conf');
  writeFileSync(confFile, JSON.stringify(keys.conf), { mode: 0o600 });
  const cfg = {
    socketDir: sock,
    cniConfigDir: join(cfgDir, 'net.d'),
    multusConfigFile: confFile,
    logLevel: 'error',
    logToStderr: true,
    metricsPort,
    ...keys.daemon,
  };
  mkdirSync(cfg.cniConfigDir, { recursive: true });
  const cfgFile = join(cfgDir, 'daemon-config.json');
  writeFileSync(cfgFile, JSON.stringify(cfg), { mode: 0o600 });
  const args = ['daemon', '--config', cfgFile];
  const d = startDaemon(`ts-${tag}`, exe, args, { PATH: RUNTIME_PATH, ...env }, join(tmp, `daemon-ts-${tag}.log`));
  daemons.push(d);
  const why = await d.ready(join(sock, 'multus.sock'), 60_000);
  if (why) {
    await d.stop();
    return { error: `daemon unavailable: build/multus daemon ${why}; log:\n${tail(d.logFile)}` };
  }
  d.metricsPort = metricsPort;
  return { daemon: d, sock };
}

/**
 * Go Multus thick's daemon (`goDaemon`) serving `delegateBytes` as its auto-generated config (of `cniVersion`),
 * talking to the cluster `cl` as the multus service account, on node `nodeName`. {daemon, sock} or {error}.
 */
export async function startGoDaemon({ tmp, daemons }, { goDaemon, delegateBytes, cl, nodeName, cniVersion = '1.0.0' }) {
  const sock = join(tmp, 'sock-go');
  const dir = join(tmp, 'daemon-go');
  mkdirSync(join(dir, 'auto'), { recursive: true, mode: 0o700 });
  mkdirSync(join(dir, 'net.d'), { recursive: true });
  writeFileSync(join(dir, 'auto', '10-bench.conf'), delegateBytes);
  const cfg = {
    cniVersion,
    socketDir: sock,
    cniConfigDir: join(dir, 'net.d'),
    multusConfigFile: 'auto',
    multusAutoconfigDir: join(dir, 'auto'),
    logLevel: 'error',
    logToStderr: true,
  };
  const cfgFile = join(dir, 'daemon-config.json');
  writeFileSync(cfgFile, JSON.stringify(cfg), { mode: 0o600 });
  const script =
    'set -e; mount -t tmpfs -o mode=0755 tmpfs /run; d=/run/secrets/kubernetes.io/serviceaccount; mkdir -p "$d"; ' +
    'cp "$1" "$d/token"; cp "$2" "$d/ca.crt"; echo "$3" > "$d/namespace"; exec "$4" -config "$5"';
  const env = {
    PATH: RUNTIME_PATH,
    KUBERNETES_SERVICE_HOST: '127.0.0.1',
    KUBERNETES_SERVICE_PORT: new URL(cl.server).port,
    MULTUS_NODE_NAME: nodeName,
  };
  const inNs = ['--mount', '--propagation', 'private', '--', '/bin/sh', '-c', script, 'sh'];
  const args = [...inNs, cl.tokenFile, cl.caFile, 'kube-system', goDaemon, cfgFile];
  const d = startDaemon('go-thick', 'unshare', args, env, join(tmp, 'daemon-go.log'));
  daemons.push(d);
  const why = await d.ready(join(sock, 'multus.sock'), 60_000);
  if (why) {
    await d.stop();
    return { error: `Go Multus thick daemon ${why}; log:\n${tail(d.logFile)}` };
  }
  return { daemon: d, sock };
}
