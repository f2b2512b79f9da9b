/**
 * The DRA networks bench (`npm run bench -- --scenario dra [--pods N]`, docs/performance.md "Networks as DRA
 * devices"), run by scripts/bench/dra.mjs as a child of the bench (Node 24 with --experimental-transform-types):
 * - `daemon_rss`: build/multus daemon against a kube-apiserver (test/k8s/cluster.ts), draNetworks off and on
 *   alternately (off on off on ...), its VmRSS once it serves (and, on, once its DRA sockets exist) and a 5 s
 *   settle, and on after 100 NodePrepareResources + NodeUnprepareResources of a claim (the kubelet's .proto client);
 * - `pod_ready`: on a kubelet + containerd node (test/runtime/kubelet-boot.ts) with the resident DaemonSet and
 *   draNetworks on (test/runtime/kubelet-dra-networks.ts' objects), N pods with one macvlan + host-local network
 *   from a claim against N with it from the annotation, interleaved one by one: ms from the pod's POST until the
 *   API shows it Ready (100 ms polls), each pod deleted before the next.
 *
 *   node --experimental-transform-types scripts/bench/dra/run.ts '{"pods":N,"rssRounds":R,"exe":F,"dir":D}'
 *
 * Prints one JSON line (the `dra` object) on stdout; progress on stderr.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { call, draClient } from '../../../test/helpers/dra-client.ts';
import { collection } from '../../../test/helpers/manifests.ts';
import { ensureNamespace } from '../../../test/e2e-k8s/world.ts';
import { type Cluster, nadPath, podPath, startCluster } from '../../../test/k8s/cluster.ts';
import { bootKubeletNode, until } from '../../../test/runtime/kubelet-boot.ts';
import { draDaemonSetObjects } from '../../../test/runtime/kubelet-dra-objects.ts';
import { untilDefaultServiceAccount } from '../../../test/runtime/kubelet-suite.ts';

const DRA = '/apis/resource.k8s.io/v1';
/** The daemon's default DRA driver name (src/dra/claim-networks.ts, which this runner does not import). */
const DEFAULT_DRA_DRIVER = 'multus.k8s.cni.cncf.io';
const say = (m: string) => process.stderr.write(`dra: ${m}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const mib = (pid: number) =>
  Math.round((Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) / 1024) * 100) / 100;
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const summary = (xs: number[], unit: string) => ({
  n: xs.length,
  [`median_${unit}`]: Math.round(median(xs) * 100) / 100,
  [`min_${unit}`]: Math.min(...xs),
  [`max_${unit}`]: Math.max(...xs),
});

interface Args {
  pods: number;
  rssRounds: number;
  exe: string;
  dir: string;
}

/** One daemon (in a mount namespace of its own, /var/lib/cni a tmpfs), draNetworks `on`; its RSS figures. */
async function daemonRss(a: Args, cluster: Cluster, on: boolean, round: number) {
  const dir = join(a.dir, `rss-${on ? 'on' : 'off'}-${round}`);
  mkdirSync(join(dir, 'net.d'), { recursive: true, mode: 0o700 });
  const kubeletDir = join(dir, 'kubelet');
  const cfg = join(dir, 'daemon-config.json');
  const keys = { socketDir: join(dir, 'run'), cniConfigDir: join(dir, 'net.d'), kubeconfig: cluster.adminKubeconfig };
  writeFileSync(cfg, JSON.stringify({ ...keys, logLevel: 'error', draNetworks: on, kubeletDir }));
  const child: ChildProcess = spawn(
    'unshare',
    [
      '--mount',
      '--propagation',
      'private',
      'sh',
      '-c',
      'mount -t tmpfs tmpfs /var/lib/cni && exec "$0" "$@"',
      a.exe,
    ].concat(['daemon', '--config', cfg]),
    { env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', MULTUS_NODE_NAME: 'bench-dra' }, stdio: 'ignore' },
  );
  const sock = join(kubeletDir, 'plugins', DEFAULT_DRA_DRIVER, 'dra.sock');
  const ready = () => existsSync(join(dir, 'run', 'multus.sock')) && (!on || existsSync(sock));
  for (let i = 0; i < 600 && !ready(); i++) await sleep(50);
  if (!ready()) throw new Error(`the daemon (draNetworks ${on}) did not start`);
  await sleep(5000);
  const idle = mib(child.pid!);
  let afterCalls: number | undefined;
  if (on) {
    const c = draClient(sock);
    const claims = [await benchClaim(cluster)];
    for (let i = 0; i < 100; i++) {
      await call(c, 'NodePrepareResources', { claims });
      await call(c, 'NodeUnprepareResources', { claims });
    }
    c.close();
    afterCalls = mib(child.pid!);
  }
  child.kill('SIGTERM');
  await new Promise((r) => child.once('exit', r));
  return { idle, afterCalls };
}

let claimRef: { namespace: string; name: string; uid: string } | undefined;
/** A claim allocated on our driver's `any` device, naming the NAD `bench-net` (made once). */
async function benchClaim(cluster: Cluster) {
  if (claimRef) return claimRef;
  const ns = 'bench-dra';
  await ensureNamespace(cluster, ns);
  const conf = { cniVersion: '1.0.0', name: 'bench-net', type: 'macvlan', master: 'eth0' };
  await cluster.admin.post(nadPath(ns), {
    apiVersion: 'k8s.cni.cncf.io/v1',
    kind: 'NetworkAttachmentDefinition',
    metadata: { name: 'bench-net', namespace: ns },
    spec: { config: JSON.stringify(conf) },
  });
  const c = await cluster.admin.post(`${DRA}/namespaces/${ns}/resourceclaims`, {
    apiVersion: 'resource.k8s.io/v1',
    kind: 'ResourceClaim',
    metadata: { name: 'bench', namespace: ns },
    spec: { devices: { requests: [{ name: 'net', exactly: { deviceClassName: 'multus-network' } }] } },
  });
  const parameters = { apiVersion: 'dra.multus.k8s.cni.cncf.io/v1alpha1', kind: 'NetworkSelection', name: 'bench-net' };
  const result = { request: 'net', driver: DEFAULT_DRA_DRIVER, pool: 'bench-dra', device: 'any' };
  c.status = {
    allocation: {
      devices: {
        results: [{ ...result, shareID: '0a0b0c0d-0000-4000-8000-000000000001' }],
        config: [{ source: 'FromClaim', requests: ['net'], opaque: { driver: DEFAULT_DRA_DRIVER, parameters } }],
      },
    },
  };
  await cluster.admin.put(`${DRA}/namespaces/${ns}/resourceclaims/bench/status`, c);
  claimRef = { namespace: ns, name: 'bench', uid: c.metadata.uid };
  return claimRef;
}

async function rssFigures(a: Args) {
  const cluster = await startCluster();
  const off: number[] = [];
  const on: number[] = [];
  const afterCalls: number[] = [];
  try {
    for (let r = 0; r < a.rssRounds; r++) {
      off.push((await daemonRss(a, cluster, false, r)).idle);
      const got = await daemonRss(a, cluster, true, r);
      on.push(got.idle);
      afterCalls.push(got.afterCalls!);
      say(
        `rss round ${r + 1}: off ${off.at(-1)} MiB, on ${got.idle} MiB, on after 100 prepare/unprepare ${got.afterCalls} MiB`,
      );
    }
  } finally {
    await cluster.stop();
  }
  return {
    dra_off: summary(off, 'mib'),
    dra_on: summary(on, 'mib'),
    dra_on_after_100_prepares: summary(afterCalls, 'mib'),
    plugin_cost_median_mib: Math.round((median(on) - median(off)) * 100) / 100,
  };
}

async function podReady(a: Args) {
  const { cluster, node, tunnel } = await bootKubeletNode('bench-dra-cluster', 'mtsbdrabr0', '10.253.0.0/24', {
    draDriver: false,
  });
  const ns = 'bench-dra';
  try {
    for (const o of draDaemonSetObjects(new URL(cluster.server).port)) await cluster.admin.post(collection(o), o);
    await ensureNamespace(cluster, ns);
    await untilDefaultServiceAccount(cluster, ns, async () => node.tail('kubelet'));
    for (const [name, subnet] of [
      ['claim-net', '10.253.1.0/24'],
      ['annot-net', '10.253.2.0/24'],
    ] as const) {
      const ipam = { type: 'host-local', ranges: [[{ subnet }]] };
      const conf = { cniVersion: '1.0.0', name, type: 'macvlan', master: node.linkPeer, mode: 'bridge', ipam };
      await cluster.admin.post(nadPath(ns), {
        apiVersion: 'k8s.cni.cncf.io/v1',
        kind: 'NetworkAttachmentDefinition',
        metadata: { name, namespace: ns },
        spec: { config: JSON.stringify(conf) },
      });
    }
    const parameters = {
      apiVersion: 'dra.multus.k8s.cni.cncf.io/v1alpha1',
      kind: 'NetworkSelection',
      name: 'claim-net',
    };
    await cluster.admin.post(`${DRA}/namespaces/${ns}/resourceclaimtemplates`, {
      apiVersion: 'resource.k8s.io/v1',
      kind: 'ResourceClaimTemplate',
      metadata: { name: 'claim-net', namespace: ns },
      spec: {
        spec: {
          devices: {
            requests: [{ name: 'net', exactly: { deviceClassName: 'multus-network' } }],
            config: [{ requests: ['net'], opaque: { driver: DEFAULT_DRA_DRIVER, parameters } }],
          },
        },
      },
    });
    const times: Record<'claim' | 'annotation', number[]> = { claim: [], annotation: [] };
    for (let i = 0; i < a.pods * 2; i++) {
      const kind = i % 2 === 0 ? 'claim' : 'annotation';
      const name = `${kind}-${i}`;
      const t0 = Date.now();
      await cluster.admin.post(podPath(ns), {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {
          name,
          namespace: ns,
          annotations: kind === 'annotation' ? { 'k8s.v1.cni.cncf.io/networks': 'annot-net' } : {},
        },
        spec: {
          ...(kind === 'claim' ? { resourceClaims: [{ name: 'net', resourceClaimTemplateName: 'claim-net' }] } : {}),
          containers: [{ name: 'pause', image: node.sandboxImage, imagePullPolicy: 'Never' }],
          terminationGracePeriodSeconds: 1,
        },
      });
      await until(
        `${name} Ready`,
        180_000,
        async () => {
          const p = await cluster.admin.get(podPath(ns, name));
          return (p.status?.conditions ?? []).some((c: any) => c.type === 'Ready' && c.status === 'True') || undefined;
        },
        async () => node.tail('kubelet'),
      );
      times[kind].push(Date.now() - t0);
      say(`${name}: Ready after ${times[kind].at(-1)} ms`);
      await cluster.admin.del(podPath(ns, name));
      await until(
        `${name} gone`,
        120_000,
        async () => (await cluster.admin.request('GET', podPath(ns, name))).status === 404 || undefined,
        async () => '',
      );
    }
    return { claim: summary(times.claim, 'ms'), annotation: summary(times.annotation, 'ms') };
  } finally {
    await node.stop();
    await tunnel.close();
    await cluster.stop();
  }
}

async function main() {
  const a = JSON.parse(process.argv[2] ?? '{}') as Args;
  mkdirSync(a.dir, { recursive: true, mode: 0o700 });
  const daemon_rss = await rssFigures(a);
  const pod_ready = a.pods > 0 ? await podReady(a) : null;
  process.stdout.write(`${JSON.stringify({ daemon_rss, pod_ready })}\n`);
}

main().catch((e) => {
  process.stderr.write(`dra: FAILED: ${e?.stack ?? e}\n`);
  process.exit(1);
});
