/**
 * Selection elements that choose their device, against a real kube-apiserver (resource.k8s.io/v1), thin (the lean
 * client from the kubeconfig) and resident (the daemon's warm client), as an in-process ADD through handle() with
 * the fake exec for delegates:
 * - `"resourceClaim": {"claimName", "requestName"}` (docs/behaviour.md#claim-request): a claim with a NIC request
 *   and a GPU request, the element naming the NIC request, gets exactly that device (deviceID in the delegate's
 *   config, device-info in network-status), which no other attachment gets; an unknown claim entry or request, a
 *   GPU request (no deviceID) and an unallocated claim are code 7 naming both, before anything is attached;
 * - `"resourceName"` (docs/behaviour.md#device-pool, Multus #1520): an element picks one of the NAD's allowed
 *   pools; a conflict with the NAD's resourceName and a pool off its allow-list are code 7 with a Warning event in
 *   the API, a pool the pod has no device of and one with no device left are code 7 naming element and pool;
 * - KEP-4817 (docs/behaviour.md#claim-network-data) under Kubernetes 1.36+'s granular status authorization: with
 *   deployments/multus-ts-claim-network-data.yml applied and a token bound to the node, the claim's
 *   status.devices[] gets the attachment's network data, and it agrees with network-status; without the rule, or
 *   with a token bound to no node, the write is refused and the ADD says why in a Warning event.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/base/log.ts';
import type { WarmKube } from '../../src/informers/informers.ts';
import { startWarmKube } from '../../src/informers/informers.ts';
import { handle } from '../../src/host/handle.ts';
import { createHost } from '../../src/host/host.ts';
import { FakeExec } from '../helpers/fake-exec.ts';
import { testNetns } from '../helpers/netns.ts';
import { docs } from '../helpers/manifests.ts';
import { needs } from '../helpers/skip.ts';
import {
  type Cluster,
  MULTUS_NAMESPACE,
  MULTUS_SA,
  k8sRequirements,
  nadPath,
  podPath,
  startCluster,
} from './cluster.ts';

const ready = needs(...k8sRequirements());
const NODE = 'node-select';
const NIC = 'nic.select.example.com';
const GPU = 'gpu.select.example.com';
const POOL_A = 'example.com/vf-a';
const POOL_B = 'example.com/vf-b';
const DRA = '/apis/resource.k8s.io/v1';
const STATUS = 'k8s.v1.cni.cncf.io/network-status';
const NORULE_SA = 'multus-no-driver-rule';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
type Mode = 'thin' | 'resident';
interface PodRef {
  name: string;
  uid: string;
  status: Record<string, unknown>;
}

describe.skipIf(!ready)('selection elements choosing their device, against a real kube-apiserver', () => {
  let cluster: Cluster;
  let warm: WarmKube;
  let dir: string;
  /** Kubeconfigs with tokens bound to the Node object: multus' own, and one of an account without the driver rule. */
  let nodeBound: string;
  let nodeBoundNoRule: string;
  const ns = `select-${process.pid}`;

  const nicAttrs = (id: string, pool: string) => ({
    'k8s.cni.cncf.io/deviceID': { string: id },
    'k8s.cni.cncf.io/resourceName': { string: pool },
  });

  /** A claim with `requests`, allocated on NODE through /status as the scheduler does ([request, driver, device]). */
  async function createClaim(name: string, requests: string[], results?: [string, string, string][]) {
    const claim = await cluster.admin.post(`${DRA}/namespaces/${ns}/resourceclaims`, {
      apiVersion: 'resource.k8s.io/v1',
      kind: 'ResourceClaim',
      metadata: { name, namespace: ns },
      spec: { devices: { requests: requests.map((r) => ({ name: r, exactly: { deviceClassName: 'select' } })) } },
    });
    if (!results) return;
    claim.status = {
      allocation: {
        devices: { results: results.map(([request, driver, device]) => ({ request, driver, pool: NODE, device })) },
        nodeSelector: {
          nodeSelectorTerms: [{ matchFields: [{ key: 'metadata.name', operator: 'In', values: [NODE] }] }],
        },
      },
    };
    await cluster.admin.put(`${DRA}/namespaces/${ns}/resourceclaims/${name}/status`, claim);
  }

  async function createNad(name: string, annotations: Record<string, string>) {
    await cluster.admin.post(nadPath(ns), {
      apiVersion: 'k8s.cni.cncf.io/v1',
      kind: 'NetworkAttachmentDefinition',
      metadata: { name, namespace: ns, annotations },
      spec: { config: JSON.stringify({ cniVersion: '1.0.0', name, type: 'sriov' }) },
    });
  }

  /** A pod whose spec.resourceClaims entries (from a template) are named in its status, as the claim controller does. */
  async function createPod(name: string, networks: unknown[], claims: Record<string, string>): Promise<PodRef> {
    const pod = await cluster.admin.post(podPath(ns), {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: ns, annotations: { 'k8s.v1.cni.cncf.io/networks': JSON.stringify(networks) } },
      spec: {
        nodeName: NODE,
        resourceClaims: Object.keys(claims).map((entry) => ({ name: entry, resourceClaimTemplateName: 'select' })),
        containers: [
          {
            name: 'app',
            image: 'example.invalid/none',
            resources: { claims: Object.keys(claims).map((entry) => ({ name: entry })) },
          },
        ],
      },
    });
    pod.status = {
      ...pod.status,
      resourceClaimStatuses: Object.entries(claims).map(([entry, claim]) => ({
        name: entry,
        resourceClaimName: claim,
      })),
    };
    const updated = await cluster.admin.put(`${podPath(ns, name)}/status`, pod);
    return { name, uid: updated.metadata.uid as string, status: updated.status as Record<string, unknown> };
  }

  /** Resident: the pod informer must have the status written just now (kubelet runs CNI only after it is). */
  async function untilInformerHas(pod: PodRef) {
    const want = JSON.stringify(pod.status.resourceClaimStatuses);
    for (const deadline = Date.now() + 15_000; Date.now() < deadline; await sleep(50)) {
      const before = warm.client.requestCount;
      const cached = await warm.client.getPod(ns, pod.name, { uid: pod.uid });
      if (warm.client.requestCount === before && JSON.stringify(cached.status?.resourceClaimStatuses) === want) return;
    }
    throw new Error(`the informer did not deliver pod ${pod.name}'s status within 15 s`);
  }

  async function add(mode: Mode, pod: PodRef, o: { publish?: boolean; kubeconfig?: string } = {}) {
    if (mode === 'resident') await untilInformerHas(pod);
    const exec = new FakeExec('p0', 'sriov');
    const host = createHost({
      writeStderr: () => {},
      exec,
      devices: {
        podResourcesSocket: join(dir, 'no-kubelet.sock'),
        checkpointFile: join(dir, 'checkpoint'),
        cniDevinfoDir: join(dir, 'devinfo'),
        dpDevinfoDir: join(dir, 'dp'),
      },
      ...(mode === 'resident' ? { connectKube: async () => warm.client } : {}),
    });
    const conf = {
      cniVersion: '1.0.0',
      name: 'multus-cni-network',
      type: 'multus',
      kubeconfig: o.kubeconfig ?? nodeBound,
      cniDir: join(dir, `cni-${mode}`),
      delegates: [{ cniVersion: '1.0.0', name: 'cluster', type: 'p0' }],
      ...(o.publish ? { publishClaimNetworkData: true } : {}),
    };
    const cid = `cid-${mode}-${pod.name}`;
    const env = {
      CNI_COMMAND: 'ADD',
      CNI_CONTAINERID: cid,
      CNI_NETNS: testNetns(),
      CNI_IFNAME: 'eth0',
      CNI_PATH: '/nonexistent',
      CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${ns};K8S_POD_NAME=${pod.name};K8S_POD_INFRA_CONTAINER_ID=${cid};K8S_POD_UID=${pod.uid}`,
    };
    const answer = await handle(host, { env, stdin: Buffer.from(JSON.stringify(conf)) });
    // a daemon keeps its client (which posts events in the background); a thin plugin's process ends
    if (mode === 'thin') host.close();
    const devices = exec.received
      .filter((c) => c.command === 'ADD' && c.type === 'sriov')
      .map((c) => `${c.ifName}=${String(c.stdin.deviceID ?? '-')}`);
    const error = answer.exitCode === 0 ? undefined : (JSON.parse(answer.stdout) as { code: number; msg: string });
    return { answer, devices, calls: exec.calls(), error };
  }

  const networkStatus = async (pod: string) =>
    JSON.parse((await cluster.admin.get(podPath(ns, pod))).metadata.annotations[STATUS]) as Record<string, unknown>[];
  const events = async (pod: string) =>
    ((await cluster.admin.get(`/api/v1/namespaces/${ns}/events`)).items as Record<string, any>[])
      .filter((e) => e.involvedObject?.name === pod && e.type === 'Warning')
      .map((e): [string, string] => [e.reason as string, e.message as string]);
  /** The pod's Warning events, once there are some (the resident client posts them in the background; 15 s). */
  async function eventsOf(pod: string): Promise<[string, string][]> {
    let seen: [string, string][] = [];
    for (const deadline = Date.now() + 15_000; Date.now() < deadline && seen.length === 0; await sleep(100)) {
      seen = await events(pod);
    }
    return seen;
  }

  /** A kubeconfig with a token of `sa` bound to the Node object (what `multus install --token-binding=node` uses). */
  async function nodeBoundKubeconfig(sa: string, node: { name: string; uid: string }): Promise<string> {
    const res = await cluster.admin.post(`/api/v1/namespaces/${MULTUS_NAMESPACE}/serviceaccounts/${sa}/token`, {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: { expirationSeconds: 3600, boundObjectRef: { apiVersion: 'v1', kind: 'Node', ...node } },
    });
    const file = join(dir, `${sa}-node.kubeconfig`);
    const ca = readFileSync(cluster.caFile).toString('base64');
    writeFileSync(
      file,
      [
        'apiVersion: v1',
        'kind: Config',
        `clusters: [{name: c, cluster: {server: "${cluster.server}", certificate-authority-data: ${ca}}}]`,
        `users: [{name: u, user: {token: "${res.status.token as string}"}}]`,
        'contexts: [{name: x, context: {cluster: c, user: u}}]',
        'current-context: x',
        '',
      ].join('\n'),
      { mode: 0o600 },
    );
    return file;
  }

  async function rbac(docsToApply: Record<string, any>[]) {
    for (const d of docsToApply) {
      const plural = d.kind === 'ClusterRole' ? 'clusterroles' : 'clusterrolebindings';
      await cluster.admin.post(`/apis/rbac.authorization.k8s.io/v1/${plural}`, d);
    }
  }

  beforeAll(async () => {
    cluster = await startCluster();
    dir = mkdtempSync(join(tmpdir(), 'mts-select-'));
    // the kubelet's checkpoint: no device plugin on this node, so its pools are the DRA drivers'
    const checkpoint = { Data: { PodDeviceEntries: null, RegisteredDevices: {} }, Checksum: 0 };
    writeFileSync(join(dir, 'checkpoint'), JSON.stringify(checkpoint));
    // the device plugin's device-info of vf0, which network-status carries for the attachment that gets it
    mkdirSync(join(dir, 'dp'));
    const devinfo = { type: 'pci', version: '1.1.0', pci: { 'pci-address': '0000:3b:00.2' } };
    writeFileSync(join(dir, 'dp', 'example.com-vf-a-0000:3b:00.2-device.json'), JSON.stringify(devinfo));
    await cluster.admin.post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
    const node = await cluster.admin.post('/api/v1/nodes', {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: NODE },
    });
    await cluster.admin.post(`${DRA}/deviceclasses`, {
      apiVersion: 'resource.k8s.io/v1',
      kind: 'DeviceClass',
      metadata: { name: 'select' },
      spec: {},
    });
    const slice = (name: string, driver: string, devices: Record<string, object>) =>
      cluster.admin.post(`${DRA}/resourceslices`, {
        apiVersion: 'resource.k8s.io/v1',
        kind: 'ResourceSlice',
        metadata: { name },
        spec: {
          driver,
          nodeName: NODE,
          pool: { name: NODE, generation: 1, resourceSliceCount: 1 },
          devices: Object.entries(devices).map(([device, attributes]) => ({ name: device, attributes })),
        },
      });
    await slice('select-nics', NIC, {
      vf0: nicAttrs('0000:3b:00.2', POOL_A),
      vf1: nicAttrs('0000:3b:00.3', POOL_A),
      vf2: nicAttrs('0000:3b:00.4', POOL_A),
      vf3: nicAttrs('0000:3b:00.5', POOL_A),
      vf4: nicAttrs('0000:5e:00.2', POOL_B),
      vf5: nicAttrs('0000:5e:00.3', POOL_B),
    });
    await slice('select-gpus', GPU, { gpu0: { model: { string: 'x' } }, gpu1: { model: { string: 'x' } } });
    await createNad('sriov-net', { 'k8s.v1.cni.cncf.io/resourceName': POOL_A });
    await createNad('multi-net', {
      'k8s.v1.cni.cncf.io/resourceName': POOL_A,
      'k8s.v1.cni.cncf.io/allowedResourceNames': `${POOL_A},${POOL_B}`,
    });
    await createNad('any-net', {});

    // the optional manifest piece, for the test's service account and NIC driver
    const piece = docs('multus-ts-claim-network-data.yml') as Record<string, any>[];
    for (const d of piece) {
      if (d.kind === 'ClusterRole') d.rules[1].resourceNames = [NIC];
      else d.subjects = [{ kind: 'ServiceAccount', name: MULTUS_SA, namespace: MULTUS_NAMESPACE }];
    }
    await rbac(piece);
    // an account with multus' role and resourceclaims/status, but not the per-driver rule
    await cluster.admin.post(`/api/v1/namespaces/${MULTUS_NAMESPACE}/serviceaccounts`, {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name: NORULE_SA, namespace: MULTUS_NAMESPACE },
    });
    const [role] = piece;
    await rbac([
      { ...role, metadata: { name: 'no-driver-rule' }, rules: [role!.rules[0]] },
      ...['multus', 'no-driver-rule'].map((r) => ({
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRoleBinding',
        metadata: { name: `${NORULE_SA}-${r}` },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: r },
        subjects: [{ kind: 'ServiceAccount', name: NORULE_SA, namespace: MULTUS_NAMESPACE }],
      })),
    ]);
    const nodeRef = { name: NODE, uid: node.metadata.uid as string };
    nodeBound = await nodeBoundKubeconfig(MULTUS_SA, nodeRef);
    nodeBoundNoRule = await nodeBoundKubeconfig(NORULE_SA, nodeRef);
    warm = await startWarmKube({
      kubeconfig: nodeBound,
      env: {},
      nodeName: NODE,
      log: silentLogger,
      backoff: { initialMs: 100, maxMs: 500 },
    });
    expect(await warm.waitForSync(30_000)).toBe(true);
  }, 180_000);

  afterAll(async () => {
    warm?.close();
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  describe.each(['thin', 'resident'] as const)('%s: "resourceClaim"', (mode) => {
    it("the element naming the NIC request of a NIC+GPU claim takes that device, not the claim's first NIC, and no other attachment gets it", async () => {
      const claim = `gpu-nic-${mode}`;
      // "first" is allocated first: handed out in order (the pooled lookup), net1 would get vf2, not vf0
      await createClaim(
        claim,
        ['first', 'nic', 'gpu'],
        [
          ['first', NIC, 'vf2'],
          ['nic', NIC, 'vf0'],
          ['gpu', GPU, 'gpu0'],
        ],
      );
      const pod = await createPod(
        claim,
        [{ name: 'sriov-net', resourceClaim: { claimName: 'gpu-nic', requestName: 'nic' } }, { name: 'sriov-net' }],
        { 'gpu-nic': claim },
      );
      const r = await add(mode, pod);
      expect(r.answer.exitCode, r.answer.stdout).toBe(0);
      // net2 asks the NAD's pool: vf0 is net1's, so it gets the pod's other vf-a device, vf2 (as Multus would)
      expect(r.devices).toEqual(['net1=0000:3b:00.2', 'net2=0000:3b:00.4']);
      const status = await networkStatus(claim);
      expect(status[1]).toMatchObject({
        name: `${ns}/sriov-net`,
        interface: 'net1',
        'device-info': { type: 'pci', version: '1.1.0', pci: { 'pci-address': '0000:3b:00.2' } },
      });
      expect(status[2]).not.toHaveProperty('device-info');
    });

    it.each([
      [
        'an unknown claim entry',
        'nic-claim',
        'nic',
        'pod NS/P has no spec.resourceClaims entry named "nic-claim" (it has: gpu-nic)',
      ],
      ['an unknown request', 'gpu-nic', 'vf', 'ResourceClaim NS/C has no request "vf" (its requests: nic, gpu)'],
      [
        'the GPU request',
        'gpu-nic',
        'gpu',
        `device gpu1 (driver ${GPU}, pool ${NODE}) of ResourceClaim NS/C has no k8s.cni.cncf.io/deviceID attribute`,
      ],
    ])(
      '%s is code 7 naming the claim and the request, and nothing is attached',
      async (what, claimName, requestName, problem) => {
        const claim = `bad-${mode}-${requestName}-${claimName}`;
        await createClaim(
          claim,
          ['nic', 'gpu'],
          [
            ['nic', NIC, 'vf1'],
            ['gpu', GPU, 'gpu1'],
          ],
        );
        const pod = await createPod(claim, [{ name: 'sriov-net', resourceClaim: { claimName, requestName } }], {
          'gpu-nic': claim,
        });
        const r = await add(mode, pod);
        expect(r.error?.code, what).toBe(7);
        expect(r.error?.msg).toBe(
          `pod ${ns}/${claim}: the selection element for network ${ns}/sriov-net: resourceClaim {claimName: "${claimName}", requestName: "${requestName}"}: ` +
            problem.replace('NS/P', `${ns}/${claim}`).replace('NS/C', `${ns}/${claim}`),
        );
        expect(r.calls).toEqual([]);
      },
    );

    it('an unallocated claim is code 7 naming both, and nothing is attached', async () => {
      const claim = `unallocated-${mode}`;
      await createClaim(claim, ['nic']);
      const pod = await createPod(
        claim,
        [{ name: 'sriov-net', resourceClaim: { claimName: 'c', requestName: 'nic' } }],
        {
          c: claim,
        },
      );
      const r = await add(mode, pod);
      expect([r.error?.code, r.error?.msg]).toEqual([
        7,
        `pod ${ns}/${claim}: the selection element for network ${ns}/sriov-net: resourceClaim {claimName: "c", requestName: "nic"}: ResourceClaim ${ns}/${claim} is not allocated (no status.allocation.devices.results)`,
      ]);
      expect(r.calls).toEqual([]);
    });
  });

  describe.each(['thin', 'resident'] as const)('%s: "resourceName"', (mode) => {
    it("each element takes a device of the pool it picked among the NAD's allowed ones", async () => {
      const claim = `pools-${mode}`;
      await createClaim(
        claim,
        ['a', 'b'],
        [
          ['a', NIC, 'vf2'],
          ['b', NIC, 'vf4'],
        ],
      );
      const pod = await createPod(claim, [{ name: 'multi-net', resourceName: POOL_B }, { name: 'multi-net' }], {
        nics: claim,
      });
      const r = await add(mode, pod);
      expect(r.answer.exitCode, r.answer.stdout).toBe(0);
      expect(r.devices).toEqual(['net1=0000:5e:00.2', 'net2=0000:3b:00.4']);
    });

    it.each([
      [
        "a conflict with the NAD's resourceName",
        { name: 'sriov-net', resourceName: POOL_B },
        `conflicting resourceName for network NS/sriov-net: NAD annotation "${POOL_A}" does not match NetworkSelectionElement request "${POOL_B}"`,
        'ResourceNameConflict',
      ],
      [
        'a pool off the allow-list',
        { name: 'multi-net', resourceName: 'example.com/vf-c' },
        `resourceName "example.com/vf-c" of the selection element for network NS/multi-net is not in the NAD's k8s.v1.cni.cncf.io/allowedResourceNames (${POOL_A}, ${POOL_B})`,
        'ResourceNameNotAllowed',
      ],
    ])('%s is code 7 with a Warning event, before anything runs', async (_, element, msg, reason) => {
      const claim = `refused-${mode}-${reason.toLowerCase()}`;
      await createClaim(claim, ['b'], [['b', NIC, 'vf5']]);
      const pod = await createPod(claim, [element], { nics: claim });
      const r = await add(mode, pod);
      const text = msg.replace('NS/', `${ns}/`);
      expect([r.error?.code, r.error?.msg]).toEqual([7, `pod ${ns}/${claim}: error loading k8s delegates: ${text}`]);
      expect(r.calls).toEqual([]);
      expect(await eventsOf(claim)).toEqual([[reason, text]]);
    });

    it('a pool the node does not have, one the pod has no device of, and one with no device left are code 7', async () => {
      const claim = `nodev-${mode}`;
      await createClaim(claim, ['b'], [['b', NIC, 'vf5']]);
      const tries: [string, unknown[], string][] = [
        [
          'none',
          [{ name: 'any-net', resourceName: 'example.com/vf-z' }],
          `the selection element for network ${ns}/any-net: pool "example.com/vf-z" is not on node ${NODE}: no device plugin registered it and no DRA driver publishes it there (the node has: ${POOL_A}, ${POOL_B})`,
        ],
        [
          'other',
          [{ name: 'multi-net', resourceName: POOL_A }],
          `the selection element for network ${ns}/multi-net: pool "${POOL_A}" is on the node, but neither its device plugins nor its DRA claims gave the pod a device of it (the pod has: ${POOL_B})`,
        ],
        [
          'twice',
          [
            { name: 'any-net', resourceName: POOL_B },
            { name: 'multi-net', resourceName: POOL_B },
          ],
          `the selection element for network ${ns}/multi-net: pool "${POOL_B}" has no free device: the pod's 1 device(s) of it went to earlier attachments`,
        ],
      ];
      for (const [tag, networks, msg] of tries) {
        const pod = await createPod(`${claim}-${tag}`, networks, { nics: claim });
        const r = await add(mode, pod);
        expect([r.error?.code, r.error?.msg]).toEqual([7, `pod ${ns}/${claim}-${tag}: ${msg}`]);
        expect(r.calls).toEqual([]);
      }
    });
  });

  describe.each(['thin', 'resident'] as const)('%s: KEP-4817 network data under granular authorization', (mode) => {
    it("writes the claim's status.devices through a node-bound token, and it agrees with network-status", async () => {
      const claim = `kep-${mode}`;
      await createClaim(
        claim,
        ['nic', 'gpu'],
        [
          ['nic', NIC, mode === 'thin' ? 'vf0' : 'vf1'],
          ['gpu', GPU, 'gpu0'],
        ],
      );
      const pod = await createPod(
        claim,
        [{ name: 'sriov-net', resourceClaim: { claimName: 'c', requestName: 'nic' } }],
        {
          c: claim,
        },
      );
      const r = await add(mode, pod, { publish: true });
      expect(r.answer.exitCode, r.answer.stdout).toBe(0);
      const devices = (await cluster.admin.get(`${DRA}/namespaces/${ns}/resourceclaims/${claim}`)).status.devices;
      expect(devices).toEqual([
        expect.objectContaining({
          driver: NIC,
          pool: NODE,
          device: mode === 'thin' ? 'vf0' : 'vf1',
          conditions: [expect.objectContaining({ type: 'Ready', status: 'True', reason: 'NetworkConfigured' })],
        }),
      ]);
      const data = devices[0].networkData as { interfaceName: string; ips: string[]; hardwareAddress: string };
      const entry = (await networkStatus(claim)).find((s) => s.name === `${ns}/sriov-net`)!;
      // the same attachment, as network-status and the claim tell it
      expect(data.interfaceName).toBe(entry.interface);
      expect(data.ips.map((ip) => ip.split('/')[0])).toEqual(entry.ips);
      expect(data.hardwareAddress).toBe(entry.mac);
      expect(data.ips.length).toBeGreaterThan(0);
      expect(await events(claim)).toEqual([]);
    });
  });

  it.each([
    [
      'norule',
      'an account without the resourceclaims/driver rule',
      () => nodeBoundNoRule,
      `lacks "associated-node:patch" on resourceclaims/driver for driver ${NIC}: apply deployments/multus-ts-claim-network-data.yml`,
    ],
    [
      'unbound',
      'a token bound to no node',
      () => cluster.multusKubeconfig,
      'multus\' token is not bound to the claim\'s node (the API tried only "arbitrary-node:patch")',
    ],
  ])(
    'thin, %s: %s: the claim is not written, and the ADD says why in a Warning event',
    async (tag, _, kubeconfig, why) => {
      const claim = `kep-refused-${tag}`;
      await createClaim(claim, ['nic'], [['nic', NIC, 'vf3']]);
      const pod = await createPod(
        claim,
        [{ name: 'sriov-net', resourceClaim: { claimName: 'c', requestName: 'nic' } }],
        {
          c: claim,
        },
      );
      const r = await add('thin', pod, { publish: true, kubeconfig: kubeconfig() });
      expect(r.answer.exitCode, r.answer.stdout).toBe(0);
      expect(
        (await cluster.admin.get(`${DRA}/namespaces/${ns}/resourceclaims/${claim}`)).status.devices,
      ).toBeUndefined();
      const [event, ...more] = await eventsOf(claim);
      expect(more).toEqual([]);
      expect(event![0]).toBe('ClaimNetworkDataFailed');
      expect(event![1]).toContain(
        `cannot write the network data of ResourceClaim ${ns}/${claim} (status.devices): the API server's granular claim status authorization refused it: `,
      );
      expect(event![1]).toContain(why);
    },
  );
});
