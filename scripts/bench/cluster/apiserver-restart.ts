/**
 * 5. The cluster bench's API-server restart (`--apiserver-restart`, docs/archive/performance.md "A cluster"): the
 * kube-apiserver stopped (SIGTERM, etcd kept) and started again on the same port and flags; then how long the real
 * node's daemon takes to be synced again, and the requests and bytes it spends on it.
 *
 * "Synced again" is read the same way for both daemons, from the API server's audit log: for pods and for NADs,
 * the daemon's watch that began after the restart and is still open SETTLE_MS later (a watch resumed from a
 * resourceVersion the new server has not got in its cache is answered 200 and then ends at once with 410 Gone;
 * that one does not count): the time the server began answering it (stage ResponseStarted). A LIST before it
 * (a relist) is part of the way there. `resync_s` is from the new server process's start to the later of the
 * two; `resync_after_readyz_s` from its first /readyz 200 (below zero when the daemon was back before the server
 * called itself ready: it answers before all its post-start hooks are done). A watch that asks for its initial
 * objects (sendInitialEvents) has them still to come at that moment: from the watch cache, in well under a second
 * at these sizes. Our daemon's own view is reported beside it: /healthz answers 503 while an informer is not
 * synced (src/daemon/parts.ts), so `healthz_resync_s` is its last turn back to 200, from the server's start (null
 * for Go thick, whose /healthz stays 200 whatever its informers do).
 * Requests and bytes: from the stop to 5 s after the sync (audit log; Multus' own relay). `daemon_log`: the daemon's
 * own lines meanwhile (its container's log), each retry as it saw it.
 */
import type { ApiTunnel } from '../../../test/e2e-k8s/world.ts';
import type { Cluster } from '../../../test/k8s/cluster.ts';
import { type Audit, MULTUS_USERS, bytesNow, bytesSince, connectionsSince, healthz, requestsIn } from './measure.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** A watch still open this long after its start is the daemon's watch again (not one ended by a 410). */
const SETTLE_MS = 5000;
/** Requests and bytes are counted until this long after the sync. */
const TAIL_MS = 5000;
/** Giving up: the daemon's backoff is at most 30 s (ours) and 30 s (client-go's reflector). */
const WITHIN_MS = 300_000;
const RESOURCES = ['pods', 'network-attachment-definitions'] as const;

export interface RestartCtx {
  cluster: Cluster;
  relay: ApiTunnel;
  /** The daemon's socket (/healthz). */
  socket: string;
  say(s: string): void;
  /** The daemon's log lines so far (ms since the epoch): its own account of each retry, in `daemon_log`. */
  log?: () => Promise<{ ms: number; text: string }[]>;
}

export interface WatchSync {
  /** When the server began answering the watch that stayed open (ms since the epoch). */
  at: number;
  /** The query of that watch, without the selector: how it started (resourceVersion, sendInitialEvents). */
  query: string;
  /** LISTs the daemon made of the resource after the restart. */
  lists: number;
  /** Watches it began after the restart (the one that stayed open included). */
  watches: number;
  /** Each request's HTTP status, in order (a watch ended by an ERROR event in its stream shows 200). */
  codes: number[];
}

/** Per resource, the daemon's watch begun at or after `t0` and open `SETTLE_MS` later (as of `now`); pure. */
export function syncedWatches(events: Audit[], t0: number, now: number): Partial<Record<string, WatchSync>> {
  const done = new Set<string>();
  for (const e of events) if (e.stage === 'ResponseComplete') done.add(e.auditID);
  const out: Partial<Record<string, WatchSync>> = {};
  for (const r of RESOURCES) {
    const mine = events.filter(
      (e) =>
        MULTUS_USERS.includes(e.user.username) &&
        e.objectRef?.resource === r &&
        Date.parse(e.requestReceivedTimestamp) >= t0,
    );
    const lists = new Set(mine.filter((e) => e.verb === 'list').map((e) => e.auditID)).size;
    const started = mine.filter((e) => e.verb === 'watch' && e.stage === 'ResponseStarted');
    const open = started.filter(
      (e) => !done.has(e.auditID) && e.responseStatus?.code === 200 && now - Date.parse(e.stageTimestamp) >= SETTLE_MS,
    );
    const w = open.sort((a, b) => Date.parse(a.stageTimestamp) - Date.parse(b.stageTimestamp))[0];
    if (!w) continue;
    const q = new URLSearchParams(w.requestURI?.split('?')[1] ?? '');
    q.delete('fieldSelector');
    q.delete('labelSelector');
    const codes = new Map<string, number>();
    for (const e of mine) if (!codes.has(e.auditID)) codes.set(e.auditID, e.responseStatus?.code ?? 0);
    const at = Date.parse(w.stageTimestamp);
    out[r] = { at, query: q.toString(), lists, watches: started.length, codes: [...codes.values()] };
  }
  return out;
}

/** /healthz polled every 100 ms until stopped: the last time it turned to 200 from anything else. */
function healthWatch(socket: string) {
  let on = true;
  let was = 200;
  let turned: number | undefined;
  let down = false;
  const loop = (async () => {
    while (on) {
      const s = await healthz(socket);
      if (s === 200 && was !== 200) turned = Date.now();
      if (s !== 200) down = true;
      was = s;
      await sleep(100);
    }
  })();
  return {
    async stop() {
      on = false;
      await loop;
      return down ? (turned ?? null) : null;
    },
  };
}

const s1 = (ms: number) => Math.round(ms / 100) / 10;

export async function apiserverRestart(c: RestartCtx): Promise<any> {
  const at = bytesNow(c.relay);
  const health = healthWatch(c.socket);
  const t0 = Date.now();
  c.say('apiserver restart: stopping the API server');
  await c.cluster.stopApiserver();
  const stopped = Date.now(); // the new server is started at once: its start
  await c.cluster.startApiserver();
  const ready = Date.now();
  c.say(`apiserver restart: /readyz 200 after ${s1(ready - stopped)} s`);
  const deadline = ready + WITHIN_MS;
  let sync: Partial<Record<string, WatchSync>> = {};
  for (;;) {
    await sleep(1000);
    const events = (await c.cluster.auditEvents()) as unknown as Audit[];
    sync = syncedWatches(events, stopped, Date.now());
    if (RESOURCES.every((r) => sync[r])) break;
    if (Date.now() > deadline) throw new Error(`the daemon had no open watch of ${JSON.stringify(sync)} in 300 s`);
  }
  const syncedAt = Math.max(...RESOURCES.map((r) => sync[r]!.at));
  const end = syncedAt + TAIL_MS;
  if (Date.now() < end) await sleep(end - Date.now());
  const healthyAt = await health.stop();
  const reqs = await requestsIn(c.cluster, t0, Date.now());
  const b = bytesSince(c.relay, at);
  const log = (await c.log?.().catch(() => [])) ?? [];
  return {
    resync_s: s1(syncedAt - stopped),
    resync_after_readyz_s: s1(syncedAt - ready),
    requests: reqs.count,
    bytes: b.up + b.down,
    bytes_up: b.up,
    bytes_down: b.down,
    // the daemon's connections through the relay meanwhile (one TLS handshake each), up and down
    connections: connectionsSince(c.relay, at),
    apiserver_down_s: s1(ready - stopped),
    healthz_resync_s: healthyAt === null ? null : s1(healthyAt - stopped),
    watches: Object.fromEntries(RESOURCES.map((r) => [r, { ...sync[r]!, at_s: s1(sync[r]!.at - stopped) }])),
    by: reqs.by,
    // the daemon's lines from the stop to the end of the count, seconds from the new server's start
    daemon_log: log.filter((l) => l.ms >= t0 && l.ms <= end).map((l) => `${s1(l.ms - stopped)} ${l.text}`),
  };
}
