/**
 * The resident daemon's warm Kubernetes state (src/informers/informers.ts) against a real kube-apiserver: the
 * pod informer (this node's pods) and the NAD informer sync, answers come from their caches with no request
 * (counted in the API server's audit log and by `requestCount`), a miss falls back to one GET with the lean
 * client's errors, and an in-process ADD through handle() makes exactly one non-event request once synced; the
 * API server stopped and started again with a newer watch cache: the informers start over from it, no LIST.
 * No root needed: delegates are the fake exec, the pod's netns an empty one (test/helpers/netns.ts).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/base/log.ts';
import type { WarmKube } from '../../src/informers/informers.ts';
import { startWarmKube } from '../../src/informers/informers.ts';
import type { Metrics } from '../../src/daemon/metrics.ts';
import { createMetrics } from '../../src/daemon/metrics.ts';
import { nodeEvent } from '../../src/k8s/calls.ts';
import { handle } from '../../src/host/handle.ts';
import { createHost } from '../../src/host/host.ts';
import type { KubeClient } from '../../src/k8s/types.ts';
import { FakeExec } from '../helpers/fake-exec.ts';
import { testNetns } from '../helpers/netns.ts';
import { needs } from '../helpers/skip.ts';
import {
  type AuditEvent,
  type Cluster,
  MULTUS_USER,
  k8sRequirements,
  nadPath,
  podPath,
  startCluster,
} from './cluster.ts';

const ready = needs(...k8sRequirements());
const NODE = 'node-warm';
const OTHER_NODE = 'node-elsewhere';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.skipIf(!ready)('daemon informers against a real kube-apiserver', () => {
  let cluster: Cluster;
  let warm: WarmKube;
  let metrics: Metrics;
  let client: KubeClient;
  let dir: string;
  const ns = `warm-${process.pid}`;
  let early: { uid: string };
  /** The informers' warnings (a refused watch, the wait behind the other informer's probe: informers/retry.ts). */
  const warnings: string[] = [];
  const log = { ...silentLogger, warn: (m: string) => void warnings.push(m) };

  async function createPod(
    name: string,
    nodeName: string,
    annotations: Record<string, string> = {},
    hostNetwork = false,
  ) {
    const pod = await cluster.admin.post(podPath(ns), {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: ns, annotations },
      spec: { nodeName, hostNetwork, containers: [{ name: 'c', image: 'example.invalid/none' }] },
    });
    return { name, uid: pod.metadata.uid as string };
  }

  async function createNad(name: string, config: Record<string, unknown>) {
    await cluster.admin.post(nadPath(ns), {
      apiVersion: 'k8s.cni.cncf.io/v1',
      kind: 'NetworkAttachmentDefinition',
      metadata: { name, namespace: ns },
      spec: { config: JSON.stringify(config) },
    });
  }

  /** The multus user's requests on objects of this test's namespace (lists/watches are cluster-wide: not here). */
  async function audit(settleMs = 300): Promise<AuditEvent[]> {
    await sleep(settleMs); // a line is written when its response completes
    return (await cluster.auditEvents(MULTUS_USER)).filter((e) => e.objectRef?.namespace === ns);
  }
  const line = (e: AuditEvent) =>
    `${e.verb} ${e.objectRef?.resource}${e.objectRef?.subresource ? `/${e.objectRef.subresource}` : ''} ${e.objectRef?.name}`;

  /** Polls (bounded) until `get` answers `want` without sending a request: the informer's cache has it. */
  async function untilCached<T>(get: () => Promise<T>, want: (v: T) => boolean, what: string): Promise<T> {
    const deadline = Date.now() + 15_000;
    for (;;) {
      const before = client.requestCount;
      const v = await get().catch(() => undefined);
      if (v !== undefined && want(v) && client.requestCount === before) return v;
      if (Date.now() > deadline) throw new Error(`${what} not served from the informer cache within 15 s`);
      await sleep(50);
    }
  }

  beforeAll(async () => {
    cluster = await startCluster();
    await cluster.admin.post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
    early = await createPod('early', NODE);
    await createNad('net-a', { cniVersion: '1.0.0', type: 'p1' });
    metrics = createMetrics();
    warm = await startWarmKube({
      kubeconfig: cluster.multusKubeconfig,
      env: {},
      nodeName: NODE,
      log,
      metrics,
      backoff: { initialMs: 100, maxMs: 500 },
    });
    client = warm.client;
    dir = mkdtempSync(join(tmpdir(), 'mts-warm-'));
  }, 120_000);

  afterAll(async () => {
    warm?.close();
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('both informers get their initial objects through one watch each (no LIST), and say so in the metrics', async () => {
    expect(await warm.waitForSync(30_000)).toBe(true);
    expect(warm.synced()).toBe(true);
    const body = (await metrics.render()).body;
    expect(body).toMatch(/^multus_ts_informer_synced\{informer="pods"\} 1$/m);
    expect(body).toMatch(/^multus_ts_informer_synced\{informer="network-attachment-definitions"\} 1$/m);
    const lists = (await cluster.auditEvents(MULTUS_USER)).filter((e) => e.verb === 'list' || e.verb === 'watch');
    const kinds = new Set(lists.map((e) => `${e.verb} ${e.objectRef?.resource}`));
    // client-go's WatchListClient way (Go Multus v4.3.0): sendInitialEvents on the watch, the same one request
    expect([...kinds].sort()).toEqual(['watch network-attachment-definitions', 'watch pods']);
    expect(
      lists.every((e) => (e.responseStatus?.code ?? 0) < 300 || e.stage !== 'ResponseComplete'),
      'RBAC allows list/watch',
    ).toBe(true);
    // the early pod and NAD came with the initial events: served from the cache
    const before = client.requestCount;
    expect((await client.getNad(ns, 'net-a')).metadata.name).toBe('net-a');
    expect(client.requestCount - before).toBe(0);
  });

  it('a pod of this node that existed at start-up is served from the cache: 0 GETs', async () => {
    expect(await warm.waitForSync(30_000)).toBe(true);
    const before = client.requestCount;
    const pod = await client.getPod(ns, 'early', { uid: early.uid });
    expect(pod.metadata.uid).toBe(early.uid);
    expect(client.requestCount - before).toBe(0);
    expect((await audit()).filter((e) => e.objectRef?.name === 'early').map(line)).toEqual([]);
  });

  it('a pod created after start-up is found, and soon served from the cache', async () => {
    const late = await createPod('late', NODE);
    const first = await client.getPod(ns, 'late', { uid: late.uid }); // the informer's, or the GET fallback's
    expect(first.metadata.uid).toBe(late.uid);
    await untilCached(
      () => client.getPod(ns, 'late', { uid: late.uid }),
      (p) => p.metadata.uid === late.uid,
      'pod late',
    );
  });

  it('a pod of another node is not cached, yet found with one GET', async () => {
    const other = await createPod('other', OTHER_NODE);
    await sleep(500); // the watch would have delivered it by now, were it this node's
    for (let i = 0; i < 2; i++) {
      const before = client.requestCount;
      expect((await client.getPod(ns, 'other')).metadata.uid).toBe(other.uid);
      expect(client.requestCount - before, 'one GET per lookup').toBe(1);
    }
    expect((await audit()).filter((e) => e.objectRef?.name === 'other').map(line)).toEqual([
      'get pods other',
      'get pods other',
    ]);
  });

  it('a hostNetwork pod of this node is not cached (no runtime calls CNI for it), yet found with one GET', async () => {
    const host = await createPod('host-net', NODE, {}, true);
    const seen: string[] = [];
    const stop = warm.onPod((p) => seen.push(p.metadata.name as string));
    await createPod('beside-host-net', NODE); // delivered after host-net, were host-net watched
    await untilCached(
      () => client.getPod(ns, 'beside-host-net'),
      () => true,
      'pod beside-host-net',
    );
    stop();
    expect(seen).not.toContain('host-net');
    const before = client.requestCount;
    expect((await client.getPod(ns, 'host-net')).metadata.uid).toBe(host.uid);
    expect(client.requestCount - before, 'not from the cache: one GET').toBe(1);
  });

  it("ADD's lookup (cacheMiss 'wait') of a pod not cached yet waits for the watch instead of asking at once", async () => {
    // asked before the pod exists: an immediate GET would be a 404
    const looked = client.getPod(ns, 'soon', { cacheMiss: 'wait' });
    const soon = await createPod('soon', NODE);
    expect((await looked).metadata.uid).toBe(soon.uid);
  });

  it("DEL's lookup (cacheMiss 'only') of a pod the synced cache no longer holds is NotFound with no request", async () => {
    const gone = await createPod('gone', NODE);
    await untilCached(
      () => client.getPod(ns, 'gone', { uid: gone.uid }),
      () => true,
      'pod gone',
    );
    let deleted!: () => void;
    const seen = new Promise<void>((r) => (deleted = r));
    const stop = warm.onPod((p, del) => del && p.metadata.name === 'gone' && deleted());
    await cluster.admin.del(`${podPath(ns)}/gone?gracePeriodSeconds=0`);
    await seen;
    stop();
    const before = client.requestCount;
    const err = await client.getPod(ns, 'gone', { uid: gone.uid, cacheMiss: 'only' }).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 404 });
    expect(client.requestCount - before).toBe(0);
    // a cached pod of another UID (re-created under the same name) is handed back for the caller to tell apart
    const other = await client.getPod(ns, 'early', { uid: 'not-the-uid', cacheMiss: 'only' });
    expect(other.metadata.uid).toBe(early.uid);
    expect(client.requestCount - before).toBe(0);
  });

  it('a cached pod with another UID than expected is asked for again (re-created pod)', async () => {
    const before = client.requestCount;
    const pod = await client.getPod(ns, 'early', { uid: 'not-the-uid' });
    expect(pod.metadata.uid).toBe(early.uid);
    expect(client.requestCount - before).toBe(1);
  });

  it('a NAD updated while running is seen from the cache; a missing one is a NotFound from a GET', async () => {
    await untilCached(
      () => client.getNad(ns, 'net-a'),
      (n) => n.spec?.config?.includes('"p1"') === true,
      'NAD net-a',
    );
    const cur = await cluster.admin.get(nadPath(ns, 'net-a'));
    cur.spec.config = JSON.stringify({ cniVersion: '1.0.0', type: 'p2' });
    await cluster.admin.put(nadPath(ns, 'net-a'), cur);
    const nad = await untilCached(
      () => client.getNad(ns, 'net-a'),
      (n) => n.spec?.config?.includes('"p2"') === true,
      'updated NAD',
    );
    expect(JSON.parse(nad.spec!.config!)).toEqual({ cniVersion: '1.0.0', type: 'p2' });

    const before = client.requestCount;
    const err = await client.getNad(ns, 'nope').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ status: 404, reason: 'NotFound' });
    expect(client.requestCount - before, 'a cache miss is asked for').toBe(1);
  });

  it('handle(): an ADD of a pod with 2 NADs makes exactly 1 non-event request once synced; its DEL none', async () => {
    await createNad('nad-a', { cniVersion: '1.0.0', type: 'p1' });
    await createNad('nad-b', { cniVersion: '1.0.0', type: 'p2' });
    const pod = await createPod('two-nads', NODE, { 'k8s.v1.cni.cncf.io/networks': 'nad-a,nad-b' });
    // a label and a status condition the cache must carry into the status write (informer-trim.ts)
    const made = await cluster.admin.get(podPath(ns, 'two-nads'));
    made.metadata.labels = { app: 'warm' };
    await cluster.admin.put(podPath(ns, 'two-nads'), made);
    const labelled = await cluster.admin.get(podPath(ns, 'two-nads'));
    labelled.status.conditions = [{ type: 'PodScheduled', status: 'True', lastTransitionTime: '2026-12-01T00:00:00Z' }];
    await cluster.admin.put(`${podPath(ns, 'two-nads')}/status`, labelled);
    const stored = await cluster.admin.get(podPath(ns, 'two-nads'));
    const cached = await untilCached(
      () => client.getPod(ns, 'two-nads', { uid: pod.uid }),
      (p) => p.metadata.resourceVersion === stored.metadata.resourceVersion,
      'pod two-nads',
    );
    // the cache keeps what the daemon reads, not managedFields nor the containers
    expect(cached.metadata).not.toHaveProperty('managedFields');
    expect(cached.spec).toEqual({ nodeName: NODE });
    expect(cached.status).toEqual(stored.status);
    expect((cached.metadata as Record<string, unknown>).labels).toEqual({ app: 'warm' });
    await untilCached(
      () => client.getNad(ns, 'nad-a'),
      () => true,
      'NAD nad-a',
    );
    await untilCached(
      () => client.getNad(ns, 'nad-b'),
      () => true,
      'NAD nad-b',
    );

    const exec = new FakeExec('p0', 'p1', 'p2');
    let connects = 0;
    const host = createHost({
      writeStderr: () => {},
      exec,
      connectKube: async () => {
        connects++;
        return client;
      },
    });
    const conf = {
      cniVersion: '1.0.0',
      name: 'multus-cni-network',
      type: 'multus',
      kubeconfig: cluster.multusKubeconfig,
      cniDir: join(dir, 'cni'),
      delegates: [{ cniVersion: '1.0.0', name: 'cluster', type: 'p0' }],
    };
    const env = (command: string) => ({
      CNI_COMMAND: command,
      CNI_CONTAINERID: 'cid-two-nads',
      CNI_NETNS: testNetns(),
      CNI_IFNAME: 'eth0',
      CNI_PATH: '/nonexistent',
      CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${ns};K8S_POD_NAME=two-nads;K8S_POD_INFRA_CONTAINER_ID=cid-two-nads;K8S_POD_UID=${pod.uid}`,
    });
    const mine = (events: AuditEvent[]) => events.filter((e) => e.objectRef?.resource !== 'events').map(line);

    const before = mine(await audit(0));
    const add = await handle(host, { env: env('ADD'), stdin: Buffer.from(JSON.stringify(conf)) });
    expect(add.exitCode, add.stdout).toBe(0);
    expect(exec.received.map((c) => `${c.type} ${c.command} ${c.ifName}`)).toEqual([
      'p0 ADD eth0',
      'p1 ADD net1',
      'p2 ADD net2',
    ]);
    const afterAdd = mine(await audit());
    expect(afterAdd.slice(before.length)).toEqual(['update pods/status two-nads']);
    const status = (await cluster.admin.get(podPath(ns, 'two-nads'))).metadata.annotations[
      'k8s.v1.cni.cncf.io/network-status'
    ];
    expect(JSON.parse(status).map((s: { interface?: string }) => s.interface)).toEqual(['eth0', 'net1', 'net2']);
    // written from the trimmed cached pod: spec, labels, status and the managed fields all stay as they were
    const written = await cluster.admin.get(podPath(ns, 'two-nads'));
    expect(written.spec).toEqual(stored.spec);
    expect(written.metadata.labels).toEqual({ app: 'warm' });
    expect(written.status).toEqual(stored.status);
    const managers = (o: any) => o.metadata.managedFields.map((m: any) => `${m.manager} ${m.subresource ?? ''}`);
    expect(managers(written)).toEqual(expect.arrayContaining(managers(stored)));

    const del = await handle(host, { env: env('DEL'), stdin: Buffer.from(JSON.stringify(conf)) });
    expect(del.exitCode, del.stdout).toBe(0);
    expect(mine(await audit()).slice(afterAdd.length)).toEqual([]);
    expect(connects).toBe(1);
    host.close();
  });

  it("onPod: this node's pods' annotation edits and deletes reach a listener, with the cache already updated", async () => {
    const seen: string[] = [];
    let atEvent: Promise<{ value?: string; requests: number }> | undefined;
    const stop = warm.onPod((pod, deleted) => {
      if (pod.metadata.namespace !== ns) return;
      const value = pod.metadata.annotations?.['k8s.v1.cni.cncf.io/networks'] ?? '';
      seen.push(`${deleted ? 'deleted' : 'changed'} ${pod.metadata.name} ${value}`);
      if (!deleted && value === 'edited' && !atEvent) {
        // a lookup made in the listener (synchronously, as dynamic networks' is not) already sees the edit
        const before = client.requestCount;
        atEvent = client.getPod(ns, pod.metadata.name, { uid: pod.metadata.uid }).then((got) => ({
          value: got.metadata.annotations?.['k8s.v1.cni.cncf.io/networks'],
          requests: client.requestCount - before,
        }));
      }
    });
    await createPod('evented', NODE);
    await createPod('evented-elsewhere', OTHER_NODE);
    const until = async (what: string, probe: () => boolean) => {
      const deadline = Date.now() + 15_000;
      while (!probe()) {
        if (Date.now() > deadline) throw new Error(`${what} not within 15 s: ${JSON.stringify(seen)}`);
        await sleep(20);
      }
    };
    await until('the add', () => seen.includes('changed evented '));
    await cluster.admin.patch(podPath(ns, 'evented'), {
      metadata: { annotations: { 'k8s.v1.cni.cncf.io/networks': 'edited' } },
    });
    await until('the update', () => seen.includes('changed evented edited'));
    // the listener ran after the cache took the change: the lookup answered the edit without a request
    expect(await atEvent).toEqual({ value: 'edited', requests: 0 });
    await cluster.admin.del(`${podPath(ns, 'evented')}?gracePeriodSeconds=0`); // no kubelet confirms
    await until('the delete', () => seen.some((s) => s.startsWith('deleted evented')));
    stop();
    await createPod('after-unsubscribe', NODE);
    await sleep(500); // the watch would have delivered it by now
    expect(seen.filter((s) => s.includes('elsewhere') || s.includes('after-unsubscribe'))).toEqual([]);
  });

  it("pod_network_name_info follows this node's pods' network-status through onPod (as daemon/main.ts wires it)", async () => {
    const stop = warm.onPod(metrics.podNetworks);
    const status = JSON.stringify([
      { name: 'cbr0', interface: 'eth0', default: true },
      { name: `${ns}/net-a`, interface: 'net1' },
    ]);
    await createPod('named', NODE, { 'k8s.v1.cni.cncf.io/network-status': status });
    await createPod('named-elsewhere', OTHER_NODE, { 'k8s.v1.cni.cncf.io/network-status': status });
    const series = async () =>
      (await metrics.render()).body.split('\n').filter((l) => l.startsWith('pod_network_name_info{') && l.includes(ns));
    const until = async (what: string, probe: (lines: string[]) => boolean) => {
      const deadline = Date.now() + 15_000;
      while (!probe(await series())) {
        if (Date.now() > deadline) throw new Error(`${what} not within 15 s: ${JSON.stringify(await series())}`);
        await sleep(50);
      }
    };
    await until('the series', (l) => l.length === 2);
    expect((await series()).sort()).toEqual([
      `pod_network_name_info{pod="named",namespace="${ns}",interface="eth0",network_name="cbr0"} 0`,
      `pod_network_name_info{pod="named",namespace="${ns}",interface="net1",network_name="${ns}/net-a"} 0`,
    ]);
    await cluster.admin.del(`${podPath(ns, 'named')}?gracePeriodSeconds=0`);
    await until('their removal', (l) => l.length === 0);
    stop();
  });

  it('a Warning event about the node (MultusConfigRenamed, as the daemon posts it) is recorded on the Node', async () => {
    await client.createEvent(nodeEvent(NODE, 'Warning', 'MultusConfigRenamed', `renamed away ${ns}`));
    await (client as unknown as { flushEvents(): Promise<void> }).flushEvents();
    const list = (await cluster.admin.get(
      '/api/v1/namespaces/default/events?fieldSelector=involvedObject.kind%3DNode',
    )) as { items: { reason: string; message: string; type: string; involvedObject: Record<string, unknown> }[] };
    const mine = list.items.filter((e) => e.message === `renamed away ${ns}`);
    expect(mine.map((e) => [e.type, e.reason, e.involvedObject.kind, e.involvedObject.name])).toEqual([
      ['Warning', 'MultusConfigRenamed', 'Node', NODE],
    ]);
  });

  it('API requests are reported to the metrics by verb, resource and outcome', async () => {
    const body = (await metrics.render()).body;
    expect(body).toMatch(
      /^multus_ts_api_request_duration_seconds_count\{verb="get",resource="pods",outcome="success"\} [1-9]/m,
    );
    expect(body).toMatch(
      /^multus_ts_api_request_duration_seconds_count\{verb="update",resource="pods\/status",outcome="success"\} 1$/m,
    );
    expect(body).toMatch(
      /^multus_ts_api_request_duration_seconds_count\{verb="get",resource="network-attachment-definitions",outcome="error"\} 1$/m,
    );
    expect(body).toMatch(
      /^multus_ts_api_request_duration_seconds_count\{verb="watch",resource="pods",outcome="success"\} 1$/m,
    );
  });

  // Last: stops the API server.
  it('the API server gone: informers report unsynced; lookups fall back to GET and fail as transient (code 11)', async () => {
    warnings.length = 0;
    await cluster.stopApiserver();
    const deadline = Date.now() + 20_000;
    while (warm.synced() && Date.now() < deadline) await sleep(50);
    expect(warm.synced()).toBe(false);
    // Each informer notices the loss on its own watch: wait (bounded) until the pod informer has too.
    const podsUnsynced = /^multus_ts_informer_synced\{informer="pods"\} 0$/m;
    let body = (await metrics.render()).body;
    while (!podsUnsynced.test(body) && Date.now() < deadline) {
      await sleep(50);
      body = (await metrics.render()).body;
    }
    expect(body).toMatch(podsUnsynced);
    const err = await client.getPod(ns, 'early', { uid: early.uid }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ code: 11, status: 0 });
    // both watches broke with the server; the informer refused second waits for the first one's probe
    const waiting = warnings.filter((w) => w.includes('waiting for the API server'));
    expect(waiting.length).toBeGreaterThan(0);
  });
  /** A write straight into etcd while the API server is away: the new server's watch cache begins after it. */
  async function bumpEtcdRevision(): Promise<void> {
    const etcdPid = readFileSync(join(cluster.dir, 'pids'), 'utf8').trim().split(' ')[0];
    const args = readFileSync(`/proc/${etcdPid}/cmdline`, 'utf8').split('\0');
    const url = args.find((a) => a.startsWith('--listen-client-urls='))!.split('=')[1];
    const b64 = (x: string) => Buffer.from(x).toString('base64');
    const res = await fetch(`${url}/v3/kv/put`, {
      method: 'POST',
      body: JSON.stringify({ key: b64('/multus-ts-test/bump'), value: b64(String(Date.now())) }),
    });
    expect(res.status).toBe(200);
  }

  // After the one above: the API server comes back.
  it('the API server back with a newer watch cache: 410 Gone, then the initial events not older than the last resourceVersion, no LIST', async () => {
    await bumpEtcdRevision();
    const since = Date.now();
    await cluster.startApiserver();
    const deadline = Date.now() + 30_000;
    while (!warm.synced() && Date.now() < deadline) await sleep(50);
    expect(warm.synced()).toBe(true);
    await sleep(300); // the audit lines of the watches ended by 410
    const after = (await cluster.auditEvents(MULTUS_USER)).filter(
      (e) => Date.parse(String(e.requestReceivedTimestamp)) >= since - 1000 && e.verb !== 'get',
    );
    const query = (e: AuditEvent) => new URLSearchParams(e.requestURI.split('?')[1] ?? '');
    const relists = after.filter((e) => query(e).get('sendInitialEvents') === 'true');
    // both informers started over (the cache they had is older than the new server's), each from its watch cache
    expect(new Set(relists.map((e) => e.objectRef?.resource))).toEqual(
      new Set(['pods', 'network-attachment-definitions']),
    );
    for (const e of relists) {
      expect(query(e).get('resourceVersion')).toMatch(/^[1-9][0-9]*$/);
      expect(query(e).get('resourceVersionMatch')).toBe('NotOlderThan');
    }
    expect(after.filter((e) => e.verb === 'list')).toEqual([]);
  });
});
