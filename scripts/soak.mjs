#!/usr/bin/env node
/**
 * `npm run soak -- --cycles N [--kill-rate P] [--parallel K] [--seed S]` (needs root and build/multus):
 * ADD/DEL cycles of one pod after another through build/multus with real plugins (bridge + host-local as the
 * cluster network, macvlan + host-local on a veth master as the second), each pod in a real network namespace,
 * run as a runtime runs a CNI plugin. With --kill-rate, that share of ADDs is killed (SIGKILL of the process
 * group) at a random point, and the runtime's DEL follows at once. At the end it prints one JSON line: cycles,
 * kills, failures, what is left (links and bridge ports in the host namespace, IPs in host-local's dir, cache
 * files, temp files, netns, plugin processes, the runner's fds) and the mean cycle time of the first and the
 * last 10% of the cycles (drift). Exit 0 only when nothing failed and nothing is left.
 *
 * The bridge and the macvlan master live in a throwaway "host" namespace (multus runs there via `ip netns
 * exec`, which execs, so the pid is multus'), so the machine's own namespace is never touched.
 *
 * --resident: the same cycles through the resident mode. `build/multus daemon` runs in the host namespace for
 * the whole soak, each call execs `build/multus-shim` (config of type multus-shim), and a kill hits the shim's
 * process group (as a runtime's timeout does): the daemon finishes the ADD and the DEL that follows tears it
 * down. The report adds the daemon's RSS after the first 10% of the cycles and at the end, and the daemon must
 * still be serving at the end.
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const MULTUS = process.env.MULTUS_TS_BIN || join(ROOT, 'build/multus');
const PLUGIN_DIR = '/usr/lib/cni';

function usage(msg) {
  console.error(
    `soak: ${msg}\nusage: npm run soak -- --cycles N [--kill-rate P] [--parallel K] [--seed S] [--resident]`,
  );
  process.exit(2);
}
const argv = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : dflt;
};
const resident = argv.includes('--resident');
const SHIM = process.env.MULTUS_TS_SHIM || join(dirname(MULTUS), 'multus-shim');
const cycles = Number(opt('cycles', '100'));
const killRate = Number(opt('kill-rate', '0'));
const parallel = Number(opt('parallel', '1'));
let seed = Number(opt('seed', String(Date.now() % 2 ** 31)));
if (!Number.isInteger(cycles) || cycles < 1) usage('--cycles must be a whole number >= 1');
if (!(killRate >= 0 && killRate <= 1)) usage('--kill-rate must be between 0 and 1');
if (!Number.isInteger(parallel) || parallel < 1 || parallel > 64) usage('--parallel must be a whole number 1..64');
if (process.getuid?.() !== 0) usage('needs root (network namespaces, a bridge, veth links)');
if (!existsSync(MULTUS)) usage(`no executable at ${MULTUS}: run npm run build`);
if (resident && !existsSync(SHIM)) usage(`no shim at ${SHIM}: run npm run build (with Go)`);
if (!existsSync(join(PLUGIN_DIR, 'bridge'))) usage(`no CNI plugins in ${PLUGIN_DIR}`);

/** A small seeded PRNG (mulberry32), so a run's kill points can be replayed with --seed. */
const startSeed = seed;
function random() {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}

/**
 * Runs `file` in a process group of its own; with `kill` (ms) the group gets SIGKILL after that long.
 * @param {string} file
 * @param {string[]} args
 * @param {{ input?: string, env?: NodeJS.ProcessEnv, kill?: number }} [opts]
 */
function run(file, args, { input = '', env = process.env, kill = undefined } = {}) {
  return new Promise((res) => {
    const child = spawn(file, args, { env, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    const out = [];
    const err = [];
    child.stdout.on('data', (b) => out.push(b));
    child.stderr.on('data', (b) => err.push(b));
    let killed = false;
    const timer =
      kill === undefined
        ? undefined
        : setTimeout(() => {
            killed = true;
            try {
              process.kill(-child.pid, 'SIGKILL');
            } catch {
              // already gone
            }
          }, kill);
    child.on('error', (e) => res({ code: -1, stdout: '', stderr: e.message, killed }));
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      res({
        code: code ?? signal,
        stdout: Buffer.concat(out).toString(),
        stderr: Buffer.concat(err).toString(),
        killed: killed && code === null,
      });
    });
    child.stdin.on('error', () => {});
    child.stdin.end(input);
  });
}
const must = (args) => {
  const r = spawnSync('ip', args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`ip ${args.join(' ')}: ${r.stderr.trim()}`);
  return r.stdout;
};
const ipJson = (args) => JSON.parse(spawnSync('ip', ['-j', ...args], { encoding: 'utf8' }).stdout || '[]');

const id = randomBytes(3).toString('hex');
const hostNs = `mts-soak-h-${id}`;
const bridge = `mtssbr${id}`;
const master = `mtssva${id}`;
const dir = mkdtempSync(join(tmpdir(), 'mts-soak-'));
const cniDir = join(dir, 'multus');
const ipamDir = join(dir, 'ipam');
const podNsPrefix = `mts-soak-${id}-`;

const sockDir = join(dir, 'run');
const config = JSON.stringify({
  cniVersion: '1.0.0',
  name: 'multus-cni-network',
  type: resident ? 'multus-shim' : 'multus',
  ...(resident ? { daemonSocketDir: sockDir } : {}),
  cniDir,
  binDir: PLUGIN_DIR,
  logLevel: 'error',
  logFile: join(dir, 'multus.log'),
  delegates: [
    {
      cniVersion: '1.0.0',
      name: 'soak-cluster',
      plugins: [
        {
          type: 'bridge',
          bridge,
          isGateway: true,
          ipMasq: false,
          ipam: { type: 'host-local', dataDir: ipamDir, subnet: '10.252.0.0/16' },
        },
      ],
    },
    {
      cniVersion: '1.0.0',
      name: 'soak-macvlan',
      type: 'macvlan',
      master,
      mode: 'bridge',
      ipam: { type: 'host-local', dataDir: ipamDir, subnet: '10.253.0.0/16' },
    },
  ],
});

/** The resident daemon (--resident): started below, stopped by cleanup(). */
let daemon;

function cleanup() {
  if (daemon && daemon.exitCode === null && daemon.signalCode === null) daemon.kill('SIGKILL');
  for (const ns of existsSync('/var/run/netns') ? readdirSync('/var/run/netns') : []) {
    if (ns.startsWith(podNsPrefix) || ns === hostNs) spawnSync('ip', ['netns', 'delete', ns]);
  }
  rmSync(dir, { recursive: true, force: true });
}
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => (cleanup(), process.exit(130)));

must(['netns', 'add', hostNs]);
must(['-n', hostNs, 'link', 'set', 'lo', 'up']);
must(['-n', hostNs, 'link', 'add', master, 'type', 'veth', 'peer', 'name', `mtssvb${id}`]);
must(['-n', hostNs, 'link', 'set', master, 'up']);
const baseLinks = new Set(ipJson(['-n', hostNs, 'link', 'show']).map((l) => l.ifname));
baseLinks.add(bridge); // the bridge plugin creates it on the first ADD and keeps it, as on a node

if (resident) {
  // daemon-config.json: the soak's config used as is (the daemon answers each call with the config it is sent)
  mkdirSync(join(dir, 'net.d'), { mode: 0o700 });
  writeFileSync(join(dir, 'multus.conf'), config, { mode: 0o600 });
  const daemonConfig = {
    socketDir: sockDir,
    cniConfigDir: join(dir, 'net.d'),
    multusConfigFile: join(dir, 'multus.conf'),
    logLevel: 'error',
    logToStderr: true,
  };
  writeFileSync(join(dir, 'daemon-config.json'), JSON.stringify(daemonConfig), { mode: 0o600 });
  const log = openSync(join(dir, 'daemon.log'), 'a', 0o600);
  daemon = spawn('ip', ['netns', 'exec', hostNs, MULTUS, 'daemon', '--config', join(dir, 'daemon-config.json')], {
    env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' },
    stdio: ['ignore', log, log],
  });
  closeSync(log);
  for (let i = 0; !existsSync(join(sockDir, 'multus.sock')); i++) {
    if (daemon.exitCode !== null || i > 600) {
      const text = existsSync(join(dir, 'daemon.log')) ? readFileSync(join(dir, 'daemon.log'), 'utf8') : '';
      cleanup();
      usage(`the daemon did not start: ${text.trim().slice(-500)}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}
/** The daemon's resident set size in MiB (`ip netns exec` execs, so the child's pid is the daemon's). */
const daemonRssMiB = () => {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${daemon.pid}/status`, 'utf8'));
  return m ? Math.round((Number(m[1]) / 1024) * 10) / 10 : undefined;
};
let rssAfterTenth;

const fdCount = () => readdirSync('/proc/self/fd').length;
await run('true', []); // the first child opens libuv's signal pipe for good: count fds after it
const fdsBefore = fdCount();

async function multus(command, containerId, netns, kill) {
  const env = {
    PATH: '/usr/sbin:/usr/bin:/sbin:/bin',
    CNI_COMMAND: command,
    CNI_CONTAINERID: containerId,
    CNI_NETNS: netns,
    CNI_IFNAME: 'eth0',
    CNI_PATH: PLUGIN_DIR,
    CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=soak;K8S_POD_NAME=${containerId};K8S_POD_INFRA_CONTAINER_ID=${containerId}`,
  };
  return run('ip', ['netns', 'exec', hostNs, resident ? SHIM : MULTUS], { input: config, env, kill });
}

const times = new Array(cycles);
const failures = [];
let kills = 0;
let next = 0;
/** Kill points are drawn over the time an unkilled ADD takes (a running estimate). */
let addMs = 300;

async function cycle(i) {
  const containerId = `soak-${id}-${i}`;
  const ns = `${podNsPrefix}${i}`;
  const netns = `/var/run/netns/${ns}`;
  must(['netns', 'add', ns]);
  const started = performance.now();
  const kill = random() < killRate ? Math.floor(random() * addMs * 1.2) : undefined;
  const add = await multus('ADD', containerId, netns, kill);
  if (add.killed) kills++;
  else if (add.code !== 0)
    failures.push({ cycle: i, step: 'ADD', code: add.code, out: (add.stdout || add.stderr).slice(0, 300) });
  else addMs = addMs * 0.9 + (performance.now() - started) * 0.1;
  const del = await multus('DEL', containerId, netns);
  if (del.code !== 0)
    failures.push({ cycle: i, step: 'DEL', code: del.code, out: (del.stdout || del.stderr).slice(0, 300) });
  spawnSync('ip', ['netns', 'delete', ns]);
  times[i] = performance.now() - started;
  if (resident && i === Math.max(1, Math.floor(cycles / 10)) - 1) rssAfterTenth = daemonRssMiB();
}

async function worker() {
  for (let i = next++; i < cycles; i = next++) await cycle(i);
}

function leftovers() {
  const links = ipJson(['-n', hostNs, 'link', 'show'])
    .map((l) => l.ifname)
    .filter((n) => !baseLinks.has(n));
  const ports = ipJson(['-n', hostNs, 'link', 'show', 'master', bridge]).map((l) => l.ifname);
  const ips = [];
  for (const net of existsSync(ipamDir) ? readdirSync(ipamDir) : []) {
    for (const f of readdirSync(join(ipamDir, net))) if (/^[0-9.]+$|:/.test(f)) ips.push(`${net}/${f}`);
  }
  const list = (d) =>
    existsSync(d)
      ? readdirSync(d, { withFileTypes: true })
          .filter((e) => !e.isDirectory())
          .map((e) => e.name)
      : [];
  const cacheEntries = [...list(cniDir), ...list(join(cniDir, 'results')).map((n) => `results/${n}`)];
  const netns = (existsSync('/var/run/netns') ? readdirSync('/var/run/netns') : []).filter((n) =>
    n.startsWith(podNsPrefix),
  );
  const processes = [];
  // ours run in the soak's own host netns (other test files may run build/multus meanwhile: not counted)
  const hostNsLink = existsSync(`/var/run/netns/${hostNs}`) ? `net:[${statSync(`/var/run/netns/${hostNs}`).ino}]` : '';
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const exe = readlinkSync(`/proc/${pid}/exe`);
      if (Number(pid) === daemon?.pid) continue;
      const ours = exe.startsWith(`${PLUGIN_DIR}/`) || readlinkSync(`/proc/${pid}/ns/net`) === hostNsLink;
      if (ours && (exe === MULTUS || exe === SHIM || exe.startsWith(`${PLUGIN_DIR}/`))) processes.push(`${pid}:${exe}`);
    } catch {
      // gone, or a kernel thread
    }
  }
  return {
    links,
    bridgePorts: ports,
    ips,
    cacheFiles: cacheEntries.filter((n) => !n.split('/').pop().startsWith('.')),
    tempFiles: cacheEntries.filter((n) => n.split('/').pop().startsWith('.')),
    netns,
    processes,
    fds: fdCount() - fdsBefore,
  };
}

const mean = (xs) => (xs.length ? Math.round((xs.reduce((a, b) => a + b, 0) / xs.length) * 10) / 10 : 0);
let report;
try {
  const started = Date.now();
  await Promise.all(Array.from({ length: Math.min(parallel, cycles) }, worker));
  // Plugins orphaned by a kill finish on their own; give them a moment before looking for processes.
  for (let i = 0; i < 50 && leftovers().processes.length > 0; i++) await new Promise((r) => setTimeout(r, 100));
  const tenth = Math.max(1, Math.floor(cycles / 10));
  const left = leftovers();
  let daemonReport;
  if (resident) {
    const serving = daemon.exitCode === null && existsSync(join(sockDir, 'multus.sock'));
    daemonReport = { serving, rssMiB: { afterFirst10pct: rssAfterTenth, end: serving ? daemonRssMiB() : undefined } };
  }
  const clean =
    Object.values(left).every((v) => (Array.isArray(v) ? v.length === 0 : v <= 0)) && daemonReport?.serving !== false;
  report = {
    mode: resident ? 'resident' : 'thin',
    cycles,
    parallel,
    killRate,
    seed: startSeed,
    kills,
    failures: failures.length,
    left,
    clean,
    cycleMs: { first10pct: mean(times.slice(0, tenth)), last10pct: mean(times.slice(-tenth)) },
    totalS: Math.round((Date.now() - started) / 100) / 10,
    ...(daemonReport ? { daemon: daemonReport } : {}),
    ...(failures.length ? { firstFailures: failures.slice(0, 5) } : {}),
  };
} finally {
  cleanup();
}
console.log(JSON.stringify(report));
process.exit(report.clean && report.failures === 0 ? 0 : 1);
