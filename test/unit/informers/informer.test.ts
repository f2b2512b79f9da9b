/**
 * One informer (src/informers/informer.ts) against a scripted fake of client-node's Watch: the initial objects
 * through the watch (sendInitialEvents, synced at the initial-events-end bookmark, no LIST), the fallback to a
 * LIST when the API server refuses that, 410 Gone starting over with the cache replaced, a watch the server ends
 * resuming from the last resourceVersion. No network: the fallback's LIST goes to a local HTTP server.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { KubeConfig } from '@kubernetes/client-node/dist/config.js';
import { silentLogger } from '../../../src/base/log.ts';
import type { ClientNode, InformerMetrics, Obj } from '../../../src/informers/informer-config.ts';
import { type Informer, informer } from '../../../src/informers/informer.ts';

type Cb = (type: string, obj: unknown) => void;
type Done = (err: unknown) => void;

/** One watch the informer opened: its query, and the means to send it events and end it. */
interface Opened {
  query: Record<string, unknown>;
  send(type: string, obj: unknown): void;
  end(err?: unknown): void;
  aborted: boolean;
}

/** client-node's Watch, scripted: each watch() waits in `opened` for the test to drive it. */
function fakeWatch(opened: Opened[], refuse?: (q: Record<string, unknown>) => number | undefined) {
  return class {
    constructor(_kc: unknown) {}
    async watch(_path: string, query: Record<string, unknown>, cb: Cb, done: Done) {
      const ctrl = new AbortController();
      let over = false;
      const end = (err?: unknown) => {
        if (over) return;
        over = true;
        done(err ?? null);
      };
      const status = refuse?.(query);
      if (status) {
        end(Object.assign(new Error(`HTTP ${status}`), { statusCode: status }));
        return ctrl;
      }
      const w: Opened = { query, send: (t, o) => !over && cb(t, o), end, aborted: false };
      ctrl.signal.addEventListener('abort', () => {
        w.aborted = true;
        end(new Error('aborted'));
      });
      opened.push(w);
      return ctrl;
    }
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
  let server: Server | undefined;
  afterEach(() => {
    inf?.stop();
    server?.close();
  });

  function start(opened: Opened[], kc: KubeConfig, refuse?: (q: Record<string, unknown>) => number | undefined) {
    const { calls, m } = metricsLog();
    const cn = { KubeConfig, Watch: fakeWatch(opened, refuse) } as unknown as ClientNode;
    const o = { log: silentLogger, metrics: m, backoff: { initialMs: 10, maxMs: 20 } };
    inf = informer('pods', '/api/v1/pods', 'spec.nodeName=n1', kc, o, () => {}, cn);
    const seen: string[] = [];
    inf.subscribe((obj, deleted) => seen.push(`${deleted ? 'del' : 'set'} ${obj.metadata?.name}`));
    inf.start();
    return { calls, seen };
  }
  const kcFor = (server = 'https://127.0.0.1:1') => {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server, skipTLSVerify: true }],
      users: [{ name: 'u', token: 't' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    return kc;
  };

  it('asks for the initial events on its one watch, and is synced only at the initial-events-end bookmark', async () => {
    const opened: Opened[] = [];
    const { calls, seen } = start(opened, kcFor());
    await until('the first watch', () => opened.length === 1);
    expect(opened[0]!.query).toMatchObject({
      sendInitialEvents: true,
      resourceVersionMatch: 'NotOlderThan',
      allowWatchBookmarks: true,
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
    start(opened, kcFor());
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
    const { seen } = start(opened, kcFor());
    await until('the first watch', () => opened.length === 1);
    opened[0]!.send('ADDED', pod('a', '5'));
    opened[0]!.send('ADDED', pod('b', '6'));
    opened[0]!.send('BOOKMARK', bookmark('7', true));
    opened[0]!.send('ERROR', { kind: 'Status', code: 410, reason: 'Expired' });
    expect(opened[0]!.aborted).toBe(true);
    expect(inf!.synced()).toBe(false);
    await until('the second watch', () => opened.length === 2);
    expect(opened[1]!.query.sendInitialEvents).toBe(true);
    opened[1]!.send('ADDED', pod('a', '5'));
    opened[1]!.send('ADDED', pod('c', '9'));
    opened[1]!.send('BOOKMARK', bookmark('10', true));
    expect(inf!.synced()).toBe(true);
    expect(inf!.get('ns', 'b')).toBeUndefined();
    expect(seen).toEqual(['set a', 'set b', 'del b', 'set c']); // a unchanged: not announced again
  });

  it('an API server that refuses the initial events (HTTP 422) gets a paged LIST, then a watch from its resourceVersion', async () => {
    const paths: string[] = [];
    server = createServer((req, res) => {
      paths.push(req.url ?? '');
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify({ kind: 'PodList', metadata: { resourceVersion: '77' }, items: [pod('a', '70')] }));
    });
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const opened: Opened[] = [];
    const { calls } = start(opened, kcFor(url), (q) => (q.sendInitialEvents ? 422 : undefined));
    await until('the watch after the list', () => opened.length === 1);
    expect(paths).toEqual(['/api/v1/pods?limit=500&fieldSelector=spec.nodeName%3Dn1']);
    expect(opened[0]!.query.resourceVersion).toBe('77');
    expect(opened[0]!.query.sendInitialEvents).toBeUndefined();
    expect(inf!.synced()).toBe(true);
    expect(inf!.get('ns', 'a')?.metadata?.resourceVersion).toBe('70');
    expect(calls).toEqual(['watch pods failed', 'list pods ok']);
  });

  it('any other failure before the initial events end is retried with the initial events again, unsynced', async () => {
    const opened: Opened[] = [];
    start(opened, kcFor());
    await until('the first watch', () => opened.length === 1);
    opened[0]!.send('ADDED', pod('a', '5'));
    opened[0]!.end(Object.assign(new Error('HTTP 503'), { statusCode: 503 }));
    expect(inf!.synced()).toBe(false);
    await until('the second watch', () => opened.length === 2);
    expect(opened[1]!.query.sendInitialEvents).toBe(true);
  });
});
