/**
 * Two kubelet nodes in one cluster (issue 30; docs/archive/kubernetes-tests.md, "Two nodes"), in both modes
 * (kubelet-cluster-thin.test.ts, kubelet-cluster-resident.test.ts): `node-a` and `node-b`, each a NodeRuntime
 * (node.ts: its own containerd, kubelet, CNI bin and conf dirs, caches, /run and network namespace, its own
 * address and veth names), joined to one kube-apiserver, one scheduler and one DaemonSet controller, each reaching
 * the API server through a relay of its own. The mode's DaemonSet runs on both. A veth pair joins the nodes'
 * network namespaces (`mtsx0` on both sides: the secondary networks' macvlan master, as a NIC of the same name on
 * every node of a real cluster), and whereabouts hands the secondary network's addresses from one pool.
 *
 * The cases: the DaemonSet's pod on each node; pods on both nodes get their networks and network-status from
 * their own node's plugin (its caches, its daemon), whereabouts' addresses distinct across nodes; a pod on each
 * node pings the other over the secondary network, and not once the link between the nodes is down; resident:
 * dynamic networks and hot-plug act on their own node's pods only; node-b rebooted (the density bench's power-off,
 * node-power.ts) and drained leaves node-a's pods untouched; nothing left on either node; the machine as it was.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileExists, needs } from '../helpers/skip.ts';
import { collection } from '../helpers/manifests.ts';
import { type Cluster, k8sRequirements, podPath, startCluster } from '../k8s/cluster.ts';
import { ApiTunnel, NETWORKS_ANNOTATION, type PodRef, ensureNamespace } from '../e2e-k8s/world.ts';
import { run as runProcess } from '../e2e/helpers.ts';
import { type NodeOptions, NodeRuntime, nodeRequirements } from './node.ts';
import { installWhereabouts } from './kubelet-peers.ts';
import {
  type MachineState,
  type Mode,
  daemonSetObjects,
  machineState,
  untilDefaultServiceAccount,
} from './kubelet-suite.ts';
import { until } from './kubelet-boot.ts';
import {
  BRIDGE,
  BUSYBOX,
  CLUSTER_NET,
  type ClusterCtx,
  INTER,
  POD_CIDRS,
  type Placed,
  WB_RANGE,
  nodeCases,
  whereaboutsNad,
} from './kubelet-cluster-cases.ts';
import { CTR_BIN, LAUNCHER_BIN, REPO_ROOT, imageEnv, runOk, runtimeRequirements } from './runtime.ts';

const CACHE = process.env.MULTUS_TS_CACHE_DIR || join(REPO_ROOT, '.cache');
const SHIM_BIN = join(REPO_ROOT, 'build/multus-shim');

/** The two nodes: names, addresses and veth names none of the default node's (node.ts). */
const NODES: NodeOptions[] = [
  { name: 'node-a', ip: '10.249.254.1', link: 'mtsna0', linkPeer: 'mtsna1' },
  { name: 'node-b', ip: '10.249.254.2', link: 'mtsnb0', linkPeer: 'mtsnb1' },
];

const sha256 = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

export function clusterSuite(mode: Mode): void {
  const ready = needs(
    ...runtimeRequirements(),
    ...k8sRequirements(),
    ...nodeRequirements(false), // no DRA driver on these nodes
    ...(mode === 'resident' ? [fileExists(SHIM_BIN, 'the native shim build/multus-shim (npm run build with Go)')] : []),
    fileExists(join(CACHE, 'whereabouts/whereabouts'), 'whereabouts (bash test/peers/build-whereabouts.sh)'),
    fileExists(BUSYBOX, "busybox's ping (apt-get install busybox-static, or bash scripts/setup.sh)"),
  );
  describe.skipIf(!ready)(
    `two kubelet nodes, node-a and node-b, run the ${mode} DaemonSet (containerd, kube-apiserver)`,
    () => {
      clusterBody(mode);
    },
  );
}

/** The image made from the current build (scripts/image.sh) in `dir`: its tarball. */
async function buildImage(dir: string): Promise<string> {
  const env = imageEnv(dir);
  const img = await runProcess('bash', [join(REPO_ROOT, 'scripts/image.sh')], { env, timeoutMs: 120_000 });
  expect(img.code, `npm run image: ${img.stderr}`).toBe(0);
  const tar = (await readdir(dir)).find((f) => f.endsWith('.tar'));
  expect(tar, `no image tarball in ${dir}`).toBeDefined();
  return join(dir, tar!);
}

/** A veth pair between the nodes' network namespaces, named `name` at both ends, up. */
async function linkNodes(a: NodeRuntime, b: NodeRuntime, name: string): Promise<void> {
  await runOk('ip', ['-n', a.hostNs, 'link', 'add', name, 'type', 'veth', 'peer', 'name', name, 'netns', b.hostNs]);
  for (const n of [a, b]) await runOk('ip', ['-n', n.hostNs, 'link', 'set', name, 'up']);
}

function clusterBody(mode: Mode): void {
  let cluster: Cluster;
  const nodes: NodeRuntime[] = [];
  const tunnels: ApiTunnel[] = [];
  const ns = `mts-kc-${Math.random().toString(16).slice(2, 8)}`;
  let before: MachineState;

  const logs = async () =>
    (
      await Promise.all([
        ...nodes.map((n) => n.tail('kubelet', 20)),
        nodes[0]!.tail('kube-scheduler', 10),
        nodes[0]!.tail('kube-controller-manager', 10),
      ])
    ).join('\n');

  beforeAll(async () => {
    before = await machineState();
    cluster = await startCluster({ serviceAccountAdmission: true, apiserverArgs: ['--allow-privileged=true'] });
    for (const [i, o] of NODES.entries()) {
      const node = new NodeRuntime(o);
      nodes.push(node);
      await node.prepare();
      await node.forDaemonSet(CLUSTER_NET, BRIDGE, POD_CIDRS[i]!);
    }
    await linkNodes(nodes[0]!, nodes[1]!, INTER);
    const tar = await buildImage(join(nodes[0]!.dir, 'image'));
    for (const node of nodes) {
      await node.start();
      await runOk(CTR_BIN, ['-a', node.socket, '-n', 'k8s.io', 'images', 'import', '--all-platforms', tar]);
      const tunnel = new ApiTunnel();
      tunnels.push(tunnel);
      await tunnel.open(cluster, node.hostNs, node.dir);
    }
    // one control plane for the cluster (its logs in node-a's dir)
    await nodes[0]!.startControlPlane(cluster);
    for (const node of nodes) {
      await node.startKubelet(cluster);
      await installWhereabouts(cluster, node, ns);
    }
    for (const o of daemonSetObjects(mode, new URL(cluster.server).port)) await cluster.admin.post(collection(o), o);
    await ensureNamespace(cluster, ns);
    await whereaboutsNad(cluster, ns, 'wb', WB_RANGE);
    await untilDefaultServiceAccount(cluster, ns, logs);
  }, 300_000);

  afterAll(async () => {
    // node-b first: node-a holds the control plane
    for (const node of [...nodes].reverse()) await node.stop();
    for (const t of tunnels) await t.close();
    await cluster?.stop();
  });

  /** A pod (pause image) requesting `networks`, placed on `node` by a nodeSelector (the scheduler binds it). */
  const createPodOn = async (name: string, node: NodeRuntime, networks = 'wb'): Promise<Placed> => {
    const created = await cluster.admin.post(podPath(ns), {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: ns, annotations: { [NETWORKS_ANNOTATION]: networks } },
      spec: {
        nodeSelector: { 'kubernetes.io/hostname': node.nodeName },
        containers: [{ name: 'pause', image: node.sandboxImage, imagePullPolicy: 'Never' }],
        terminationGracePeriodSeconds: 1,
      },
    });
    const p: PodRef = { namespace: ns, name, uid: created.metadata.uid };
    return { p, node };
  };

  const dsPods = async () =>
    (await cluster.admin.get(`/api/v1/namespaces/kube-system/pods?labelSelector=app%3Dmultus-ts`)).items as any[];

  it("the DaemonSet's pod runs on each node and installs multus-ts there; the nodes' names and addresses are their own", async () => {
    const ds = '/apis/apps/v1/namespaces/kube-system/daemonsets/multus-ts';
    await until(
      'the DaemonSet ready on both nodes',
      240_000,
      async () => {
        const st = (await cluster.admin.get(ds)).status;
        return st.desiredNumberScheduled === 2 && st.numberReady === 2 ? true : undefined;
      },
      async () => `${JSON.stringify((await dsPods()).map((p) => p.status))}\n${await logs()}`,
    );
    const placed = (await dsPods()).map((p) => p.spec.nodeName as string).sort();
    expect(placed).toEqual(['node-a', 'node-b']);
    for (const node of nodes) {
      const api = await cluster.admin.get(`/api/v1/nodes/${node.nodeName}`);
      const internal = api.status.addresses.find((a: { type: string }) => a.type === 'InternalIP')?.address;
      expect(internal, `${node.nodeName}'s address`).toBe(node.nodeIp);
      expect(sha256(node.path('/opt/cni/bin/multus')), `${node.nodeName}: /opt/cni/bin/multus`).toBe(
        sha256(LAUNCHER_BIN),
      );
      const conf = mode === 'thin' ? '00-multus.conflist' : '00-multus.conf';
      expect((await readdir(node.path('/etc/cni/net.d'))).filter((f) => f.startsWith('00-multus'))).toEqual([conf]);
      // the kubeconfig's token is bound to this node, not the other
      const kubeconfig = readFileSync(node.path('/etc/cni/net.d/multus.d/multus.kubeconfig'), 'utf8');
      const token = /^\s*token: "([^"]+)"$/m.exec(kubeconfig)?.[1] ?? '';
      const claims = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8'));
      expect(claims['kubernetes.io']?.node?.name, `${node.nodeName}'s kubeconfig token`).toBe(node.nodeName);
    }
  }, 300_000);

  const ctx: ClusterCtx = {
    mode,
    ns,
    cluster: () => cluster,
    nodes: () => nodes,
    createPodOn,
    logs,
  };
  nodeCases(ctx);

  it("the machine is as it was: kubelet's sysctls, paths and iptables chains stayed in the nodes", async () => {
    expect(await machineState()).toEqual(before);
    for (const node of nodes) {
      expect(readFileSync(join(node.dir, 'kubelet.log'), 'utf8')).not.toContain('Updating kernel flag');
    }
  });
}
