/**
 * A real container runtime for tests: Debian's containerd (1.6) with runc, its CRI plugin driven by crictl,
 * creating pod sandboxes whose networks come from the CNI plugins in the fixture's own bin and conf dirs (see
 * docs/archive/kubernetes-tests.md, "Runtime tier").
 *
 * Everything lives in one temp dir `$TMPDIR/mts-rt-XXXXXX`: containerd's root, state, gRPC socket, config and
 * log; the CNI bin dir (a copy of build/multus and of Debian's plugins) and conf dir; the sandbox configs.
 * containerd runs inside a network namespace of its own (`mts-rt-<id>`, entered with nsenter --net only, so
 * it shares the machine's mounts and cgroups, which runc needs): the bridges, host veth ends and macvlan
 * masters the plugins make live there and never touch the machine's root namespace. Sandbox network
 * namespaces are bind-mounted under the state dir (`netns_mounts_under_state_dir`), sandbox cgroups under a
 * parent of the fixture's own name.
 *
 * `stop()` removes sandboxes through CRI while containerd runs, stops containerd, then runs cleanup.sh: shims
 * and pause processes killed by PID, mounts below the dir, cgroups, the namespace, the dir. A watchdog shell
 * runs the same script when the test runner dies without stopping the fixture. MULTUS_TS_KEEP_TMP=1 keeps
 * the temp dir (containerd.log, multus.log, configs) for debugging.
 *
 * Every child process is started with an argument array, never through a shell command built from input.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { chmod, copyFile, mkdir, mkdtemp, readFile, readdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Requirement, fileExists, isRoot } from '../helpers/skip.ts';
import { type RunResult, run as runProcess } from '../e2e/helpers.ts';

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const RUNTIME_CACHE_DIR = join(process.env.MULTUS_TS_CACHE_DIR || join(REPO_ROOT, '.cache'), 'runtime');
export const CRICTL_BIN = join(RUNTIME_CACHE_DIR, 'crictl');
export const PAUSE_TAR = join(RUNTIME_CACHE_DIR, 'pause.tar');
export const BUILD_SCRIPT = join(REPO_ROOT, 'test/runtime/build.sh');
export const CLEANUP_SCRIPT = join(REPO_ROOT, 'test/runtime/cleanup.sh');
export const MULTUS_BIN = join(REPO_ROOT, 'build/multus');
/**
 * The resident daemon's `delegateExec` in the runtime suites: "caller" (our manifests': the shim runs the delegates)
 * unless MULTUS_TS_DELEGATE_EXEC=daemon (Multus' way), so both run against containerd, CRI-O and the kubelet.
 */
export const DELEGATE_EXEC = process.env.MULTUS_TS_DELEGATE_EXEC === 'daemon' ? 'daemon' : 'caller';
/** The launcher alone, as the image stores it (scripts/image.sh): what the DaemonSets install as /opt/cni/bin/multus. */
export const LAUNCHER_BIN = join(REPO_ROOT, 'build/multus.launcher');
export const PLUGIN_DIR = '/usr/lib/cni';
export const CONTAINERD_BIN = '/usr/bin/containerd';
export const CTR_BIN = '/usr/bin/ctr';
export const RUNC_BIN = '/usr/sbin/runc';
/** The reference the pause image is imported under (build.sh's tag; containerd's sandbox_image). */
export const PAUSE_IMAGE_BASE = 'localhost/pause';

/** MULTUS_TS_KEEP_TMP=1: stop() keeps the temp dir (logs, configs) and removes everything else. */
export const keepTmp = process.env.MULTUS_TS_KEEP_TMP === '1';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What the runtime tier needs, for `needs(...)`. */
export function runtimeRequirements(): Requirement[] {
  return [
    isRoot(),
    fileExists(CONTAINERD_BIN, 'containerd (apt-get install containerd, or bash scripts/setup.sh)'),
    fileExists(CTR_BIN, 'ctr (apt-get install containerd)'),
    fileExists(RUNC_BIN, 'runc (apt-get install runc)'),
    fileExists(CRICTL_BIN, 'crictl (bash test/runtime/build.sh)'),
    fileExists(PAUSE_TAR, 'the pause image (bash test/runtime/build.sh)'),
    fileExists(MULTUS_BIN, 'the built plugin (npm run build)'),
    fileExists(join(PLUGIN_DIR, 'bridge'), 'the CNI plugins of containernetworking-plugins (bash scripts/setup.sh)'),
  ];
}

// ---------------------------------------------------------------------------------------------------------
// processes

export type { RunResult };

/** Runs `file args` (no shell) without the Node variables of this test process; never rejects on an exit status. */
/** This process's environment without its Node variables, as a runtime would start a child. */
export function childEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env = { ...process.env, ...extra };
  delete env.NODE_OPTIONS;
  delete env.NODE_EXTRA_CA_CERTS;
  return env;
}

/**
 * The environment of `npm run image` (scripts/image.sh) into `dir`, tagged with the committed manifests' and chart's
 * default tag (package.json's version) so that they name the image the node imports; a release is tagged
 * <version>-<commit> (docs/install.md, "Image").
 */
export function imageEnv(dir: string): NodeJS.ProcessEnv {
  const { version } = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string };
  return childEnv({ MULTUS_TS_IMAGE_DIR: dir, MULTUS_TS_IMAGE_TAG: version });
}

export function run(
  file: string,
  args: readonly string[],
  opts: { timeoutMs?: number; input?: string } = {},
): Promise<RunResult> {
  return runProcess(file, args, {
    env: childEnv(),
    timeoutMs: opts.timeoutMs ?? 120_000,
    ...(opts.input !== undefined ? { input: opts.input } : {}),
  });
}

export async function runOk(file: string, args: readonly string[], opts: { timeoutMs?: number } = {}): Promise<string> {
  const r = await run(file, args, opts);
  if (r.code !== 0) {
    throw new Error(`${file} ${args.join(' ')} exited ${r.code ?? r.signal}: ${r.stderr.trim() || r.stdout.trim()}`);
  }
  return r.stdout;
}

/** Fixtures not stopped yet: their cleanup runs synchronously on the runner's 'exit'. */
const live = new Set<Runtime>();
let exitHook = false;
function installExitHook(): void {
  if (exitHook) return;
  exitHook = true;
  process.on('exit', () => {
    for (const rt of live) rt.cleanupSync();
  });
}

// ---------------------------------------------------------------------------------------------------------
// the fixture

export interface SandboxMeta {
  name: string;
  namespace: string;
  uid: string;
}

export interface SandboxInfo {
  id: string;
  /** PID of the sandbox's pause process. */
  pid: number;
  /** Path of the sandbox's network namespace (below the state dir). */
  netns: string;
}

export class Runtime {
  /** The CRI runtime's name: its log and PID file in the dir are `<kind>.log`, `<kind>.pid` (crio.ts: 'crio'). */
  readonly kind: string = 'containerd';
  readonly id = randomBytes(4).toString('hex');
  /** containerd's network namespace (the "host" of the sandboxes). */
  readonly hostNs = `mts-rt-${this.id}`;
  /** Cgroup parent of every sandbox of this fixture. */
  readonly cgroupParent = `mts-rt-${this.id}`;
  dir = '';
  private containerd: ChildProcess | undefined;
  private containerdExit: Promise<void> | undefined;
  private watchdog: ChildProcess | undefined;
  private stopped = false;
  /** The pause image's tag (written by build.sh). */
  readonly pauseTag = readFileSync(join(RUNTIME_CACHE_DIR, 'pause.tag'), 'utf8').trim();

  get binDir(): string {
    return join(this.dir, 'bin');
  }
  get confDir(): string {
    return join(this.dir, 'net.d');
  }
  get socket(): string {
    return join(this.dir, 'containerd.sock');
  }
  get stateDir(): string {
    return join(this.dir, 'state');
  }
  get netnsDir(): string {
    return join(this.stateDir, 'io.containerd.grpc.v1.cri', 'netns');
  }
  get log(): string {
    return join(this.dir, `${this.kind}.log`);
  }
  get sandboxImage(): string {
    return `${PAUSE_IMAGE_BASE}:${this.pauseTag}`;
  }

  /** Makes the temp dir, the namespace and the CNI bin dir (build/multus and Debian's plugins, copied). */
  async prepare(): Promise<this> {
    installExitHook();
    this.dir = await mkdtemp(join(tmpdir(), 'mts-rt-'));
    live.add(this);
    if (keepTmp) await writeFile(join(this.dir, 'keep'), '');
    this.startWatchdog();
    await runOk('ip', ['netns', 'add', this.hostNs]);
    await runOk('ip', ['-n', this.hostNs, 'link', 'set', 'lo', 'up']);
    for (const d of [this.binDir, this.confDir, join(this.dir, 'pods'), join(this.dir, 'logs')]) {
      await mkdir(d, { recursive: true, mode: 0o700 });
    }
    for (const f of await readdir(PLUGIN_DIR)) await copyFile(join(PLUGIN_DIR, f), join(this.binDir, f));
    // the launcher and the Bun executable it starts (docs/build.md, "The launcher")
    const payloads = (await readdir(dirname(MULTUS_BIN))).filter((f) => f.startsWith('.multus-bun-'));
    for (const f of [...payloads, 'multus']) {
      await copyFile(join(dirname(MULTUS_BIN), f), join(this.binDir, f));
      await chmod(join(this.binDir, f), 0o755);
    }
    await writeFile(
      join(this.dir, 'crictl.yaml'),
      `runtime-endpoint: unix://${this.socket}\nimage-endpoint: unix://${this.socket}\ntimeout: 60\ndebug: false\n`,
      { mode: 0o600 },
    );
    await writeFile(join(this.dir, 'config.toml'), this.config(), { mode: 0o600 });
    return this;
  }

  /** containerd's config: own root/state/socket, CRI with the fixture's CNI dirs and the local pause image. */
  protected config(): string {
    const d = this.dir;
    return `version = 2
root = "${d}/root"
state = "${d}/state"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "${this.socket}"
[ttrpc]
  address = "${this.socket}.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${this.sandboxImage}"
  # this machine lacks CAP_SYS_RESOURCE: lowering oom_score_adj fails
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = ${this.netnsDir !== '/run/netns'}
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    snapshotter = "overlayfs"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "${RUNC_BIN}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "${this.cniDirs().bin}"
    conf_dir = "${this.cniDirs().conf}"
    max_conf_num = 1
`;
  }

  /** The CNI dirs as containerd sees them (a NodeRuntime mounts the fixture's at the standard paths). */
  protected cniDirs(): { bin: string; conf: string } {
    return { bin: this.binDir, conf: this.confDir };
  }

  /** nsenter's options that put containerd (and a node's kubelet) into the fixture's namespaces. */
  nsenterArgs(): string[] {
    return [`--net=/var/run/netns/${this.hostNs}`];
  }

  /** Writes a file of the CNI conf dir (containerd watches the dir and reloads). */
  async writeConf(name: string, conf: unknown): Promise<string> {
    const path = join(this.confDir, name);
    await writeFile(path, JSON.stringify(conf, null, 2), { mode: 0o600 });
    return path;
  }

  /** The runtime's command line (run with nsenterArgs()) and its environment. */
  protected command(): { args: string[]; env: NodeJS.ProcessEnv } {
    return { args: [CONTAINERD_BIN, '--config', join(this.dir, 'config.toml')], env: childEnv() };
  }

  /** Starts containerd (first start: also imports the pause image) and waits until CRI answers. */
  async start(): Promise<void> {
    const firstStart = !existsSync(join(this.dir, 'root'));
    const out = createWriteStream(this.log, { flags: 'a', mode: 0o600 });
    await new Promise((r) => out.once('open', r));
    // nsenter execs the runtime: the child's PID is the runtime's
    const { args, env } = this.command();
    const child = spawn('nsenter', [...this.nsenterArgs(), ...args], {
      env,
      cwd: this.dir,
      stdio: ['ignore', out, out],
    });
    this.containerd = child;
    this.containerdExit = new Promise((r) => child.once('exit', () => r()));
    if (child.pid) writeFileSync(join(this.dir, `${this.kind}.pid`), String(child.pid));
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(`${this.kind} exited ${child.exitCode ?? child.signalCode}\n${await this.logTail()}`);
      }
      if (existsSync(this.socket)) {
        const r = await this.crictl(['info'], 10_000);
        if (r.code === 0) break;
      }
      if (Date.now() > deadline) throw new Error(`${this.kind}'s CRI not ready after 30 s\n${await this.logTail()}`);
      await sleep(100);
    }
    // --base-name names the image by its ref.name annotation (the tag): one reference, which the CRI
    // plugin resolves; --index-name would add a second "import-<date>" reference it cannot resolve.
    if (firstStart) await this.importImages(PAUSE_TAR, PAUSE_IMAGE_BASE);
  }

  /** Imports an OCI archive into the CRI's image store, each tag of its index as `<base>:<tag>`. */
  async importImages(tar: string, base: string): Promise<void> {
    await runOk(CTR_BIN, ['-a', this.socket, '-n', 'k8s.io', 'images', 'import', '--base-name', base, tar]);
  }

  /** Stops containerd (SIGTERM, SIGKILL after 10 s); shims and sandboxes keep running, as on a node. */
  async stopContainerd(): Promise<void> {
    const child = this.containerd;
    if (!child) return;
    this.containerd = undefined;
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await this.containerdExit;
      clearTimeout(t);
    }
  }

  /** Waits until CRI's status says NetworkReady (CRI-O: only after its start-up GC of the CNI network ran). */
  async waitNetworkReady(timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const r = await this.crictl(['info'], 10_000);
      type Condition = { type: string; status: boolean; message?: string };
      const conditions = ((r.code === 0 && JSON.parse(r.stdout).status?.conditions) || []) as Condition[];
      const network = conditions.find((c) => c.type === 'NetworkReady');
      if (network?.status === true) return;
      if (Date.now() > deadline) {
        throw new Error(`${this.kind}: NetworkReady not true after ${timeoutMs} ms: ${network?.message ?? r.stderr}`);
      }
      await sleep(100);
    }
  }

  async restart(): Promise<void> {
    await this.stopContainerd();
    await this.start();
  }

  crictl(args: readonly string[], timeoutMs = 120_000): Promise<RunResult> {
    return run(CRICTL_BIN, ['-c', join(this.dir, 'crictl.yaml'), ...args], { timeoutMs });
  }

  /** Writes the sandbox config of a pod (same name, namespace and UID as in the API) and returns its path. */
  async sandboxConfig(meta: SandboxMeta): Promise<string> {
    const path = join(this.dir, 'pods', `${meta.namespace}_${meta.name}.json`);
    const config = {
      metadata: { name: meta.name, namespace: meta.namespace, uid: meta.uid, attempt: 0 },
      hostname: meta.name,
      log_directory: join(this.dir, 'logs', meta.uid),
      linux: { cgroup_parent: `/${this.cgroupParent}` },
    };
    await writeFile(path, JSON.stringify(config), { mode: 0o600 });
    return path;
  }

  /** `crictl runp`: the sandbox ID on success, the whole result otherwise. */
  async runp(meta: SandboxMeta): Promise<RunResult & { id?: string }> {
    const r = await this.crictl(['runp', await this.sandboxConfig(meta)]);
    const id = r.code === 0 ? r.stdout.trim().split('\n').pop() : undefined;
    return { ...r, id };
  }

  async runpOk(meta: SandboxMeta): Promise<SandboxInfo> {
    const r = await this.runp(meta);
    if (r.code !== 0 || !r.id) throw new Error(`crictl runp ${meta.namespace}/${meta.name} failed: ${r.stderr.trim()}`);
    return this.inspect(r.id);
  }

  async inspect(id: string): Promise<SandboxInfo> {
    const r = await this.crictl(['inspectp', id]);
    if (r.code !== 0) throw new Error(`crictl inspectp ${id}: ${r.stderr.trim()}`);
    const info = JSON.parse(r.stdout).info;
    const ns = (info?.runtimeSpec?.linux?.namespaces ?? []).find((n: { type: string }) => n.type === 'network');
    return { id, pid: info.pid as number, netns: ns?.path as string };
  }

  async stopp(id: string): Promise<RunResult> {
    return this.crictl(['stopp', id]);
  }
  async rmp(id: string): Promise<RunResult> {
    return this.crictl(['rmp', id]);
  }

  /** IDs of the sandboxes containerd knows (ready or not). */
  async pods(): Promise<string[]> {
    const r = await this.crictl(['pods', '-q']);
    if (r.code !== 0) throw new Error(`crictl pods: ${r.stderr.trim()}`);
    return r.stdout
      .split('\n')
      .map((s) => s.trim())
      .filter(Boolean);
  }

  /** Network namespace files containerd left under its state dir. */
  async netnsFiles(): Promise<string[]> {
    try {
      return (await readdir(this.netnsDir)).sort();
    } catch {
      return [];
    }
  }

  async logTail(lines = 30): Promise<string> {
    const text = await readFile(this.log, 'utf8').catch(() => '');
    return `--- ${this.kind} log (tail) ---\n${text.trimEnd().split('\n').slice(-lines).join('\n')}`;
  }

  /** Removes every sandbox through CRI (best effort), stops containerd, then cleanup.sh. Never throws. */
  async stop(): Promise<void> {
    if (this.stopped || !this.dir) return;
    this.stopped = true;
    try {
      if (this.containerd) {
        for (const id of await this.pods().catch(() => [] as string[])) {
          await this.stopp(id);
          await this.rmp(id);
        }
      }
    } catch (e) {
      console.warn(`runtime ${this.id}: removing sandboxes: ${(e as Error).message}`);
    }
    await this.stopContainerd().catch(() => {});
    const r = await run('sh', [CLEANUP_SCRIPT, this.dir, this.hostNs, this.cgroupParent]);
    if (r.code !== 0) console.warn(`runtime ${this.id}: cleanup.sh exited ${r.code}: ${r.stderr}`);
    try {
      this.watchdog?.kill('SIGKILL');
    } catch {
      // gone
    }
    live.delete(this);
  }

  /** The runner is exiting: kill containerd and run the cleanup script synchronously. */
  cleanupSync(): void {
    try {
      this.containerd?.kill('SIGKILL');
    } catch {
      // gone
    }
    spawnSync('sh', [CLEANUP_SCRIPT, this.dir, this.hostNs, this.cgroupParent], { stdio: 'ignore', timeout: 30_000 });
  }

  /** A detached shell that runs cleanup.sh once this runner is gone (SIGKILL, crash) and the dir still exists. */
  private startWatchdog(): void {
    const script =
      'parent=$1; dir=$2; while kill -0 "$parent" 2>/dev/null && [ -d "$dir" ]; do sleep 1; done; ' +
      '[ -d "$dir" ] && sh "$3" "$dir" "$4" "$5"';
    const args = [String(process.pid), this.dir, CLEANUP_SCRIPT, this.hostNs, this.cgroupParent];
    const w = spawn('/bin/sh', ['-c', script, 'multus-ts-runtime-watchdog', ...args], {
      detached: true,
      stdio: 'ignore',
    });
    w.unref();
    this.watchdog = w;
  }
}

/** A prepared fixture (dirs, namespace, bin dir): write the CNI conf, then `await rt.start()`. */
export function prepareRuntime(): Promise<Runtime> {
  return new Runtime().prepare();
}

// ---------------------------------------------------------------------------------------------------------
// reading a sandbox's network namespace

/** `ip <args>` inside the network namespace of a process (the sandbox's pause). */
export async function ipInSandbox(sb: SandboxInfo, args: readonly string[]): Promise<string> {
  return runOk('nsenter', [`--net=${sb.netns}`, 'ip', ...args]);
}
