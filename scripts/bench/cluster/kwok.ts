/**
 * The simulated part of the cluster bench (docs/archive/performance.md, "A cluster"): kwok v0.8.0's controller
 * (test/peers/build-kwok.sh) against the bench's kube-apiserver, managing the nodes annotated
 * `kwok.x-k8s.io/node: fake` with kwok's default stages (nodes Ready with a lease renewed every 10 s, pods
 * Running with an IP, deleted pods removed); the N-1 nodes, the namespaces and their NADs, the pods, and the
 * churn, made through a kept-alive admin client (`Api`).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { Agent } from 'node:https';
import { join } from 'node:path';
import { type Cluster, KubeClient } from '../../../test/k8s/cluster.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const NETWORKS = 'k8s.v1.cni.cncf.io/networks';
/** The NADs every pod requests (the real node's pods get them from its macvlan + host-local). */
export const POD_NADS = ['net-0', 'net-1'];

/** A kept-alive admin client: `call` resolves to the status and the parsed body, never rejects on a status. */
export class Api {
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 48 });
  private readonly client: KubeClient;
  constructor(cluster: Cluster) {
    const ca = readFileSync(cluster.caFile, 'utf8');
    this.client = new KubeClient(cluster.server, ca, { token: cluster.adminToken }, this.agent);
  }
  async call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
    const r = await this.client.request(method, path, body, undefined, 120_000);
    return { status: r.status, body: r.body };
  }
  /** `call`, retried on 429/5xx and connection errors (a loaded API server); throws on another failure. */
  async ok(method: string, path: string, body?: unknown, accept: number[] = []): Promise<any> {
    for (let i = 0; ; i++) {
      const r = await this.call(method, path, body).catch((e: Error) => ({ status: 0, body: e.message }));
      if ((r.status >= 200 && r.status < 300) || accept.includes(r.status)) return r.body;
      if (i >= 8 || (r.status >= 400 && r.status < 500 && r.status !== 429)) {
        throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
      }
      await sleep(250 * 2 ** Math.min(i, 4));
    }
  }
  close(): void {
    this.agent.destroy();
  }
}

/** Runs `fn` over `items`, `width` at a time. */
async function pool<T>(items: T[], width: number, fn: (x: T, i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < items.length; i = next++) await fn(items[i]!, i);
  };
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, worker));
}

/** kwok's controller (its log in `dir`/kwok.log); `stop()` kills it. */
export function startKwok(bin: string, stages: string, cluster: Cluster, dir: string): { stop(): Promise<void> } {
  const out = openSync(join(dir, 'kwok.log'), 'a', 0o600);
  const child: ChildProcess = spawn(
    bin,
    [
      `--kubeconfig=${cluster.adminKubeconfig}`,
      `--config=${stages}`,
      '--manage-all-nodes=false',
      '--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake',
      '--node-lease-duration-seconds=40',
      '--cidr=10.64.0.0/10',
    ],
    { stdio: ['ignore', out, out] },
  );
  closeSync(out);
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  return {
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await Promise.race([exited, sleep(10_000)]);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
}

/** The simulated nodes `kwok-0..n-1`; resolves once kwok has made them all Ready. */
export async function createNodes(api: Api, n: number): Promise<void> {
  const names = Array.from({ length: n }, (_, i) => `kwok-${i}`);
  await pool(names, 32, async (name) => {
    await api.ok('POST', '/api/v1/nodes', {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: {
        name,
        annotations: { 'kwok.x-k8s.io/node': 'fake' },
        labels: { type: 'kwok', 'kubernetes.io/hostname': name },
      },
      status: {
        allocatable: { cpu: '32', memory: '256Gi', pods: '110' },
        capacity: { cpu: '32', memory: '256Gi', pods: '110' },
      },
    });
  });
  for (let i = 0; ; i++) {
    const list = await api.ok('GET', '/api/v1/nodes?labelSelector=type%3Dkwok');
    const ready = (list.items as any[]).filter((o) =>
      (o.status?.conditions ?? []).some((c: any) => c.type === 'Ready' && c.status === 'True'),
    ).length;
    if (ready === n) return;
    if (i > 600) throw new Error(`kwok made ${ready} of ${n} nodes Ready in 5 min`);
    await sleep(500);
  }
}

/** A NAD's config: macvlan on `master` with host-local in a /16 of its own (the pods' two share theirs). */
function nadConfig(name: string, j: number, master: string): string {
  return JSON.stringify({
    cniVersion: '1.0.0',
    name,
    type: 'macvlan',
    master,
    mode: 'bridge',
    ipam: { type: 'host-local', ranges: [[{ subnet: `10.${(241 + j) % 256}.0.0/16` }]] },
  });
}

/** NADs `net-<from>..net-<to-1>` in each namespace (label `bench: extra` beyond the pods' own). */
export async function createNads(api: Api, namespaces: string[], from: number, to: number, master: string) {
  const jobs = namespaces.flatMap((ns) => Array.from({ length: to - from }, (_, i) => [ns, from + i] as const));
  await pool(jobs, 32, async ([ns, j]) => {
    const name = `net-${j}`;
    await api.ok('POST', `/apis/k8s.cni.cncf.io/v1/namespaces/${ns}/network-attachment-definitions`, {
      apiVersion: 'k8s.cni.cncf.io/v1',
      kind: 'NetworkAttachmentDefinition',
      metadata: { name, namespace: ns, labels: { bench: j < POD_NADS.length ? 'pods' : 'extra' } },
      spec: { config: nadConfig(name, j, master) },
    });
  });
}

/** Removes the NADs beyond the pods' own (one deletecollection per namespace). */
export async function deleteExtraNads(api: Api, namespaces: string[]): Promise<void> {
  await pool(namespaces, 8, async (ns) => {
    await api.ok(
      'DELETE',
      `/apis/k8s.cni.cncf.io/v1/namespaces/${ns}/network-attachment-definitions?labelSelector=bench%3Dextra`,
    );
  });
}

/**
 * The namespaces `cl-0..`, each with its default service account (pods need it; the controller-manager that would
 * make it starts with the real node, later).
 */
export async function createNamespaces(api: Api, count: number): Promise<string[]> {
  const names = Array.from({ length: count }, (_, i) => `cl-${i}`);
  await pool(names, 16, async (ns) => {
    await api.ok('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } }, [409]);
    const sa = { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'default', namespace: ns } };
    await api.ok('POST', `/api/v1/namespaces/${ns}/serviceaccounts`, sa, [409]);
  });
  return names;
}

/** A pod of the workload: on `node`, requesting the two NADs of its namespace. */
function podObject(name: string, ns: string, node: string, image: string): unknown {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: ns,
      labels: { app: 'cluster-bench' },
      annotations: { [NETWORKS]: POD_NADS.join(',') },
    },
    spec: {
      nodeName: node,
      automountServiceAccountToken: false,
      terminationGracePeriodSeconds: 1,
      containers: [{ name: 'c', image, imagePullPolicy: 'Never' }],
    },
  };
}

/** A pod placed on a node: its namespace, name and node. */
export interface PodSlot {
  ns: string;
  name: string;
  node: string;
}

/** The M pods of each node in `nodes`, spread over the namespaces. */
export function slots(nodes: string[], perNode: number, namespaces: string[]): PodSlot[] {
  return nodes.flatMap((node, i) =>
    Array.from({ length: perNode }, (_, j) => ({
      ns: namespaces[(i * perNode + j) % namespaces.length]!,
      name: `${node}-p${j}`,
      node,
    })),
  );
}

export async function createPods(api: Api, pods: PodSlot[], image: string, width = 48): Promise<void> {
  await pool(pods, width, async (p) => {
    await api.ok('POST', `/api/v1/namespaces/${p.ns}/pods`, podObject(p.name, p.ns, p.node, image));
  });
}

/** Deletes the pods; resolves once the API has none of them. */
export async function deletePods(api: Api, pods: PodSlot[], width = 48): Promise<void> {
  await pool(pods, width, async (p) => {
    await api.ok('DELETE', `/api/v1/namespaces/${p.ns}/pods/${p.name}`, undefined, [404]);
  });
  await pool(pods, width, async (p) => {
    for (let i = 0; (await api.call('GET', `/api/v1/namespaces/${p.ns}/pods/${p.name}`)).status !== 404; i++) {
      if (i > 1200) throw new Error(`pod ${p.ns}/${p.name} not gone after 5 min`);
      await sleep(250);
    }
  });
}

/** Waits until no pod of the workload is anything but Running (one cheap list: the others); `timeoutMs`. */
export async function untilAllRunning(api: Api, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const q = 'labelSelector=app%3Dcluster-bench&fieldSelector=status.phase%21%3DRunning&limit=5';
    const list = await api.ok('GET', `/api/v1/pods?${q}`);
    const left = (list.items as any[]).length;
    if (left === 0) return;
    if (Date.now() > deadline)
      throw new Error(`pods not Running after ${timeoutMs} ms (${list.items[0].metadata.name})`);
    await sleep(1000);
  }
}

/** The workload's pods on `node` as the API has them. */
async function podsOn(api: Api, node: string): Promise<any[]> {
  const q = `labelSelector=app%3Dcluster-bench&fieldSelector=spec.nodeName%3D${node}`;
  return (await api.ok('GET', `/api/v1/pods?${q}`)).items as any[];
}

/** Waits until `count` pods on `node` pass `check` (and none is being deleted); throws after `timeoutMs`. */
export async function untilNodePods(
  api: Api,
  node: string,
  count: number,
  timeoutMs: number,
  check: (pod: any) => boolean,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const items = await podsOn(api, node);
    const ok = items.filter((o) => !o.metadata.deletionTimestamp && check(o)).length;
    if (ok === count && items.length === count) return;
    if (Date.now() > deadline) throw new Error(`${ok} of ${count} pods on ${node} ready after ${timeoutMs} ms`);
    await sleep(500);
  }
}
