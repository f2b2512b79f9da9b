/**
 * Networks from claims of our DRA driver (docs/behaviour.md#claim-networks) against a real kube-apiserver (1.37):
 * claims allocated through their status subresource as the scheduler does, with the opaque configs the allocation
 * copies (the DeviceClass's and the claim's), and a pod naming one of them beside its networks annotation. An
 * in-process ADD through handle() with the resident host (delegates are the fake exec) attaches the annotation's
 * network, then the claim's NetworkSelection (a NAD) and its DeviceClass's inline cni-dra-driver `CNI` config;
 * one network-status lists all of them, the claim's entries with `resourceClaim`; the claim's `status.devices[]`
 * entries (field manager = the driver) say Ready and carry the network-status entry's interface, IPs and MAC. DEL
 * tears all down in reverse and clears the claim's entries. Refusals attach nothing: the thin plugin (code 11), an
 * inline config in the claim itself without the opt-in, namespace isolation.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sortKeysDeep } from '../../src/base/json.ts';
import { handle } from '../../src/host/handle.ts';
import { createHost } from '../../src/host/host.ts';
import type { FakeCall } from '../helpers/fake-exec.ts';
import { FakeExec, defaultResult } from '../helpers/fake-exec.ts';
import { testNetns } from '../helpers/netns.ts';
import { needs } from '../helpers/skip.ts';
import { type Cluster, k8sRequirements, nadPath, podPath, startCluster } from './cluster.ts';

const ready = needs(...k8sRequirements());
const NODE = 'node-net';
const DRIVER = 'multus.k8s.cni.cncf.io';
const DRA = '/apis/resource.k8s.io/v1';
const SELECTION = 'dra.multus.k8s.cni.cncf.io/v1alpha1';

type Result = [request: string, device: string];
interface Config {
  source: 'FromClass' | 'FromClaim';
  requests?: string[];
  parameters: Record<string, unknown>;
}

describe.skipIf(!ready)('claim networks of our DRA driver against a real kube-apiserver', () => {
  let cluster: Cluster;
  let dir: string;
  const ns = `dranet-${process.pid}`;

  /** A claim allocated on this node to our driver (each result shared: a shareID), with the allocation's configs. */
  async function createClaim(name: string, results: Result[], config: Config[]) {
    const claim = await cluster.admin.post(`${DRA}/namespaces/${ns}/resourceclaims`, {
      apiVersion: 'resource.k8s.io/v1',
      kind: 'ResourceClaim',
      metadata: { name, namespace: ns },
      spec: {
        devices: {
          requests: results.map(([request]) => ({ name: request, exactly: { deviceClassName: 'multus-net' } })),
        },
      },
    });
    claim.status = {
      allocation: {
        devices: {
          results: results.map(([request, device]) => ({
            request,
            driver: DRIVER,
            pool: NODE,
            device,
            shareID: randomUUID(),
          })),
          config: config.map((c) => ({
            source: c.source,
            ...(c.requests ? { requests: c.requests } : {}),
            // in sorted key order, as kubectl writes them: the API server's apply re-encodes opaque parameters
            // sorted and then sees the allocation changed (docs/behaviour.md#claim-networks)
            opaque: { driver: DRIVER, parameters: sortKeysDeep(c.parameters) },
          })),
        },
      },
    };
    await cluster.admin.put(`${DRA}/namespaces/${ns}/resourceclaims/${name}/status`, claim);
  }

  async function createNad(name: string, type: string) {
    await cluster.admin.post(nadPath(ns), {
      apiVersion: 'k8s.cni.cncf.io/v1',
      kind: 'NetworkAttachmentDefinition',
      metadata: { name, namespace: ns },
      spec: { config: JSON.stringify({ cniVersion: '1.0.0', name, type }) },
    });
  }

  /** A pod naming `claim` directly, with the networks annotation; the claim is reserved for it. */
  async function createPod(name: string, claim: string, networks: string) {
    const pod = await cluster.admin.post(podPath(ns), {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: ns, annotations: { 'k8s.v1.cni.cncf.io/networks': networks } },
      spec: {
        nodeName: NODE,
        resourceClaims: [{ name: 'net', resourceClaimName: claim }],
        containers: [{ name: 'app', image: 'example.invalid/none', resources: { claims: [{ name: 'net' }] } }],
      },
    });
    const path = `${DRA}/namespaces/${ns}/resourceclaims/${claim}`;
    const current = await cluster.admin.get(path);
    current.status.reservedFor = [{ resource: 'pods', name, uid: pod.metadata.uid }];
    await cluster.admin.put(`${path}/status`, current);
    return { name, uid: pod.metadata.uid as string };
  }

  /** Each plugin answers with its own address on the interface it was given (10.<n>.0.2/24). */
  const execFor = () => {
    const exec = new FakeExec('p0', 'anno', 'claimnad', 'inline');
    const subnet: Record<string, number> = { p0: 1, anno: 2, claimnad: 3, inline: 4 };
    for (const [type, n] of Object.entries(subnet)) {
      exec.returns[`${type} ADD`] = (call: FakeCall) => {
        const r = defaultResult(call);
        r.ips = [{ address: `10.${n}.0.2/24`, interface: 0 }];
        r.routes = [];
        return { stdout: Buffer.from(JSON.stringify(r)) };
      };
    }
    return exec;
  };

  async function call(
    command: 'ADD' | 'CHECK' | 'DEL',
    pod: { name: string; uid: string },
    o: { resident?: boolean; conf?: Record<string, unknown>; exec?: FakeExec } = {},
  ) {
    const exec = o.exec ?? execFor();
    const stderr: string[] = [];
    const host = createHost({ writeStderr: (t) => stderr.push(t), exec, resident: o.resident ?? true });
    const conf = {
      cniVersion: '1.0.0',
      name: 'multus-cni-network',
      type: 'multus',
      kubeconfig: cluster.multusKubeconfig,
      cniDir: join(dir, 'cni'),
      delegates: [{ cniVersion: '1.0.0', name: 'cluster', type: 'p0' }],
      draNetworks: true,
      logLevel: 'error',
      ...o.conf,
    };
    const cid = `cid-${pod.name}`;
    const env = {
      CNI_COMMAND: command,
      CNI_CONTAINERID: cid,
      CNI_NETNS: testNetns(),
      CNI_IFNAME: 'eth0',
      CNI_PATH: '/nonexistent',
      CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${ns};K8S_POD_NAME=${pod.name};K8S_POD_INFRA_CONTAINER_ID=${cid};K8S_POD_UID=${pod.uid}`,
    };
    const answer = await handle(host, { env, stdin: Buffer.from(JSON.stringify(conf)) });
    host.close();
    return { answer, calls: exec.calls(), exec, stderr: stderr.join('') };
  }

  const claimOf = (name: string) => cluster.admin.get(`${DRA}/namespaces/${ns}/resourceclaims/${name}`);
  const statusOf = async (pod: string) =>
    JSON.parse(
      (await cluster.admin.get(podPath(ns, pod))).metadata.annotations?.['k8s.v1.cni.cncf.io/network-status'] ?? '[]',
    ) as Record<string, unknown>[];

  beforeAll(async () => {
    cluster = await startCluster();
    dir = mkdtempSync(join(tmpdir(), 'mts-dranet-'));
    await cluster.admin.post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
    await cluster.admin.post(`${DRA}/deviceclasses`, {
      apiVersion: 'resource.k8s.io/v1',
      kind: 'DeviceClass',
      metadata: { name: 'multus-net' },
      spec: { selectors: [{ cel: { expression: `device.driver == "${DRIVER}"` } }] },
    });
    // the claim status of our driver: patch on resourceclaims/status and, since 1.36, the per-driver rule (this
    // token is bound to no node, so arbitrary-node; docs/behaviour.md#claim-networks)
    await cluster.admin.post('/apis/rbac.authorization.k8s.io/v1/clusterroles', {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'multus-dra-networks' },
      rules: [
        { apiGroups: ['resource.k8s.io'], resources: ['resourceclaims/status'], verbs: ['patch'] },
        {
          apiGroups: ['resource.k8s.io'],
          resources: ['resourceclaims/driver'],
          verbs: ['arbitrary-node:patch'],
          resourceNames: [DRIVER],
        },
      ],
    });
    await cluster.admin.post('/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'multus-dra-networks' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'multus-dra-networks' },
      subjects: [{ kind: 'ServiceAccount', name: 'multus', namespace: 'kube-system' }],
    });
    await createNad('anno-net', 'anno');
    await createNad('claim-net', 'claimnad');
    await createClaim(
      'both',
      [
        ['net', 'any'],
        ['raw', 'any'],
      ],
      [
        // the DeviceClass's inline config for every request, the claim's NetworkSelection for "net" (it wins there)
        {
          source: 'FromClass',
          parameters: {
            apiVersion: 'cni.networking.x-k8s.io/v1alpha1',
            kind: 'CNI',
            ifName: 'dra1',
            config: { cniVersion: '1.0.0', type: 'inline' },
          },
        },
        {
          source: 'FromClaim',
          requests: ['net'],
          parameters: { apiVersion: SELECTION, kind: 'NetworkSelection', name: 'claim-net', interface: 'dra0' },
        },
      ],
    );
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('ADD attaches the annotation’s network and the claim’s, lists them in one network-status and writes the claim’s status; DEL undoes it', async () => {
    const pod = await createPod('both', 'both', 'anno-net');
    const add = await call('ADD', pod);
    expect(add.answer.exitCode, add.answer.stdout).toBe(0);
    expect(add.calls).toEqual(['ADD p0 eth0', 'ADD anno net1', 'ADD claimnad dra0', 'ADD inline dra1']);

    const status = await statusOf('both');
    expect(status.map((e) => [e.name, e.interface, e.ips, e.resourceClaim])).toEqual([
      ['cluster', 'eth0', ['10.1.0.2'], undefined],
      [`${ns}/anno-net`, 'net1', ['10.2.0.2'], undefined],
      [`${ns}/claim-net`, 'dra0', ['10.3.0.2'], { name: 'both', request: 'net' }],
      ['both/raw', 'dra1', ['10.4.0.2'], { name: 'both', request: 'raw' }],
    ]);

    const claim = await claimOf('both');
    const results = claim.status.allocation.devices.results as Record<string, unknown>[];
    const devices = claim.status.devices as Record<string, unknown>[];
    expect(add.stderr).toBe('');
    expect(devices).toHaveLength(2);
    for (const [i, entry] of status.slice(2).entries()) {
      const device = devices.find((d) => d.shareID === results[i]!.shareID)!;
      expect(device).toMatchObject({ driver: DRIVER, pool: NODE, device: 'any' });
      expect((device.conditions as Record<string, unknown>[])[0]).toMatchObject({ type: 'Ready', status: 'True' });
      const data = device.networkData as Record<string, unknown>;
      // networkData equals the network-status entry (KEP-4817 writes the IPs as CIDRs)
      expect([data.interfaceName, (data.ips as string[]).map((ip) => ip.split('/')[0]), data.hardwareAddress]).toEqual([
        entry.interface,
        entry.ips,
        entry.mac,
      ]);
    }
    const managers = (claim.metadata.managedFields as Record<string, unknown>[]).map((m) => m.manager);
    expect(managers).toContain(DRIVER);

    // CHECK sees the claim's attachments as any other (the scratch cache records them)
    const check = await call('CHECK', pod, { conf: { prevResult: JSON.parse(add.answer.stdout) } });
    expect(check.answer.exitCode, check.answer.stdout).toBe(0);
    expect(check.calls).toEqual(['CHECK p0 eth0', 'CHECK anno net1', 'CHECK claimnad dra0', 'CHECK inline dra1']);

    const del = await call('DEL', pod);
    expect(del.answer.exitCode, del.answer.stdout).toBe(0);
    expect(del.calls).toEqual(['DEL inline dra1', 'DEL claimnad dra0', 'DEL anno net1', 'DEL p0 eth0']);
    expect((await claimOf('both')).status.devices ?? []).toEqual([]);
  }, 60_000);

  it('the thin plugin refuses a claim of our driver (code 11) and attaches nothing', async () => {
    const pod = await createPod('thin', 'both', 'anno-net');
    const add = await call('ADD', pod, { resident: false });
    expect(add.answer.exitCode).toBe(1);
    const error = JSON.parse(add.answer.stdout) as { code: number; msg: string };
    expect(error.code).toBe(11);
    expect(error.msg).toContain(
      `ResourceClaim ${ns}/both asks for networks of DRA driver ${DRIVER}, which only the resident daemon attaches (draNetworks: true)`,
    );
    expect(add.calls).toEqual([]);
  }, 60_000);

  it('refuses an inline config in the claim itself without draInlineConfigFromClaims, and honours it with', async () => {
    const inline = {
      apiVersion: 'cni.networking.x-k8s.io/v1alpha1',
      kind: 'CNI',
      config: { cniVersion: '1.0.0', type: 'inline' },
    };
    await createClaim('own', [['x', 'any']], [{ source: 'FromClaim', parameters: inline }]);
    const pod = await createPod('own', 'own', 'anno-net');
    const refused = await call('ADD', pod);
    expect(refused.answer.exitCode).toBe(1);
    const error = JSON.parse(refused.answer.stdout) as { code: number; msg: string };
    expect([error.code, error.msg]).toEqual([
      7,
      expect.stringContaining(
        `ResourceClaim ${ns}/own request x (device any): an inline CNI config in the claim itself`,
      ),
    ]);
    expect(refused.calls).toEqual([]);
    const allowed = await call('ADD', pod, { conf: { draInlineConfigFromClaims: true } });
    expect(allowed.answer.exitCode, allowed.answer.stdout).toBe(0);
    expect(allowed.calls).toEqual(['ADD p0 eth0', 'ADD anno net1', 'ADD inline net2']);
    expect((await call('DEL', pod)).answer.exitCode).toBe(0);
  }, 60_000);

  it('a NetworkSelection obeys namespace isolation with the annotation’s message', async () => {
    const other = { apiVersion: SELECTION, kind: 'NetworkSelection', namespace: 'elsewhere', name: 'claim-net' };
    await createClaim('iso', [['x', 'any']], [{ source: 'FromClaim', parameters: other }]);
    const pod = await createPod('iso', 'iso', 'anno-net');
    const add = await call('ADD', pod, { conf: { namespaceIsolation: true } });
    expect(add.answer.exitCode).toBe(1);
    expect(JSON.parse(add.answer.stdout).msg).toContain(
      `namespace isolation enabled, annotation violates permission, pod is in namespace ${ns} but refers to target namespace elsewhere (network "elsewhere/claim-net" in ResourceClaim ${ns}/iso request x)`,
    );
    expect(add.calls).toEqual([]);
  }, 60_000);
});
