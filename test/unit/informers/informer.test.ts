/**
 * One informer (src/informers/informer.ts) against a scripted fake of the lean client's watch and list
 * (WatchClient): the initial objects through the watch (sendInitialEvents, synced at the initial-events-end
 * bookmark, no LIST), the fallback to a LIST when the API server refuses that, 410 Gone starting over with the
 * cache replaced, a watch the server ends resuming from the last resourceVersion.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { CniCode } from '../../../src/base/errors.ts';
import { silentLogger } from '../../../src/base/log.ts';
import type { InformerMetrics, Obj } from '../../../src/informers/informer-types.ts';
import { type Informer, informer } from '../../../src/informers/informer.ts';
import { KubeApiError, type WatchClient } from '../../../src/k8s/types.ts';

/** One watch the informer opened: its query, and the means to send it events and end it. */
interface Opened {
  query: Record<string, string>;
  send(type: string, obj: unknown): void;
  end(err?: unknown): void;
  aborted: boolean;
}

/** The lean client's watch and list, scripted: each watch waits in `opened` for the test to drive it. */
function fakeApi(
  opened: Opened[],
  refuse?: (q: Record<string, string>) => number | undefined,
  list?: { paths: string[]; page: unknown },
): WatchClient {
  return {
    async listPage<T>(_resource: string, path: string): Promise<T> {
      list?.paths.push(path);
      return list?.page as T;
    },
    async watch(_resource, path, on) {
      const query = Object.fromEntries(new URLSearchParams(path.split('?')[1]));
      const status = refuse?.(query);
      if (status) throw new KubeApiError(CniCode.Internal, `HTTP ${status}`, status, 'Invalid');
      let over = false;
      const w: Opened = {
        query,
        send: (t, o) => !over && on.event(t, o),
        end: (err) => {
          if (over) return;
          over = true;
          on.done(err);
        },
        aborted: false,
      };
      opened.push(w);
      return () => {
        w.aborted = true;
        over = true;
      };
    },
  };
}

const pod = (name: string, rv: string, extra: Record<string, unknown> = {}): Obj =>
  ({ apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: 'ns', resourceVersion: rv, ...extra } }) as Obj;
const bookmark = (rv: string, end = false) => ({
  kind: 'Pod',
  metadata: { resourceVersion: rv, ...(end ? { annotations: { 'k8s.io/initial-events-end': 'true' } } : {}) },
});
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function until(what: string, ok: () => boolean): Promise<void> {
  for (let i = 0; i < 400 && !ok(); i++) await sleep(5);
  if (!ok()) throw new Error(`${what}: not within 2 s`);
}

function metricsLog() {
  const calls: string[] = [];
  const m: InformerMetrics = {
    apiCall: (verb, resource, _s, ok) => calls.push(`${verb} ${resource} ${ok ? 'ok' : 'failed'}`),
    informerSynced: () => {},
  };
  return { calls, m };
}

describe('informer: initial objects through the watch', () => {
  let inf: Informer | undefined;
  afterEach(() => inf?.stop());

  function start(opened: Opened[], api: WatchClient) {
    const { calls, m } = metricsLog();
    const o = { log: silentLogger, metrics: m, backoff: { initialMs: 10, maxMs: 20 } };
    inf = informer('pods', '/api/v1/pods', 'spec.nodeName=n1', api, o, () => {});
    const seen: string[] = [];
    inf.subscribe((obj, deleted) => seen.push(`${deleted ? 'del' : 'set'} ${obj.metadata?.name}`));
    inf.start();
    return { calls, seen };
  }
  it('requests its first watch within start(), not on a later turn of the event loop', () => {
    // the daemon's start goes on after start() (config, socket): the watch travels meanwhile (docs/resident.md)
    const opened: Opened[] = [];
    start(opened, fakeApi(opened));
    expect(opened).toHaveLength(1);
  });
  it('asks for the initial events on its one watch, and is synced only at the initial-events-end bookmark', async () => {
    const opened: Opened[] = [];
    const { calls, seen } = start(opened, fakeApi(opened));
    await until('the first watch', () => opened.length === 1);
    expect(opened[0]!.query).toEqual({
      watch: 'true',
      sendInitialEvents: 'true',
      resourceVersionMatch: 'NotOlderThan',
      allowWatchBookmarks: 'true',
      fieldSelector: 'spec.nodeName=n1',
    });
    expect(opened[0]!.query.resourceVersion).toBeUndefined();
    opened[0]!.send('ADDED', pod('a', '5'));
    opened[0]!.send('ADDED', pod('b', '6'));
    opened[0]!.send('DELETED', pod('b', '7'));
    opened[0]!.send('BOOKMARK', bookmark('8'));
    expect(inf!.synced()).toBe(false);
    expect(seen).toEqual([]); // nothing announced before the set is complete
    opened[0]!.send('BOOKMARK', bookmark('9', true));
    expect(inf!.synced()).toBe(true);
    expect(inf!.get('ns', 'a')?.metadata?.resourceVersion).toBe('5');
    expect(inf!.get('ns', 'b')).toBeUndefined();
    expect(seen).toEqual(['set a']);
    expect(calls).toEqual(['watch pods ok']); // no list
    // the same stream carries the changes
    opened[0]!.send('MODIFIED', pod('a', '10', { annotations: { x: 'y' } }));
    expect(inf!.get('ns', 'a')?.metadata?.annotations).toEqual({ x: 'y' });
    expect(opened).toHaveLength(1);
  });

  it('a watch the server ends resumes at once from the last resourceVersion (a bookmark included), still synced', async () => {
    const opened: Opened[] = [];
    start(opened, fakeApi(opened));
    await until('the first watch', () => opened.length === 1);
    opened[0]!.send('ADDED', pod('a', '5'));
    opened[0]!.send('BOOKMARK', bookmark('6', true));
    opened[0]!.send('BOOKMARK', bookmark('42'));
    await sleep(1100); // a watch ended sooner than 1 s is a failure, not a timeout
    opened[0]!.end();
    expect(inf!.synced()).toBe(true);
    await until('the second watch', () => opened.length === 2);
    expect(opened[1]!.query.resourceVersion).toBe('42');
    expect(opened[1]!.query.sendInitialEvents).toBeUndefined();
  });

  it('410 Gone (an ERROR event) starts over with the initial events; the new set replaces the cache', async () => {
    const opened: Opened[] = [];
    const { seen } = start(opened, fakeApi(opened));
    await until('the first watch', () => opened.length === 1);
    opened[0]!.send('ADDED', pod('a', '5'));
    opened[0]!.send('ADDED', pod('b', '6'));
    opened[0]!.send('BOOKMARK', bookmark('7', true));
    opened[0]!.send('ERROR', { kind: 'Status', code: 410, reason: 'Expired' });
    expect(opened[0]!.aborted).toBe(true);
    expect(inf!.synced()).toBe(false);
    await until('the second watch', () => opened.length === 2);
    expect(opened[1]!.query.sendInitialEvents).toBe('true');
    // not older than what the cache had seen: served from the API server's watch cache (no read from etcd first)
    expect(opened[1]!.query.resourceVersion).toBe('7');
    expect(opened[1]!.query.resourceVersionMatch).toBe('NotOlderThan');
    opened[1]!.send('ADDED', pod('a', '5'));
    opened[1]!.send('ADDED', pod('c', '9'));
    opened[1]!.send('BOOKMARK', bookmark('10', true));
    expect(inf!.synced()).toBe(true);
    expect(inf!.get('ns', 'b')).toBeUndefined();
    expect(seen).toEqual(['set a', 'set b', 'del b', 'set c']); // a unchanged: not announced again
  });

  it('an API server that refuses the initial events (HTTP 422) gets a paged LIST, then a watch from its resourceVersion', async () => {
    const list = { paths: [] as string[], page: { metadata: { resourceVersion: '77' }, items: [pod('a', '70')] } };
    const opened: Opened[] = [];
    const { calls } = start(
      opened,
      fakeApi(opened, (q) => (q.sendInitialEvents ? 422 : undefined), list),
    );
    await until('the watch after the list', () => opened.length === 1);
    expect(list.paths).toEqual(['/api/v1/pods?limit=500&fieldSelector=spec.nodeName%3Dn1']);
    expect(opened[0]!.query.resourceVersion).toBe('77');
    expect(opened[0]!.query.sendInitialEvents).toBeUndefined();
    expect(inf!.synced()).toBe(true);
    expect(inf!.get('ns', 'a')?.metadata?.resourceVersion).toBe('70');
    expect(calls).toEqual(['watch pods failed', 'list pods ok']);
  });

  it('a 404 (a just-started API server that has not loaded the CRD yet) is retried as a watch-list, not a LIST', async () => {
    const list = { paths: [] as string[], page: { metadata: { resourceVersion: '77' }, items: [] } };
    const opened: Opened[] = [];
    let calls = 0;
    start(
      opened,
      fakeApi(opened, () => (++calls === 1 ? 404 : undefined), list),
    );
    await until('the watch after the 404', () => opened.length === 1);
    expect(opened[0]!.query.sendInitialEvents).toBe('true');
    expect(list.paths).toEqual([]);
  });

  it('any other failure before the initial events end is retried with the initial events again, unsynced', async () => {
    const opened: Opened[] = [];
    start(opened, fakeApi(opened));
    await until('the first watch', () => opened.length === 1);
    opened[0]!.send('ADDED', pod('a', '5'));
    opened[0]!.end(new KubeApiError(CniCode.TryAgainLater, 'HTTP 503', 503, 'ServiceUnavailable'));
    expect(inf!.synced()).toBe(false);
    await until('the second watch', () => opened.length === 2);
    expect(opened[1]!.query.sendInitialEvents).toBe('true');
  });
});
