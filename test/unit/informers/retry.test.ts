/**
 * When an informer's next watch goes after a failure (src/informers/retry.ts, used by informer.ts): client-go's
 * backoff steps, a 429's Retry-After (from its Status, as the lean client reads it: k8s/calls.ts), and the gate
 * by which one informer probes an API server that refuses everyone while the other waits for its answer.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { CniCode } from '../../../src/base/errors.ts';
import { silentLogger } from '../../../src/base/log.ts';
import { type Informer, informer } from '../../../src/informers/informer.ts';
import { ServerGate, nextWaitMs, serverWide } from '../../../src/informers/retry.ts';
import { statusError } from '../../../src/k8s/calls.ts';
import type { ClientConfig } from '../../../src/k8s/kubeconfig.ts';
import { KubeApiError, type WatchClient } from '../../../src/k8s/types.ts';
import { type WatchHandlers, streamCall } from '../../../src/k8s/watch.ts';

const refusal = (status: number, msg = `HTTP ${status}`) => new KubeApiError(CniCode.TryAgainLater, msg, status, 'x');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function until(what: string, ok: () => boolean): Promise<void> {
  for (let i = 0; i < 400 && !ok(); i++) await sleep(5);
  if (!ok()) throw new Error(`${what}: not within 2 s`);
}

describe('retry: the wait before the next watch', () => {
  const backoff = { initialMs: 800, maxMs: 30_000 };
  it("client-go's reflector steps: 0.8 s doubling to 30 s, each stretched by 0 to 100%", () => {
    expect([1, 2, 3, 6, 7].map((n) => nextWaitMs(refusal(403), n, backoff, () => 0))).toEqual([
      800, 1600, 3200, 25_600, 30_000,
    ]);
    expect(nextWaitMs(refusal(403), 2, backoff, () => 0.999)).toBe(3198);
    expect(nextWaitMs(new Error('socket hang up'), 1, backoff, () => 0.5)).toBe(1200);
  });
  it("a 429 or 503 with Retry-After waits that long, whatever the backoff's step (at most the backoff's cap)", () => {
    const busy = Object.assign(refusal(429), { retryAfterS: 1 });
    expect(nextWaitMs(busy, 5, backoff, () => 0.5)).toBe(1000);
    expect(nextWaitMs(Object.assign(refusal(503), { retryAfterS: 90 }), 1, backoff)).toBe(30_000);
    expect(nextWaitMs(Object.assign(refusal(404), { retryAfterS: 1 }), 5, backoff, () => 0)).toBe(12_800);
  });
  it("the lean client reads Retry-After from the API server's Status (details.retryAfterSeconds)", () => {
    const body = (details: unknown) =>
      Buffer.from(JSON.stringify({ kind: 'Status', code: 429, reason: 'TooManyRequests', details }));
    const c = streamCall('network-attachment-definitions', '/apis/k8s.cni.cncf.io/v1/network-attachment-definitions');
    const cfg = { server: 'https://k8s:6443' } as ClientConfig;
    expect(statusError(429, body({ retryAfterSeconds: 1 }), c, cfg).retryAfterS).toBe(1);
    expect(statusError(429, body({}), c, cfg).retryAfterS).toBeUndefined();
    expect(statusError(429, Buffer.from('<html>busy</html>'), c, cfg).retryAfterS).toBeUndefined();
  });
  it('server-wide refusals: no HTTP answer, 401, 403, 503; a resource of its own: 404, 410, 429, 500', () => {
    expect([0, 401, 403, 503].map((s) => serverWide(refusal(s)))).toEqual([true, true, true, true]);
    expect(serverWide(new Error('the watch ended after 3 ms'))).toBe(true);
    expect([404, 410, 429, 500].map((s) => serverWide(refusal(s)))).toEqual([false, false, false, false]);
  });
  it('the gate: the first refused probes, the next waits; an answer lets the waiters go; a leaving prober too', () => {
    const gate = new ServerGate();
    const [a, b] = [{}, {}];
    const went: string[] = [];
    expect(gate.refused(a)).toBe(false);
    expect(gate.refused(a)).toBe(false); // still the prober
    expect(gate.refused(b)).toBe(true);
    gate.wait(b, () => went.push('b'));
    gate.answered();
    expect(went).toEqual(['b']);
    expect(gate.refused(b)).toBe(false); // no prober after the answer: b probes now
    expect(gate.refused(a)).toBe(true);
    gate.wait(a, () => went.push('a'));
    gate.leave(b);
    expect(went).toEqual(['b', 'a']);
  });
});

/** An API server the test switches: 'down' refuses connections (status 0), 'forbidden' answers 403, 'up' serves. */
function server() {
  const s = { state: 'down' as 'down' | 'forbidden' | 'up', tries: { pods: 0, nads: 0 } as Record<string, number> };
  const api: WatchClient = {
    listPage: () => Promise.reject(new Error('no LIST expected')),
    async watch(resource) {
      s.tries[resource] = (s.tries[resource] ?? 0) + 1;
      if (s.state === 'down') throw refusal(0);
      if (s.state === 'forbidden') throw refusal(403);
      return () => {};
    },
  };
  return { s, api };
}

describe('retry: two informers behind one gate', () => {
  const informers: Informer[] = [];
  afterEach(() => informers.splice(0).forEach((i) => i.stop()));
  /** One NAD informer on `api` with its backoff's steps, started. */
  function startNads(api: WatchClient, backoff: { initialMs: number; maxMs: number }): Informer {
    const inf = informer('nads', '/nads', undefined, api, { log: silentLogger, backoff }, () => {});
    informers.push(inf);
    inf.start();
    return inf;
  }
  function start(api: WatchClient, gate: ServerGate | undefined) {
    // the prober's steps 1 ms doubling (its 8th try within 260 ms), a waiter's own fallback 10-20 s
    const o = { log: silentLogger, backoff: { initialMs: 1, maxMs: 10_000 }, ...(gate ? { gate } : {}) };
    for (const name of ['pods', 'nads']) {
      const inf = informer(name, `/${name}`, undefined, api, o, () => {});
      informers.push(inf);
      inf.start();
    }
  }

  it('while the server refuses everyone only one informer tries again; the other goes when it gets through', async () => {
    const { s, api } = server();
    start(api, new ServerGate());
    await until('refusals', () => s.tries.pods! >= 4);
    s.state = 'forbidden'; // listening, its authorizer not loaded yet
    await until('more refusals', () => s.tries.pods! >= 7);
    expect(s.tries.nads).toBe(1); // its first try only: it waits for the prober's answer
    s.state = 'up';
    await until('the waiter goes', () => s.tries.nads === 2);
    expect(s.tries.pods).toBe(8);
  });

  it("an informer's 429 with Retry-After: 1 is tried again after 1 s, not after its backoff's step (60 s here)", async () => {
    let tries = 0;
    const api: WatchClient = {
      listPage: () => Promise.reject(new Error('no LIST expected')),
      async watch() {
        if (++tries === 1) throw Object.assign(refusal(429), { retryAfterS: 1 });
        return () => {};
      },
    };
    startNads(api, { initialMs: 60_000, maxMs: 60_000 });
    for (let i = 0; i < 60 && tries < 2; i++) await sleep(50); // up to 3 s
    expect(tries).toBe(2);
  });

  it('429 "storage is (re)initializing" (a new watch cache): the initial events next, not a resume it would end by 410', async () => {
    const queries: Record<string, string>[] = [];
    let on: WatchHandlers | undefined;
    const api: WatchClient = {
      listPage: () => Promise.reject(new Error('no LIST expected')),
      async watch(_resource, path, handlers) {
        queries.push(Object.fromEntries(new URLSearchParams(path.split('?')[1])));
        if (queries.length === 2) throw refusal(429, 'storage is (re)initializing');
        on = handlers;
        return () => {};
      },
    };
    const inf = startNads(api, { initialMs: 1, maxMs: 10 });
    on!.event('ADDED', { metadata: { name: 'a', namespace: 'ns', resourceVersion: '5' } });
    on!.event('BOOKMARK', { metadata: { resourceVersion: '7', annotations: { 'k8s.io/initial-events-end': 'true' } } });
    expect(inf.synced()).toBe(true);
    on!.done(new Error('ECONNRESET')); // the server stopped
    await until('the try after the 429', () => queries.length === 3);
    expect(queries[1]!.sendInitialEvents).toBeUndefined(); // the resume from 7, refused
    expect(queries[2]).toMatchObject({
      sendInitialEvents: 'true',
      resourceVersionMatch: 'NotOlderThan',
      resourceVersion: '7',
    });
  });

  it('without the gate each informer pays its own refusals (as each client-go informer does)', async () => {
    const { s, api } = server();
    start(api, undefined);
    await until('refusals of both', () => s.tries.pods! >= 4 && s.tries.nads! >= 4);
  });
});
