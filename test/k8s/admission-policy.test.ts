/**
 * The chart's ValidatingAdmissionPolicy (deployments/helm/multus/files/validating-admission-policy.yaml), applied
 * as is to a real kube-apiserver: what CEL can check without the webhook (the networks annotation at the string
 * level, a NAD config's outline, no nested meta-plugin) is refused; good objects and pods without the annotation
 * are admitted.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { needs } from '../helpers/skip.ts';
import { type Cluster, REPO_ROOT, k8sRequirements, nadPath, podPath, startCluster } from './cluster.ts';

const ready = needs(...k8sRequirements());
const POLICY = join(REPO_ROOT, 'deployments/helm/multus/files/validating-admission-policy.yaml');
const NETWORKS = 'k8s.v1.cni.cncf.io/networks';
const API = '/apis/admissionregistration.k8s.io/v1';

describe.skipIf(!ready)('ValidatingAdmissionPolicy without the webhook', () => {
  let cluster: Cluster;
  const ns = `vap-${process.pid}`;
  let n = 0;

  const pod = (annotations: Record<string, string>) =>
    cluster.admin.request('POST', podPath(ns), {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: `p${n++}`, namespace: ns, annotations },
      spec: { containers: [{ name: 'c', image: 'example.invalid/none' }] },
    });
  const nad = (config: string) =>
    cluster.admin.request('POST', nadPath(ns), {
      apiVersion: 'k8s.cni.cncf.io/v1',
      kind: 'NetworkAttachmentDefinition',
      metadata: { name: `n${n++}`, namespace: ns },
      spec: { config },
    });

  beforeAll(async () => {
    cluster = await startCluster();
    await cluster.admin.post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
    const [policy, binding] = yaml.loadAll(readFileSync(POLICY, 'utf8'));
    await cluster.admin.post(`${API}/validatingadmissionpolicies`, policy);
    await cluster.admin.post(`${API}/validatingadmissionpolicybindings`, binding);
    // the policy takes effect in the background: wait until a bad annotation is refused
    for (let i = 0; i < 100 && (await pod({ [NETWORKS]: 'a,,b' })).status === 201; i++) {
      await new Promise((r) => setTimeout(r, 100));
    }
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  const refused: [string, string][] = [
    ['an empty element', 'net-a,,net-b'],
    ['an upper-case name', 'Net-A'],
    ['an interface name over 15 characters', 'net-a@an-interface-too-long'],
    ['a JSON form that is not an array', '{"name":"net-a"}'],
    ['a JSON array cut short', '[{"name":"net-a"}'],
  ];
  it.each(refused)('refuses a pod whose networks annotation has %s', async (_what, value) => {
    const r = await pod({ [NETWORKS]: value });
    expect(r.status).toBe(422);
    expect(r.body.message).toMatch(/ValidatingAdmissionPolicy 'multus-ts-networks'.*k8s.v1.cni.cncf.io\/networks/);
  });

  it('admits good annotations and pods without one', async () => {
    for (const value of ['net-a', 'other/net-a@net1, net-b', '[{"name":"net-a","interface":"net1"}]', '']) {
      expect((await pod({ [NETWORKS]: value })).status, value).toBe(201);
    }
    expect((await pod({})).status).toBe(201);
  });

  it('refuses a NAD config without type or plugins, not an object, or nesting multus; admits good ones', async () => {
    for (const config of [
      '{"cniVersion":"1.0.0"}',
      '"bridge"',
      '{"cniVersion":"1.0.0","type":"multus","delegates":[]}',
    ]) {
      const r = await nad(config);
      expect(r.status, config).toBe(422);
    }
    for (const config of ['{"cniVersion":"1.0.0","type":"bridge"}', '{"plugins":[{"type":"bridge"}]}', '']) {
      expect((await nad(config)).status, config).toBe(201);
    }
  });
});
