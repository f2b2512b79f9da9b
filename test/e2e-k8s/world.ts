/**
 * Kubernetes end-to-end helpers: the built `multus` run by libcni (the Go driver, as containerd runs it) in
 * real network namespaces, with a real kube-apiserver (test/k8s/cluster.ts) holding the pods and NADs.
 *
 * Every test gets a `K8sWorld`: the e2e tier's TestWorld (its own "host" network namespace, bridge names,
 * macvlan master, temp dir with the plugin bin dir, multus' cniDir, libcni's cache dir and host-local's
 * dataDir), its own Kubernetes namespaces, and an API tunnel. The driver (and so multus) runs inside the
 * host namespace, whose loopback is not the machine's: the tunnel makes the API server's
 * https://127.0.0.1:<port> reachable there. A small node process inside the host namespace listens on
 * 127.0.0.1:<port> and relays each connection over a unix socket to this process, which connects to the
 * real API server. A connection the API server refuses is reset on the host-namespace side, so multus sees
 * a connection error, not a hang. TLS is end to end (the relay only copies bytes).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { type Server, type Socket, connect, createServer } from 'node:net';
import { join } from 'node:path';
import { expect } from 'vitest';
import {
  ApiError,
  type AuditEvent,
  type Cluster,
  MULTUS_NAMESPACE,
  MULTUS_USER,
  nadPath,
  podPath,
} from '../k8s/cluster.ts';
import {
  type DriverCommand,
  type DriverResult,
  type IpLink,
  PLUGIN_DIR,
  TestWorld,
  clusterConflist,
  createNetns,
  deleteNetns,
  describeRun,
  hostLocal,
  ip,
  linkNames,
  listDir,
  multusConf,
  netnsPath,
  readLinks,
  reservedIps,
  runDriver,
  writeJson,
} from '../e2e/helpers.ts';

export const NETWORKS_ANNOTATION = 'k8s.v1.cni.cncf.io/networks';
export const DEFAULT_NETWORK_ANNOTATION = 'v1.multus-cni.io/default-network';
export const NETWORK_STATUS_ANNOTATION = 'k8s.v1.cni.cncf.io/network-status';
export const CREDENTIAL_ID = 'authentication.kubernetes.io/credential-id';

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------------------
// the API tunnel into a network namespace

/**
 * The `kubernetes` Service's address (the first of the API server's --service-cluster-ip-range, in its serving
 * certificate), which kubelet gives every pod as KUBERNETES_SERVICE_HOST/PORT.
 */
export const KUBERNETES_SERVICE = { host: '10.96.0.1', port: 443 };

/**
 * Runs inside the host namespace: TCP 127.0.0.1:<port> (and <host>:<port> pairs after the socket) → unix socket;
 * reset when the far side gives up.
 */
const RELAY_SOURCE = `
const net = require('node:net');
const [port, sock, ...extra] = process.argv.slice(1);
const relay = (c) => {
  let answered = false;
  const u = net.connect(sock);
  u.once('data', () => { answered = true; });
  c.pipe(u);
  u.pipe(c);
  c.on('error', () => u.destroy());
  u.on('error', () => {});
  u.on('close', () => { if (!answered) c.resetAndDestroy(); });
};
const listens = [['127.0.0.1', Number(port)], ...extra.map((a) => [a.split(':')[0], Number(a.split(':')[1])])];
let waiting = listens.length;
for (const [host, p] of listens) {
  net.createServer(relay).listen(p, host, () => { if (--waiting === 0) process.stdout.write('ready\\n'); });
}
`;

export class ApiTunnel {
  private relay: ChildProcess | undefined;
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  /** Bytes relayed so far: `up` to the API server, `down` from it (TLS records, as on the wire). */
  readonly bytes = { up: 0, down: 0 };
  /** The same per connection, in the order they were opened (the cluster bench's split of a daemon's start). */
  readonly connections: { up: number; down: number }[] = [];

  /**
   * Listens on 127.0.0.1:`listenPort` (default: the API server's port) inside `hostNs` and relays to the API
   * server; with `service` also on the `kubernetes` Service's address (KUBERNETES_SERVICE, added to the
   * namespace's lo), so pods find the API server where kubelet tells them (no kube-proxy here). A second tunnel
   * into the same namespace needs a port of its own (the cluster bench gives Multus one, to count its bytes apart
   * from kubelet's).
   */
  async open(
    cluster: Cluster,
    hostNs: string,
    dir: string,
    opts: { service?: boolean; listenPort?: number } = {},
  ): Promise<void> {
    const listenPort = opts.listenPort;
    const port = Number(new URL(cluster.server).port);
    const sock = join(dir, listenPort ? `api-${listenPort}.sock` : 'api.sock');
    this.server = createServer((down) => {
      const up = connect(port, '127.0.0.1');
      this.sockets.add(down).add(up);
      const conn = { up: 0, down: 0 };
      this.connections.push(conn);
      down.on('data', (b: Buffer) => ((this.bytes.up += b.length), (conn.up += b.length)));
      up.on('data', (b: Buffer) => ((this.bytes.down += b.length), (conn.down += b.length)));
      down.pipe(up);
      up.pipe(down);
      up.on('error', () => down.destroy());
      down.on('error', () => up.destroy());
      down.on('close', () => this.sockets.delete(down));
      up.on('close', () => this.sockets.delete(up));
    });
    await new Promise<void>((resolve, reject) => {
      this.server!.once('error', reject);
      this.server!.listen(sock, () => resolve());
    });
    const extra: string[] = [];
    if (opts.service) {
      const { host, port: servicePort } = KUBERNETES_SERVICE;
      await new Promise<void>((resolve, reject) =>
        spawn('ip', ['-n', hostNs, 'addr', 'replace', `${host}/32`, 'dev', 'lo'], { stdio: 'ignore' }).once(
          'exit',
          (code) => (code === 0 ? resolve() : reject(new Error(`ip addr add ${host} in ${hostNs}: exit ${code}`))),
        ),
      );
      extra.push(`${host}:${servicePort}`);
    }
    const relayArgs = [process.execPath, '-e', RELAY_SOURCE, String(listenPort ?? port), sock, ...extra];
    const relay = spawn('ip', ['netns', 'exec', hostNs, ...relayArgs], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.relay = relay;
    let stderr = '';
    relay.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`API relay in ${hostNs} not ready after 10 s: ${stderr}`)),
        10_000,
      );
      relay.stdout!.on('data', (b: Buffer) => {
        if (b.toString().includes('ready')) {
          clearTimeout(timer);
          resolve();
        }
      });
      relay.on('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`API relay in ${hostNs} exited ${code}: ${stderr}`));
      });
    });
  }

  async close(): Promise<void> {
    const relay = this.relay;
    this.relay = undefined;
    if (relay && relay.exitCode === null && relay.signalCode === null) {
      const exited = new Promise((r) => relay.once('exit', r));
      relay.kill('SIGKILL');
      await exited;
    }
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
    const server = this.server;
    this.server = undefined;
    if (server) await new Promise((r) => server.close(r));
  }
}

// ---------------------------------------------------------------------------------------------------------
// Kubernetes objects

export interface PodRef {
  namespace: string;
  name: string;
  uid: string;
}

export async function ensureNamespace(cluster: Cluster, name: string): Promise<void> {
  const res = await cluster.admin.request('POST', '/api/v1/namespaces', {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name },
  });
  if (res.status !== 409 && (res.status < 200 || res.status > 299))
    throw new ApiError('POST', '/api/v1/namespaces', res.status, res.body);
}

export async function createPod(
  cluster: Cluster,
  namespace: string,
  name: string,
  annotations: Record<string, string> = {},
): Promise<PodRef> {
  const pod = await cluster.admin.post(podPath(namespace), {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace, annotations },
    spec: { containers: [{ name: 'c', image: 'example.invalid/none' }] },
  });
  return { namespace, name, uid: pod.metadata.uid as string };
}

/** A NAD; `config` undefined gives `spec: {}`, a string is used as is, an object is JSON-encoded. */
export async function createNad(
  cluster: Cluster,
  namespace: string,
  name: string,
  config: Record<string, unknown> | string | undefined,
): Promise<void> {
  const spec = config === undefined ? {} : { config: typeof config === 'string' ? config : JSON.stringify(config) };
  await cluster.admin.post(nadPath(namespace), {
    apiVersion: 'k8s.cni.cncf.io/v1',
    kind: 'NetworkAttachmentDefinition',
    metadata: { name, namespace },
    spec,
  });
}

export interface NetworkStatusEntry {
  name: string;
  interface?: string;
  ips?: string[];
  mac?: string;
  default?: boolean;
  dns?: unknown;
  gateway?: string[];
}

export async function readPod(cluster: Cluster, pod: PodRef): Promise<any> {
  return cluster.admin.get(podPath(pod.namespace, pod.name));
}

/** The pod's network-status annotation, parsed; undefined when absent. */
export async function networkStatus(cluster: Cluster, pod: PodRef): Promise<NetworkStatusEntry[] | undefined> {
  const value = (await readPod(cluster, pod)).metadata?.annotations?.[NETWORK_STATUS_ANNOTATION];
  return value === undefined ? undefined : (JSON.parse(value) as NetworkStatusEntry[]);
}

/** Events about the pod (by UID) with `reason`. */
export async function podEvents(
  cluster: Cluster,
  pod: PodRef,
  reason?: string,
): Promise<
  {
    metadata: { name: string };
    reason: string;
    message: string;
    type: string;
    count?: number;
    source?: { component?: string };
  }[]
> {
  const list = await cluster.admin.get(`/api/v1/namespaces/${pod.namespace}/events`);
  return (list.items as any[]).filter(
    (e) => e.involvedObject?.uid === pod.uid && (reason === undefined || e.reason === reason),
  );
}

/** A TokenRequest for the multus service account bound to a new Secret: deleting the Secret revokes it. */
export async function boundMultusToken(
  cluster: Cluster,
  secretName: string,
): Promise<{ token: string; jti: string; secret: string }> {
  const secret = await cluster.admin.post(`/api/v1/namespaces/${MULTUS_NAMESPACE}/secrets`, {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: secretName, namespace: MULTUS_NAMESPACE },
  });
  const res = await cluster.admin.post(`/api/v1/namespaces/${MULTUS_NAMESPACE}/serviceaccounts/multus/token`, {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: {
      expirationSeconds: 3600,
      boundObjectRef: { kind: 'Secret', apiVersion: 'v1', name: secretName, uid: secret.metadata.uid },
    },
  });
  const token = res.status.token as string;
  const payload = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8')) as { jti?: string };
  if (!payload.jti) throw new Error('the bound token has no jti');
  return { token, jti: payload.jti, secret: secretName };
}

/**
 * Deletes the token's Secret and waits until the API server rejects the token (401). The API server caches
 * a successful token authentication for 10 s (kube-apiserver's token cache), so this takes up to ~10 s.
 */
export async function revokeToken(cluster: Cluster, t: { token: string; secret: string }): Promise<number> {
  const t0 = Date.now();
  await cluster.admin.del(`/api/v1/namespaces/${MULTUS_NAMESPACE}/secrets/${t.secret}`);
  const client = cluster.client(t.token);
  for (;;) {
    // a NAD that does not exist, in kube-system: 404 while the token is valid, 401 once it is not (and no
    // audit line in the test's namespaces, whose requests the tests attribute to multus)
    const res = await client.request('GET', nadPath(MULTUS_NAMESPACE, 'token-probe'));
    if (res.status === 401) return Date.now() - t0;
    if (Date.now() - t0 > 25_000)
      throw new Error(
        `token bound to ${t.secret} still accepted (HTTP ${res.status}) 25 s after the Secret was deleted`,
      );
    await sleep(250);
  }
}

/** The multus user's audit events matching `filter`, waiting (bounded) until at least `min` are there. */
export async function multusAudit(
  cluster: Cluster,
  filter: (e: AuditEvent) => boolean,
  min = 0,
  settleMs = 300,
): Promise<AuditEvent[]> {
  const deadline = Date.now() + 5_000;
  for (;;) {
    const events = (await cluster.auditEvents(MULTUS_USER)).filter(filter);
    if (events.length >= min || Date.now() > deadline) {
      if (settleMs <= 0) return events;
      // the log is written as responses complete: give a late line a moment, then read once more
      await sleep(settleMs);
      return (await cluster.auditEvents(MULTUS_USER)).filter(filter);
    }
    await sleep(100);
  }
}

export const credentialOf = (e: AuditEvent): string | undefined => {
  const extra = (e.user as { extra?: Record<string, string[]> }).extra;
  return extra?.[CREDENTIAL_ID]?.[0];
};

/** `verb resource[/subresource] namespace/name -> code`, for messages. */
export const auditLine = (e: AuditEvent): string =>
  `${e.verb} ${e.objectRef?.resource ?? '?'}${e.objectRef?.subresource ? `/${e.objectRef.subresource}` : ''} ` +
  `${e.objectRef?.namespace ?? ''}/${e.objectRef?.name ?? ''} -> ${e.responseStatus?.code}`;

// ---------------------------------------------------------------------------------------------------------
// one test's world

/** One pod sandbox: its network namespace, container ID and Kubernetes pod. */
export interface Sandbox {
  netns: string;
  containerId: string;
  pod: PodRef;
}

export interface WorldOptions {
  cniVersion?: string;
  /** Distinguishes the subnets of worlds (1..200). */
  index: number;
}

/** A shell wrapper `<binDir>/<name>` around a real plugin, that holds ADD while `<dir>/<containerID>.hold` exists. */
const GATE_SCRIPT = (dir: string, real: string) => `#!/bin/sh
if [ "$CNI_COMMAND" = ADD ] && [ -e "${dir}/$CNI_CONTAINERID.hold" ]; then
  : > "${dir}/$CNI_CONTAINERID.entered"
  i=0
  while [ -e "${dir}/$CNI_CONTAINERID.hold" ] && [ $i -lt 800 ]; do sleep 0.05; i=$((i+1)); done
fi
exec ${real} "$@"
`;

export class K8sWorld {
  readonly w = new TestWorld();
  readonly cniVersion: string;
  readonly index: number;
  /** The pods' Kubernetes namespace and a second one for cross-namespace NADs. */
  readonly ns: string;
  readonly otherNs: string;
  readonly tunnel = new ApiTunnel();
  readonly sandboxes: Sandbox[] = [];
  /** Configs written by `writeConf`, used for the best-effort DEL in cleanup. */
  private confs: string[] = [];
  private extraNetns: string[] = [];

  constructor(
    readonly cluster: Cluster,
    opts: WorldOptions,
  ) {
    this.cniVersion = opts.cniVersion ?? '1.0.0';
    this.index = opts.index;
    this.ns = `mts-${this.w.id}`;
    this.otherNs = `mts-${this.w.id}-o`;
  }

  get id(): string {
    return this.w.id;
  }
  get dir(): string {
    return this.w.dir;
  }
  get confDir(): string {
    return join(this.w.dir, 'confdir');
  }
  get gateDir(): string {
    return join(this.w.dir, 'gate');
  }

  /** `10.<second>.<index>.0/24`; second = 240 + k for the k-th network of the world. */
  subnet(k: number): string {
    return `10.${240 + k}.${this.index}.0/24`;
  }
  /** The n-th host address of subnet k ("10.x.y.n"). */
  addr(k: number, n: number): string {
    return `10.${240 + k}.${this.index}.${n}`;
  }

  async setup(): Promise<this> {
    await this.w.setup();
    await ensureNamespace(this.cluster, this.ns);
    await ensureNamespace(this.cluster, this.otherNs);
    await this.tunnel.open(this.cluster, this.w.hostNs, this.w.dir);
    return this;
  }

  /** A pod in the API plus a sandbox (network namespace, container ID) for it. */
  async pod(name: string, annotations: Record<string, string> = {}, namespace = this.ns): Promise<Sandbox> {
    const pod = await createPod(this.cluster, namespace, name, annotations);
    let netns: string;
    if (this.sandboxes.length === 0) {
      netns = this.w.podNs;
    } else {
      netns = await createNetns('mts-k');
      this.extraNetns.push(netns);
      await ip(netns, ['link', 'set', 'lo', 'up']);
    }
    const containerId =
      this.sandboxes.length === 0 ? this.w.containerId : `${this.w.containerId}-${this.sandboxes.length}`;
    const sb = { netns, containerId, pod };
    this.sandboxes.push(sb);
    return sb;
  }

  /** The cluster network (delegates[0]): bridge `w.bridge` + host-local over subnet 0, default route. */
  clusterNetwork(type = 'bridge'): Record<string, unknown> {
    const conf = clusterConflist(this.w, this.cniVersion, this.subnet(0));
    (conf.plugins as Record<string, unknown>[])[0]!.type = type;
    return conf;
  }

  /** The multus config of the brief: kubeconfig, cniDir, binDir, confDir, delegates = [cluster network]. */
  multusConfig(
    kubeconfig: string,
    extra: Record<string, unknown> = {},
    clusterType = 'bridge',
  ): Record<string, unknown> {
    return multusConf(this.w, this.cniVersion, [this.clusterNetwork(clusterType)], {
      kubeconfig,
      confDir: this.confDir,
      ...extra,
    });
  }

  async writeConf(conf: Record<string, unknown>, file = '00-multus.conf'): Promise<string> {
    const path = await writeJson(join(this.w.dir, file), conf);
    this.confs.push(path);
    return path;
  }

  /** A macvlan config on the world's veth end with host-local over subnet k (no `name` when name is ''). */
  macvlan(name: string, k: number, extra: Record<string, unknown> = {}): Record<string, unknown> {
    return {
      cniVersion: this.cniVersion,
      ...(name ? { name } : {}),
      type: 'macvlan',
      master: this.w.master,
      mode: 'bridge',
      ipam: hostLocal(this.w.ipamDir, this.subnet(k)),
      ...extra,
    };
  }

  /** A bridge (`<w.bridge><suffix>`, no gateway) config with host-local over subnet k. */
  bridge(name: string, k: number, suffix: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
    return {
      cniVersion: this.cniVersion,
      ...(name ? { name } : {}),
      type: 'bridge',
      bridge: `${this.w.bridge}${suffix}`,
      ipam: hostLocal(this.w.ipamDir, this.subnet(k)),
      ...extra,
    };
  }

  /** A macvlan config with the static IPAM plugin and the `ips` capability (for a selection's `ips`). */
  staticMacvlan(name: string): Record<string, unknown> {
    return {
      cniVersion: this.cniVersion,
      name,
      type: 'macvlan',
      master: this.w.master,
      mode: 'bridge',
      capabilities: { ips: true },
      ipam: { type: 'static' },
    };
  }

  /** Installs `<binDir>/<name>`: a wrapper around /usr/lib/cni/<real> that holds ADDs (see hold()). */
  async installGate(name: string, real: string): Promise<void> {
    await rm(this.gateDir, { recursive: true, force: true });
    await writeFile(join(this.w.binDir, name), GATE_SCRIPT(this.gateDir, join(PLUGIN_DIR, real)));
    await chmod(join(this.w.binDir, name), 0o755);
    await mkdir(this.gateDir, { recursive: true });
  }
  async hold(sb: Sandbox): Promise<void> {
    await writeFile(join(this.gateDir, `${sb.containerId}.hold`), '');
  }
  async waitEntered(sb: Sandbox, timeoutMs = 20_000): Promise<void> {
    const file = join(this.gateDir, `${sb.containerId}.entered`);
    const deadline = Date.now() + timeoutMs;
    while (!existsSync(file)) {
      if (Date.now() > deadline)
        throw new Error(`the gated plugin was not reached for ${sb.containerId} within ${timeoutMs} ms`);
      await sleep(20);
    }
  }
  async release(sb: Sandbox): Promise<void> {
    await rm(join(this.gateDir, `${sb.containerId}.hold`), { force: true });
  }

  /** CNI_ARGS as a kubelet sends them (K8S_POD_UID from the created pod unless `uid` is given). */
  cniArgs(sb: Sandbox, uid = sb.pod.uid): string {
    return `IgnoreUnknown=1;K8S_POD_NAMESPACE=${sb.pod.namespace};K8S_POD_NAME=${sb.pod.name};K8S_POD_INFRA_CONTAINER_ID=${sb.containerId};K8S_POD_UID=${uid}`;
  }

  driver(cmd: DriverCommand, conf: string, sb: Sandbox, opts: { uid?: string } = {}): Promise<DriverResult> {
    return runDriver(cmd, {
      conf,
      netns: netnsPath(sb.netns),
      id: sb.containerId,
      ifname: 'eth0',
      args: this.cniArgs(sb, opts.uid),
      cacheDir: this.w.cacheDir,
      path: this.w.path,
      hostNetns: this.w.hostNs,
    });
  }

  async add(conf: string, sb: Sandbox): Promise<DriverResult> {
    const r = await this.driver('add', conf, sb);
    expect(r.code, `ADD of ${sb.pod.namespace}/${sb.pod.name}: ${describeRun(r)}\n${await this.logTail()}`).toBe(0);
    await this.notePeers(sb);
    return r;
  }

  /** Host-side ends of the sandbox's veths (bridge attachments), kept for expectTornDown. */
  private readonly peers = new Map<string, string[]>();
  async notePeers(sb: Sandbox): Promise<string[]> {
    const podLinks = await readLinks(sb.netns);
    const hostLinks = await readLinks(this.w.hostNs);
    const names = podLinks
      .filter((l) => l.linkinfo?.info_kind === 'veth' && typeof l.link_index === 'number')
      .map((l) => hostLinks.find((h) => h.ifindex === l.link_index)?.ifname)
      .filter((n): n is string => n !== undefined);
    this.peers.set(sb.containerId, names);
    return names;
  }

  async del(conf: string, sb: Sandbox): Promise<DriverResult> {
    const r = await this.driver('del', conf, sb);
    expect(r.code, `DEL of ${sb.pod.namespace}/${sb.pod.name}: ${describeRun(r)}\n${await this.logTail()}`).toBe(0);
    return r;
  }

  /** The last lines of multus' log file (debug level), for assertion messages. */
  async logTail(lines = 25): Promise<string> {
    try {
      const text = await readFile(this.w.logFile, 'utf8');
      return `--- multus log (tail) ---\n${text.trimEnd().split('\n').slice(-lines).join('\n')}`;
    } catch {
      return '(no multus log)';
    }
  }

  /** Links of the pod namespace (with addresses and link kind) by name. */
  async podLinks(sb: Sandbox): Promise<Map<string, IpLink>> {
    const out = await ip(sb.netns, ['-j', '-d', 'addr', 'show']);
    return new Map((JSON.parse(out) as IpLink[]).map((l) => [l.ifname, l]));
  }

  /** multus' libcni result caches and libcni's own result caches of this container. */
  async cacheFiles(sb: Sandbox): Promise<string[]> {
    // <network>-<containerID>-<ifname>; the test's interface names have no "-"
    const mine = (f: string) => {
      const cut = f.lastIndexOf('-');
      return cut > 0 && f.slice(0, cut).endsWith(`-${sb.containerId}`);
    };
    return [
      ...(await listDir(join(this.w.cniDir, 'results'))).filter(mine).map((f) => `cniDir/results/${f}`),
      ...(existsSync(join(this.w.cniDir, sb.containerId)) ? [`cniDir/${sb.containerId}`] : []),
      ...(await listDir(join(this.w.cacheDir, 'results'))).filter(mine).map((f) => `runtime/results/${f}`),
    ];
  }

  /**
   * Nothing of an ADD that failed before any delegate ran: the pod namespace has only lo, no cache of the
   * container, no reserved IP, no bridge or host veth, no network-status annotation.
   */
  async expectNothingAttached(sb: Sandbox): Promise<void> {
    expect(await linkNames(sb.netns), 'pod namespace links').toEqual(['lo']);
    expect(await this.cacheFiles(sb), 'cache files').toEqual([]);
    expect(await reservedIps(this.w.ipamDir), 'reserved IPs').toEqual([]);
    const host = await readLinks(this.w.hostNs);
    expect(
      host
        .filter((l) => l.ifname !== this.w.master && l.ifname !== this.w.masterPeer && l.ifname !== 'lo')
        .map((l) => l.ifname),
      'host links',
    ).toEqual([]);
    expect(await networkStatus(this.cluster, sb.pod), 'network-status annotation').toBeUndefined();
  }

  /**
   * After DEL: the pod namespace has only lo, the sandbox's host veth ends are gone, no cache of the
   * container is left; with `last` (the default: no other sandbox of the world is still attached), no host
   * veth at all and no reserved IP remain.
   */
  async expectTornDown(sb: Sandbox, opts: { last?: boolean } = {}): Promise<void> {
    expect(await linkNames(sb.netns), 'pod namespace links').toEqual(['lo']);
    const host = (await readLinks(this.w.hostNs)).map((l) => l.ifname);
    const peers = this.peers.get(sb.containerId) ?? [];
    expect(
      host.filter((n) => peers.includes(n)),
      `host veth ends of ${sb.containerId}`,
    ).toEqual([]);
    if (opts.last ?? true) {
      const veths = (await readLinks(this.w.hostNs)).filter(
        (l) => l.linkinfo?.info_kind === 'veth' && l.ifname !== this.w.master && l.ifname !== this.w.masterPeer,
      );
      expect(
        veths.map((l) => l.ifname),
        'host veth ends',
      ).toEqual([]);
      expect(await reservedIps(this.w.ipamDir), 'reserved IPs').toEqual([]);
    }
    expect(await this.cacheFiles(sb), 'cache files').toEqual([]);
  }

  /** Best-effort DEL of every sandbox (a failed test leaves nothing), then namespaces, relay and files. */
  async cleanup(): Promise<void> {
    const steps: (() => Promise<unknown>)[] = [];
    for (const sb of this.sandboxes) {
      for (const conf of this.confs) steps.push(() => this.driver('del', conf, sb));
    }
    steps.push(() => this.tunnel.close());
    for (const ns of this.extraNetns) steps.push(() => deleteNetns(ns));
    steps.push(() => this.w.cleanup());
    for (const step of steps) {
      try {
        await step();
      } catch (e) {
        console.warn(`cleanup of ${this.id}: ${(e as Error).message}`);
      }
    }
  }
}

/** Runs `fn` with a set-up world and always cleans it up. */
export async function withWorld<T>(cluster: Cluster, opts: WorldOptions, fn: (kw: K8sWorld) => Promise<T>): Promise<T> {
  const kw = new K8sWorld(cluster, opts);
  try {
    await kw.setup();
    return await fn(kw);
  } finally {
    await kw.cleanup();
  }
}

export const randomUid = (): string => {
  const h = randomBytes(16).toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
};

/** IPv4 addresses (CIDR) of a link from `readLinks`/`readAddrs` output. */
export function v4(link: IpLink | undefined): string[] {
  return (link?.addr_info ?? []).filter((a) => a.family === 'inet').map((a) => `${a.local}/${a.prefixlen}`);
}
