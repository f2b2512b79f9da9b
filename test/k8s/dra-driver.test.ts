/**
 * The DRA driver's API traffic against a real kube-apiserver (1.37, resource.k8s.io/v1), as the multus service
 * account with a role that grants exactly what the driver needs (DRIVER_RULES, what the manifests must grant):
 *
 *   - the node's ResourceSlices (src/dra/slice-sync.ts) published from the NADs the informer holds: one slice owned by
 *     the Node, `any` and one device per opted-in NAD with its attributes, the capacity and allowMultipleAllocations
 *     as the API keeps them (consumable capacity, KEP-5075: the gate DRAConsumableCapacity is beta and on by default
 *     since 1.36, so the apiserver needs no flag); following a NAD opted out and a NAD deleted (a new
 *     pool generation each time); `multus install`'s uninstall (deleteDraSlices) removes them;
 *   - prepare (src/dra/prepare.ts) through the lean client: a good claim answered with its device and no status
 *     write; a claim naming a NAD that does not exist refused: status.devices gets Ready=False written by
 *     server-side apply with the driver's name as field manager, and the reserved pod a Warning event.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/base/log.ts';
import { fileCheckpoints } from '../../src/dra/checkpoint.ts';
import { networkDeviceName } from '../../src/dra/device-names.ts';
import { preparer } from '../../src/dra/prepare.ts';
import { startSliceSync } from '../../src/dra/slice-sync.ts';
import { deleteDraSlices } from '../../src/install/uninstall.ts';
import type { WarmKube } from '../../src/informers/informers.ts';
import { startWarmKube } from '../../src/informers/informers.ts';
import { loadKubeClient } from '../../src/k8s/client.ts';
import { needs } from '../helpers/skip.ts';
import { type Cluster, k8sRequirements, nadPath, podPath, startCluster } from './cluster.ts';

const ready = needs(...k8sRequirements());
const NODE = 'node-drv';
const DRIVER = 'multus.k8s.cni.cncf.io';
const DRA = '/apis/resource.k8s.io/v1';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What the DRA driver asks of the API (besides the informers' list/watch of NADs). */
const DRIVER_RULES = [
  { apiGroups: [''], resources: ['nodes'], verbs: ['get'] },
  {
    apiGroups: ['resource.k8s.io'],
    resources: ['resourceslices'],
    verbs: ['list', 'create', 'update', 'delete', 'deletecollection'],
  },
  { apiGroups: ['resource.k8s.io'], resources: ['resourceclaims'], verbs: ['get'] },
  { apiGroups: ['resource.k8s.io'], resources: ['resourceclaims/status'], verbs: ['patch'] },
  // a token bound to no node here, so any node (the DaemonSet's node-bound token needs associated-node:patch)
  {
    apiGroups: ['resource.k8s.io'],
    resources: ['resourceclaims/driver'],
    verbs: ['arbitrary-node:patch'],
    resourceNames: [DRIVER],
  },
  { apiGroups: ['', 'events.k8s.io'], resources: ['events'], verbs: ['create'] },
];

describe.skipIf(!ready)('the DRA driver against a real kube-apiserver', () => {
  let cluster: Cluster;
  let warm: WarmKube;
  let dir: string;
  let nodeUid: string;
  const ns = `drv-${process.pid}`;
  const controller = new AbortController();

  async function createNad(name: string, annotations: Record<string, string>) {
    await cluster.admin.post(nadPath(ns), {
      apiVersion: 'k8s.cni.cncf.io/v1',
      kind: 'NetworkAttachmentDefinition',
      metadata: { name, namespace: ns, annotations },
      spec: { config: JSON.stringify({ cniVersion: '1.0.0', name, type: 'macvlan', master: 'eth0' }) },
    });
  }
  const slices = async () =>
    ((await cluster.admin.get(`${DRA}/resourceslices`)).items as Record<string, any>[]).filter(
      (s) => s.spec.nodeName === NODE && s.spec.driver === DRIVER,
    );
  async function until(what: string, cond: () => Promise<boolean>) {
    for (const deadline = Date.now() + 15_000; Date.now() < deadline; await sleep(100)) if (await cond()) return;
    throw new Error(`timed out waiting for ${what}`);
  }

  beforeAll(async () => {
    cluster = await startCluster();
    dir = mkdtempSync(join(tmpdir(), 'mts-drv-'));
    await cluster.admin.post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
    const node = await cluster.admin.post('/api/v1/nodes', {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: NODE },
    });
    nodeUid = node.metadata.uid;
    await cluster.admin.post('/apis/rbac.authorization.k8s.io/v1/clusterroles', {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'multus-dra-driver' },
      rules: DRIVER_RULES,
    });
    await cluster.admin.post('/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'multus-dra-driver' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'multus-dra-driver' },
      subjects: [{ kind: 'ServiceAccount', name: 'multus', namespace: 'kube-system' }],
    });
    await createNad('net-a', {
      'dra.multus.k8s.cni.cncf.io/device': 'true',
      'dra.multus.k8s.cni.cncf.io/capacity': '2',
    });
    await createNad('net-b', { 'dra.multus.k8s.cni.cncf.io/device': 'true' });
    await createNad('plain', {});
    warm = await startWarmKube({ kubeconfig: cluster.multusKubeconfig, env: {}, nodeName: NODE, log: silentLogger });
    expect(await warm.waitForSync(30_000)).toBe(true);
  }, 120_000);

  afterAll(async () => {
    controller.abort();
    warm?.close();
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("publishes the node's slice, follows NAD changes with new generations, and removes it on uninstall", async () => {
    const api = (await loadKubeClient({ kubeconfig: cluster.multusKubeconfig, env: {}, log: silentLogger }))!;
    const sync = startSliceSync({
      api,
      nads: warm.nads,
      log: silentLogger,
      signal: controller.signal,
      nodeName: NODE,
      driver: DRIVER,
      debounceMs: 50,
    });
    await sync.synced();
    const [slice, ...more] = await slices();
    expect(more).toEqual([]);
    expect(slice!.metadata.ownerReferences).toEqual([
      { apiVersion: 'v1', kind: 'Node', name: NODE, uid: nodeUid, controller: true },
    ]);
    expect(slice!.spec.pool).toEqual({ name: NODE, generation: 1, resourceSliceCount: 1 });
    const devices = slice!.spec.devices as Record<string, any>[];
    expect(devices.map((d) => d.name)).toEqual(['any', networkDeviceName(ns, 'net-a'), networkDeviceName(ns, 'net-b')]);
    expect(devices.every((d) => d.allowMultipleAllocations === true)).toBe(true);
    expect(devices[1]!.capacity).toEqual({
      'dra.multus.k8s.cni.cncf.io/attachments': { value: '2', requestPolicy: { default: '1', validValues: ['1'] } },
    });
    expect(devices[1]!.attributes).toMatchObject({
      'dra.multus.k8s.cni.cncf.io/namespace': { string: ns },
      'dra.multus.k8s.cni.cncf.io/name': { string: 'net-a' },
      'dra.multus.k8s.cni.cncf.io/cniType': { string: 'macvlan' },
      'multinetwork.networking.k8s.io/podNetwork': { string: 'net-a' },
    });

    const b = await cluster.admin.get(nadPath(ns, 'net-b'));
    b.metadata.annotations['dra.multus.k8s.cni.cncf.io/device'] = 'false';
    await cluster.admin.put(nadPath(ns, 'net-b'), b);
    await until('net-b to leave', async () => (await slices())[0]?.spec.devices.length === 2);
    expect((await slices())[0]!.spec.pool.generation).toBe(2);
    await cluster.admin.del(nadPath(ns, 'net-a'));
    await until('net-a to leave', async () => (await slices())[0]?.spec.devices.length === 1);
    expect((await slices())[0]!.spec.pool.generation).toBe(3);

    controller.abort();
    const creds = { server: cluster.server, ca: readFileSync(cluster.caFile), token: cluster.multusToken };
    expect(await deleteDraSlices({ ...creds, nodeName: 'other-node', driver: DRIVER })).toMatch(/^deleted/);
    expect(await slices()).toHaveLength(1);
    expect(await deleteDraSlices({ ...creds, nodeName: NODE, driver: DRIVER })).toBe(
      `deleted the ResourceSlices of driver ${DRIVER} on node ${NODE}`,
    );
    expect(await slices()).toEqual([]);
    api.close();
  }, 60_000);

  describe('prepare', () => {
    async function allocatedClaim(name: string, nad: string, pod: { name: string; uid: string }) {
      const claim = await cluster.admin.post(`${DRA}/namespaces/${ns}/resourceclaims`, {
        apiVersion: 'resource.k8s.io/v1',
        kind: 'ResourceClaim',
        metadata: { name, namespace: ns },
        spec: { devices: { requests: [{ name: 'net', exactly: { deviceClassName: 'multus-networks' } }] } },
      });
      const parameters = { apiVersion: 'dra.multus.k8s.cni.cncf.io/v1alpha1', kind: 'NetworkSelection', name: nad };
      claim.status = {
        allocation: {
          devices: {
            results: [
              {
                request: 'net',
                driver: DRIVER,
                pool: NODE,
                device: 'any',
                shareID: '0a0b0c0d-0000-4000-8000-000000000001',
              },
            ],
            config: [{ source: 'FromClaim', requests: ['net'], opaque: { driver: DRIVER, parameters } }],
          },
        },
        reservedFor: [{ resource: 'pods', name: pod.name, uid: pod.uid }],
      };
      return (await cluster.admin.put(`${DRA}/namespaces/${ns}/resourceclaims/${name}/status`, claim)) as Record<
        string,
        any
      >;
    }

    it('answers a good claim, and refuses a claim naming no NAD: Ready=False as the driver, an event on the pod', async () => {
      await createNad('net-c', {});
      const pod = await cluster.admin.post(podPath(ns), {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'p1', namespace: ns },
        spec: { nodeName: NODE, containers: [{ name: 'c', image: 'example.invalid/none' }] },
      });
      const ref = { name: pod.metadata.name as string, uid: pod.metadata.uid as string };
      const good = await allocatedClaim('good', 'net-c', ref);
      const bad = await allocatedClaim('bad', 'missing', ref);
      const api = (await loadKubeClient({ kubeconfig: cluster.multusKubeconfig, env: {}, log: silentLogger }))!;
      const p = preparer({
        kube: api,
        checkpoints: fileCheckpoints(join(dir, 'dra')),
        driver: DRIVER,
        allowInlineFromClaim: false,
        log: silentLogger,
      });
      const answers = await p.prepare([
        { namespace: ns, name: 'good', uid: good.metadata.uid },
        { namespace: ns, name: 'bad', uid: bad.metadata.uid },
      ]);
      expect(answers[good.metadata.uid]).toEqual({
        devices: [
          {
            requestNames: ['net'],
            poolName: NODE,
            deviceName: 'any',
            cdiDeviceIds: [],
            shareId: '0a0b0c0d-0000-4000-8000-000000000001',
          },
        ],
        error: '',
      });
      expect(answers[bad.metadata.uid]!.error).toContain(`NetworkAttachmentDefinition ${ns}/missing not found`);

      const goodNow = await cluster.admin.get(`${DRA}/namespaces/${ns}/resourceclaims/good`);
      expect(goodNow.status.devices).toBeUndefined();
      const badNow = await cluster.admin.get(`${DRA}/namespaces/${ns}/resourceclaims/bad`);
      expect(badNow.status.devices).toEqual([
        {
          driver: DRIVER,
          pool: NODE,
          device: 'any',
          shareID: '0a0b0c0d-0000-4000-8000-000000000001',
          conditions: [expect.objectContaining({ type: 'Ready', status: 'False', reason: 'NetworkNotFound' })],
        },
      ]);
      const managers = (badNow.metadata.managedFields as { manager: string; subresource?: string }[])
        .filter((m) => m.subresource === 'status')
        .map((m) => m.manager);
      expect(managers).toContain(DRIVER);
      const events = (await cluster.admin.get(`/api/v1/namespaces/${ns}/events`)).items as Record<string, any>[];
      expect(events.filter((e) => e.involvedObject.name === 'p1').map((e) => [e.type, e.reason])).toEqual([
        ['Warning', 'ClaimNetworkRefused'],
      ]);
      api.close();
    }, 60_000);
  });
});
