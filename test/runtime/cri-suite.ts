/**
 * The CRI cases, run in both modes: containerd's CRI plugin (Debian's containerd 1.6 + runc, see runtime.ts)
 * creates pod sandboxes with `crictl runp` and calls, through its own libcni, either build/multus (thin mode,
 * thin-cri.test.ts; put in place by `build/multus install`) or build/multus-shim talking to `build/multus
 * daemon` (resident mode, resident-cri.test.ts), with the pods and NADs in a real kube-apiserver
 * (test/k8s/cluster.ts).
 *
 * - a pod with a bridge cluster network, a macvlan NAD (master: a veth end in containerd's namespace), a
 *   static-IP NAD and a `default-route` NAD: interfaces, addresses and routes inside the sandbox, the pod's
 *   network-status and events; `stopp` + `rmp` leave nothing (links, reserved IPs, caches, netns);
 * - a missing NAD: RunPodSandbox fails with Multus' message and nothing is left;
 * - the sandbox's pod UID is not the API's: RunPodSandbox fails naming both UIDs, nothing is left;
 * - containerd restarted between runp and stopp: teardown still complete;
 * - 20 sandboxes created (and removed) in parallel;
 * - CRI-O only: CRI-O restarted as after a reboot (its pods wiped): its DEL and GC on start leave nothing;
 * - resident mode only: the daemon killed between runp and stopp: the shim's thin fallback tears down;
 * - the API server stopped before stopp (last: it stops the API server): teardown still complete.
 *
 * A mode's own cases (resident-cri.test.ts: hot-plug) come in through `criSuite(mode, extra)`: they run on the
 * same fixtures, before the last case.
 *
 * `criSuite(mode, extra, 'crio')` runs the same cases under CRI-O (crio.ts; thin-crio.test.ts,
 * resident-crio.test.ts) with multus' config at CNI 1.1.0, so that CRI-O's STATUS (NetworkReady) and its GC on
 * every start (the restart case: the running sandbox must survive it) reach multus-ts; the multus network is
 * named for the fixture there (CRI-O's GC DELs every cached attachment of its network in the machine's
 * /var/lib/cni that is not one of its pods, other fixtures' included).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { chmod, copyFile, mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { needs } from '../helpers/skip.ts';
import { killPid } from '../helpers/procs.ts';
import { type Cluster, k8sRequirements, startCluster } from '../k8s/cluster.ts';
import {
  ApiTunnel,
  NETWORKS_ANNOTATION,
  type PodRef,
  createNad,
  createPod,
  ensureNamespace,
  networkStatus,
  podEvents,
} from '../e2e-k8s/world.ts';
import { fileExists } from '../helpers/skip.ts';
import { type CrioRuntime, crioRequirements, prepareCrio } from './crio.ts';
import {
  DELEGATE_EXEC,
  MULTUS_BIN,
  REPO_ROOT,
  type Runtime,
  type SandboxInfo,
  ipInSandbox,
  prepareRuntime,
  runOk,
  runtimeRequirements,
} from './runtime.ts';

export type Mode = 'thin' | 'resident';
export type RuntimeKind = 'containerd' | 'crio';
export const SHIM_BIN = join(REPO_ROOT, 'build/multus-shim');

const MULTUS_NET = 'multus-cni-network';
const CLUSTER_NET = 'rt-cluster';
const BRIDGE = 'mtsrtbr0';
const GW_BRIDGE = 'mtsrtbr1';
const MASTER = 'mtsrtva';
const MASTER_PEER = 'mtsrtvb';
const subnet = (k: number) => `10.250.${k}.0/24`;
const addr = (k: number, n: number) => `10.250.${k}.${n}`;
/** An address of subnet k with its prefix, as `ip` shows it. */
const inSubnet = (k: number) => new RegExp(`^10\\.250\\.${k}\\.\\d+/24$`);

export interface Link {
  ifname: string;
  linkinfo?: { info_kind?: string };
  addr_info?: { family: string; local: string; prefixlen: number }[];
}

/** The suite's fixtures and helpers, for a mode's own cases (usable inside tests, once beforeAll has run). */
export interface CriSuite {
  readonly cluster: Cluster;
  readonly rt: Runtime;
  /** Resident mode only. */
  readonly daemon: Daemon | undefined;
  /** The pods' and NADs' namespace; NADs `mv` (macvlan, 10.250.1.0/24) and `gw` (bridge, 10.250.2.0/24). */
  readonly ns: string;
  /** multus' cniDir (scratch and result caches). */
  readonly cniDir: string;
  pod(name: string, annotations: Record<string, string>): Promise<PodRef>;
  /** `crictl runp`, expected to succeed; the sandbox is removed after the test whatever happens. */
  runp(p: PodRef): Promise<SandboxInfo>;
  links(sb: SandboxInfo): Promise<Map<string, Link>>;
  /** `crictl stopp` + `rmp`, expected to succeed. */
  teardown(id: string): Promise<void>;
  expectNothingLeft(ids: string[]): Promise<void>;
  /** Cache files naming the sandbox. */
  cachesOf(id: string): Promise<string[]>;
  /** `<network>/<ip>` files of host-local's data dir. */
  reservedIps(): Promise<string[]>;
  /** Links of containerd's namespace but lo, the macvlan master pair and bridges. */
  hostLeftovers(): Promise<string[]>;
}

/** Lines of a log file that mention `text`. */
function logLines(file: string, text: string): string[] {
  return existsSync(file)
    ? readFileSync(file, 'utf8')
        .split('\n')
        .filter((l) => l.includes(text))
    : [];
}

export const v4 = (l: Link | undefined): string[] =>
  (l?.addr_info ?? []).filter((a) => a.family === 'inet').map((a) => `${a.local}/${a.prefixlen}`);

export function criSuite(mode: Mode, extra?: (s: CriSuite) => void, kind: RuntimeKind = 'containerd'): void {
  const ready = needs(
    ...runtimeRequirements(),
    ...(kind === 'crio' ? crioRequirements() : []),
    ...k8sRequirements(),
    ...(mode === 'resident' ? [fileExists(SHIM_BIN, 'the native shim build/multus-shim (npm run build with Go)')] : []),
  );
  const title = mode === 'thin' ? 'thin mode' : 'resident mode (build/multus-shim + build/multus daemon)';
  const runtime = kind === 'crio' ? 'CRI-O' : 'containerd CRI';
  describe.skipIf(!ready)(`${title} through ${runtime} (crictl runp/stopp/rmp) with a real kube-apiserver`, () => {
    suiteBody(mode, extra, kind);
  });
}

/** `build/multus daemon` in containerd's namespace, serving the shim. */
export class Daemon {
  child: ChildProcess | undefined;
  exited: Promise<void> | undefined;
  constructor(
    readonly rt: Runtime,
    readonly config: Record<string, unknown>,
  ) {}
  get socketDir(): string {
    return join(this.rt.dir, 'run');
  }
  get log(): string {
    return join(this.rt.dir, 'daemon.log');
  }
  get generatedConf(): string {
    return join(this.rt.confDir, '00-multus.conf');
  }
  async start(): Promise<void> {
    const file = join(this.rt.dir, 'daemon-config.json');
    await writeFile(file, JSON.stringify({ delegateExec: DELEGATE_EXEC, ...this.config }), { mode: 0o600 });
    const env = { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin' };
    const args = [`--net=/var/run/netns/${this.rt.hostNs}`, MULTUS_BIN, 'daemon', '--config', file];
    const child = spawn('nsenter', args, { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
    this.child = child;
    this.exited = new Promise((r) => child.once('exit', () => r()));
    if (child.pid) await writeFile(join(this.rt.dir, 'daemon.pid'), String(child.pid));
    const deadline = Date.now() + 30_000;
    // ready: the socket is there and the generated 00-multus.conf names the shim
    while (!existsSync(join(this.socketDir, 'multus.sock')) || !existsSync(this.generatedConf)) {
      if (child.exitCode !== null || Date.now() > deadline) throw new Error(`the daemon did not start: ${stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  /** SIGKILL, as a crash: the generated config stays, the shim finds no daemon. */
  async kill(): Promise<void> {
    this.child?.kill('SIGKILL');
    await this.exited;
    this.child = undefined;
  }
  async stop(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await this.exited;
    clearTimeout(t);
  }
  /** Lines of the daemon's log that mention `text`. */
  lines(text: string): string[] {
    const all = existsSync(this.log) ? readFileSync(this.log, 'utf8').split('\n') : [];
    return all.filter((l) => l.includes(text));
  }
}

/**
 * Thin mode installed as on a node: `build/multus install` copies the executable into the bin dir and writes the
 * service-account kubeconfig (from a token and CA laid out like a pod's service-account volume) and
 * 00-multus.conf (copied from `conf`, whose kubeconfig is the one install writes) into the conf dir. Stopped
 * once all three are there: a DaemonSet's container would keep running to keep them current.
 */
async function installThin(rt: Runtime, cluster: Cluster, conf: Record<string, unknown>): Promise<void> {
  await rm(join(rt.binDir, 'multus'));
  const sa = join(rt.dir, 'serviceaccount');
  await mkdir(sa, { mode: 0o700 });
  await copyFile(cluster.tokenFile, join(sa, 'token'));
  await copyFile(cluster.caFile, join(sa, 'ca.crt'));
  const kubeconfig = join(rt.confDir, 'multus.d', 'multus.kubeconfig');
  const src = join(rt.dir, '00-multus.conf');
  await writeFile(src, JSON.stringify({ ...conf, kubeconfig }, null, 2), { mode: 0o600 });
  const env = {
    PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
    KUBERNETES_SERVICE_HOST: '127.0.0.1',
    KUBERNETES_SERVICE_PORT: new URL(cluster.server).port,
  };
  const args = [
    'install',
    `--cni-bin-dir=${rt.binDir}`,
    `--cni-conf-dir=${rt.confDir}`,
    `--multus-conf-file=${src}`,
    `--service-account-dir=${sa}`,
  ];
  const child = spawn(MULTUS_BIN, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr!.on('data', (b: Buffer) => (out += b.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const installed = [join(rt.binDir, 'multus'), kubeconfig, join(rt.confDir, '00-multus.conf')];
  for (let i = 0; !installed.every((f) => existsSync(f)); i++) {
    if (child.exitCode !== null || i > 600) throw new Error(`multus install did not install: ${out}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  child.kill('SIGTERM');
  expect(await exited, `multus install on SIGTERM: ${out}`).toBe(0);
  expect(readFileSync(join(rt.binDir, 'multus')).equals(readFileSync(MULTUS_BIN)), 'the installed executable').toBe(
    true,
  );
}

function suiteBody(mode: Mode, extra: ((s: CriSuite) => void) | undefined, kind: RuntimeKind): void {
  let cluster: Cluster;
  let rt: Runtime;
  let daemon: Daemon | undefined;
  const tunnel = new ApiTunnel();
  const ns = `mts-rt-${Math.random().toString(16).slice(2, 8)}`;
  const ipamDir = () => join(rt.dir, 'ipam');
  const cniDir = () => join(rt.dir, 'multus');
  /** Sandboxes of the current test, removed after it whatever happened. */
  const made: string[] = [];

  beforeAll(async () => {
    cluster = await startCluster();
    rt = kind === 'crio' ? await prepareCrio() : await prepareRuntime();
    await runOk('ip', ['-n', rt.hostNs, 'link', 'add', MASTER, 'type', 'veth', 'peer', 'name', MASTER_PEER]);
    await runOk('ip', ['-n', rt.hostNs, 'link', 'set', MASTER, 'up']);
    await runOk('ip', ['-n', rt.hostNs, 'link', 'set', MASTER_PEER, 'up']);
    await ensureNamespace(cluster, ns);
    const hostLocal = (k: number) => ({ type: 'host-local', dataDir: ipamDir(), ranges: [[{ subnet: subnet(k) }]] });
    await createNad(cluster, ns, 'mv', {
      cniVersion: '1.0.0',
      name: 'mv',
      type: 'macvlan',
      master: MASTER,
      mode: 'bridge',
      ipam: hostLocal(1),
    });
    await createNad(cluster, ns, 'gw', {
      cniVersion: '1.0.0',
      name: 'gw',
      type: 'bridge',
      bridge: GW_BRIDGE,
      isGateway: true,
      ipam: hostLocal(2),
    });
    await createNad(cluster, ns, 'static', {
      cniVersion: '1.0.0',
      name: 'static',
      type: 'macvlan',
      master: MASTER,
      mode: 'bridge',
      capabilities: { ips: true },
      ipam: { type: 'static' },
    });
    // CRI-O's libcni speaks CNI 1.1.0 (STATUS, GC); containerd 1.6's does not
    const cniVersion = kind === 'crio' ? '1.1.0' : '1.0.0';
    const multusKeys = {
      cniVersion,
      name: kind === 'crio' ? (rt as CrioRuntime).multusNetworkName : MULTUS_NET,
      type: 'multus',
      kubeconfig: cluster.multusKubeconfig,
      cniDir: cniDir(),
      binDir: rt.binDir,
      confDir: join(rt.dir, 'multus.d'),
      logLevel: 'debug',
      logFile: join(rt.dir, 'multus.log'),
      delegates: [
        {
          cniVersion: '1.0.0',
          name: CLUSTER_NET,
          plugins: [{ type: 'bridge', bridge: BRIDGE, isGateway: true, isDefaultGateway: true, ipam: hostLocal(0) }],
        },
      ],
    };
    if (mode === 'thin') {
      await installThin(rt, cluster, multusKeys);
    } else {
      // the daemon generates 00-multus.conf (type multus-shim) from the master config and its own keys; the
      // thin plugin stays in the bin dir as the shim's fallback
      await copyFile(SHIM_BIN, join(rt.binDir, 'multus-shim'));
      await chmod(join(rt.binDir, 'multus-shim'), 0o755);
      const { delegates, name: _name, type: _type, cniVersion: _v, logFile: _lf, logLevel: _ll, ...keys } = multusKeys;
      const masterDir = join(rt.dir, 'master.d');
      await mkdir(masterDir, { recursive: true, mode: 0o700 });
      await writeFile(join(masterDir, '10-cluster.conflist'), JSON.stringify((delegates as unknown[])[0]));
      daemon = new Daemon(rt, {
        ...keys,
        socketDir: join(rt.dir, 'run'),
        cniConfigDir: rt.confDir,
        multusConfigFile: 'auto',
        multusAutoconfigDir: masterDir,
        cniVersion,
        // CRI-O: the generated config takes the master's name, not the "multus-cni-network" every fixture shares
        ...(kind === 'crio' ? { overrideNetworkName: true } : {}),
        logLevel: 'verbose',
        logFile: join(rt.dir, 'daemon.log'),
        logToStderr: false,
        // the daemon-killed case: the shim waits this long for a daemon that stays gone, then falls back
        shimWaitSeconds: 2,
      });
    }
    await rt.start();
    await daemon?.start();
    // multus runs in containerd's namespace, whose loopback is not the machine's: relay the API server there
    await tunnel.open(cluster, rt.hostNs, rt.dir);
  });

  afterEach(async () => {
    for (const id of made.splice(0)) {
      await rt.stopp(id);
      await rt.rmp(id);
    }
  });

  afterAll(async () => {
    await rt?.stop();
    await daemon?.stop();
    await tunnel.close();
    await cluster?.stop();
  });

  const pod = (name: string, annotations: Record<string, string>): Promise<PodRef> =>
    createPod(cluster, ns, name, annotations);

  const runp = async (p: PodRef): Promise<SandboxInfo> => {
    const r = await rt.runp(p);
    if (r.id) made.push(r.id);
    expect(r.code, `crictl runp ${p.name}: ${r.stderr}\n${await rt.logTail()}`).toBe(0);
    return rt.inspect(r.id!);
  };

  const links = async (sb: SandboxInfo): Promise<Map<string, Link>> =>
    new Map((JSON.parse(await ipInSandbox(sb, ['-j', '-d', 'addr', 'show'])) as Link[]).map((l) => [l.ifname, l]));

  const teardown = async (id: string): Promise<void> => {
    const stop = await rt.stopp(id);
    expect(stop.code, `crictl stopp: ${stop.stderr}\n${await rt.logTail()}`).toBe(0);
    const rm = await rt.rmp(id);
    expect(rm.code, `crictl rmp: ${rm.stderr}`).toBe(0);
    made.splice(made.indexOf(id), 1);
  };

  /** Files of multus' caches and of containerd's libcni cache (/var/lib/cni) that name the sandbox. */
  const cachesOf = async (id: string): Promise<string[]> => {
    const found: string[] = [];
    for (const dir of [cniDir(), join(cniDir(), 'results'), '/var/lib/cni/results']) {
      const names = await readdir(dir).catch(() => [] as string[]);
      found.push(...names.filter((n) => n.includes(id)).map((n) => join(dir, n)));
    }
    return found;
  };

  const reservedIps = async (): Promise<string[]> => {
    const found: string[] = [];
    for (const net of await readdir(ipamDir()).catch(() => [] as string[])) {
      for (const f of await readdir(join(ipamDir(), net))) if (/^[0-9.]+$/.test(f)) found.push(`${net}/${f}`);
    }
    return found.sort();
  };

  /** The host side of containerd's namespace: no veth but the macvlan master pair, no macvlan. */
  const hostLeftovers = async (): Promise<string[]> => {
    const host = JSON.parse(await runOk('ip', ['-n', rt.hostNs, '-j', '-d', 'link', 'show'])) as Link[];
    return host
      .filter((l) => !['lo', MASTER, MASTER_PEER].includes(l.ifname) && l.linkinfo?.info_kind !== 'bridge')
      .map((l) => `${l.ifname} (${l.linkinfo?.info_kind ?? '?'})`);
  };

  /** What a test found already there (a failed earlier test's leftovers are not this test's). */
  let baseline = { netns: [] as string[], links: [] as string[], ips: [] as string[] };
  const notIn = (before: string[]) => (x: string) => !before.includes(x);
  beforeEach(async () => {
    baseline = { netns: await rt.netnsFiles(), links: await hostLeftovers(), ips: await reservedIps() };
  });

  /**
   * Nothing of the sandboxes is left: not in CRI, and since the test began no new netns file, host link or
   * reserved IP, and no cache file naming them.
   */
  const expectNothingLeft = async (ids: string[]): Promise<void> => {
    const pods = await rt.pods();
    expect(
      ids.filter((id) => pods.includes(id)),
      'sandboxes still known to containerd',
    ).toEqual([]);
    const netns = (await rt.netnsFiles()).filter(notIn(baseline.netns));
    expect(netns, "sandbox netns files under containerd's state dir").toEqual([]);
    expect((await hostLeftovers()).filter(notIn(baseline.links)), "links left in containerd's namespace").toEqual([]);
    expect((await reservedIps()).filter(notIn(baseline.ips)), "IPs reserved in host-local's data dir").toEqual([]);
    const caches = (await Promise.all(ids.map(cachesOf))).flat();
    expect(caches, 'cache files of the sandboxes').toEqual([]);
  };

  it('cluster net + macvlan, static-IP, default-route NADs: links, routes, status, events; no leftovers', async () => {
    const p = await pod('pod-a', {
      [NETWORKS_ANNOTATION]: JSON.stringify([
        { name: 'mv' },
        { name: 'static', interface: 'st0', ips: [`${addr(3, 7)}/24`] },
        { name: 'gw', 'default-route': [addr(2, 1)] },
      ]),
    });
    const sb = await runp(p);
    expect(sb.netns.startsWith(rt.netnsDir), `the sandbox netns ${sb.netns} is containerd's`).toBe(true);

    const l = await links(sb);
    expect([...l.keys()].sort()).toEqual(['eth0', 'lo', 'net1', 'net3', 'st0']);
    expect(v4(l.get('eth0'))).toEqual([expect.stringMatching(inSubnet(0))]);
    expect(v4(l.get('net1'))).toEqual([expect.stringMatching(inSubnet(1))]);
    expect(l.get('net1')?.linkinfo?.info_kind).toBe('macvlan');
    expect(v4(l.get('st0'))).toEqual([`${addr(3, 7)}/24`]);
    expect(l.get('st0')?.linkinfo?.info_kind).toBe('macvlan');
    expect(v4(l.get('net3'))).toEqual([expect.stringMatching(inSubnet(2))]);
    expect(l.get('eth0')?.linkinfo?.info_kind).toBe('veth');

    type Route = { dst: string; gateway?: string; dev: string };
    const routes = JSON.parse(await ipInSandbox(sb, ['-j', '-4', 'route', 'show'])) as Route[];
    const defaults = routes.filter((r) => r.dst === 'default').map((r) => `${r.gateway} ${r.dev}`);
    expect(defaults, 'the default route moved to the gw NAD').toEqual([`${addr(2, 1)} net3`]);
    expect(routes.map((r) => `${r.dst} ${r.dev}`).sort()).toEqual(
      ['default net3', `${subnet(0)} eth0`, `${subnet(1)} net1`, `${subnet(2)} net3`, `${subnet(3)} st0`].sort(),
    );

    const status = await networkStatus(cluster, p);
    const ipOf = (ifname: string) => v4(l.get(ifname)).map((a) => a.split('/')[0]);
    expect(status?.map((e) => [e.name, e.interface, e.ips, e.mac, e.default === true])).toEqual([
      [CLUSTER_NET, 'eth0', ipOf('eth0'), (l.get('eth0') as { address?: string })?.address, true],
      [`${ns}/mv`, 'net1', ipOf('net1'), (l.get('net1') as { address?: string })?.address, false],
      [`${ns}/static`, 'st0', [addr(3, 7)], (l.get('st0') as { address?: string })?.address, false],
      [`${ns}/gw`, 'net3', ipOf('net3'), (l.get('net3') as { address?: string })?.address, false],
    ]);
    // The resident daemon posts events in the background (after the ADD returns): wait for all four, bounded.
    let events = await podEvents(cluster, p, 'AddedInterface');
    for (let i = 0; i < 100 && events.length < 4; i++) {
      await new Promise((r) => setTimeout(r, 100));
      events = await podEvents(cluster, p, 'AddedInterface');
    }
    expect(events.map((e) => e.message).sort()).toEqual(
      [
        `Add eth0 [${v4(l.get('eth0'))[0]}] from ${CLUSTER_NET}`,
        `Add net1 [${v4(l.get('net1'))[0]}] from ${ns}/mv`,
        `Add st0 [${addr(3, 7)}/24] from ${ns}/static`,
        `Add net3 [${v4(l.get('net3'))[0]}] from ${ns}/gw`,
      ].sort(),
    );
    expect(await cachesOf(sb.id), 'caches while the sandbox runs').not.toEqual([]);
    if (daemon) expect(daemon.lines(`ADD ${sb.id}: 200`), 'the ADD served by the daemon').toHaveLength(1);

    await teardown(sb.id);
    await expectNothingLeft([sb.id]);
  });

  it("a NAD that does not exist: RunPodSandbox fails with Multus' message and nothing is left", async () => {
    const p = await pod('pod-missing', { [NETWORKS_ANNOTATION]: 'mv,nad-missing' });
    const before = await rt.pods();
    const r = await rt.runp(p);
    if (r.id) made.push(r.id);
    expect(r.code, 'crictl runp exit code').not.toBe(0);
    expect(r.stderr).toContain(`cannot find a network-attachment-definition (nad-missing) in namespace (${ns})`);
    expect(await rt.pods(), 'no sandbox left').toEqual(before);
    expect((await rt.netnsFiles()).filter(notIn(baseline.netns)), 'netns files').toEqual([]);
    expect((await hostLeftovers()).filter(notIn(baseline.links)), 'host links').toEqual([]);
    expect((await reservedIps()).filter(notIn(baseline.ips)), 'reserved IPs').toEqual([]);
    expect(await networkStatus(cluster, p)).toBeUndefined();
    const found = await readdir(cniDir()).catch(() => [] as string[]);
    expect(
      found.filter((f) => f !== 'results'),
      'multus scratch caches',
    ).toEqual([]);
    expect(await readdir(join(cniDir(), 'results')).catch(() => []), 'multus result caches').toEqual([]);
  });

  it("the runtime's pod UID is not the API's (pod re-created under its name): runp fails, nothing left", async () => {
    const p = await pod('pod-uid', { [NETWORKS_ANNOTATION]: 'mv' });
    const before = await rt.pods();
    const stale = '00000000-0000-4000-8000-000000000000';
    const r = await rt.runp({ ...p, uid: stale });
    if (r.id) made.push(r.id);
    expect(r.code, 'crictl runp exit code').not.toBe(0);
    // crictl prints containerd's error with its quotes escaped
    expect(r.stderr.replaceAll('\\"', '"')).toContain(`expected pod UID "${stale}" but got "${p.uid}" from Kube API`);
    expect(await rt.pods(), 'no sandbox left').toEqual(before);
    expect((await rt.netnsFiles()).filter(notIn(baseline.netns)), 'netns files').toEqual([]);
    expect((await hostLeftovers()).filter(notIn(baseline.links)), 'host links').toEqual([]);
    expect((await reservedIps()).filter(notIn(baseline.ips)), 'reserved IPs').toEqual([]);
    expect(await networkStatus(cluster, p)).toBeUndefined();
  });

  it(`${kind} restarted between runp and stopp: the sandbox survives, teardown is complete`, async () => {
    const p = await pod('pod-restart', { [NETWORKS_ANNOTATION]: 'mv' });
    const sb = await runp(p);
    expect([...(await links(sb)).keys()].sort()).toEqual(['eth0', 'lo', 'net1']);
    // CRI-O GCs its network on every start, with its pods as the valid attachments, before NetworkReady
    const gcs = () => (daemon ? daemon.lines('GC : 200') : logLines(join(rt.dir, 'multus.log'), '] GC ')).length;
    const gcBefore = gcs();
    await rt.restart();
    await rt.waitNetworkReady();
    if (kind === 'crio') expect(gcs(), "CRI-O's GC on restart served by multus-ts").toBeGreaterThan(gcBefore);
    const state = JSON.parse((await rt.crictl(['inspectp', sb.id])).stdout).status?.state;
    expect(state, 'the sandbox after the restart').toBe('SANDBOX_READY');
    expect([...(await links(sb)).keys()].sort()).toEqual(['eth0', 'lo', 'net1']);
    await teardown(sb.id);
    await expectNothingLeft([sb.id]);
  });

  if (kind === 'crio') {
    it('CRI-O restarted as after a reboot: it forgets its pods, its start-up GC DELs their attachments through multus-ts', async () => {
      const p = await pod('pod-reboot', { [NETWORKS_ANNOTATION]: JSON.stringify([{ name: 'mv' }, { name: 'gw' }]) });
      const sb = await runp(p);
      expect([...(await links(sb)).keys()].sort()).toEqual(['eth0', 'lo', 'net1', 'net2']);
      expect(await cachesOf(sb.id), 'caches while the sandbox runs').not.toEqual([]);
      // the "reboot": CRI-O and the sandbox gone, and with /var/run CRI-O's version file (so it wipes its
      // containers on start, as after a real reboot); the sandbox's netns file (a bind mount) stays here
      await rt.stopContainerd();
      killPid(sb.pid);
      await rm(join(rt.dir, 'version'));
      await rt.start();
      await rt.waitNetworkReady();
      expect(await rt.pods(), 'the sandbox after the wipe').not.toContain(sb.id);
      made.splice(made.indexOf(sb.id), 1);
      const crio = rt as CrioRuntime;
      expect(await crio.logLines('Garbage collect stale network resources'), "CRI-O's GC failures").toEqual([]);
      expect((await hostLeftovers()).filter(notIn(baseline.links)), "links left in CRI-O's namespace").toEqual([]);
      expect((await reservedIps()).filter(notIn(baseline.ips)), "IPs reserved in host-local's dir").toEqual([]);
      expect(await cachesOf(sb.id), 'cache files of the sandbox').toEqual([]);
    });
  }

  it('20 sandboxes in parallel: each its eth0, net1, own addresses and status; all removed in parallel', async () => {
    const n = 20;
    const names = Array.from({ length: n }, (_, i) => `pod-par-${i}`);
    const pods = await Promise.all(names.map((name) => pod(name, { [NETWORKS_ANNOTATION]: 'mv' })));
    const results = await Promise.all(pods.map((p) => rt.runp(p)));
    for (const r of results) if (r.id) made.push(r.id);
    expect(
      results.filter((r) => r.code !== 0).map((r) => r.stderr),
      'failed runp',
    ).toEqual([]);
    const sbs = await Promise.all(results.map((r) => rt.inspect(r.id!)));
    const seen = new Set<string>();
    for (const [i, sb] of sbs.entries()) {
      const l = await links(sb);
      expect([...l.keys()].sort(), pods[i]!.name).toEqual(['eth0', 'lo', 'net1']);
      const a = [...v4(l.get('eth0')), ...v4(l.get('net1'))];
      for (const x of a) seen.add(x);
      const status = await networkStatus(cluster, pods[i]!);
      expect(
        status?.map((e) => [e.interface, e.ips?.[0]]),
        pods[i]!.name,
      ).toEqual([
        ['eth0', a[0]!.split('/')[0]],
        ['net1', a[1]!.split('/')[0]],
      ]);
    }
    expect(seen.size, 'distinct addresses').toBe(2 * n);
    const stops = await Promise.all(sbs.map((sb) => rt.stopp(sb.id)));
    expect(
      stops.filter((r) => r.code !== 0).map((r) => r.stderr),
      'failed stopp',
    ).toEqual([]);
    const rms = await Promise.all(sbs.map((sb) => rt.rmp(sb.id)));
    expect(
      rms.filter((r) => r.code !== 0).map((r) => r.stderr),
      'failed rmp',
    ).toEqual([]);
    made.splice(0);
    await expectNothingLeft(sbs.map((sb) => sb.id));
  }, 240_000);

  if (mode === 'resident') {
    it("the daemon killed between runp and stopp: the shim's thin fallback tears down, nothing left", async () => {
      const p = await pod('pod-nodaemon', {
        [NETWORKS_ANNOTATION]: JSON.stringify([{ name: 'mv' }, { name: 'gw', 'default-route': [addr(2, 1)] }]),
      });
      const sb = await runp(p);
      expect([...(await links(sb)).keys()].sort()).toEqual(['eth0', 'lo', 'net1', 'net2']);
      expect(daemon!.lines(`ADD ${sb.id}: 200`), 'the ADD served by the daemon').toHaveLength(1);
      await daemon!.kill();
      try {
        expect(existsSync(daemon!.generatedConf), 'the generated config outlives a crashed daemon').toBe(true);
        await teardown(sb.id);
        expect(daemon!.lines(`DEL ${sb.id}`), 'no DEL reached the dead daemon').toEqual([]);
        await expectNothingLeft([sb.id]);
      } finally {
        await daemon!.start();
      }
    });
  }

  extra?.({
    get cluster() {
      return cluster;
    },
    get rt() {
      return rt;
    },
    get daemon() {
      return daemon;
    },
    ns,
    get cniDir() {
      return cniDir();
    },
    pod,
    runp,
    links,
    teardown,
    expectNothingLeft,
    cachesOf,
    reservedIps,
    hostLeftovers,
  });

  // last: it stops the API server for good
  it('the API server stopped before stopp: teardown is still complete', async () => {
    const p = await pod('pod-noapi', { [NETWORKS_ANNOTATION]: 'mv' });
    const sb = await runp(p);
    expect([...(await links(sb)).keys()].sort()).toEqual(['eth0', 'lo', 'net1']);
    await cluster.stopApiserver();
    await teardown(sb.id);
    await expectNothingLeft([sb.id]);
    expect(existsSync(sb.netns), 'the netns file').toBe(false);
  });
}
