/**
 * kube-burner v2.7.3 (test/peers/build-kube-burner.sh) running the density bench's workload, a node-density-cni
 * like job: N pods (the pause image, pinned to the node), each annotated with two macvlan + host-local NADs,
 * created at kube-burner's qps/burst, waited for until Ready; its podLatency measurement is the figure
 * (podReadyLatency quantiles: kube-burner takes them from the pod conditions' lastTransitionTime, so their
 * resolution is one second). Kubernetes' namespace controller does not run here, so kube-burner's gc is off and
 * the bench deletes the pods itself.
 */
import { spawn } from 'node:child_process';
import { mkdir, readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { REPO_ROOT } from '../../../test/runtime/runtime.ts';

export const KUBE_BURNER = join(
  process.env.MULTUS_TS_CACHE_DIR || join(REPO_ROOT, '.cache'),
  'kube-burner',
  'kube-burner',
);
export const JOB = 'node-density-cni';

export interface Workload {
  namespace: string;
  networks: string;
  image: string;
  nodeName: string;
}

function podTemplate(w: Workload): object {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'density-{{.Iteration}}', annotations: { 'k8s.v1.cni.cncf.io/networks': w.networks } },
    spec: {
      nodeSelector: { 'kubernetes.io/hostname': w.nodeName },
      containers: [{ name: 'pause', image: w.image, imagePullPolicy: 'Never' }],
      terminationGracePeriodSeconds: 1,
    },
  };
}

function config(w: Workload, pods: number, metrics: string): object {
  return {
    global: { gc: false, measurements: [{ name: 'podLatency' }] },
    metricsEndpoints: [{ indexer: { type: 'local', metricsDirectory: metrics } }],
    jobs: [
      {
        name: JOB,
        jobIterations: pods,
        qps: 20,
        burst: 20,
        namespacedIterations: false,
        namespace: w.namespace,
        waitWhenFinished: true,
        podWait: false,
        preLoadImages: false,
        cleanup: false,
        // a pod not Ready by then counts as failed (healthy modes need seconds at N = 100; Go thick under its 50Mi
        // limit OOM-loops and would hold the run for the whole wait)
        maxWaitTimeout: '5m',
        // the podLatency watcher stops right after the wait; with every pod Ready within seconds it had not yet
        // seen their Ready updates (an empty measurement in 2 of 8 jobs): the pause lets it catch up
        jobPause: '5s',
        objects: [{ objectTemplate: 'pod.yml', replicas: 1 }],
      },
    ],
  };
}

export interface BurnerResult {
  exitCode: number | null;
  pod_ready_ms?: { p50: number; p99: number; max: number; avg: number };
  quantiles?: any[];
  log: string;
}

/** Runs the job; kube-burner's exit code and its Ready quantiles (ms). */
export async function runBurner(dir: string, kubeconfig: string, w: Workload, pods: number): Promise<BurnerResult> {
  await mkdir(dir, { recursive: true });
  const metrics = join(dir, 'metrics');
  // YAML: kube-burner's template decoder finds no object in a JSON document
  await writeFile(join(dir, 'pod.yml'), yaml.dump(podTemplate(w)));
  await writeFile(join(dir, 'config.yml'), yaml.dump(config(w, pods, metrics)));
  const log = join(dir, 'kube-burner.log');
  const args = ['init', '-c', 'config.yml', '--kubeconfig', kubeconfig, '--log-level', 'info', '--timeout', '30m'];
  const exitCode = await new Promise<number | null>((resolve) => {
    const c = spawn(KUBE_BURNER, args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    const chunks: Buffer[] = [];
    c.stdout.on('data', (b: Buffer) => chunks.push(b));
    c.stderr.on('data', (b: Buffer) => chunks.push(b));
    c.on('error', () => resolve(-1));
    c.on('close', async (code) => {
      await writeFile(log, Buffer.concat(chunks));
      resolve(code);
    });
  });
  const text = await readFile(log, 'utf8').catch(() => '');
  const files = await readdir(metrics).catch(() => [] as string[]);
  const qfile = files.find((f) => f.startsWith('podLatencyQuantilesMeasurement'));
  if (!qfile) return { exitCode, log: text.slice(-3000) };
  const quantiles = JSON.parse(await readFile(join(metrics, qfile), 'utf8')) as any[];
  const ready = quantiles.find((q) => q.quantileName === 'Ready');
  return {
    exitCode,
    quantiles,
    log: text.slice(-1500),
    ...(ready ? { pod_ready_ms: { p50: ready.P50, p99: ready.P99, max: ready.max, avg: ready.avg } } : {}),
  };
}
