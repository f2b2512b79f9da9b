/**
 * kubelet runs multus-ts the way a cluster does (issue "A real container runtime", stage 2), in both modes
 * (kubelet-thin.test.ts, kubelet-resident.test.ts): a real kubelet with containerd (node.ts) registers a node
 * with the test kube-apiserver; the mode's DaemonSet of deployments/ (multus-ts-thin.yml or
 * multus-ts-resident.yml), with the image `npm run image` makes (imported into containerd under the manifest's
 * `image:`), is scheduled there by the real DaemonSet controller and scheduler.
 * - thin: its `multus install` copies the executable into the node's /opt/cni/bin and generates
 *   00-multus.conflist from the node's default network; containerd runs /opt/cni/bin/multus;
 * - resident: an init container copies multus and multus-shim, a sidecar writes the kubeconfig, and the daemon
 *   (privileged, hostPID, delegates chrooted into the node's root) generates 00-multus.conf for the shim;
 *   containerd runs /opt/cni/bin/multus-shim, which the daemon serves over /run/multus/multus.sock.
 * Then a pod whose annotation requests a NAD gets its interfaces and network-status from the CNI calls kubelet
 * makes through containerd, and deleting it leaves nothing. Then the DaemonSet's pod is taken off the node (an
 * upgrade's gap): the node keeps its config and its node-bound kubeconfig token (`--token-binding=node`), a pod
 * made before the gap is deleted in it, and a pod made in it gets its NAD at the first attempt.
 *
 * One change to the manifests, the one an operator without kube-proxy makes: the containers'
 * KUBERNETES_SERVICE_HOST/PORT name the API server's address (no proxy serves the `kubernetes` Service IP here).
 *
 * The last case checks that the machine is as it was: kubelet's sysctls, iptables chains and fixed paths stayed
 * in the node's namespaces (node.ts).
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileExists, needs } from '../helpers/skip.ts';
import { type Obj, collection, docs, withApiServer } from '../helpers/manifests.ts';
import { type Cluster, k8sRequirements, podPath } from '../k8s/cluster.ts';
import type { ApiTunnel } from '../e2e-k8s/world.ts';
import {
  NETWORKS_ANNOTATION,
  type PodRef,
  createNad,
  ensureNamespace,
  networkStatus,
  podEvents,
} from '../e2e-k8s/world.ts';
import type { NodeRuntime } from './node.ts';
import { DRA_DRIVER, KUBELET_SYSCTLS, NODE_LINK, NODE_LINK_PEER, nodeRequirements } from './node.ts';
import { peerCases } from './kubelet-peers.ts';
import { bootKubeletNode, until } from './kubelet-boot.ts';
import {
  DELEGATE_EXEC,
  LAUNCHER_BIN,
  REPO_ROOT,
  type SandboxInfo,
  run,
  runOk,
  runtimeRequirements,
} from './runtime.ts';

export type Mode = 'thin' | 'resident';
const MANIFEST: Record<Mode, string> = { thin: 'multus-ts-thin.yml', resident: 'multus-ts-resident.yml' };
const SHIM_BIN = join(REPO_ROOT, 'build/multus-shim');
const WHEREABOUTS_BIN = join(process.env.MULTUS_TS_CACHE_DIR || join(REPO_ROOT, '.cache'), 'whereabouts/whereabouts');
/** Where `multus install` writes the service account kubeconfig on the node (both modes). */
const KUBECONFIG_PATH = '/etc/cni/net.d/multus.d/multus.kubeconfig';

const CLUSTER_NET = 'kl-cluster';
const BRIDGE = 'mtsklbr0';
const sha256 = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

export interface Link {
  ifname: string;
  address?: string;
  linkinfo?: { info_kind?: string };
  addr_info?: { family: string; local: string; prefixlen: number }[];
}
const v4 = (l: Link | undefined): string[] =>
  (l?.addr_info ?? []).filter((a) => a.family === 'inet').map((a) => `${a.local}/${a.prefixlen}`);

/** The claims of a service account JWT. */
const claimsOf = (jwt: string): { 'kubernetes.io'?: { node?: { name?: string }; pod?: unknown } } =>
  JSON.parse(Buffer.from(jwt.split('.')[1] ?? '', 'base64url').toString('utf8'));

/** What kubelet could change on the machine: its sysctls, its fixed paths, KUBE-* iptables chains. */
export interface MachineState {
  sysctls: Record<string, string>;
  paths: Record<string, boolean>;
  kubeChains: string[];
}
const NODE_PATHS = [
  '/var/lib/kubelet',
  '/var/log/pods',
  '/var/log/containers',
  '/etc/cni',
  '/opt/cni',
  '/run/multus',
  '/run/k8s.cni.cncf.io',
];

export async function machineState(): Promise<MachineState> {
  const sysctls: Record<string, string> = {};
  for (const key of Object.keys(KUBELET_SYSCTLS)) sysctls[key] = readFileSync(`/proc/sys/${key}`, 'utf8').trim();
  const paths: Record<string, boolean> = {};
  for (const p of NODE_PATHS) paths[p] = existsSync(p);
  const kubeChains: string[] = [];
  for (const bin of ['iptables-save', 'ip6tables-save']) {
    const r = await run(bin, []);
    kubeChains.push(
      ...r.stdout
        .split('\n')
        .filter((l) => /^:KUBE-/.test(l))
        .map((l) => `${bin} ${l.split(' ')[0]}`),
    );
  }
  return { sysctls, paths, kubeChains: kubeChains.sort() };
}

/**
 * The mode's manifest of deployments/ as it is, but for the API server's address in the containers' environment
 * (no kube-proxy serves the `kubernetes` Service IP here) and, resident, dynamic networks on (an operator's
 * choice, off by default) driven by the pod informer alone: the resync is an hour away, so the tests' edits are
 * seen from the informer's updates.
 */
export function daemonSetObjects(mode: Mode, apiPort: string): Obj[] {
  const objs = docs(MANIFEST[mode]);
  for (const o of objs) {
    if (o.kind === 'ConfigMap') {
      const data = o.data as Record<string, string>;
      const conf = JSON.parse(data['daemon-config.json']!) as Record<string, unknown>;
      // resident: dynamic networks on (an operator's choice, off by default), driven by the pod informer alone
      // (the resync is an hour away); the gap without a DaemonSet pod: the shim waits 2 s, then falls back
      data['daemon-config.json'] = JSON.stringify({
        ...conf,
        dynamicNetworks: true,
        dynamicNetworksPollSeconds: 3600,
        shimWaitSeconds: 2,
        delegateExec: DELEGATE_EXEC, // the manifest's "caller", or "daemon" (MULTUS_TS_DELEGATE_EXEC)
      });
    }
  }
  return withApiServer(objs, apiPort);
}

/** The ServiceAccount admission plugin needs the namespace's default account (the controller makes it). */
export const untilDefaultServiceAccount = (cluster: Cluster, ns: string, why: () => Promise<string>) =>
  until(
    `the default service account of ${ns}`,
    30_000,
    async () =>
      (await cluster.admin.request('GET', `/api/v1/namespaces/${ns}/serviceaccounts/default`)).status === 200 ||
      undefined,
    why,
  );

export function kubeletSuite(mode: Mode): void {
  const ready = needs(
    ...runtimeRequirements(),
    ...k8sRequirements(),
    ...nodeRequirements(),
    ...(mode === 'resident' ? [fileExists(SHIM_BIN, 'the native shim build/multus-shim (npm run build with Go)')] : []),
    fileExists(WHEREABOUTS_BIN, 'whereabouts (bash test/peers/build-whereabouts.sh)'),
  );
  describe.skipIf(!ready)(
    `kubelet runs the ${mode} DaemonSet, then a pod with a NAD (containerd, kube-apiserver)`,
    () => {
      suiteBody(mode);
    },
  );
}

function suiteBody(mode: Mode): void {
  let cluster: Cluster;
  let node: NodeRuntime;
  let tunnel: ApiTunnel | undefined;
  const ns = `mts-kl-${Math.random().toString(16).slice(2, 8)}`;
  let before: MachineState;
  let imageRef = '';

  const logs = async () =>
    [
      await node.tail('kubelet'),
      await node.tail('kube-controller-manager', 15),
      await node.tail('kube-scheduler', 15),
    ].join('\n');
  /** Lines of a container's logs in the DaemonSet's pods (the files containerd writes under /var/log/pods). */
  const dsLog = async (container: string, text: string): Promise<string[]> => {
    const base = node.path('/var/log/pods');
    const lines: string[] = [];
    for (const pod of (await readdir(base)).filter((d) => d.startsWith('kube-system_multus-ts-'))) {
      const dir = join(base, pod, container);
      for (const f of await readdir(dir).catch(() => [] as string[])) {
        lines.push(...(await readFile(join(dir, f), 'utf8')).split('\n'));
      }
    }
    return lines.filter((l) => l.includes(text));
  };
  const daemonLog = (text: string) => dsLog('daemon', text);
  /** Lines of the DRA driver's log that contain `text`. */
  const driverLog = async (text: string): Promise<string[]> =>
    (await readFile(join(node.dir, 'dra-driver.log'), 'utf8')).split('\n').filter((l) => l.includes(text));
  const dsPods = async () =>
    (await cluster.admin.get(`/api/v1/namespaces/kube-system/pods?labelSelector=app%3Dmultus-ts`)).items as any[];

  beforeAll(async () => {
    before = await machineState();
    ({ cluster, node, tunnel, imageRef } = await bootKubeletNode(CLUSTER_NET, BRIDGE, '10.251.0.0/24'));

    for (const o of daemonSetObjects(mode, new URL(cluster.server).port)) await cluster.admin.post(collection(o), o);
    await ensureNamespace(cluster, ns);
  }, 300_000);

  afterAll(async () => {
    await node?.stop();
    await tunnel?.close();
    await cluster?.stop();
  });

  it("the DaemonSet's pod installs multus-ts on the node and passes its probes", async () => {
    const ds = docs(MANIFEST[mode]).find((o) => o.kind === 'DaemonSet') as any;
    const image = ds.spec.template.spec.containers[0].image as string;
    expect(imageRef, 'the image npm run image makes is the one the manifest names').toBe(image);

    const pod = await dsReady(180_000);
    expect(pod.spec.nodeName).toBe(node.nodeName);
    expect(pod.metadata.ownerReferences?.[0]?.kind).toBe('DaemonSet');
    expect(pod.status.phase).toBe('Running');
    // started: the startup probe passed (thin: `multus --is-default-ready`; resident: the kubeconfig sidecar's)
    const started = [...(pod.status.initContainerStatuses ?? []), ...pod.status.containerStatuses]
      .filter((c: { name: string }) => c.name !== 'install-binaries')
      .map((c: { name: string; started?: boolean }) => `${c.name} ${c.started}`);
    expect(started).toEqual(mode === 'thin' ? ['install true'] : ['kubeconfig true', 'daemon true']);
    // the controller writes the DaemonSet's status after it saw the pod Ready: waited for, not raced
    const dsStatus = async () =>
      (await cluster.admin.get('/apis/apps/v1/namespaces/kube-system/daemonsets/multus-ts')).status;
    await until(
      "the DaemonSet's status counting the ready pod",
      30_000,
      async () => ((await dsStatus()).numberReady === 1 ? true : undefined),
      async () => JSON.stringify(await dsStatus()),
    );
    const status = await dsStatus();
    expect([status.desiredNumberScheduled, status.numberReady]).toEqual([1, 1]);

    // what it installed, seen from the node
    // the image's launcher (its Bun executable beside it, scripts/image.sh)
    expect(sha256(node.path('/opt/cni/bin/multus')), 'the executable in /opt/cni/bin').toBe(sha256(LAUNCHER_BIN));
    const kubeconfigPath = KUBECONFIG_PATH;
    if (mode === 'thin') {
      // a conflist, as the default network's config is one
      const list = JSON.parse(readFileSync(node.path('/etc/cni/net.d/00-multus.conflist'), 'utf8'));
      expect(list.plugins).toHaveLength(1);
      const conf = list.plugins[0];
      expect(conf.type).toBe('multus');
      expect(conf.kubeconfig).toBe(kubeconfigPath);
      expect(conf.delegates?.map((d: { name: string }) => d.name)).toEqual([CLUSTER_NET]);
    } else {
      expect(sha256(node.path('/opt/cni/bin/multus-shim')), 'the shim in /opt/cni/bin').toBe(sha256(SHIM_BIN));
      // written by the daemon: the shim, pointing at the node's default network
      const conf = JSON.parse(readFileSync(node.path('/etc/cni/net.d/00-multus.conf'), 'utf8'));
      expect(conf.type).toBe('multus-shim');
      expect(conf.clusterNetwork).toBe('/etc/cni/net.d/10-cluster.conflist');
      expect(existsSync(node.path('/run/multus/multus.sock')), "the daemon's socket on the node").toBe(true);
    }
    const kubeconfig = readFileSync(node.path(kubeconfigPath), 'utf8');
    expect(kubeconfig).toContain(`server: https://127.0.0.1:${new URL(cluster.server).port}`);
    const token = /^\s*token: "([^"]+)"$/m.exec(kubeconfig)?.[1] ?? '';
    const installer = mode === 'thin' ? 'install' : 'kubeconfig';
    expect(await dsLog(installer, 'node-bound token'), 'no failed TokenRequest').toEqual([]);
    expect(await dsLog(installer, `got a service account token bound to node ${node.nodeName}`)).toHaveLength(1);
    // bound to the node, not to the pod (a pod-bound token names its node too since Kubernetes 1.30)
    expect(claimsOf(token)['kubernetes.io']?.node?.name, "the kubeconfig's token").toBe(node.nodeName);
    expect(claimsOf(token)['kubernetes.io']?.pod, "the kubeconfig's token names no pod").toBeUndefined();
  }, 200_000);

  /** Files of multus' and containerd's CNI caches (in the node) that name the sandbox. */
  const cniCaches = async (id: string): Promise<string[]> => {
    const found: string[] = [];
    for (const d of ['/var/lib/cni/multus', '/var/lib/cni/multus/results', '/var/lib/cni/results']) {
      const names = await readdir(node.path(d)).catch(() => [] as string[]);
      found.push(...names.filter((n) => n.includes(id)).map((n) => join(d, n)));
    }
    return found;
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

  /** A macvlan NAD on the node's veth end, host-local in 10.251.<k>.0/24. */
  const macvlanNad = (name: string, k: number) =>
    createNad(cluster, ns, name, {
      cniVersion: '1.0.0',
      name,
      type: 'macvlan',
      master: NODE_LINK_PEER,
      mode: 'bridge',
      ipam: { type: 'host-local', ranges: [[{ subnet: `10.251.${k}.0/24` }]] },
    });

  /** Waits until kubelet reports the pod Running; its API object. */
  const untilRunning = (p: PodRef) =>
    until(
      `pod ${p.name} Running`,
      180_000,
      async () => {
        const got = await cluster.admin.get(podPath(ns, p.name));
        return got.status?.phase === 'Running' ? got : undefined;
      },
      async () => `${JSON.stringify((await cluster.admin.get(podPath(ns, p.name))).status)}\n${await logs()}`,
    );

  /** The one sandbox kubelet made for the pod (found through CRI by its UID). */
  const sandboxOf = async (p: PodRef): Promise<SandboxInfo> => {
    const ids = (await node.crictl(['pods', '-q', '--label', `io.kubernetes.pod.uid=${p.uid}`])).stdout
      .trim()
      .split('\n');
    expect(ids).toHaveLength(1);
    return node.inspect(ids[0]!);
  };

  /** `ip -j <args>` inside the sandbox's network namespace, parsed. */
  const ipIn = async <T>(sb: SandboxInfo, args: string[]): Promise<T> =>
    JSON.parse(await runOk('nsenter', ['-t', String(sb.pid), '--net', 'ip', '-j', ...args])) as T;
  const linksIn = async (sb: SandboxInfo): Promise<Map<string, Link>> =>
    new Map((await ipIn<Link[]>(sb, ['-d', 'addr', 'show'])).map((l) => [l.ifname, l]));

  interface NadPod {
    p: PodRef;
    sb: SandboxInfo;
    links: Map<string, Link>;
    ipOf(ifname: string): string[];
  }

  /**
   * Creates a pod requesting the `mv` NAD, waits until kubelet reports it Running, and checks its sandbox's
   * interfaces, its network-status (MACs included), its pod IP and its AddedInterface events.
   */
  const runNadPod = async (name: string): Promise<NadPod> => expectRunningWithNad(await createNadPod(name));

  /** A pod (pause image) requesting the `mv` NAD, in the API (the scheduler places it, kubelet runs it). */
  const createNadPod = async (name: string, networks = 'mv'): Promise<PodRef> => {
    const created = await cluster.admin.post(podPath(ns), {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: ns, annotations: { [NETWORKS_ANNOTATION]: networks } },
      spec: {
        containers: [{ name: 'pause', image: node.sandboxImage, imagePullPolicy: 'Never' }],
        terminationGracePeriodSeconds: 1,
      },
    });
    return { namespace: ns, name, uid: created.metadata.uid };
  };

  const expectRunningWithNad = async (p: PodRef): Promise<NadPod> => {
    const running = await untilRunning(p);
    expect(running.spec.nodeName).toBe(node.nodeName);

    // the sandbox kubelet made, and its network namespace
    const sb = await sandboxOf(p);
    const links = await linksIn(sb);
    expect([...links.keys()].sort()).toEqual(['eth0', 'lo', 'net1']);
    expect(v4(links.get('eth0'))).toEqual([expect.stringMatching(/^10\.251\.0\.\d+\/24$/)]);
    expect(v4(links.get('net1'))).toEqual([expect.stringMatching(/^10\.251\.1\.\d+\/24$/)]);
    expect(links.get('net1')?.linkinfo?.info_kind).toBe('macvlan');

    const ipOf = (ifname: string) => v4(links.get(ifname)).map((a) => a.split('/')[0]!);
    const st = await networkStatus(cluster, p);
    expect(st?.map((e) => [e.name, e.interface, e.ips, e.mac, e.default === true])).toEqual([
      [CLUSTER_NET, 'eth0', ipOf('eth0'), links.get('eth0')?.address, true],
      [`${ns}/mv`, 'net1', ipOf('net1'), links.get('net1')?.address, false],
    ]);
    // the pod's IP as kubelet reports it is eth0's (the CRI result multus returned)
    expect(running.status.podIP).toBe(ipOf('eth0')[0]);
    const events = await podEvents(cluster, p, 'AddedInterface');
    expect(events.map((e) => e.message).sort()).toEqual(
      [
        `Add eth0 [${v4(links.get('eth0'))[0]}] from ${CLUSTER_NET}`,
        `Add net1 [${v4(links.get('net1'))[0]}] from ${ns}/mv`,
      ].sort(),
    );
    expect(await cniCaches(sb.id), 'caches while the pod runs').not.toEqual([]);
    expect(await reservedIps()).toEqual([`${CLUSTER_NET}/${ipOf('eth0')[0]}`, `mv/${ipOf('net1')[0]}`].sort());
    return { p, sb, links, ipOf };
  };

  /** Deletes the pod (kubelet stops its sandbox: CNI DEL), waits for the API's 404, and checks nothing is left. */
  const deleteAndExpectNothingLeft = async ({ p, sb }: { p: PodRef; sb: SandboxInfo }): Promise<void> => {
    await cluster.admin.del(podPath(ns, p.name));
    await until(
      `pod ${p.name} gone from the API`,
      60_000,
      async () => ((await cluster.admin.request('GET', podPath(ns, p.name))).status === 404 ? true : undefined),
      logs,
    );
    const state = JSON.parse((await node.crictl(['inspectp', sb.id])).stdout || '{}').status?.state;
    expect(state ?? 'removed', 'the sandbox').not.toBe('SANDBOX_READY');
    expect(await reservedIps(), "IPs reserved in host-local's data dir").toEqual([]);
    expect(await cniCaches(sb.id), 'cache files of the sandbox').toEqual([]);
    expect(await node.netnsFiles(), "the pods' netns files").toEqual([]);
    const hostLinks = JSON.parse(await runOk('ip', ['-n', node.hostNs, '-j', '-d', 'link', 'show'])) as Link[];
    expect(
      hostLinks
        .filter((l) => !['lo', NODE_LINK, NODE_LINK_PEER].includes(l.ifname) && l.linkinfo?.info_kind !== 'bridge')
        .map((l) => l.ifname),
      "links left in the node's namespace",
    ).toEqual([]);
  };

  const DS_PATH = '/apis/apps/v1/namespaces/kube-system/daemonsets/multus-ts';
  const dsReady = (timeoutMs: number) =>
    until(
      'the DaemonSet pod Ready on the node',
      timeoutMs,
      async () => {
        const p = (await dsPods())[0];
        const readyCond = (p?.status?.conditions ?? []).find((c: { type: string }) => c.type === 'Ready');
        return readyCond?.status === 'True' ? p : undefined;
      },
      async () => `${JSON.stringify((await dsPods())[0]?.status ?? 'no pod')}\n${await logs()}`,
    );

  it('a pod requesting a NAD gets eth0 and net1, its network-status and events; deleting it leaves nothing', async () => {
    await macvlanNad('mv', 1);
    await untilDefaultServiceAccount(cluster, ns, logs);
    const pod = await runNadPod('pod-nad');
    if (mode === 'resident') {
      expect(await daemonLog(`ADD ${pod.sb.id}: 200`), 'the ADD served by the daemon').toHaveLength(1);
    }
    await deleteAndExpectNothingLeft(pod);
    if (mode === 'resident') {
      expect(await daemonLog(`DEL ${pod.sb.id}: 200`), 'the DEL served by the daemon').not.toEqual([]);
    }
  }, 240_000);

  const DRA = '/apis/resource.k8s.io/v1';
  const NIC_RESOURCE = 'multus-ts.test/nic';
  /**
   * The driver's slice for the node (three NICs with Multus' attributes, a GPU without them), two classes selecting
   * its devices (the NICs by Multus' resourceName) and a template asking for a GPU and a NIC; the NICs' deviceIDs.
   */
  async function draSetup(): Promise<Map<string, string | undefined>> {
    const slices = (await cluster.admin.get(`${DRA}/resourceslices?fieldSelector=spec.nodeName%3D${node.nodeName}`))
      .items as any[];
    expect(slices.map((sl) => `${sl.spec.driver} ${sl.spec.pool.name}`)).toEqual([`${DRA_DRIVER} ${node.nodeName}`]);
    const idOf = new Map<string, string | undefined>(
      slices[0].spec.devices.map((d: any) => [d.name, d.attributes?.['k8s.cni.cncf.io/deviceID']?.string]),
    );
    expect([...idOf.keys()]).toEqual(['nic0', 'nic1', 'nic2', 'gpu0']);
    expect(idOf.get('gpu0')).toBeUndefined();
    // the other mode's suite, or the other case, may have made them (classes are cluster-scoped)
    const create = (path: string, body: object) => cluster.admin.post(path, body).catch(() => undefined);
    const cls = (name: string, expression: string) =>
      create(`${DRA}/deviceclasses`, {
        apiVersion: 'resource.k8s.io/v1',
        kind: 'DeviceClass',
        metadata: { name },
        spec: { selectors: [{ cel: { expression: `device.driver == "${DRA_DRIVER}" && ${expression}` } }] },
      });
    await cls('mts-nic', `device.attributes["k8s.cni.cncf.io"].resourceName == "${NIC_RESOURCE}"`);
    await cls('mts-gpu', `device.attributes["${DRA_DRIVER}"].type == "gpu"`);
    await create(`${DRA}/namespaces/${ns}/resourceclaimtemplates`, {
      apiVersion: 'resource.k8s.io/v1',
      kind: 'ResourceClaimTemplate',
      metadata: { name: 'nic-gpu', namespace: ns },
      spec: {
        spec: {
          devices: {
            requests: [
              { name: 'gpu', exactly: { deviceClassName: 'mts-gpu' } },
              { name: 'nic', exactly: { deviceClassName: 'mts-nic' } },
            ],
          },
        },
      },
    });
    return idOf;
  }

  /** A macvlan NAD on the node link for the DRA cases (`annotations`: e.g. a resourceName). */
  const draNad = (name: string, subnet: string, annotations: Record<string, string> = {}) =>
    cluster.admin.post(`/apis/k8s.cni.cncf.io/v1/namespaces/${ns}/network-attachment-definitions`, {
      apiVersion: 'k8s.cni.cncf.io/v1',
      kind: 'NetworkAttachmentDefinition',
      metadata: { name, namespace: ns, annotations },
      spec: {
        config: JSON.stringify({
          cniVersion: '1.0.0',
          name,
          type: 'macvlan',
          master: NODE_LINK_PEER,
          mode: 'bridge',
          ipam: { type: 'host-local', ranges: [[{ subnet }]] },
        }),
      },
    });

  /** A pod using one claim from the nic-gpu template (entry "dev"), with `networks` as its selection annotation. */
  const draPod = (name: string, networks: string) =>
    cluster.admin.post(podPath(ns), {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: ns, annotations: { [NETWORKS_ANNOTATION]: networks } },
      spec: {
        resourceClaims: [{ name: 'dev', resourceClaimTemplateName: 'nic-gpu' }],
        containers: [
          {
            name: 'pause',
            image: node.sandboxImage,
            imagePullPolicy: 'Never',
            resources: { claims: [{ name: 'dev' }] },
          },
        ],
        terminationGracePeriodSeconds: 1,
      },
    });

  /**
   * The DRA pod's net1 got `deviceId`: in the config its delegate was given (the result cache keeps it) and in
   * network-status' device-info (`why`); resident: the ADD was the daemon's. The pod's sandbox.
   */
  async function expectDeviceOnNet1(p: PodRef, nad: string, deviceId: string, why: string) {
    const sb = await sandboxOf(p);
    expect([...(await linksIn(sb)).keys()].sort()).toEqual(['eth0', 'lo', 'net1']);
    const cached = JSON.parse(readFileSync(node.path(`/var/lib/cni/multus/results/${nad}-${sb.id}-net1`), 'utf8')) as {
      config: string;
    };
    const delegateConf = JSON.parse(Buffer.from(cached.config, 'base64').toString('utf8'));
    expect([delegateConf.type, delegateConf.deviceID, delegateConf.pciBusID]).toEqual(['macvlan', deviceId, deviceId]);
    const entry = (await networkStatus(cluster, p))?.find((e) => e.name === `${ns}/${nad}`);
    expect(entry?.interface).toBe('net1');
    expect((entry as any)?.['device-info'], why).toEqual({
      type: 'pci',
      version: '1.1.0',
      pci: { 'pci-address': deviceId },
    });
    if (mode === 'resident') {
      expect(await daemonLog(`ADD ${sb.id}: 200`), 'the ADD served by the daemon').toHaveLength(1);
    }
    return sb;
  }

  /** After the pod's deletion: kubelet had the driver unprepare the claim, which went with the pod. */
  async function claimGone(claimName: string, uid: string): Promise<void> {
    await until(
      'the claim unprepared and deleted',
      60_000,
      async () =>
        (await driverLog(`unprepared ${ns}/${claimName} ${uid}`)).length === 1 &&
        (await cluster.admin.request('GET', `${DRA}/namespaces/${ns}/resourceclaims/${claimName}`)).status === 404
          ? true
          : undefined,
      async () => `${await node.tail('dra-driver')}\n${await logs()}`,
    );
    for (const d of ['/run/k8s.cni.cncf.io/devinfo/dp', '/run/k8s.cni.cncf.io/devinfo/cni']) {
      expect(await readdir(node.path(d)).catch(() => []), `device-info files in ${d}`).toEqual([]);
    }
  }

  it("DRA: the scheduler allocates a NIC and a GPU from the driver's slice; the NAD gets the NIC's deviceID; nothing is left", async () => {
    await dsReady(180_000); // multus installed (when this case runs alone)
    // kubelet's DRA is on (GA since 1.34) and accepted the driver (startDraDriver); its sockets are in the node
    for (const sock of [`plugins_registry/${DRA_DRIVER}-reg.sock`, `plugins/${DRA_DRIVER}/dra.sock`]) {
      expect(existsSync(node.path(`/var/lib/kubelet/${sock}`)), `${sock} in the node`).toBe(true);
      expect(existsSync(`/var/lib/kubelet/${sock}`), `${sock} on the machine`).toBe(false);
    }
    const idOf = await draSetup();
    await draNad('mv-dra', '10.251.3.0/24', { 'k8s.v1.cni.cncf.io/resourceName': NIC_RESOURCE });
    const created = await draPod('pod-dra', 'mv-dra');
    const p: PodRef = { namespace: ns, name: 'pod-dra', uid: created.metadata.uid };
    const running = await untilRunning(p);
    const claimName = running.status.resourceClaimStatuses?.[0]?.resourceClaimName as string;
    expect(claimName, 'the claim the resource claim controller made from the template').toMatch(/^pod-dra-dev-/);
    const claim = await cluster.admin.get(`${DRA}/namespaces/${ns}/resourceclaims/${claimName}`);
    const results = claim.status.allocation.devices.results as any[];
    expect(results.map((r) => `${r.request} ${r.driver} ${r.pool}`)).toEqual([
      `gpu ${DRA_DRIVER} ${node.nodeName}`,
      `nic ${DRA_DRIVER} ${node.nodeName}`,
    ]);
    expect(results[0].device).toBe('gpu0');
    const nic = results[1].device as string;
    const deviceId = idOf.get(nic)!;
    expect(deviceId, `the deviceID of ${nic}`).toMatch(/^0000:00:1\d\.0$/);
    // kubelet had the driver prepare the claim before it made the sandbox
    expect(await driverLog(`prepared ${ns}/${claimName} ${claim.metadata.uid}:`)).toEqual([
      expect.stringContaining(`${node.nodeName}/gpu0 ${node.nodeName}/${nic}=${deviceId}`),
    ]);

    // the ID reached the delegate's config (the result cache keeps what macvlan was given) and network-status
    const sb = await expectDeviceOnNet1(
      p,
      'mv-dra',
      deviceId,
      "the driver's device-info, copied for the NIC's deviceID",
    );

    await deleteAndExpectNothingLeft({ p, sb });
    // the claim unprepared by kubelet (the driver removed its device-info file) and deleted with the pod
    await claimGone(claimName, claim.metadata.uid);
  }, 240_000);

  it('DRA: an element naming the NIC request of a NIC+GPU claim ("resourceClaim") gets that device, the NAD having no resourceName', async () => {
    await dsReady(180_000);
    const idOf = await draSetup();
    // without a resourceName the NAD asks no pool: only the element's claim request can give it a device
    await draNad('mv-claim', '10.251.4.0/24');
    const networks = JSON.stringify([{ name: 'mv-claim', resourceClaim: { claimName: 'dev', requestName: 'nic' } }]);
    const created = await draPod('pod-claim', networks);
    const p: PodRef = { namespace: ns, name: 'pod-claim', uid: created.metadata.uid };
    const running = await untilRunning(p);
    const claimName = running.status.resourceClaimStatuses?.[0]?.resourceClaimName as string;
    const claim = await cluster.admin.get(`${DRA}/namespaces/${ns}/resourceclaims/${claimName}`);
    const results = claim.status.allocation.devices.results as any[];
    expect(results.map((r) => r.request)).toEqual(['gpu', 'nic']);
    const nic = results.find((r) => r.request === 'nic').device as string;
    const deviceId = idOf.get(nic)!;
    expect(deviceId, `the deviceID of ${nic}`).toMatch(/^0000:00:1\d\.0$/);

    const sb = await expectDeviceOnNet1(
      p,
      'mv-claim',
      deviceId,
      "the driver's device-info of the NIC request's device",
    );
    await deleteAndExpectNothingLeft({ p, sb });
    await claimGone(claimName, claim.metadata.uid);
  }, 240_000);

  it("default-route on the NAD: the pod's default route goes via net1 (resident: set by the daemon in its container)", async () => {
    const p = await createNadPod('pod-route', JSON.stringify([{ name: 'mv', 'default-route': ['10.251.1.1'] }]));
    await untilRunning(p);
    const sb = await sandboxOf(p);
    const routes = await ipIn<{ dst: string; gateway?: string; dev: string }[]>(sb, ['-4', 'route', 'show']);
    expect(routes.filter((r) => r.dst === 'default').map((r) => `${r.gateway} ${r.dev}`)).toEqual(['10.251.1.1 net1']);
    // `default` in network-status marks the cluster network, wherever the default route goes (as in the CRI tier)
    const st = await networkStatus(cluster, p);
    expect(st?.map((e) => [e.interface, e.default === true])).toEqual([
      ['eth0', true],
      ['net1', false],
    ]);
    if (mode === 'resident') {
      expect(await daemonLog(`ADD ${sb.id}: 200`), 'the ADD served by the daemon').toHaveLength(1);
    }
    await deleteAndExpectNothingLeft({ p, sb });
  }, 240_000);

  // resident only (defined only there: a skipped case would count as a skip in CI)
  if (mode === 'resident')
    it("dynamic networks: editing a running pod's annotation plugs, then unplugs, a NAD (the daemon's own controller)", async () => {
      await macvlanNad('mv2', 2);
      const pod = await runNadPod('pod-dyn');
      const setNetworks = (value: string) =>
        cluster.admin.patch(podPath(ns, pod.p.name), { metadata: { annotations: { [NETWORKS_ANNOTATION]: value } } });
      const statusNames = async () =>
        ((await networkStatus(cluster, pod.p)) ?? []).map((e) => `${e.name} ${e.interface}`);

      await setNetworks('mv,mv2');
      await until(
        'net2 in the network-status',
        60_000,
        async () => ((await statusNames()).length === 3 ? true : undefined),
        async () => `${JSON.stringify(await statusNames())}\n${(await daemonLog('dynamic')).slice(-5).join('\n')}`,
      );
      expect(await statusNames()).toEqual([`${CLUSTER_NET} eth0`, `${ns}/mv net1`, `${ns}/mv2 net2`]);
      const plugged = await linksIn(pod.sb);
      expect([...plugged.keys()].sort()).toEqual(['eth0', 'lo', 'net1', 'net2']);
      expect(v4(plugged.get('net2'))).toEqual([expect.stringMatching(/^10\.251\.2\.\d+\/24$/)]);
      expect(plugged.get('net2')?.linkinfo?.info_kind).toBe('macvlan');
      const added = (await podEvents(cluster, pod.p, 'AddedInterface')).map((e) => e.message);
      expect(added).toContain(`Add net2 [${v4(plugged.get('net2'))[0]}] from ${ns}/mv2`);
      expect(await reservedIps()).toContain(`mv2/${v4(plugged.get('net2'))[0]!.split('/')[0]}`);

      await setNetworks('mv');
      await until(
        'net2 out of the network-status',
        60_000,
        async () => ((await statusNames()).length === 2 ? true : undefined),
        async () => JSON.stringify(await statusNames()),
      );
      expect([...(await linksIn(pod.sb)).keys()].sort()).toEqual(['eth0', 'lo', 'net1']);
      expect(
        (await reservedIps()).filter((ip) => ip.startsWith('mv2/')),
        'the lease of net2',
      ).toEqual([]);
      const removed = (await podEvents(cluster, pod.p, 'RemovedInterface')).map((e) => e.message);
      expect(removed).toHaveLength(1);
      await deleteAndExpectNothingLeft(pod);
    }, 240_000);

  // whereabouts, dynamic networks under load, Multus' own e2e scenarios (kubelet-peers.ts)
  peerCases({
    mode,
    ns,
    cluster: () => cluster,
    node: () => node,
    clusterNet: CLUSTER_NET,
    until,
    logs,
    daemonLog,
    createPod: createNadPod,
    untilRunning,
    sandboxOf,
    linksIn,
    ipIn,
    cniCaches,
    reservedIps,
    dsPods,
    dsReady,
  });

  it("the DaemonSet's pod gone (an upgrade's gap): config and node-bound token stay, a pod made then gets its NAD", async () => {
    const confName = mode === 'thin' ? '00-multus.conflist' : '00-multus.conf';
    const conf = readFileSync(node.path(`/etc/cni/net.d/${confName}`), 'utf8');
    // a nodeSelector no node matches: the DaemonSet controller deletes the pod (SIGTERM), none comes back
    const patch = (nodeSelector: Record<string, string> | null) =>
      cluster.admin.patch(
        DS_PATH,
        { spec: { template: { spec: { nodeSelector } } } },
        'application/strategic-merge-patch+json',
      );
    // a pod made before the gap (resident: its ADD served by the daemon), deleted during it
    const before = await runNadPod('pod-before');
    if (mode === 'resident') {
      expect(await daemonLog(`ADD ${before.sb.id}: 200`), 'the ADD served by the daemon').toHaveLength(1);
    }
    // a control token: the DaemonSet's service account, bound to the pod about to be deleted
    const old = (await dsPods())[0];
    const control = (
      await cluster.admin.post('/api/v1/namespaces/kube-system/serviceaccounts/multus-ts/token', {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: { boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: old.metadata.name, uid: old.metadata.uid } },
      })
    ).status.token as string;
    await patch({ 'multus-ts.test/nowhere': 'true' });
    await until(
      'the DaemonSet pod gone',
      120_000,
      async () => ((await dsPods()).length === 0 ? true : undefined),
      logs,
    );
    expect((await node.crictl(['ps', '-q', '--label', 'io.kubernetes.pod.namespace=kube-system'])).stdout.trim()).toBe(
      '',
    );
    expect(readFileSync(node.path(`/etc/cni/net.d/${confName}`), 'utf8'), 'the config, kept').toBe(conf);
    if (mode === 'resident') {
      // nobody serves the socket: the shim runs its thin fallback (/opt/cni/bin/multus) with that config
      expect(existsSync(node.path('/run/multus/multus.sock')), "the daemon's socket").toBe(false);
    }

    // A pod made in the gap. The kubeconfig's token is bound to the node (--token-binding=node), not to the
    // deleted pod: a control token bound to that pod shows when the API server has noticed the pod is gone
    // (its 401), and the node's token must still be accepted then. With the pod's own token (Multus, or
    // --token-binding=pod) the pod's ADD would fail with Unauthorized until the DaemonSet's pod is back.
    const token = /^\s*token: "([^"]+)"$/m.exec(readFileSync(node.path(KUBECONFIG_PATH), 'utf8'))?.[1] ?? '';
    expect(claimsOf(token)['kubernetes.io']?.node?.name, 'the token is bound to the node').toBe(node.nodeName);
    expect(claimsOf(token)['kubernetes.io']?.pod, 'and not to a pod').toBeUndefined();
    await until(
      'the API server to refuse a token bound to the deleted pod',
      60_000,
      async () =>
        (await cluster.client(control).request('GET', '/api/v1/namespaces/default')).status === 401 || undefined,
      logs,
    );
    expect(
      (await cluster.client(token).request('GET', `/api/v1/namespaces/${ns}/pods`)).status,
      "the node's token",
    ).not.toBe(401);
    // the pod made before the gap, deleted in it (resident: the fallback's DEL reads the daemon's caches)
    await deleteAndExpectNothingLeft(before);
    const gap = await runNadPod('pod-gap');
    expect(await podEvents(cluster, gap.p, 'FailedCreatePodSandBox'), 'no failed attempt').toEqual([]);
    await deleteAndExpectNothingLeft(gap);

    // the DaemonSet's pod back
    await patch(null);
    const back = await dsReady(180_000);
    expect(back.spec.nodeName).toBe(node.nodeName);
  }, 420_000);

  it("the machine is as it was: kubelet's sysctls, paths and iptables chains stayed in the node", async () => {
    expect(await machineState()).toEqual(before);
    expect(readFileSync(join(node.dir, 'kubelet.log'), 'utf8')).not.toContain('Updating kernel flag');
    // where they went instead: the chains into the node's network namespace, the paths into its overlays
    const chains = await runOk('ip', ['netns', 'exec', node.hostNs, 'iptables-save']);
    expect(chains).toContain(':KUBE-FIREWALL');
    expect(existsSync(node.path('/var/lib/kubelet/device-plugins/kubelet.sock')), 'the device-plugin socket').toBe(
      true,
    );
  });
}
