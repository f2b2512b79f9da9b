/**
 * DRA device IDs (src/devices/dra.ts) against a real kube-apiserver (1.37) with resource.k8s.io/v1: the tests
 * create ResourceSlices as a driver would, ResourceClaims allocated through their status subresource as the
 * scheduler does, and pods whose status names them, as the kubelet does. An in-process ADD through handle()
 * (delegates are the fake exec) in thin mode (the lean client from the kubeconfig) and resident mode (the
 * daemon's warm client) gives each NAD with `k8s.v1.cni.cncf.io/resourceName` its device. Cases: a claim
 * mixing a NIC and a GPU, two containers each with a claim, a device whose slice is missing, a claim not
 * allocated (an error naming it, nothing attached), an extended-resource pod (feature gate DRAExtendedResource)
 * with a matching and a mismatching device. The multus user's requests are read from the audit log: one GET per
 * claim and one LIST per driver, allowed by the role that grants exactly those (as both manifests do).
 *
 * Status writes keep what they do not own (kubernetes/kubernetes#139772: a typed PUT of pods/status wiped
 * `resourceClaimStatuses`): after an ADD's and a hot-plug's network-status write, thin and resident (the
 * informer's cached object, also when it is stale), every status field is as before: `resourceClaimStatuses`,
 * `extendedResourceClaimStatus`, and fields no client of ours models (a condition type of our own,
 * `reason`, `message`, `qosClass`).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/base/log.ts';
import type { WarmKube } from '../../src/informers/informers.ts';
import { startWarmKube } from '../../src/informers/informers.ts';
import { editNetworkStatus } from '../../src/multus/publish.ts';
import { loadKubeClient } from '../../src/k8s/client.ts';
import { handle } from '../../src/host/handle.ts';
import type { Host } from '../../src/host/host.ts';
import { createHost } from '../../src/host/host.ts';
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
const NODE = 'node-dra';
const NIC = 'sriov.dra.example.com';
const GPU = 'gpu.dra.example.com';
const RESOURCE = 'example.com/sriov';
const EXT_RESOURCE = 'example.com/ext-nic';
const DRA = '/apis/resource.k8s.io/v1';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.skipIf(!ready)('DRA device IDs against a real kube-apiserver (resource.k8s.io/v1)', () => {
  let cluster: Cluster;
  let warm: WarmKube;
  let dir: string;
  const ns = `dra-${process.pid}`;

  const attrs = (id: string | undefined, resource: string | undefined) => ({
    ...(id ? { 'k8s.cni.cncf.io/deviceID': { string: id } } : {}),
    ...(resource ? { 'k8s.cni.cncf.io/resourceName': { string: resource } } : {}),
  });

  async function createSlice(name: string, driver: string, pool: string, devices: Record<string, object>) {
    await cluster.admin.post(`${DRA}/resourceslices`, {
      apiVersion: 'resource.k8s.io/v1',
      kind: 'ResourceSlice',
      metadata: { name },
      spec: {
        driver,
        nodeName: NODE,
        pool: { name: pool, generation: 1, resourceSliceCount: 1 },
        devices: Object.entries(devices).map(([device, attributes]) => ({ name: device, attributes })),
      },
    });
  }

  /** A claim, allocated through /status as the scheduler does (results: [request, driver, pool, device]). */
  async function createClaim(name: string, results: [string, string, string, string][]) {
    const requests = [...new Set(results.map((r) => r[0]))].map((request) => ({
      name: request,
      exactly: { deviceClassName: 'dra-test' },
    }));
    const claim = await cluster.admin.post(`${DRA}/namespaces/${ns}/resourceclaims`, {
      apiVersion: 'resource.k8s.io/v1',
      kind: 'ResourceClaim',
      metadata: { name, namespace: ns },
      spec: { devices: { requests } },
    });
    if (results.length === 0) return;
    claim.status = {
      allocation: {
        devices: { results: results.map(([request, driver, pool, device]) => ({ request, driver, pool, device })) },
      },
    };
    await cluster.admin.put(`${DRA}/namespaces/${ns}/resourceclaims/${name}/status`, claim);
  }

  async function createNad(name: string, resourceName: string) {
    await cluster.admin.post(nadPath(ns), {
      apiVersion: 'k8s.cni.cncf.io/v1',
      kind: 'NetworkAttachmentDefinition',
      metadata: { name, namespace: ns, annotations: { 'k8s.v1.cni.cncf.io/resourceName': resourceName } },
      spec: { config: JSON.stringify({ cniVersion: '1.0.0', name, type: 'sriov' }) },
    });
  }

  /**
   * A pod whose containers each use claims. `template` (the default, what Multus reads): each claim is named as
   * generated from a ResourceClaimTemplate, in `status.resourceClaimStatuses` as the claim controller writes it;
   * `direct`: the spec names the claim itself, and the status lists nothing (Multus misses these).
   */
  async function createPod(
    name: string,
    networks: string,
    containers: Record<string, string[]>,
    status: Record<string, unknown> = {},
    resources: Record<string, Record<string, string>> = {},
    how: 'template' | 'direct' = 'template',
  ) {
    const claimNames = [...new Set(Object.values(containers).flat())];
    const pod = await cluster.admin.post(podPath(ns), {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: ns, annotations: { 'k8s.v1.cni.cncf.io/networks': networks } },
      spec: {
        nodeName: NODE,
        resourceClaims: claimNames.map((c) =>
          how === 'direct'
            ? { name: `ref-${c}`, resourceClaimName: c }
            : { name: `ref-${c}`, resourceClaimTemplateName: 'dra-test-template' },
        ),
        containers: Object.entries(containers).map(([c, claims]) => ({
          name: c,
          image: 'example.invalid/none',
          resources: {
            claims: claims.map((cl) => ({ name: `ref-${cl}` })),
            ...(resources[c] ? { requests: resources[c], limits: resources[c] } : {}),
          },
        })),
      },
    });
    pod.status = {
      ...pod.status,
      ...(how === 'template'
        ? { resourceClaimStatuses: claimNames.map((c) => ({ name: `ref-${c}`, resourceClaimName: c })) }
        : {}),
      ...status,
    };
    const updated = await cluster.admin.put(`${podPath(ns, name)}/status`, pod);
    return { name, uid: updated.metadata.uid as string, status: updated.status as Record<string, unknown> };
  }

  function hostFor(mode: 'thin' | 'resident', exec: FakeExec): Host {
    const devices = {
      podResourcesSocket: join(dir, 'no-kubelet.sock'),
      checkpointFile: join(dir, 'checkpoint'),
      cniDevinfoDir: join(dir, 'devinfo'),
      dpDevinfoDir: join(dir, 'dp'),
    };
    return createHost({
      writeStderr: () => {},
      exec,
      devices,
      ...(mode === 'resident' ? { connectKube: async () => warm.client } : {}),
    });
  }

  /**
   * Resident: the pod informer must have seen the status write (the kubelet runs CNI only after the scheduler
   * and the claim controller wrote it, so the daemon's watch has it by then; here the test writes it just now).
   */
  async function untilInformerHas(pod: { name: string; uid: string; status: Record<string, unknown> }) {
    const want = JSON.stringify([pod.status.resourceClaimStatuses, pod.status.extendedResourceClaimStatus]);
    for (const deadline = Date.now() + 15_000; Date.now() < deadline; await sleep(50)) {
      const before = warm.client.requestCount;
      const cached = await warm.client.getPod(ns, pod.name, { uid: pod.uid });
      const got = JSON.stringify([cached.status?.resourceClaimStatuses, cached.status?.extendedResourceClaimStatus]);
      if (warm.client.requestCount === before && got === want) return;
    }
    throw new Error(`the informer did not deliver pod ${pod.name}'s status within 15 s`);
  }

  async function add(
    mode: 'thin' | 'resident',
    pod: { name: string; uid: string; status: Record<string, unknown> },
    o: { command?: string; publish?: boolean } = {},
  ) {
    if (mode === 'resident' && o.command === undefined) await untilInformerHas(pod);
    const exec = new FakeExec('p0', 'sriov');
    const host = hostFor(mode, exec);
    const conf = {
      cniVersion: '1.0.0',
      name: 'multus-cni-network',
      type: 'multus',
      kubeconfig: cluster.multusKubeconfig,
      cniDir: join(dir, `cni-${mode}`),
      delegates: [{ cniVersion: '1.0.0', name: 'cluster', type: 'p0' }],
      ...(o.publish ? { publishClaimNetworkData: true } : {}),
    };
    const cid = `cid-${mode}-${pod.name}`;
    const env = {
      CNI_COMMAND: o.command ?? 'ADD',
      CNI_CONTAINERID: cid,
      CNI_NETNS: testNetns(),
      CNI_IFNAME: 'eth0',
      CNI_PATH: '/nonexistent',
      CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${ns};K8S_POD_NAME=${pod.name};K8S_POD_INFRA_CONTAINER_ID=${cid};K8S_POD_UID=${pod.uid}`,
    };
    const answer = await handle(host, { env, stdin: Buffer.from(JSON.stringify(conf)) });
    host.close();
    const devices = exec.received
      .filter((c) => c.command === 'ADD' && c.type === 'sriov')
      .map((c) => `${c.ifName}=${String(c.stdin.deviceID ?? '-')}`);
    return { answer, devices, calls: exec.calls() };
  }

  /** The multus user's DRA requests since `before` (claims of this namespace, all slice lists). */
  async function draAudit(before: number): Promise<string[]> {
    await sleep(300); // a line is written when its response completes
    const line = (e: AuditEvent) =>
      `${e.verb} ${e.objectRef?.resource}${e.objectRef?.name ? ` ${e.objectRef.name}` : ''} ${e.responseStatus?.code}`;
    return (await cluster.auditEvents(MULTUS_USER))
      .slice(before)
      .filter((e) => e.objectRef?.apiGroup === 'resource.k8s.io')
      .map(line);
  }
  const auditCount = async () => (await cluster.auditEvents(MULTUS_USER)).length;

  beforeAll(async () => {
    cluster = await startCluster({ apiserverArgs: ['--feature-gates=DRAExtendedResource=true'] });
    dir = mkdtempSync(join(tmpdir(), 'mts-dra-'));
    writeFileSync(join(dir, 'checkpoint'), JSON.stringify({ Data: { PodDeviceEntries: null }, Checksum: 0 }));
    await cluster.admin.post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
    await cluster.admin.post(`${DRA}/deviceclasses`, {
      apiVersion: 'resource.k8s.io/v1',
      kind: 'DeviceClass',
      metadata: { name: 'dra-test' },
      spec: {},
    });
    await cluster.admin.post(`${DRA}/deviceclasses`, {
      apiVersion: 'resource.k8s.io/v1',
      kind: 'DeviceClass',
      metadata: { name: 'dra-ext' },
      spec: { extendedResourceName: EXT_RESOURCE },
    });
    await createSlice('nic-a', NIC, 'pool-a', {
      vf0: attrs('0000:3b:00.2', RESOURCE),
      vf1: attrs('0000:3b:00.3', RESOURCE),
      vf2: attrs('0000:3b:00.4', RESOURCE),
      vf3: attrs('0000:3b:00.5', RESOURCE),
      ext0: attrs('0000:5e:00.1', EXT_RESOURCE),
      ext1: attrs('0000:5e:00.2', RESOURCE),
    });
    await createSlice('gpu-a', GPU, 'gpus', { gpu0: {}, gpu1: attrs('GPU-1', undefined) });
    // the opt-in claim write (publishClaimNetworkData) needs patch on resourceclaims/status, granted here only
    await cluster.admin.post('/apis/rbac.authorization.k8s.io/v1/clusterroles', {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'multus-claim-status' },
      rules: [
        { apiGroups: ['resource.k8s.io'], resources: ['resourceclaims/status'], verbs: ['patch'] },
        // Kubernetes 1.36+ (granular status authorization): this token is bound to no node and these claims name
        // no node, so the per-driver rule must allow any node; dra-select.test.ts runs the node-bound rule
        {
          apiGroups: ['resource.k8s.io'],
          resources: ['resourceclaims/driver'],
          verbs: ['arbitrary-node:patch'],
          resourceNames: [NIC],
        },
      ],
    });
    await cluster.admin.post('/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'multus-claim-status' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'multus-claim-status' },
      subjects: [{ kind: 'ServiceAccount', name: 'multus', namespace: 'kube-system' }],
    });
    await createNad('sriov-net', RESOURCE);
    await createNad('ext-net', EXT_RESOURCE);
    warm = await startWarmKube({
      kubeconfig: cluster.multusKubeconfig,
      env: {},
      nodeName: NODE,
      log: silentLogger,
      backoff: { initialMs: 100, maxMs: 500 },
    });
    expect(await warm.waitForSync(30_000)).toBe(true);
  }, 120_000);

  afterAll(async () => {
    warm?.close();
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  describe.each(['thin', 'resident'] as const)('%s: network data in the claim (KEP-4817)', (mode) => {
    it("ADD writes the device's status.devices entry as its own field manager, DEL removes only it", async () => {
      const name = `kep-${mode}`;
      await createClaim(name, [
        ['nic', NIC, 'pool-a', 'vf2'],
        ['gpu', GPU, 'gpus', 'gpu0'],
      ]);
      // the driver's entry for the GPU, applied as the driver would (another field manager)
      await cluster.admin.patch(
        `${DRA}/namespaces/${ns}/resourceclaims/${name}/status?fieldManager=gpu-driver&force=true`,
        {
          apiVersion: 'resource.k8s.io/v1',
          kind: 'ResourceClaim',
          metadata: { name, namespace: ns },
          status: { devices: [{ driver: GPU, pool: 'gpus', device: 'gpu0', data: { vendor: 'x' } }] },
        },
        'application/apply-patch+yaml',
      );
      const pod = await createPod(name, 'sriov-net', { app: [name] });
      const before = await auditCount();
      const r = await add(mode, pod, { publish: true });
      expect(r.answer.exitCode, r.answer.stdout).toBe(0);
      const devices = () =>
        cluster.admin
          .get(`${DRA}/namespaces/${ns}/resourceclaims/${name}`)
          .then((c) => c.status.devices as Record<string, unknown>[]);
      const written = await devices();
      expect(written).toHaveLength(2);
      expect(written).toContainEqual(expect.objectContaining({ driver: GPU, device: 'gpu0', data: { vendor: 'x' } }));
      expect(written).toContainEqual(
        expect.objectContaining({
          driver: NIC,
          pool: 'pool-a',
          device: 'vf2',
          networkData: { interfaceName: 'net1', ips: ['10.1.0.2/24'], hardwareAddress: '02:00:00:00:00:01' },
          conditions: [expect.objectContaining({ type: 'Ready', status: 'True' })],
        }),
      );
      expect(await draAudit(before)).toContainEqual(`patch resourceclaims ${name} 200`);
      const del = await add(mode, pod, { command: 'DEL', publish: true });
      expect(del.answer.exitCode, del.answer.stdout).toBe(0);
      expect(await devices()).toEqual([
        expect.objectContaining({ driver: GPU, device: 'gpu0', data: { vendor: 'x' } }),
      ]);
    });
  });

  describe.each(['thin', 'resident'] as const)('%s: status writes', (mode) => {
    const extra = (claim: string) => ({
      // Kubernetes 1.37 refuses nominatedNodeName on a pod bound to a node: reason/message are as unmodelled
      reason: 'NobodyKnowsMe',
      message: 'kept?',
      conditions: [{ type: 'example.com/NobodyKnowsMe', status: 'True', reason: 'Test', message: 'kept?' }],
      extendedResourceClaimStatus: {
        resourceClaimName: claim,
        requestMappings: [{ containerName: 'app', resourceName: EXT_RESOURCE, requestName: 'container-0-request-0' }],
      },
    });
    const withoutAnnotation = async (name: string) => {
      const p = await cluster.admin.get(podPath(ns, name));
      return { status: p.status, annotations: p.metadata.annotations as Record<string, string> };
    };

    it("an ADD's and a hot-plug's network-status write keep every status field, the informer's copy included", async () => {
      const name = `keep-${mode}`;
      await createClaim(`${name}-nic`, [['nic', NIC, 'pool-a', 'vf0']]);
      await createClaim(`${name}-ext`, [['container-0-request-0', NIC, 'pool-a', 'ext0']]);
      const pod = await createPod(name, 'sriov-net', { app: [`${name}-nic`] }, extra(`${name}-ext`), {
        app: { [EXT_RESOURCE]: '1' },
      });
      const before = await withoutAnnotation(name);
      expect(before.status.resourceClaimStatuses).toHaveLength(1);
      expect(before.status.extendedResourceClaimStatus).toBeDefined();
      expect(before.status.conditions).toContainEqual(expect.objectContaining({ type: 'example.com/NobodyKnowsMe' }));
      if (mode === 'resident') {
        await untilInformerHas(pod);
        expect((await warm.client.getPod(ns, name, { uid: pod.uid })).status).toEqual(before.status);
      }
      const r = await add(mode, pod);
      expect(r.answer.exitCode, r.answer.stdout).toBe(0);
      const afterAdd = await withoutAnnotation(name);
      expect(afterAdd.status).toEqual(before.status);
      expect(JSON.parse(afterAdd.annotations['k8s.v1.cni.cncf.io/network-status']!)).toHaveLength(2);

      // the network-status writer (src/multus/publish.ts) as hot-plug calls it, from the same kind of client and pod copy
      const kube =
        mode === 'resident'
          ? warm.client
          : (await loadKubeClient({ kubeconfig: cluster.multusKubeconfig, env: {}, log: silentLogger }))!;
      if (mode === 'resident') await untilInformerHas(pod);
      const copy = await kube.getPod(ns, name, { uid: pod.uid });
      await editNetworkStatus(
        kube,
        copy,
        (entries) => [...entries, { name: `${ns}/hot`, interface: 'net9', dns: {} }],
        silentLogger,
      );
      const afterHotplug = await withoutAnnotation(name);
      expect(afterHotplug.status).toEqual(before.status);
      expect(
        JSON.parse(afterHotplug.annotations['k8s.v1.cni.cncf.io/network-status']!).map(
          (e: { interface?: string }) => e.interface,
        ),
      ).toEqual(['eth0', 'net1', 'net9']);
    });

    it('a status field written after the copy was read survives: the write gets a 409, re-reads, and keeps it', async () => {
      const name = `stale-${mode}`;
      await createClaim(`${name}-nic`, [['nic', NIC, 'pool-a', 'vf1']]);
      const pod = await createPod(name, 'sriov-net', { app: [`${name}-nic`] });
      const kube =
        mode === 'resident'
          ? warm.client
          : (await loadKubeClient({ kubeconfig: cluster.multusKubeconfig, env: {}, log: silentLogger }))!;
      if (mode === 'resident') await untilInformerHas(pod);
      const copy = await kube.getPod(ns, name, { uid: pod.uid }); // then someone else writes the status
      const cur = await cluster.admin.get(podPath(ns, name));
      cur.status.conditions = [...(cur.status.conditions ?? []), { type: 'example.com/Later', status: 'True' }];
      await cluster.admin.put(`${podPath(ns, name)}/status`, cur);
      await editNetworkStatus(kube, copy, () => [{ name: `${ns}/hot`, interface: 'net9', dns: {} }], silentLogger);
      const after = await withoutAnnotation(name);
      expect(after.status.conditions).toContainEqual(expect.objectContaining({ type: 'example.com/Later' }));
      expect(after.status.resourceClaimStatuses).toEqual(pod.status.resourceClaimStatuses);
      expect(after.annotations['k8s.v1.cni.cncf.io/network-status']).toContain('net9');
    });
  });

  describe.each(['thin', 'resident'] as const)('%s', (mode) => {
    it('a claim mixing a NIC and a GPU: the NIC is the attachment deviceID, the GPU is skipped', async () => {
      await createClaim(`mixed-${mode}`, [
        ['gpu', GPU, 'gpus', 'gpu0'],
        ['gpu', GPU, 'gpus', 'gpu1'],
        ['nic', NIC, 'pool-a', mode === 'thin' ? 'vf0' : 'vf1'],
      ]);
      const pod = await createPod(`mixed-${mode}`, 'sriov-net', { app: [`mixed-${mode}`] });
      const before = await auditCount();
      const r = await add(mode, pod);
      expect(r.answer.exitCode, r.answer.stdout).toBe(0);
      expect(r.devices).toEqual([`net1=${mode === 'thin' ? '0000:3b:00.2' : '0000:3b:00.3'}`]);
      // one GET of the claim, one LIST per driver, every one allowed by the role
      expect((await draAudit(before)).sort()).toEqual(
        [`get resourceclaims mixed-${mode} 200`, 'list resourceslices 200', 'list resourceslices 200'].sort(),
      );
    });

    it('two containers, each with a claim named in the spec: each attachment gets its container claim device, in order', async () => {
      await createClaim(`first-${mode}`, [['nic', NIC, 'pool-a', 'vf3']]);
      await createClaim(`second-${mode}`, [['nic', NIC, 'pool-a', 'vf2']]);
      // named directly in the spec, so absent from status.resourceClaimStatuses (beyond Multus, which reads only that)
      const pod = await createPod(
        `two-${mode}`,
        'sriov-net,sriov-net',
        { first: [`first-${mode}`], second: [`second-${mode}`] },
        {},
        {},
        'direct',
      );
      const before = await auditCount();
      const r = await add(mode, pod);
      expect(r.answer.exitCode, r.answer.stdout).toBe(0);
      expect(r.devices).toEqual(['net1=0000:3b:00.5', 'net2=0000:3b:00.4']);
      expect((await draAudit(before)).filter((l) => l.startsWith('list'))).toEqual(['list resourceslices 200']);
    });

    // defined in resident mode only (a runIf skip would count as a skip in CI)
    if (mode === 'resident')
      it('a fresh getPod goes past the informer cache: one GET', async () => {
        const pod = await createPod(`fresh-${mode}`, 'sriov-net', { app: [] });
        await untilInformerHas(pod);
        const before = warm.client.requestCount;
        await warm.client.getPod(ns, pod.name, { uid: pod.uid });
        expect(warm.client.requestCount - before).toBe(0);
        await warm.client.getPod(ns, pod.name, { uid: pod.uid, fresh: true });
        expect(warm.client.requestCount - before).toBe(1);
      });

    it('a device whose slice is missing is skipped (the attachment gets no deviceID), as Multus does', async () => {
      await createClaim(`noslice-${mode}`, [['nic', NIC, 'pool-gone', 'vf9']]);
      const pod = await createPod(`noslice-${mode}`, 'sriov-net', { app: [`noslice-${mode}`] });
      const r = await add(mode, pod);
      expect(r.answer.exitCode, r.answer.stdout).toBe(0);
      expect(r.devices).toEqual(['net1=-']);
    });

    it('a claim that is not allocated: code 11 naming it, and nothing is attached', async () => {
      await createClaim(`pending-${mode}`, []);
      const pod = await createPod(`pending-${mode}`, 'sriov-net', { app: [`pending-${mode}`] });
      const r = await add(mode, pod);
      expect(r.answer.exitCode).toBe(1);
      const err = JSON.parse(r.answer.stdout) as { code: number; msg: string };
      expect(err.code).toBe(11);
      expect(err.msg).toContain(`ResourceClaim ${ns}/pending-${mode} has no device allocation`);
      expect(r.calls).toEqual([]); // resolved before any delegate ran
    });

    it('an extended-resource pod: mapped strictly, a device with another resourceName fails naming it', async () => {
      const ext = async (name: string, device: string) => {
        await createClaim(name, [['container-0-request-0', NIC, 'pool-a', device]]);
        const extended = {
          extendedResourceClaimStatus: {
            resourceClaimName: name,
            requestMappings: [
              { containerName: 'app', resourceName: EXT_RESOURCE, requestName: 'container-0-request-0' },
            ],
          },
        };
        const pod = await createPod(name, 'ext-net', { app: [] }, extended, { app: { [EXT_RESOURCE]: '1' } });
        expect(pod.status.extendedResourceClaimStatus, 'the API server keeps the field (feature gate)').toBeDefined();
        return pod;
      };
      const good = await add(mode, await ext(`ext-good-${mode}`, 'ext0'));
      expect(good.answer.exitCode, good.answer.stdout).toBe(0);
      expect(good.devices).toEqual(['net1=0000:5e:00.1']);
      const bad = await add(mode, await ext(`ext-bad-${mode}`, 'ext1'));
      expect(bad.answer.exitCode).toBe(1);
      expect(JSON.parse(bad.answer.stdout).msg).toMatch(
        new RegExp(
          `device ext1 \\(driver ${NIC}, pool pool-a\\) of ResourceClaim ${ns}/ext-bad-${mode}.*must be "${EXT_RESOURCE}"`,
        ),
      );
      expect(bad.calls).toEqual([]);
    });
  });
});
