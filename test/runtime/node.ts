/**
 * A Kubernetes node for tests: the runtime fixture's containerd (runtime.ts) plus a real kubelet, and the two
 * control-plane components a DaemonSet needs besides the API server (kube-controller-manager with only the
 * DaemonSet, service-account, root-CA, node-lifecycle, resource-claim, Deployment and ReplicaSet controllers;
 * kube-scheduler), and a DRA driver of the tests' own (test/runtime/dra-driver). kubelet and the control plane are
 * built from Go modules at the API server's release by `bash test/runtime/build.sh --kubelet`, the driver by
 * build-dra-driver.sh (see docs/archive/kubernetes-tests.md, "kubelet").
 *
 * kubelet changes the machine it runs on, not only its own dirs. The node keeps all of it inside namespaces
 * of its own, so the machine is as before whatever happens:
 * - network: kubelet and containerd share the fixture's network namespace, so kubelet's iptables chains
 *   (KUBE-FIREWALL, KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT) live and die there; the node's address is on a
 *   veth end in it (kubelet refuses a loopback node IP); the API server is relayed in by the caller's ApiTunnel;
 * - mounts: both run in a mount namespace held by a `sleep` (its PID in `holder.pid`), cut off from the
 *   machine's (private) and then made shared within itself, as systemd makes a node's root, so that mounts
 *   reach containers with HostToContainer propagation. /etc, /opt, /run and /var are overlays whose upper
 *   dirs are in the fixture's temp dir: kubelet's fixed paths (/var/lib/kubelet, /var/log/pods,
 *   /var/log/containers), the DaemonSets' host paths (/opt/cni/bin and /etc/cni/net.d, bind mounts of the
 *   fixture's bin and conf dirs; /run/multus, ...), the pods' network namespaces (/run/netns, where containerd
 *   puts them on a node) and the CNI caches (/var/lib/cni) land there; `root` (`/proc/<holder>/root`) is the
 *   node's view of its file system;
 * - sysctls: kubelet sets six global ones when they differ from its values (kernel.panic 10,
 *   kernel.panic_on_oops 1, vm.overcommit_memory 1, ...). In the node's mount namespace a file holding
 *   kubelet's value is bind-mounted over each, so kubelet finds them set and writes nothing; a write would
 *   land in the file;
 * - cgroups: kubelet runs without QoS cgroups, with the fixture's cgroup parent as its root.
 *
 * Every process is killed by PID through the fixture's pid files (cleanup.sh), also when the runner dies; the
 * mount namespace ends with its last process.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, readFileSync } from 'node:fs';
import { mkdir, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { type Requirement, fileExists } from '../helpers/skip.ts';
import type { Cluster } from '../k8s/cluster.ts';
import { crioCommand, crioConfig, importIntoCrio } from './crio.ts';
import { RUNTIME_CACHE_DIR, Runtime, childEnv, runOk } from './runtime.ts';

export const KUBELET_BIN = join(RUNTIME_CACHE_DIR, 'kubelet');
export const CONTROLLER_MANAGER_BIN = join(RUNTIME_CACHE_DIR, 'kube-controller-manager');
export const SCHEDULER_BIN = join(RUNTIME_CACHE_DIR, 'kube-scheduler');
/** The kubelet tier's DRA driver (test/runtime/dra-driver, built by test/runtime/build-dra-driver.sh). */
export const DRA_DRIVER_BIN = join(dirname(RUNTIME_CACHE_DIR), 'dra-driver', 'dra-driver');
/** Its name (the ResourceSlices' spec.driver, the claims' allocation results' driver). */
export const DRA_DRIVER = 'nic.multus-ts.test';

/** kubelet's kernel tunables (its setupKernelTunables) and the values it wants: masked in the node. */
export const KUBELET_SYSCTLS: Readonly<Record<string, string>> = {
  'kernel/panic': '10',
  'kernel/panic_on_oops': '1',
  'vm/overcommit_memory': '1',
  'vm/panic_on_oom': '0',
  'kernel/keys/root_maxkeys': '1000000',
  'kernel/keys/root_maxbytes': '25000000',
};

/** Where kubelet reads static pod manifests, as the node sees it. */
export const STATIC_POD_DIR = '/etc/kubernetes/manifests';

/**
 * The default node's address (on a veth end in its network namespace) and the link's names. The two-node tier
 * (kubelet-cluster.ts) gives each of its nodes others (`NodeOptions`), so its nodes and the default one never
 * share a name or an address.
 */
export const NODE_IP = '10.249.255.1';
export const NODE_LINK = 'mtsnode0';
export const NODE_LINK_PEER = 'mtsnode1';

/** A node's name in the API, its address and the names of its veth pair (defaults: the constants above). */
export interface NodeOptions {
  name?: string;
  ip?: string;
  link?: string;
  linkPeer?: string;
  /** The node's CRI runtime (default containerd; CRI-O as crio.ts runs it, its namespaces in the node's /run). */
  runtime?: 'containerd' | 'crio';
}

/** What the node needs besides the runtime tier's requirements, for `needs(...)` (`dra`: the DRA driver too). */
export function nodeRequirements(dra = true): Requirement[] {
  const build = 'bash test/runtime/build.sh --kubelet';
  return [
    fileExists(KUBELET_BIN, `kubelet (${build})`),
    fileExists(CONTROLLER_MANAGER_BIN, `kube-controller-manager (${build})`),
    fileExists(SCHEDULER_BIN, `kube-scheduler (${build})`),
    ...(dra ? [fileExists(DRA_DRIVER_BIN, 'the DRA driver (bash test/runtime/build-dra-driver.sh)')] : []),
    fileExists('/usr/bin/unshare', 'unshare (util-linux)'),
    fileExists('/usr/bin/umoci', 'umoci, to build the image (apt-get install umoci)'),
  ];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Proc {
  child: ChildProcess;
  exited: Promise<void>;
  log: string;
}

export class NodeRuntime extends Runtime {
  override readonly kind: string = 'containerd';
  /** The node's name in the API. */
  readonly nodeName: string;
  /** Its address (kubelet's --node-ip), on `link` in its network namespace. */
  readonly nodeIp: string;
  /** The node's veth pair in its network namespace (`linkPeer` is the macvlan master of the tiers' NADs). */
  readonly link: string;
  readonly linkPeer: string;
  private holder: ChildProcess | undefined;
  private readonly procs = new Map<string, Proc>();

  constructor(o: NodeOptions = {}) {
    super();
    this.nodeName = o.name ?? `mts-node-${this.id}`;
    this.nodeIp = o.ip ?? NODE_IP;
    this.link = o.link ?? NODE_LINK;
    this.linkPeer = o.linkPeer ?? NODE_LINK_PEER;
    this.kind = o.runtime ?? 'containerd';
  }

  private get crio(): boolean {
    return this.kind === 'crio';
  }
  override get socket(): string {
    return this.crio ? join(this.dir, 'crio.sock') : super.socket;
  }
  /** CRI-O on the node: its config with the node's CNI dirs, the pods' namespaces in /run/netns (pinns). */
  protected override config(): string {
    if (!this.crio) return super.config();
    const { bin, conf } = this.cniDirs();
    const places = { dir: this.dir, socket: this.socket, sandboxImage: this.sandboxImage, bin, conf };
    return crioConfig({ ...places, namespacesDir: '/run' });
  }
  protected override command(): { args: string[]; env: NodeJS.ProcessEnv } {
    return this.crio ? crioCommand(this.dir) : super.command();
  }
  override async importImages(tar: string, base: string): Promise<void> {
    await (this.crio ? importIntoCrio(this.dir, tar, base) : super.importImages(tar, base));
  }

  /**
   * Makes the node one a Multus DaemonSet installs: the fixture's copy of the plugin removed (the DaemonSet puts
   * its own in /opt/cni/bin), and the node's default network `name` written as 10-cluster.conflist (a bridge with
   * host-local IPAM on `subnet`), which multus wraps into its 00-multus.conf(list).
   */
  async forDaemonSet(name: string, bridge: string, subnet: string): Promise<void> {
    await rm(join(this.binDir, 'multus'));
    await this.writeConf('10-cluster.conflist', {
      cniVersion: '1.0.0',
      name,
      plugins: [
        {
          type: 'bridge',
          bridge,
          isGateway: true,
          isDefaultGateway: true,
          ipam: { type: 'host-local', ranges: [[{ subnet }]] },
        },
      ],
    });
  }

  /** PID of the process holding the node's mount namespace. */
  get holderPid(): number {
    const pid = this.holder?.pid;
    if (!pid) throw new Error('the node is not prepared');
    return pid;
  }
  /** The node's view of the file system (its mount namespace), readable from the test. */
  get root(): string {
    return `/proc/${this.holderPid}/root`;
  }
  /** A path as the node sees it, e.g. `node.path('/var/lib/cni')`. */
  path(p: string): string {
    return join(this.root, p);
  }

  /**
   * The node's own layer of a path under /etc, /opt, /run or /var (its overlay's upper dir): what the node wrote
   * there, without what shows through from the machine's dir below (other tests' files in /var/lib/cni, ...).
   */
  ownPath(p: string): string {
    const [, top, ...rest] = p.split('/');
    if (!['etc', 'opt', 'run', 'var'].includes(top ?? '')) throw new Error(`${p} is not in the node's overlays`);
    return join(this.dir, 'node', top!, 'upper', ...rest);
  }

  /** Where containerd puts the pods' network namespaces, as the node sees it (the default on a node). */
  override get netnsDir(): string {
    return '/run/netns';
  }

  /**
   * The pods' network namespace files (containerd names them cni-<uuid>, CRI-O's pinns <uuid>), from the node's
   * own /run layer (the machine's /run/netns shows through the overlay's lower dir).
   */
  override async netnsFiles(): Promise<string[]> {
    const entries = await readdir(this.ownPath(this.netnsDir), { withFileTypes: true }).catch(() => []);
    return entries
      .filter((e) => e.isFile() && (this.crio || e.name.startsWith('cni-')))
      .map((e) => e.name)
      .sort();
  }

  protected override cniDirs(): { bin: string; conf: string } {
    return { bin: '/opt/cni/bin', conf: '/etc/cni/net.d' };
  }

  override nsenterArgs(): string[] {
    return ['-t', String(this.holderPid), '--net', '--mount'];
  }

  /** The runtime's dirs, the mount namespace with its overlays and masks, and the node's veth. */
  override async prepare(): Promise<this> {
    await super.prepare();
    const holder = spawn(
      'nsenter',
      [`--net=/var/run/netns/${this.hostNs}`, 'unshare', '--mount', '--propagation', 'private', 'sleep', 'infinity'],
      { stdio: 'ignore' },
    );
    this.holder = holder;
    if (!holder.pid) throw new Error('could not start the node namespace holder');
    await writeFile(join(this.dir, 'holder.pid'), String(holder.pid));
    // nsenter and unshare exec (no fork): once the PID runs sleep, its mount namespace is the node's
    for (let i = 0; commOf(holder.pid) !== 'sleep'; i++) {
      if (holder.exitCode !== null || i > 200) throw new Error('the node namespace holder did not start');
      await sleep(10);
    }
    const inNode = (args: string[]) => runOk('nsenter', ['-t', String(holder.pid), '--mount', '--', ...args]);
    for (const d of ['etc', 'opt', 'run', 'var']) {
      const upper = join(this.dir, 'node', d, 'upper');
      const work = join(this.dir, 'node', d, 'work');
      await mkdir(upper, { recursive: true, mode: 0o700 });
      await mkdir(work, { recursive: true, mode: 0o700 });
      await inNode([
        'mount',
        '-t',
        'overlay',
        'overlay',
        '-o',
        `lowerdir=/${d},upperdir=${upper},workdir=${work}`,
        `/${d}`,
      ]);
    }
    await inNode(['mount', '--make-rshared', '/']);
    await inNode(['mkdir', '-p', '/opt/cni/bin', '/etc/cni/net.d', '/run/netns', STATIC_POD_DIR]);
    await inNode(['mount', '--bind', this.binDir, '/opt/cni/bin']);
    await inNode(['mount', '--bind', this.confDir, '/etc/cni/net.d']);
    const masks = join(this.dir, 'node', 'sysctl');
    await mkdir(masks, { recursive: true, mode: 0o700 });
    for (const [key, value] of Object.entries(KUBELET_SYSCTLS)) {
      const file = join(masks, key.replaceAll('/', '.'));
      await writeFile(file, `${value}\n`, { mode: 0o600 });
      await inNode(['mount', '--bind', file, `/proc/sys/${key}`]);
    }
    await runOk('ip', ['-n', this.hostNs, 'link', 'add', this.link, 'type', 'veth', 'peer', 'name', this.linkPeer]);
    await runOk('ip', ['-n', this.hostNs, 'addr', 'add', `${this.nodeIp}/24`, 'dev', this.link]);
    for (const l of [this.link, this.linkPeer]) await runOk('ip', ['-n', this.hostNs, 'link', 'set', l, 'up']);
    return this;
  }

  /** Starts a process (no shell), its output in `<name>.log` and its PID in `<name>.pid` of the fixture's dir. */
  private async startProc(name: string, file: string, args: string[]): Promise<Proc> {
    const log = join(this.dir, `${name}.log`);
    const out = createWriteStream(log, { flags: 'a', mode: 0o600 });
    await new Promise((r) => out.once('open', r));
    const child = spawn(file, args, { env: childEnv(), stdio: ['ignore', out, out] });
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    if (child.pid) await writeFile(join(this.dir, `${name}.pid`), String(child.pid));
    const proc = { child, exited, log };
    this.procs.set(name, proc);
    return proc;
  }

  /**
   * The DaemonSet controller (with the service-account and root-CA publishers that a pod's API token volume
   * needs, and the node lifecycle controller) and the scheduler, in the machine's namespaces against the cluster's API server.
   */
  async startControlPlane(cluster: Cluster, controllerManagerArgs: string[] = []): Promise<void> {
    await this.startProc('kube-controller-manager', CONTROLLER_MANAGER_BIN, [
      ...controllerManagerArgs,
      `--kubeconfig=${cluster.adminKubeconfig}`,
      '--leader-elect=false',
      // the node lifecycle controller lifts the not-ready taint kubelet registers the node with; the resource
      // claim controller makes pods' claims from their ResourceClaimTemplates (and deletes them with the pod); a
      // Deployment's pods (kubelet-peers.ts) need the deployment and replicaset controllers
      '--controllers=daemonset-controller,serviceaccount-controller,root-ca-certificate-publisher-controller,node-lifecycle-controller,resourceclaim-controller,deployment-controller,replicaset-controller',
      `--root-ca-file=${cluster.caFile}`,
      '--use-service-account-credentials=false',
      '--secure-port=0',
    ]);
    await this.startProc('kube-scheduler', SCHEDULER_BIN, [
      `--kubeconfig=${cluster.adminKubeconfig}`,
      '--leader-elect=false',
      '--secure-port=0',
    ]);
  }

  /**
   * kubelet in the node's namespaces, registering `nodeName` with the cluster (reached through the caller's
   * ApiTunnel, on the same address as from the machine). Resolves once the node is `Ready` in the API.
   */
  async startKubelet(cluster: Cluster, timeoutMs = 60_000): Promise<void> {
    const args = [
      ...this.nsenterArgs(),
      KUBELET_BIN,
      `--kubeconfig=${cluster.adminKubeconfig}`,
      `--container-runtime-endpoint=unix://${this.socket}`,
      `--hostname-override=${this.nodeName}`,
      `--node-ip=${this.nodeIp}`,
      '--root-dir=/var/lib/kubelet',
      '--fail-swap-on=false',
      '--cgroup-driver=cgroupfs',
      '--cgroups-per-qos=false',
      // this machine has cgroup v1 only, which kubelet refuses by default since 1.35 (still supported in 1.37)
      '--fail-cgroupv1=false',
      `--cgroup-root=/${this.cgroupParent}`,
      '--enforce-node-allocatable=',
      '--eviction-hard=',
      '--image-gc-high-threshold=100',
      '--read-only-port=0',
      // static pods (kubelet-peers.ts): manifests in the node's /etc (an overlay of the fixture's)
      `--pod-manifest-path=${STATIC_POD_DIR}`,
      '--healthz-port=0',
      '--v=2',
    ];
    const kubelet = await this.startProc('kubelet', 'nsenter', args);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (kubelet.child.exitCode !== null || kubelet.child.signalCode !== null) {
        throw new Error(
          `kubelet exited ${kubelet.child.exitCode ?? kubelet.child.signalCode}\n${await this.tail('kubelet')}`,
        );
      }
      const node = await cluster.admin.request('GET', `/api/v1/nodes/${this.nodeName}`).catch(() => undefined);
      const ready = (node?.body?.status?.conditions ?? []).find((c: { type: string }) => c.type === 'Ready');
      if (ready?.status === 'True') return;
      if (Date.now() > deadline) {
        throw new Error(
          `node ${this.nodeName} not Ready after ${timeoutMs} ms (${ready?.message ?? 'not registered'})\n${await this.tail('kubelet')}`,
        );
      }
      await sleep(250);
    }
  }

  /**
   * The DRA driver in the node's namespaces (its sockets in the node's /var/lib/kubelet/plugins and
   * plugins_registry), publishing the node's ResourceSlice. Resolves once kubelet accepted its registration.
   */
  async startDraDriver(cluster: Cluster, timeoutMs = 60_000): Promise<void> {
    const args = [
      ...this.nsenterArgs(),
      DRA_DRIVER_BIN,
      `--kubeconfig=${cluster.adminKubeconfig}`,
      `--node=${this.nodeName}`,
      `--driver=${DRA_DRIVER}`,
    ];
    const driver = await this.startProc('dra-driver', 'nsenter', args);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const log = await readFile(driver.log, 'utf8').catch(() => '');
      if (log.includes('registered with kubelet')) return;
      const gone = driver.child.exitCode !== null || driver.child.signalCode !== null;
      if (gone || log.includes('kubelet refused') || Date.now() > deadline) {
        throw new Error(`the DRA driver is not registered with kubelet\n${await this.tail('dra-driver')}`);
      }
      await sleep(100);
    }
  }

  /** SIGKILLs kubelet (a power-off's first step: node-power.ts); resolves once it is gone. */
  async killKubelet(): Promise<void> {
    const k = this.procs.get('kubelet');
    if (!k || k.child.exitCode !== null || k.child.signalCode !== null) return;
    k.child.kill('SIGKILL');
    await k.exited;
  }

  /** The last lines of a process's log (`kubelet`, `kube-scheduler`, ...). */
  async tail(name: string, lines = 40): Promise<string> {
    const text = await readFile(join(this.dir, `${name}.log`), 'utf8').catch(() => '');
    return `--- ${name}.log (tail) ---\n${text.trimEnd().split('\n').slice(-lines).join('\n')}`;
  }

  /** Stops kubelet and the control plane (SIGTERM, SIGKILL after 10 s), then the runtime; never throws. */
  override async stop(): Promise<void> {
    for (const name of ['dra-driver', 'kubelet', 'kube-controller-manager', 'kube-scheduler']) {
      const p = this.procs.get(name);
      if (!p || p.child.exitCode !== null || p.child.signalCode !== null) continue;
      p.child.kill('SIGTERM');
      const t = setTimeout(() => p.child.kill('SIGKILL'), 10_000);
      await p.exited;
      clearTimeout(t);
    }
    await super.stop();
  }

  override cleanupSync(): void {
    for (const p of this.procs.values()) {
      try {
        p.child.kill('SIGKILL');
      } catch {
        // gone
      }
    }
    super.cleanupSync();
  }
}

function commOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '';
  }
}
