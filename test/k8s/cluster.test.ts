/**
 * Smoke test of the Kubernetes test harness (cluster.ts): a real etcd + kube-apiserver, the NAD CRD, the
 * Multus RBAC and service accounts, the kubeconfigs, the audit log, and that stop() leaves nothing behind.
 */
import { existsSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { needs } from '../helpers/skip.ts';
import {
  ApiError,
  type Cluster,
  type KubeClient,
  MULTUS_USER,
  NO_ROLE_USER,
  k8sRequirements,
  nadPath,
  podPath,
  startCluster,
  tokenOf,
} from './cluster.ts';

const ready = needs(...k8sRequirements());

const NS = 'mts-smoke';
const NAD_CONFIG = JSON.stringify({ cniVersion: '1.0.0', name: 'macvlan-net', type: 'macvlan', master: 'eth0' });

/** Waits (bounded) until the audit log holds `n` events of `user` and returns them. */
async function auditOf(cluster: Cluster, user: string, n: number) {
  const deadline = Date.now() + 5_000;
  for (;;) {
    const events = await cluster.auditEvents(user);
    if (events.length >= n || Date.now() > deadline) return events;
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe.skipIf(!ready)('real kube-apiserver harness', () => {
  let cluster: Cluster;
  let multus: KubeClient;
  let pids: number[] = [];

  beforeAll(async () => {
    cluster = await startCluster();
    console.log(
      `startCluster took ${cluster.startupMs} ms ${JSON.stringify(cluster.startupPhases)} (${cluster.server})`,
    );
    multus = cluster.client(tokenOf(cluster.multusKubeconfig));
    pids = readFileSync(`${cluster.dir}/pids`, 'utf8').trim().split(/\s+/).map(Number);
  });

  afterAll(async () => {
    await cluster?.stop();
  });

  it('creates a namespace, a pod and a NetworkAttachmentDefinition as admin', async () => {
    await cluster.admin.post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
    const pod = await cluster.admin.post(podPath(NS), {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'pod1', namespace: NS, annotations: { 'k8s.v1.cni.cncf.io/networks': 'macvlan-net' } },
      spec: { containers: [{ name: 'c', image: 'example.invalid/never-pulled:1' }] },
    });
    expect(pod.metadata.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(pod.status.phase).toBe('Pending');
    const nad = await cluster.admin.post(nadPath(NS), {
      apiVersion: 'k8s.cni.cncf.io/v1',
      kind: 'NetworkAttachmentDefinition',
      metadata: { name: 'macvlan-net', namespace: NS },
      spec: { config: NAD_CONFIG },
    });
    expect(nad.spec.config).toBe(NAD_CONFIG);
    // The static admin token works as well as the client certificate.
    const nsList = await cluster.client(cluster.adminToken).get('/api/v1/namespaces');
    expect(nsList.items.map((n: { metadata: { name: string } }) => n.metadata.name)).toContain(NS);
  });

  it('lets the multus service account get pods and NADs and update pods/status', async () => {
    const pod = await multus.get(podPath(NS, 'pod1'));
    expect(pod.metadata.annotations['k8s.v1.cni.cncf.io/networks']).toBe('macvlan-net');
    const nad = await multus.get(nadPath(NS, 'macvlan-net'));
    expect(nad.kind).toBe('NetworkAttachmentDefinition');
    expect(nad.spec.config).toBe(NAD_CONFIG);
    const list = await multus.get(nadPath(NS));
    expect(list.items).toHaveLength(1);

    pod.metadata.annotations['k8s.v1.cni.cncf.io/network-status'] = '[]';
    const updated = await multus.put(`${podPath(NS, 'pod1')}/status`, pod);
    expect(updated.metadata.annotations['k8s.v1.cni.cncf.io/network-status']).toBe('[]');
    const again = await cluster.admin.get(podPath(NS, 'pod1'));
    expect(again.metadata.annotations['k8s.v1.cni.cncf.io/network-status']).toBe('[]');

    // A stale resourceVersion is a 409 Conflict (what the retry-on-conflict loop handles).
    const stale = await multus.request('PUT', `${podPath(NS, 'pod1')}/status`, pod);
    expect(stale.status).toBe(409);
    expect(stale.body.reason).toBe('Conflict');
  });

  it('gives the same account through the tokenFile kubeconfig, and a rotated token works', async () => {
    const viaFile = cluster.client(tokenOf(cluster.multusTokenFileKubeconfig));
    expect((await viaFile.get(podPath(NS, 'pod1'))).metadata.name).toBe('pod1');
    const fresh = await cluster.issueToken('multus');
    expect(fresh).not.toBe(cluster.multusToken);
    expect((await cluster.client(fresh).get(podPath(NS, 'pod1'))).metadata.name).toBe('pod1');
  });

  it('forbids what the Multus role does not grant', async () => {
    const del = await multus.request('DELETE', podPath(NS, 'pod1'));
    expect(del.status).toBe(403);
    expect(del.body.reason).toBe('Forbidden');
    expect((await multus.request('GET', '/api/v1/namespaces/kube-system/secrets')).status).toBe(403);
    expect((await multus.request('GET', '/api/v1/secrets')).status).toBe(403);
    const noRole = cluster.client(tokenOf(cluster.noRoleKubeconfig));
    const got = await noRole.request('GET', podPath(NS, 'pod1'));
    expect(got.status).toBe(403);
    expect(got.body.message).toContain(`User "${NO_ROLE_USER}" cannot get resource "pods"`);
    await expect(noRole.get(podPath(NS, 'pod1'))).rejects.toBeInstanceOf(ApiError);
    const missing = await multus.request('GET', nadPath(NS, 'nope'));
    expect(missing.status).toBe(404);
    expect(missing.body.message).toBe('network-attachment-definitions.k8s.cni.cncf.io "nope" not found');
  });

  it('records every request of the multus user in the audit log', async () => {
    // 4 (get pod, get NAD, list NADs, put status) + 1 (stale put) + 1 (tokenFile get) + 1 (delete)
    // + 2 (secrets) + 1 (missing NAD) = 10; the rotated token is the same user: 11.
    const events = await auditOf(cluster, MULTUS_USER, 11);
    expect(events).toHaveLength(11);
    expect(events.every((e) => e.stage === 'ResponseComplete')).toBe(true);
    const summary = events.map(
      (e) =>
        `${e.verb} ${e.objectRef?.resource}${e.objectRef?.subresource ? `/${e.objectRef.subresource}` : ''} ${e.responseStatus?.code}`,
    );
    expect(summary.filter((s) => s === 'get pods 200')).toHaveLength(3);
    expect(summary).toContain('update pods/status 200');
    expect(summary).toContain('update pods/status 409');
    expect(summary).toContain('delete pods 403');
    expect(summary).toContain('get network-attachment-definitions 404');
    expect((await auditOf(cluster, NO_ROLE_USER, 2)).length).toBe(2);
  });

  it('stopApiserver() makes the server refuse connections; startApiserver() serves the same objects again', async () => {
    await cluster.stopApiserver();
    await expect(multus.request('GET', podPath(NS, 'pod1'), undefined, undefined, 5_000)).rejects.toMatchObject({
      code: 'ECONNREFUSED',
    });
    await cluster.startApiserver();
    expect((await multus.get(podPath(NS, 'pod1'))).metadata.name).toBe('pod1');
    await cluster.stopApiserver();
  });

  it('stop() removes everything, the restarted kube-apiserver included', async () => {
    const dir = cluster.dir;
    const now = readFileSync(`${dir}/pids`, 'utf8').trim().split(/\s+/).map(Number);
    expect(now.length).toBe(pids.length);
    pids = [...new Set([...pids, ...now])];
    await cluster.stop();
    expect(existsSync(dir)).toBe(false);
    for (const pid of pids) expect(() => process.kill(pid, 0)).toThrow();
  });
});
