/**
 * End-to-end helpers: network namespaces, veth pairs, the libcni driver, the built `multus` executable, temp
 * dirs and `ip -j` readers.
 *
 * Every child process is started with an argument array (execFile/spawn), never through a shell.
 *
 * Isolation: each test runs in its own "host" namespace (`mts-h-<rand>`) and its own pod namespace
 * (`mts-c-<rand>`). The libcni driver is started inside the host namespace (`ip netns exec`), so bridges, host
 * veth ends, the macvlan master and ifb devices that plugins create never touch the machine's real root
 * namespace, and deleting the host namespace removes whatever a failed test left behind.
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, copyFile, mkdir, mkdtemp, readFile, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Requirement, fileExists, isRoot } from '../helpers/skip.ts';

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const MULTUS_BIN = join(REPO_ROOT, 'build/multus');
export const DRIVER_BIN = join(REPO_ROOT, '.cache/bin/libcni-driver');
export const BUILD_DRIVER = join(REPO_ROOT, 'test/e2e/build-driver.sh');
/** Debian's containernetworking-plugins. */
export const PLUGIN_DIR = '/usr/lib/cni';
export const NETNS_DIR = '/var/run/netns';

// ---------------------------------------------------------------------------------------------------------
// processes

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  input?: string | Buffer;
  env?: NodeJS.ProcessEnv;
  timeoutMs?: number;
}

/** Runs `file` with `args` (no shell), feeding `input` on stdin; never rejects on a non-zero exit. */
export function run(file: string, args: readonly string[], opts: RunOptions = {}): Promise<RunResult> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(file, args, {
      env: opts.env ?? { ...process.env, PATH: withSbin(process.env.PATH) },
      stdio: ['pipe', 'pipe', 'pipe'],
      timeout: opts.timeoutMs ?? 30_000,
      killSignal: 'SIGKILL',
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.on('error', reject);
    child.on('close', (code, signal) =>
      resolvePromise({
        code,
        signal,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
      }),
    );
    child.stdin.on('error', () => {}); // the child may exit before reading stdin
    child.stdin.end(opts.input ?? '');
  });
}

/** Like `run`, but rejects when the command exits non-zero. */
export async function runOk(file: string, args: readonly string[], opts: RunOptions = {}): Promise<string> {
  const r = await run(file, args, opts);
  if (r.code !== 0) {
    throw new Error(`${file} ${args.join(' ')} exited ${r.code ?? r.signal}: ${r.stderr.trim() || r.stdout.trim()}`);
  }
  return r.stdout;
}

export function randomSuffix(bytes = 3): string {
  return randomBytes(bytes).toString('hex');
}

/** `path` with /usr/sbin and /sbin appended when missing. */
export function withSbin(path: string | undefined): string {
  const parts = (path ?? '/usr/local/bin:/usr/bin:/bin').split(':').filter(Boolean);
  for (const d of ['/usr/local/sbin', '/usr/sbin', '/sbin']) if (!parts.includes(d)) parts.push(d);
  return parts.join(':');
}

// ---------------------------------------------------------------------------------------------------------
// the libcni driver

/**
 * Builds (or reuses) the libcni driver when Go is installed and the driver's sources changed, so `npm test`
 * on a developer machine does not need a separate step. Returns the driver's path; a missing Go or a failed
 * build is left for the caller's `needs(fileExists(DRIVER_BIN, ...))` to report.
 */
export function ensureDriver(): string {
  if (process.getuid?.() !== 0) return DRIVER_BIN;
  const hasGo = spawnSync('go', ['version'], { stdio: 'ignore' }).status === 0;
  if (!hasGo) return DRIVER_BIN;
  const r = spawnSync('bash', [BUILD_DRIVER], { encoding: 'utf8', timeout: 300_000 });
  if (r.status !== 0) console.warn(`test/e2e/build-driver.sh failed:\n${r.stderr}`);
  return DRIVER_BIN;
}

/**
 * What every end-to-end file needs, for `needs(...e2eRequirements())`: root, the built plugin, the libcni
 * driver (built here first when Go is available) and Debian's CNI plugins.
 */
export function e2eRequirements(): Requirement[] {
  ensureDriver();
  return [
    isRoot(),
    fileExists(MULTUS_BIN, 'the built plugin (npm run build)'),
    fileExists(DRIVER_BIN, 'the libcni driver (bash test/e2e/build-driver.sh)'),
    fileExists(join(PLUGIN_DIR, 'bridge'), 'the CNI plugins of containernetworking-plugins (bash scripts/setup.sh)'),
  ];
}

export type DriverCommand = 'add' | 'check' | 'del' | 'status' | 'gc';

export interface DriverOptions {
  conf: string;
  netns: string;
  id: string;
  ifname?: string;
  args?: string;
  cacheDir: string;
  path: string[];
  capArgs?: Record<string, unknown>;
  validAttachments?: { containerID: string; ifname: string }[];
  /** Run the driver inside this named network namespace (the test's "host"). */
  hostNetns?: string;
}

export interface DriverResult extends RunResult {
  /** stdout decoded as JSON, when it is JSON. */
  json: Record<string, unknown> | undefined;
}

export async function runDriver(cmd: DriverCommand, o: DriverOptions): Promise<DriverResult> {
  const args = [
    cmd,
    '--conf',
    o.conf,
    '--netns',
    o.netns,
    '--id',
    o.id,
    '--ifname',
    o.ifname ?? 'eth0',
    '--args',
    o.args ?? '',
    '--cache-dir',
    o.cacheDir,
    '--path',
    o.path.join(':'),
  ];
  if (o.capArgs) args.push('--cap-args', JSON.stringify(o.capArgs));
  if (o.validAttachments) args.push('--valid-attachments', JSON.stringify(o.validAttachments));
  // Plugins such as portmap exec iptables: make sure the sbin directories are searched.
  const env = { ...process.env, PATH: withSbin(process.env.PATH) };
  const r = o.hostNetns
    ? await run('ip', ['netns', 'exec', o.hostNetns, DRIVER_BIN, ...args], { env })
    : await run(DRIVER_BIN, args, { env });
  return { ...r, json: parseJsonOrUndefined(r.stdout) };
}

// ---------------------------------------------------------------------------------------------------------
// the multus executable, run directly the way a runtime would

export interface MultusCall {
  command: 'ADD' | 'DEL' | 'CHECK' | 'STATUS' | 'GC' | 'VERSION';
  config: Record<string, unknown> | string;
  containerId?: string;
  netns?: string;
  ifname?: string;
  args?: string;
  /** CNI_PATH entries. */
  path?: string[];
  hostNetns?: string;
  bin?: string;
}

export async function runMultus(c: MultusCall): Promise<DriverResult> {
  const env: NodeJS.ProcessEnv = { PATH: withSbin(process.env.PATH), CNI_COMMAND: c.command };
  if (c.containerId !== undefined) env.CNI_CONTAINERID = c.containerId;
  if (c.netns !== undefined) env.CNI_NETNS = c.netns;
  env.CNI_IFNAME = c.ifname ?? 'eth0';
  env.CNI_ARGS = c.args ?? '';
  env.CNI_PATH = (c.path ?? [PLUGIN_DIR]).join(':');
  const input = typeof c.config === 'string' ? c.config : JSON.stringify(c.config);
  const bin = c.bin ?? MULTUS_BIN;
  const r = c.hostNetns
    ? await run('ip', ['netns', 'exec', c.hostNetns, bin], { input, env })
    : await run(bin, [], { input, env });
  return { ...r, json: parseJsonOrUndefined(r.stdout) };
}

/**
 * Installs build/multus as `<dir>/multus`, the way a daemonset copies it into /opt/cni/bin. A symlink keeps
 * it cheap; a copy is made when the link cannot be.
 */
export async function installMultus(dir: string): Promise<string> {
  await mkdir(dir, { recursive: true });
  const dest = join(dir, 'multus');
  try {
    await symlink(MULTUS_BIN, dest);
  } catch {
    // the launcher and the Bun executable it starts (docs/build.md, "The launcher")
    for (const f of (await readdir(dirname(MULTUS_BIN))).filter((n) => n.startsWith('.multus-bun-'))) {
      await copyFile(join(dirname(MULTUS_BIN), f), join(dir, f));
      await chmod(join(dir, f), 0o755);
    }
    await copyFile(MULTUS_BIN, dest);
    await chmod(dest, 0o755);
  }
  return dest;
}

// ---------------------------------------------------------------------------------------------------------
// namespaces and links

export function netnsPath(name: string): string {
  return join(NETNS_DIR, name);
}

/** Creates a named network namespace `<prefix>-<random>` and returns its name. */
export async function createNetns(prefix = 'mts'): Promise<string> {
  const name = `${prefix}-${randomSuffix(4)}`;
  await runOk('ip', ['netns', 'add', name]);
  return name;
}

/** Deletes a named network namespace; a missing one is not an error. */
export async function deleteNetns(name: string): Promise<void> {
  if (!existsSync(netnsPath(name))) return;
  await run('ip', ['netns', 'delete', name]);
}

/** `ip` with `-n <netns>` when a namespace is given. */
export function ipArgs(netns: string | undefined, args: readonly string[]): string[] {
  return netns ? ['-n', netns, ...args] : [...args];
}

export async function ip(netns: string | undefined, args: readonly string[]): Promise<string> {
  return runOk('ip', ipArgs(netns, args));
}

/** Creates a veth pair `a`/`b` in `netns` (the current namespace when undefined) and sets both ends up. */
export async function addVethPair(a: string, b: string, netns?: string): Promise<void> {
  await ip(netns, ['link', 'add', a, 'type', 'veth', 'peer', 'name', b]);
  await ip(netns, ['link', 'set', a, 'up']);
  await ip(netns, ['link', 'set', b, 'up']);
}

/** Deletes a link; a missing one is not an error. */
export async function deleteLink(name: string, netns?: string): Promise<void> {
  await run('ip', ipArgs(netns, ['link', 'delete', name]));
}

export interface IpAddrInfo {
  family: 'inet' | 'inet6';
  local: string;
  prefixlen: number;
  scope?: string;
}

export interface IpLink {
  ifindex: number;
  ifname: string;
  address?: string;
  operstate?: string;
  link_type?: string;
  mtu?: number;
  linkinfo?: { info_kind?: string };
  addr_info?: IpAddrInfo[];
  [k: string]: unknown;
}

export interface IpRoute {
  dst: string;
  gateway?: string;
  dev?: string;
  protocol?: string;
  scope?: string;
  prefsrc?: string;
  [k: string]: unknown;
}

async function ipJson<T>(netns: string | undefined, args: readonly string[]): Promise<T[]> {
  const out = await ip(netns, ['-j', ...args]);
  return out.trim() === '' ? [] : (JSON.parse(out) as T[]);
}

export function readAddrs(netns?: string): Promise<IpLink[]> {
  return ipJson<IpLink>(netns, ['addr', 'show']);
}

export function readLinks(netns?: string): Promise<IpLink[]> {
  return ipJson<IpLink>(netns, ['-d', 'link', 'show']);
}

export function readRoutes(netns?: string, family: '4' | '6' = '4'): Promise<IpRoute[]> {
  return ipJson<IpRoute>(netns, [`-${family}`, 'route', 'show']);
}

/** Interface names in a namespace. */
export async function linkNames(netns?: string): Promise<string[]> {
  return (await readLinks(netns)).map((l) => l.ifname);
}

/** IPv4 addresses of `ifname` in CIDR form ("10.1.2.3/24"). */
export async function ipv4Of(netns: string | undefined, ifname: string): Promise<string[]> {
  const link = (await readAddrs(netns)).find((l) => l.ifname === ifname);
  return (link?.addr_info ?? []).filter((a) => a.family === 'inet').map((a) => `${a.local}/${a.prefixlen}`);
}

/** Reads a file below /proc/sys inside a namespace (sysctl values are per network namespace). */
export async function readSysctl(netns: string, key: string): Promise<string> {
  const path = join('/proc/sys', ...key.split('.'));
  return (await runOk('ip', ['netns', 'exec', netns, 'cat', path])).trim();
}

// ---------------------------------------------------------------------------------------------------------
// files

export function tempDir(prefix = 'mts-e2e-'): Promise<string> {
  return mkdtemp(join(tmpdir(), prefix));
}

export async function removeDir(dir: string | undefined): Promise<void> {
  if (dir) await rm(dir, { recursive: true, force: true });
}

export async function writeJson(path: string, value: unknown): Promise<string> {
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, JSON.stringify(value, null, 2));
  return path;
}

export async function listDir(dir: string): Promise<string[]> {
  try {
    return (await readdir(dir)).sort();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw e;
  }
}

/**
 * Files host-local keeps for reserved addresses in `<dataDir>/<network name>/`: every entry named like an IP
 * address (the `lock` and `last_reserved_ip.<n>` files are bookkeeping).
 */
export async function reservedIps(dataDir: string): Promise<string[]> {
  const found: string[] = [];
  for (const network of await listDir(dataDir)) {
    for (const f of await listDir(join(dataDir, network))) {
      if (/^[0-9.]+$/.test(f) || f.includes(':')) found.push(`${network}/${f}`);
    }
  }
  return found.sort();
}

export async function readJsonFile<T = unknown>(path: string): Promise<T> {
  return JSON.parse(await readFile(path, 'utf8')) as T;
}

export function parseJsonOrUndefined(s: string): Record<string, unknown> | undefined {
  const t = s.trim();
  if (!t.startsWith('{')) return undefined;
  try {
    return JSON.parse(t) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------------------
// one test's world

/**
 * Everything one test creates: a host namespace with a veth pair whose first end is a macvlan master, a pod
 * namespace, a temp dir holding the plugin bin dir (with `multus`), the multus cniDir, libcni's cache dir and
 * host-local's dataDir, and unique bridge/veth names. `cleanup()` removes all of it and never throws.
 */
export class TestWorld {
  readonly id = randomSuffix(4);
  readonly containerId = `mts-e2e-${this.id}`;
  readonly hostNs = `mts-h-${this.id}`;
  readonly podNs = `mts-c-${this.id}`;
  readonly bridge = `mtsbr${this.id}`;
  readonly master = `mtsva${this.id}`;
  readonly masterPeer = `mtsvb${this.id}`;
  dir = '';

  get podNsPath(): string {
    return netnsPath(this.podNs);
  }
  get binDir(): string {
    return join(this.dir, 'bin');
  }
  /** multus' cniDir; not created in advance so the plugin's own directory modes are observable. */
  get cniDir(): string {
    return join(this.dir, 'multus');
  }
  /** libcni's cache dir for the runtime's own call of `multus`. */
  get cacheDir(): string {
    return join(this.dir, 'runtime-cache');
  }
  get ipamDir(): string {
    return join(this.dir, 'ipam');
  }
  get logFile(): string {
    return join(this.dir, 'multus.log');
  }
  /** The search path given to libcni: multus first, then the real plugins. */
  get path(): string[] {
    return [this.binDir, PLUGIN_DIR];
  }

  async setup(): Promise<this> {
    this.dir = await tempDir(`mts-e2e-${this.id}-`);
    await installMultus(this.binDir);
    await runOk('ip', ['netns', 'add', this.hostNs]);
    await runOk('ip', ['netns', 'add', this.podNs]);
    await ip(this.hostNs, ['link', 'set', 'lo', 'up']);
    await ip(this.podNs, ['link', 'set', 'lo', 'up']);
    await addVethPair(this.master, this.masterPeer, this.hostNs);
    return this;
  }

  async cleanup(): Promise<void> {
    const steps = [() => deleteNetns(this.podNs), () => deleteNetns(this.hostNs), () => removeDir(this.dir)];
    for (const step of steps) {
      try {
        await step();
      } catch (e) {
        console.warn(`cleanup of ${this.id}: ${(e as Error).message}`);
      }
    }
  }

  driver(cmd: DriverCommand, conf: string, extra: Partial<DriverOptions> = {}): Promise<DriverResult> {
    return runDriver(cmd, {
      conf,
      netns: this.podNsPath,
      id: this.containerId,
      ifname: 'eth0',
      args: `IgnoreUnknown=1;K8S_POD_NAMESPACE=e2e;K8S_POD_NAME=pod-${this.id};K8S_POD_INFRA_CONTAINER_ID=${this.containerId}`,
      cacheDir: this.cacheDir,
      path: this.path,
      hostNetns: this.hostNs,
      ...extra,
    });
  }

  /** Host-side link names (the bridge, host veth ends of the bridge plugin, ifb devices of bandwidth). */
  hostLinks(): Promise<string[]> {
    return linkNames(this.hostNs);
  }

  podLinks(): Promise<string[]> {
    return linkNames(this.podNs);
  }
}

/** Formats a failed driver call for assertion messages. */
export function describeRun(r: RunResult): string {
  return `exit ${r.code ?? r.signal}\nstdout: ${r.stdout.trim()}\nstderr: ${r.stderr.trim()}`;
}

// ---------------------------------------------------------------------------------------------------------
// network configs

export const CLUSTER_NET = 'mts-cluster';
export const MACVLAN_NET = 'mts-macvlan';
export const MULTUS_NET = 'multus-cni-network';

/** host-local IPAM over `subnet` (a /24 such as "10.251.3.0/24") with its data in `dataDir`. */
export function hostLocal(
  dataDir: string,
  subnet: string,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return { type: 'host-local', dataDir, subnet, ...extra };
}

/**
 * The cluster network: a conflist of bridge (the gateway is the subnet's .1 on the bridge, default route via
 * it) plus `more` chained plugins.
 */
export function clusterConflist(
  w: TestWorld,
  cniVersion: string,
  subnet: string,
  more: Record<string, unknown>[] = [],
): Record<string, unknown> {
  return {
    cniVersion,
    name: CLUSTER_NET,
    plugins: [
      {
        type: 'bridge',
        bridge: w.bridge,
        isGateway: true,
        isDefaultGateway: true,
        ipMasq: false,
        ipam: hostLocal(w.ipamDir, subnet),
      },
      ...more,
    ],
  };
}

/** A single-plugin macvlan config on the world's veth end. */
export function macvlanConf(
  w: TestWorld,
  cniVersion: string,
  subnet: string,
  master = w.master,
): Record<string, unknown> {
  return {
    cniVersion,
    name: MACVLAN_NET,
    type: 'macvlan',
    master,
    mode: 'bridge',
    ipam: hostLocal(w.ipamDir, subnet),
  };
}

export function multusConf(
  w: TestWorld,
  cniVersion: string,
  delegates: Record<string, unknown>[],
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    cniVersion,
    name: MULTUS_NET,
    type: 'multus',
    cniDir: w.cniDir,
    binDir: PLUGIN_DIR,
    logLevel: 'debug',
    logFile: w.logFile,
    delegates,
    ...extra,
  };
}

/** Writes a multus config as `<world dir>/00-multus.conf` (a single-plugin file, as on a node). */
export function writeMultusConf(w: TestWorld, conf: Record<string, unknown>): Promise<string> {
  return writeJson(join(w.dir, '00-multus.conf'), conf);
}

/** `<cniDir>/results/<network>-<containerID>-<ifname>` */
export function resultCachePath(w: TestWorld, network: string, ifname: string): string {
  return join(w.cniDir, 'results', `${network}-${w.containerId}-${ifname}`);
}

/** `<cniDir>/<containerID>` */
export function scratchCachePath(w: TestWorld): string {
  return join(w.cniDir, w.containerId);
}
