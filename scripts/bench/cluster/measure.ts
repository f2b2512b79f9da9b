/**
 * What the cluster bench reads of a node's daemon: its memory (/proc), when its socket first answered /healthz 200 (both daemons serve it once their informers have listed), and the API
 * traffic of Multus' service accounts in a window: requests from the API server's audit log (its policy logs
 * only those users), bytes from the relay the daemon's API connections go through (ApiTunnel's counters).
 */
import { readFile } from 'node:fs/promises';
import { request } from 'node:http';
import type { ApiTunnel } from '../../../test/e2e-k8s/world.ts';
import type { Cluster } from '../../../test/k8s/cluster.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** The users the audit policy logs: ours and Go Multus' service accounts. */
export const MULTUS_USERS = ['system:serviceaccount:kube-system:multus-ts', 'system:serviceaccount:kube-system:multus'];

/** An audit policy that logs Multus' requests (level Metadata) and nothing else. */
export const AUDIT_POLICY =
  'apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages:\n- RequestReceived\nrules:\n' +
  `- level: Metadata\n  users: [${MULTUS_USERS.map((u) => `"${u}"`).join(', ')}]\n- level: None\n`;

const mib = (kib: number) => Math.round((kib / 1024) * 10) / 10;

/** The process's memory in MiB: resident (VmRSS), its anonymous and file parts, the peak (VmHWM). */
export async function memoryMib(pid: number): Promise<{ rss: number; anon: number; file: number; peak: number }> {
  const s = await readFile(`/proc/${pid}/status`, 'utf8');
  const kib = (k: string) => Number(new RegExp(`${k}:\\s+(\\d+)`).exec(s)?.[1] ?? NaN);
  return { rss: mib(kib('VmRSS')), anon: mib(kib('RssAnon')), file: mib(kib('RssFile')), peak: mib(kib('VmHWM')) };
}

/** The HTTP status of GET /healthz on a unix socket, or 0 when nothing answers within 2 s. */
export function healthz(socketPath: string): Promise<number> {
  return new Promise((resolve) => {
    const req = request({ socketPath, path: '/healthz', method: 'GET', timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(0));
    req.end();
  });
}

/** Polls /healthz every 25 ms until 200; the time it first did (ms since the epoch). */
export async function untilHealthy(socketPath: string, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if ((await healthz(socketPath)) === 200) return Date.now();
    if (Date.now() > deadline) throw new Error(`${socketPath}: /healthz not 200 after ${timeoutMs} ms`);
    await sleep(25);
  }
}

export interface Audit {
  auditID: string;
  requestURI?: string;
  responseStatus?: { code?: number };
  stage: string;
  verb: string;
  user: { username: string };
  objectRef?: { resource?: string; subresource?: string };
  requestReceivedTimestamp: string;
  stageTimestamp: string;
}

/** Multus' requests received in [t0, t1] (one per audit ID), and how many of each verb and resource. */
export async function requestsIn(cluster: Cluster, t0: number, t1: number) {
  const seen = new Map<string, Audit>();
  for (const e of (await cluster.auditEvents()) as unknown as Audit[]) {
    if (!MULTUS_USERS.includes(e.user.username)) continue;
    const t = Date.parse(e.requestReceivedTimestamp);
    if (t >= t0 && t <= t1 && !seen.has(e.auditID)) seen.set(e.auditID, e);
  }
  const by: Record<string, number> = {};
  for (const e of seen.values()) {
    const what = `${e.verb} ${e.objectRef?.resource ?? ''}${e.objectRef?.subresource ? `/${e.objectRef.subresource}` : ''}`;
    by[what] = (by[what] ?? 0) + 1;
  }
  return { count: seen.size, by, events: [...seen.values()] };
}

/** The initial lists after `t0`: the last LIST of pods and of NADs to complete (ms since the epoch). */
export async function initialListsDoneMs(cluster: Cluster, t0: number): Promise<{ pods?: number; nads?: number }> {
  const out: { pods?: number; nads?: number } = {};
  for (const e of (await cluster.auditEvents()) as unknown as Audit[]) {
    if (!MULTUS_USERS.includes(e.user.username) || e.verb !== 'list' || e.stage !== 'ResponseComplete') continue;
    if (Date.parse(e.requestReceivedTimestamp) < t0) continue;
    const key = e.objectRef?.resource === 'pods' ? 'pods' : 'nads';
    out[key] = Math.max(out[key] ?? 0, Date.parse(e.stageTimestamp));
  }
  return out;
}

/** The relay's byte counters now (to subtract: `bytesSince`), and how many connections it has relayed. */
export const bytesNow = (t: ApiTunnel) => ({ ...t.bytes, connections: t.connections.length });
export const bytesSince = (t: ApiTunnel, at: { up: number; down: number }) => ({
  up: t.bytes.up - at.up,
  down: t.bytes.down - at.down,
});
/** The bytes of each connection opened since `at` (so far), up and down. */
export const connectionsSince = (t: ApiTunnel, at: { connections: number }) =>
  t.connections.slice(at.connections).map((c) => ({ ...c }));

/** Per minute, rounded. */
export const perMin = (n: number, ms: number) => Math.round((n / (ms / 60_000)) * 10) / 10;
