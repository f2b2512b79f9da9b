/**
 * start-bytes' raw watches (scripts/bench/cluster/start-bytes.ts): the daemon's pod watch and the NAD watch on
 * connections of their own, client-go's two streams of one HTTP/2 connection, and a TLS connection with no request.
 */
import { spawn, spawnSync } from 'node:child_process';
import http2 from 'node:http2';
import https from 'node:https';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createGunzip, gzipSync } from 'node:zlib';
import type { Cluster } from '../../../../test/k8s/cluster.ts';
import { NODE } from './objects.ts';
import { type Relay, summary } from './relay.ts';

const ROOT = resolve(import.meta.dirname, '../../../..');

export const POD_WATCH = `/api/v1/pods?watch=true&allowWatchBookmarks=true&fieldSelector=spec.nodeName%3D${NODE}&sendInitialEvents=true&resourceVersionMatch=NotOlderThan`;
export const NAD_WATCH = `/apis/k8s.cni.cncf.io/v1/network-attachment-definitions?watch=true&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan`;
export const JSON_TYPE = 'application/json';
export const PROTO_TYPE = 'application/vnd.kubernetes.protobuf;stream=watch';
const END = Buffer.from('k8s.io/initial-events-end');
/** The header Go's gzip.Writer starts each member with (no name, no time): one per flush of the API server. */
const GZIP_HEADER = Buffer.from([0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0]);

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
export async function rawWatch(c: Cluster, relay: Relay, path: string, accept: string, gzip: boolean) {
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
export async function http2Watches(c: Cluster, relay: Relay, podAccept: string) {
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
export async function bareTls(c: Cluster, relay: Relay, runtime: string) {
  const mark = relay.mark();
  const src =
    `const tls=require('node:tls');const fs=require('node:fs');` +
    `const s=tls.connect({host:'127.0.0.1',port:${relay.port},ca:fs.readFileSync(${JSON.stringify(c.caFile)}),` +
    `},()=>setTimeout(()=>s.end(),300));s.on('close',()=>process.exit(0));`;
  // Bun's platform package, as the build compiles with (npm installs no node_modules/.bin/bun for it)
  const exe = runtime === 'bun' ? join(ROOT, 'node_modules/@oven/bun-linux-x64/bin/bun') : process.execPath;
  await new Promise<void>((r) => {
    // not spawnSync: the relay runs on this process' event loop
    const p = spawn(exe, ['-e', src], { stdio: 'ignore' });
    const t = setTimeout(() => p.kill('SIGKILL'), 10_000);
    p.on('exit', (code) => {
      clearTimeout(t);
      if (code !== 0) process.stderr.write(`start-bytes: bare TLS (${runtime}) exited ${code}\n`);
      r();
    });
  });
  await sleep(200);
  return summary(relay.since(mark));
}
