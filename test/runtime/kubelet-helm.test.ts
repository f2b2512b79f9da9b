/**
 * The Helm chart (deployments/helm/multus) installed and uninstalled with helm v3.22.0 on the kubelet node
 * (kubelet-boot.ts: containerd, a real kubelet, controller-manager and scheduler, the image `npm run image` makes):
 * - `helm install` (thin, then thick: the chart's defaults but for the API server's address, which no kube-proxy
 *   serves here): the DaemonSet kube-multus-ds is scheduled on the node and its pod installs multus-ts; a pod
 *   requesting a NAD gets eth0 and net1 and its network-status; deleting it leaves no IP reserved;
 * - `helm uninstall`: as the DaemonSet's pod stops, `multus install --cleanup-when-deleted` (thin: kube-multus;
 *   thick: the kubeconfig sidecar, while the daemon stops rewriting its config) finds its DaemonSet deleted and
 *   removes 00-multus.conf(list) and the kubeconfig from the node; the executables stay; a pod created
 *   afterwards, with the same NAD annotation, runs on the primary network alone instead of failing (Multus #592).
 * Run it holding /tmp/mts-node.lock (the node's link names and addresses are fixed).
 */
import { existsSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileExists, needs } from '../helpers/skip.ts';
import { k8sRequirements, podPath } from '../k8s/cluster.ts';
import { NETWORKS_ANNOTATION, type PodRef, createNad, ensureNamespace, networkStatus } from '../e2e-k8s/world.ts';
import { run as runProcess } from '../e2e/helpers.ts';
import { CHART, HELM, helmEnv } from '../helpers/helm.ts';
import { type KubeletNode, bootKubeletNode, until } from './kubelet-boot.ts';
import { NODE_LINK_PEER, nodeRequirements } from './node.ts';
import { runOk, runtimeRequirements } from './runtime.ts';

const ready = needs(
  ...runtimeRequirements(),
  ...k8sRequirements(),
  ...nodeRequirements(),
  fileExists(HELM, 'helm v3.22.0 (bash test/peers/build-go-tool.sh helm)'),
);

const CLUSTER_NET = 'kl-cluster';
const KUBECONFIG = '/etc/cni/net.d/multus.d/multus.kubeconfig';

interface Link {
  ifname: string;
  linkinfo?: { info_kind?: string };
}

describe.skipIf(!ready).each([
  { mode: 'thin', conf: '00-multus.conflist', set: [] as string[] },
  { mode: 'thick', conf: '00-multus.conf', set: ['--set', 'thickPlugin.enabled=true'] },
])('helm installs and uninstalls the chart on a kubelet node ($mode)', ({ mode, conf, set }) => {
  let k: KubeletNode;
  const ns = `mts-helm-${Math.random().toString(16).slice(2, 8)}`;

  const helm = async (args: string[]) => {
    const env = helmEnv();
    try {
      return await runProcess(HELM, [...args, '--kubeconfig', k.cluster.adminKubeconfig], { env, timeoutMs: 180_000 });
    } finally {
      rmSync(env.HOME!, { recursive: true, force: true });
    }
  };
  const logs = async () => `${await k.node.tail('kubelet')}\n${await k.node.tail('kube-controller-manager', 15)}`;
  const dsPods = async () =>
    (await k.cluster.admin.get('/api/v1/namespaces/kube-system/pods?labelSelector=name%3Dmultus')).items as any[];
  const onNode = (p: string) => k.node.path(p);
  const confFilesOnNode = () => readdirSync(onNode('/etc/cni/net.d')).filter((f) => f.startsWith('00-multus'));

  const createPod = async (name: string): Promise<PodRef> => {
    const created = await k.cluster.admin.post(podPath(ns), {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: ns, annotations: { [NETWORKS_ANNOTATION]: 'mv' } },
      spec: {
        containers: [{ name: 'pause', image: k.node.sandboxImage, imagePullPolicy: 'Never' }],
        terminationGracePeriodSeconds: 1,
      },
    });
    return { namespace: ns, name, uid: created.metadata.uid };
  };
  /** The pod Running; the names of its sandbox's links. */
  const runningLinks = async (p: PodRef): Promise<string[]> => {
    await until(
      `pod ${p.name} Running`,
      180_000,
      async () => ((await k.cluster.admin.get(podPath(ns, p.name))).status?.phase === 'Running' ? true : undefined),
      async () => `${JSON.stringify((await k.cluster.admin.get(podPath(ns, p.name))).status)}\n${await logs()}`,
    );
    const id = (await k.node.crictl(['pods', '-q', '--label', `io.kubernetes.pod.uid=${p.uid}`])).stdout.trim();
    const sb = await k.node.inspect(id);
    const links = JSON.parse(
      await runOk('nsenter', ['-t', String(sb.pid), '--net', 'ip', '-j', '-d', 'link']),
    ) as Link[];
    return links.map((l) => `${l.ifname}${l.linkinfo?.info_kind ? ` ${l.linkinfo.info_kind}` : ''}`).sort();
  };
  const deletePod = async (p: PodRef): Promise<void> => {
    await k.cluster.admin.del(podPath(ns, p.name));
    await until(
      `pod ${p.name} gone`,
      60_000,
      async () => ((await k.cluster.admin.request('GET', podPath(ns, p.name))).status === 404 ? true : undefined),
      logs,
    );
  };
  const reservedIps = (): string[] => {
    const dir = onNode('/var/lib/cni/networks');
    if (!existsSync(dir)) return [];
    return readdirSync(dir).flatMap((net) =>
      readdirSync(join(dir, net))
        .filter((f) => /^[0-9.]+$/.test(f))
        .map((f) => `${net}/${f}`),
    );
  };

  beforeAll(async () => {
    k = await bootKubeletNode(CLUSTER_NET, 'mtsklbr0', '10.251.0.0/24');
    // the test cluster made a `multus` account and role for the other tiers: the chart makes its own (same names)
    for (const path of [
      '/api/v1/namespaces/kube-system/serviceaccounts/multus',
      '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/multus',
      '/apis/rbac.authorization.k8s.io/v1/clusterroles/multus',
    ]) {
      await k.cluster.admin.del(path);
    }
    await ensureNamespace(k.cluster, ns);
    await createNad(k.cluster, ns, 'mv', {
      cniVersion: '1.0.0',
      name: 'mv',
      type: 'macvlan',
      master: NODE_LINK_PEER,
      mode: 'bridge',
      ipam: { type: 'host-local', ranges: [[{ subnet: '10.251.1.0/24' }]] },
    });
    await until(
      'the default service account',
      30_000,
      async () =>
        (await k.cluster.admin.request('GET', `/api/v1/namespaces/${ns}/serviceaccounts/default`)).status === 200 ||
        undefined,
      logs,
    );
  }, 300_000);

  afterAll(async () => {
    await k?.node.stop();
    await k?.tunnel.close();
    await k?.cluster.stop();
  });

  it('helm install: kube-multus-ds runs on the node and installs multus-ts', async () => {
    expect(k.imageRef, "the image npm run image makes is the chart's default").toBe(
      'ghcr.io/multus-ts/multus-ts:0.1.0',
    );
    const port = new URL(k.cluster.server).port;
    const r = await helm([
      'install',
      'multus',
      CHART,
      '--namespace',
      'kube-system',
      '--set',
      'extraEnv[0].name=KUBERNETES_SERVICE_HOST,extraEnv[0].value=127.0.0.1,extraEnv[1].name=KUBERNETES_SERVICE_PORT',
      '--set-string',
      `extraEnv[1].value=${port}`,
      ...set,
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('STATUS: deployed');
    const pod = await until(
      'the kube-multus-ds pod Ready',
      180_000,
      async () => {
        const p = (await dsPods())[0];
        const cond = (p?.status?.conditions ?? []).find((c: { type: string }) => c.type === 'Ready');
        return cond?.status === 'True' ? p : undefined;
      },
      async () => `${JSON.stringify((await dsPods())[0]?.status ?? 'no pod')}\n${await logs()}`,
    );
    expect(pod.metadata.ownerReferences?.[0]).toMatchObject({ kind: 'DaemonSet', name: 'kube-multus-ds' });
    expect(pod.spec.nodeName).toBe(k.node.nodeName);
    expect(confFilesOnNode()).toEqual([conf]);
    if (mode === 'thick') expect(existsSync(onNode('/opt/cni/bin/multus-shim')), 'the shim').toBe(true);
    expect(existsSync(onNode(KUBECONFIG))).toBe(true);
    // tokenBinding node through the chart's policy (multus-node-token): the kubeconfig's token is bound to the node
    const token = /token: "([^"]+)"/.exec(readFileSync(onNode(KUBECONFIG), 'utf8'))?.[1] ?? '';
    const claims = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8') || '{}');
    expect(claims['kubernetes.io']).toMatchObject({ node: { name: k.node.nodeName } });
    expect(claims['kubernetes.io'].pod).toBeUndefined();
    expect(existsSync(onNode('/opt/cni/bin/multus'))).toBe(true);
  }, 240_000);

  it('a pod requesting the NAD gets eth0 and net1 and its network-status; deleting it releases its IPs', async () => {
    const p = await createPod('pod-nad');
    expect(await runningLinks(p)).toEqual(['eth0 veth', 'lo', 'net1 macvlan']);
    const st = await networkStatus(k.cluster, p);
    expect(st?.map((e) => [e.name, e.interface])).toEqual([
      [CLUSTER_NET, 'eth0'],
      [`${ns}/mv`, 'net1'],
    ]);
    await deletePod(p);
    expect(reservedIps()).toEqual([]);
  }, 240_000);

  it('helm uninstall: the node loses 00-multus.conf* and the kubeconfig, keeps the executables; a new pod gets the primary network alone', async () => {
    const r = await helm(['uninstall', 'multus', '--namespace', 'kube-system', '--wait', '--timeout', '2m']);
    expect(r.code, r.stderr).toBe(0);
    // the garbage collector's part (this node's controller-manager runs none): the deleted DaemonSet's pods go
    for (const pod of await dsPods()) {
      expect(pod.metadata.ownerReferences?.[0]).toMatchObject({ kind: 'DaemonSet', name: 'kube-multus-ds' });
      await k.cluster.admin.del(`/api/v1/namespaces/kube-system/pods/${pod.metadata.name}`);
    }
    await until(
      'the DaemonSet pod gone',
      120_000,
      async () => ((await dsPods()).length === 0 ? true : undefined),
      logs,
    );
    expect(confFilesOnNode(), "multus' config on the node").toEqual([]);
    expect(existsSync(onNode(KUBECONFIG)), 'the kubeconfig').toBe(false);
    expect(existsSync(onNode('/opt/cni/bin/multus')), 'the executable stays for DELs of earlier pods').toBe(true);
    expect(readdirSync(onNode('/etc/cni/net.d'))).toContain('10-cluster.conflist');
    for (const path of [
      '/apis/apps/v1/namespaces/kube-system/daemonsets/kube-multus-ds',
      '/api/v1/namespaces/kube-system/serviceaccounts/multus',
    ]) {
      expect((await k.cluster.admin.request('GET', path)).status, path).toBe(404);
    }

    const p = await createPod('pod-after');
    expect(await runningLinks(p), 'the primary network alone').toEqual(['eth0 veth', 'lo']);
    const annotations = (await k.cluster.admin.get(podPath(ns, p.name))).metadata.annotations ?? {};
    expect(annotations['k8s.v1.cni.cncf.io/network-status'], 'no multus ran').toBeUndefined();
    await deletePod(p);
    expect(reservedIps()).toEqual([]);
    // the CRD stays (NADs may be in use), as helm treats crds/
    const crd = await k.cluster.admin.request(
      'GET',
      '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/network-attachment-definitions.k8s.cni.cncf.io',
    );
    expect(crd.status).toBe(200);
    expect(readFileSync(onNode('/etc/cni/net.d/10-cluster.conflist'), 'utf8')).toContain(CLUSTER_NET);
  }, 300_000);
});
