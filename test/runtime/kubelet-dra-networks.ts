/**
 * Networks as DRA devices under a real kubelet (issue 53 item 6; docs/dra-networks.md), on containerd
 * (kubelet-dra-networks-containerd.test.ts) and CRI-O (kubelet-dra-networks-crio.test.ts): one kubelet node per
 * runtime (node.ts, kubelet-boot.ts; CRI-O as crio.ts runs it, its namespaces in the node), the resident DaemonSet
 * of deployments/ with `draNetworks: true` and deployments/multus-ts-dra-networks.yml (the driver's RBAC under
 * 1.36+'s per-driver authorization, the DeviceClasses; on CRI-O the daemon container unprivileged with the
 * capabilities it uses, kubelet-dra-objects.ts), so the daemon is the node's DRA driver
 * `multus.k8s.cni.cncf.io`: the kubelet finds it through its plugin watcher, the scheduler allocates claims on its
 * ResourceSlice, the kubelet has it prepare them, and the CNI ADD the runtime makes attaches the claim networks.
 * The cases share the boot (kubelet-dra-cases.ts). The administrator's opt-in for claims' inline configs
 * (`draInlineConfigFromClaims`) is on, so cni-dra-driver's example claims (test/data/cni-dra-driver) run as
 * written; its refusal is the unit tests' and the wire test's (test/k8s/dra-plugin-wire.test.ts).
 */
import { readFileSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { fileExists, needs } from '../helpers/skip.ts';
import { collection } from '../helpers/manifests.ts';
import { type Cluster, k8sRequirements, nadPath, podPath } from '../k8s/cluster.ts';
import { type ApiTunnel, NETWORKS_ANNOTATION, type PodRef, ensureNamespace } from '../e2e-k8s/world.ts';
import { crioRequirements } from './crio.ts';
import { type NodeRuntime, nodeRequirements } from './node.ts';
import { bootKubeletNode, until } from './kubelet-boot.ts';
import { type Link, type MachineState, machineState, untilDefaultServiceAccount } from './kubelet-suite.ts';
import { draCases } from './kubelet-dra-cases.ts';
import { draDaemonSetObjects } from './kubelet-dra-objects.ts';
import type { DraCtx } from './kubelet-dra-ctx.ts';
import { REPO_ROOT, type SandboxInfo, runOk, runtimeRequirements } from './runtime.ts';

const CLUSTER_NET = 'kl-dra-cluster';
const BRIDGE = 'mtsdrabr0';
const SHIM_BIN = join(REPO_ROOT, 'build/multus-shim');

export function draNetworksSuite(runtime: 'containerd' | 'crio'): void {
  const ready = needs(
    ...runtimeRequirements(),
    ...(runtime === 'crio' ? crioRequirements() : []),
    ...k8sRequirements(),
    ...nodeRequirements(false),
    fileExists(SHIM_BIN, 'the native shim build/multus-shim (npm run build with Go)'),
  );
  describe.skipIf(!ready)(`kubelet (${runtime}) with the daemon as the DRA driver of its networks`, () => {
    suiteBody(runtime);
  });
}

function suiteBody(runtime: 'containerd' | 'crio'): void {
  let cluster: Cluster;
  let node: NodeRuntime;
  let tunnel: ApiTunnel | undefined;
  let before: MachineState;
  const ns = `mts-dra-${Math.random().toString(16).slice(2, 8)}`;

  const logs = async () =>
    [await node.tail('kubelet', 30), await node.tail('kube-scheduler', 10), await node.tail(runtime, 10)].join('\n');
  /** Lines of the daemon container's logs (all its restarts) that contain `text`. */
  const daemonLog = async (text: string): Promise<string[]> => {
    const base = node.path('/var/log/pods');
    const lines: string[] = [];
    for (const pod of (await readdir(base)).filter((d) => d.startsWith('kube-system_multus-ts-'))) {
      const dir = join(base, pod, 'daemon');
      for (const f of await readdir(dir).catch(() => [] as string[])) {
        lines.push(...readFileSync(join(dir, f), 'utf8').split('\n'));
      }
    }
    return lines.filter((l) => l.includes(text));
  };

  beforeAll(async () => {
    before = await machineState();
    ({ cluster, node, tunnel } = await bootKubeletNode(CLUSTER_NET, BRIDGE, '10.252.0.0/24', {
      runtime,
      draDriver: false,
    }));
    // the master interfaces cni-dra-driver's examples name, as on their demo's kind nodes
    // (veth pairs: this kernel has no dummy links)
    for (const l of ['eth0', 'enp0s10']) {
      await runOk('ip', ['-n', node.hostNs, 'link', 'add', l, 'type', 'veth', 'peer', 'name', `${l}p`]);
      for (const end of [l, `${l}p`]) await runOk('ip', ['-n', node.hostNs, 'link', 'set', end, 'up']);
    }
    for (const o of draDaemonSetObjects(new URL(cluster.server).port, runtime))
      await cluster.admin.post(collection(o), o);
    await ensureNamespace(cluster, ns);
    await untilDefaultServiceAccount(cluster, ns, logs);
    // the daemon's pod Ready (its DRA sockets follow): the cases wait for nothing less, so a daemon that cannot
    // start fails them all at once, with the container's state
    const dsPods = async () =>
      (await cluster.admin.get('/api/v1/namespaces/kube-system/pods?labelSelector=app%3Dmultus-ts')).items as any[];
    await until(
      "the DaemonSet's pod Ready",
      180_000,
      async () =>
        (await dsPods()).some((p) =>
          (p.status?.conditions ?? []).some((c: any) => c.type === 'Ready' && c.status === 'True'),
        ) || undefined,
      async () => `${JSON.stringify((await dsPods()).map((p) => p.status?.containerStatuses))}\n${await logs()}`,
    );
  }, 400_000);

  afterAll(async () => {
    await node?.stop();
    await tunnel?.close();
    await cluster?.stop();
  });

  /** A macvlan NAD on the node's veth end, host-local on `subnet`, with `annotations`. */
  const nad = (name: string, subnet: string, annotations: Record<string, string> = {}) =>
    cluster.admin.post(nadPath(ns), {
      apiVersion: 'k8s.cni.cncf.io/v1',
      kind: 'NetworkAttachmentDefinition',
      metadata: { name, namespace: ns, annotations },
      spec: {
        config: JSON.stringify({
          cniVersion: '1.0.0',
          name,
          type: 'macvlan',
          master: node.linkPeer,
          mode: 'bridge',
          ipam: { type: 'host-local', ranges: [[{ subnet }]] },
        }),
      },
    });

  /** A pause pod with `claims` (entry name → template name) and, when given, a networks annotation. */
  const createPod = async (name: string, claims: Record<string, string>, networks?: string): Promise<PodRef> => {
    const entries = Object.entries(claims);
    const created = await cluster.admin.post(podPath(ns), {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: ns, annotations: networks ? { [NETWORKS_ANNOTATION]: networks } : {} },
      spec: {
        resourceClaims: entries.map(([n, t]) => ({ name: n, resourceClaimTemplateName: t })),
        containers: [{ name: 'pause', image: node.sandboxImage, imagePullPolicy: 'Never' }],
        terminationGracePeriodSeconds: 1,
      },
    });
    return { namespace: ns, name, uid: created.metadata.uid };
  };

  const untilRunning = (p: PodRef, timeoutMs = 120_000) =>
    until(
      `pod ${p.name} Running`,
      timeoutMs,
      async () => {
        const got = await cluster.admin.get(podPath(ns, p.name));
        return got.status?.phase === 'Running' ? got : undefined;
      },
      async () => `${JSON.stringify((await cluster.admin.get(podPath(ns, p.name))).status)}\n${await logs()}`,
    );

  const sandboxOf = async (p: PodRef): Promise<SandboxInfo> => {
    const out = (await node.crictl(['pods', '-q', '--label', `io.kubernetes.pod.uid=${p.uid}`])).stdout.trim();
    const ready = [];
    for (const id of out.split('\n').filter(Boolean)) {
      const st = JSON.parse((await node.crictl(['inspectp', id])).stdout || '{}').status?.state;
      if (st === 'SANDBOX_READY') ready.push(id);
    }
    expect(ready, `the pod's ready sandbox`).toHaveLength(1);
    return node.inspect(ready[0]!);
  };
  /** The sandbox's links: through its pause process, or (CRI-O's inspectp names no PID) its netns in the node. */
  const linksIn = async (sb: SandboxInfo): Promise<Map<string, Link>> => {
    const ip = ['ip', '-j', '-d', 'addr', 'show'];
    const args = sb.pid
      ? ['-t', String(sb.pid), '--net', ...ip]
      : [...node.nsenterArgs(), '--', 'nsenter', `--net=${sb.netns}`, ...ip];
    return new Map((JSON.parse(await runOk('nsenter', args)) as Link[]).map((l) => [l.ifname, l]));
  };
  /** `<network>/<ip>` leases in host-local's data dir (in the node). */
  const reservedIps = async (): Promise<string[]> => {
    const found: string[] = [];
    const dir = node.path('/var/lib/cni/networks');
    for (const net of await readdir(dir).catch(() => [] as string[])) {
      for (const f of await readdir(join(dir, net))) if (/^[0-9.]+$/.test(f)) found.push(`${net}/${f}`);
    }
    return found.sort();
  };

  const ctx: DraCtx = {
    runtime,
    ns,
    clusterNet: CLUSTER_NET,
    cluster: () => cluster,
    node: () => node,
    logs,
    daemonLog,
    nad,
    createPod,
    untilRunning,
    sandboxOf,
    linksIn,
    reservedIps,
    before: () => before,
    machineState,
  };
  draCases(ctx);
}
