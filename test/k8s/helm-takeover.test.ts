/**
 * Issue 54, item 5: taking over a Go Multus install with the chart, against a real kube-apiserver. Go Multus
 * v4.3.0's own thick manifest (read from Go's module cache, never copied here) is applied as an operator would;
 * then `helm install` of our chart, which uses Multus' object names, is refused by Helm itself (the objects exist
 * and are not the release's: nothing changes), and `helm install --take-ownership` (Helm 3.17+) adopts them: the
 * DaemonSet `kube-multus-ds` and its ConfigMap become the release's, with our image. `helm uninstall` removes
 * them. docs/install.md, "Helm".
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHART, HELM, helm } from '../helpers/helm.ts';
import { collection, docs, multusModuleDir } from '../helpers/manifests.ts';
import type { Obj } from '../helpers/manifests.ts';
import { fileExists, needs } from '../helpers/skip.ts';
import { type Cluster, MULTUS_NAMESPACE, k8sRequirements, startCluster } from './cluster.ts';

const THICK = join(multusModuleDir(), 'deployments', 'multus-daemonset-thick.yml');
const THIN = join(multusModuleDir(), 'deployments', 'multus-daemonset.yml');
const ready = needs(
  ...k8sRequirements(),
  fileExists(HELM, 'helm v3.22.0 (bash test/peers/build-go-tool.sh helm)'),
  fileExists(THICK, "Go Multus v4.3.0's thick manifest (bash test/peers/build-gomultus.sh)"),
);
const DS = `/apis/apps/v1/namespaces/${MULTUS_NAMESPACE}/daemonsets/kube-multus-ds`;
const CM = `/api/v1/namespaces/${MULTUS_NAMESPACE}/configmaps/multus-daemon-config`;

describe.skipIf(!ready)('the chart over an existing Go Multus install', () => {
  let cluster: Cluster;
  const install = (...extra: string[]) =>
    helm(['install', 'multus', CHART, '-n', MULTUS_NAMESPACE, '--kubeconfig', cluster.adminKubeconfig, ...extra]);
  const thick = ['--set', 'thickPlugin.enabled=true'];

  beforeAll(async () => {
    cluster = await startCluster({ apiserverArgs: ['--allow-privileged=true'] }); // Multus' daemon is privileged
    for (const o of docs(THICK) as Obj[]) {
      if (o.kind === 'CustomResourceDefinition') continue; // the test cluster has the NAD CRD already
      const r = await cluster.admin.request('POST', collection(o), o);
      if (r.status !== 201 && r.status !== 409)
        throw new Error(`${o.kind} ${o.metadata.name}: ${r.status} ${JSON.stringify(r.body?.message)}`);
    }
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  it("a plain install is refused by Helm and changes nothing: Multus' objects are not the release's", async () => {
    const before = (await cluster.admin.request('GET', DS)).body;
    const r = install(...thick);
    expect(r.code, r.stdout).not.toBe(0);
    expect(r.stderr).toMatch(/exists and cannot be imported into the current release/);
    const after = (await cluster.admin.request('GET', DS)).body;
    expect(after.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
    expect(after.spec.template.spec.containers[0].image).toMatch(/multus-cni/);
  });

  it('--take-ownership adopts them: the DaemonSet runs our image under the release; uninstall removes it', async () => {
    const r = install(...thick, '--take-ownership');
    expect(r.code, r.stderr).toBe(0);
    const ds = (await cluster.admin.request('GET', DS)).body;
    expect(ds.metadata.labels['app.kubernetes.io/managed-by']).toBe('Helm');
    expect(ds.metadata.annotations['meta.helm.sh/release-name']).toBe('multus');
    const daemon = ds.spec.template.spec.containers.find((c: { name: string }) => c.name === 'kube-multus');
    expect(daemon.image).toMatch(/multus-ts/);
    expect(daemon.command.join(' ')).toContain('daemon');
    const cm = (await cluster.admin.request('GET', CM)).body;
    expect(cm.metadata.annotations['meta.helm.sh/release-name']).toBe('multus');
    expect(existsSync(CHART)).toBe(true);
    const u = helm(['uninstall', 'multus', '-n', MULTUS_NAMESPACE, '--kubeconfig', cluster.adminKubeconfig]);
    expect(u.code, u.stderr).toBe(0);
    expect((await cluster.admin.request('GET', DS)).status).toBe(404);
  });

  it("thin mode refuses to take over Multus' thin DaemonSet, whose init container a merge would keep", async () => {
    const ds = (docs(THIN) as Obj[]).find((o) => o.kind === 'DaemonSet')!;
    expect((await cluster.admin.request('POST', collection(ds), ds)).status).toBe(201);
    const r = install('--take-ownership');
    expect(r.code, r.stdout).not.toBe(0);
    expect(r.stderr).toContain(`delete it first (kubectl -n ${MULTUS_NAMESPACE} delete ds kube-multus-ds)`);
    const live = (await cluster.admin.request('GET', DS)).body;
    expect(live.spec.template.spec.initContainers[0].image).toMatch(/multus-cni/);
  });
});
