/**
 * `kubectl multus preflight` and `status` against a real kube-apiserver (docs/kubectl-multus.md): pods that would
 * fail under both (a missing NAD, a NAD without `type`), pods that would differ under multus-ts (IPv4 and IPv6
 * default routes on two elements, `@ifname` in the default-network annotation), pods that are fine, a hostNetwork
 * pod (skipped); kubectl's kubeconfig rules (`KUBECONFIG`, `--kubeconfig`, `--context`, `-n`, `--node`) and exit
 * codes 0/1/2.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { needs } from '../helpers/skip.ts';
import { kubectlMultus } from '../unit/operator/kubectl-run.ts';
import { type Cluster, k8sRequirements, nadPath, podPath, startCluster } from './cluster.ts';

const ready = needs(...k8sRequirements());
const NETWORKS = 'k8s.v1.cni.cncf.io/networks';
const DEFAULT_NETWORK = 'v1.multus-cni.io/default-network';
const STATUS = 'k8s.v1.cni.cncf.io/network-status';

describe.skipIf(!ready)('kubectl multus against a kube-apiserver', () => {
  let cluster: Cluster;
  const ns = `pf-${process.pid}`;
  const other = `pf-other-${process.pid}`;
  let env: Record<string, string>;
  /** A node's multus config: the cluster network a NAD in kube-system. */
  let conf = '';

  const pod = (namespace: string, name: string, annotations: Record<string, string>, spec: object = {}) =>
    cluster.admin.post(podPath(namespace), {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace, annotations },
      spec: { containers: [{ name: 'c', image: 'example.invalid/none' }], ...spec },
    });
  const nad = (namespace: string, name: string, config: string) =>
    cluster.admin.post(nadPath(namespace), {
      apiVersion: 'k8s.cni.cncf.io/v1',
      kind: 'NetworkAttachmentDefinition',
      metadata: { name, namespace },
      spec: { config },
    });

  beforeAll(async () => {
    cluster = await startCluster();
    env = { KUBECONFIG: `/nonexistent:${cluster.adminKubeconfig}` };
    conf = join(cluster.dir, '00-multus.conf');
    writeFileSync(
      conf,
      JSON.stringify({
        cniVersion: '1.0.0',
        name: 'multus-cni-network',
        type: 'multus',
        clusterNetwork: 'alt-cluster',
      }),
    );
    for (const name of [ns, other]) {
      await cluster.admin.post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
    }
    await nad(ns, 'v4', '{"cniVersion":"1.0.0","type":"macvlan"}');
    await nad(ns, 'v6', '{"cniVersion":"1.0.0","type":"ipvlan"}');
    await nad(ns, 'no-type', '{"cniVersion":"1.0.0","master":"eth1"}');
    await nad('kube-system', 'alt-cluster', '{"cniVersion":"1.0.0","type":"bridge"}');
    await pod(ns, 'fine', { [NETWORKS]: 'v4@net1,v6' });
    await pod(ns, 'plain', {});
    await pod(ns, 'missing-nad', { [NETWORKS]: 'v4,absent' });
    await pod(ns, 'bad-nad', { [NETWORKS]: 'no-type' });
    await pod(ns, 'two-routes', {
      [NETWORKS]: '[{"name":"v4","default-route":["10.1.0.1"]},{"name":"v6","default-route":["fd00::1"]}]',
    });
    await pod(ns, 'renamed-eth0', { [DEFAULT_NETWORK]: 'kube-system/alt-cluster@eth9' });
    await pod(ns, 'host', { [NETWORKS]: 'absent' }, { hostNetwork: true });
    await pod(other, 'elsewhere', { [NETWORKS]: 'absent' }, { nodeName: 'node-b' });
    const status = [
      { name: 'cbr0', interface: 'eth0', ips: ['10.244.0.5'], mac: '0a:58:0a:f4:00:05', default: true, dns: {} },
      { name: `${ns}/v4`, interface: 'net1', ips: ['10.1.0.7'], mac: '52:54:00:00:00:01', dns: {} },
    ];
    await pod(other, 'attached', { [STATUS]: JSON.stringify(status) });
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  it('preflight -o json lists the pods that would fail or differ, with the reason; exit 1', async () => {
    const r = await kubectlMultus(['preflight', '--conf', conf, '-o', 'json'], '', env);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(1);
    const pods = (
      JSON.parse(r.stdout) as { pods: { namespace: string; name: string; verdict: string; reason: string }[] }
    ).pods;
    const verdicts = Object.fromEntries(pods.map((p) => [`${p.namespace}/${p.name}`, p.verdict]));
    expect(verdicts).toEqual({
      [`${ns}/missing-nad`]: 'fails',
      [`${ns}/bad-nad`]: 'fails',
      [`${ns}/two-routes`]: 'differs',
      [`${ns}/renamed-eth0`]: 'differs',
      [`${other}/elsewhere`]: 'fails',
    });
    const reason = (name: string) => pods.find((p) => p.name === name)!.reason;
    expect(reason('missing-nad')).toMatch(/cannot find a network-attachment-definition \(absent\) in namespace/);
    expect(reason('bad-nad')).toMatch(/NetworkAttachmentDefinition .*\/no-type/);
    expect(reason('two-routes')).toMatch(/only one element may carry it.*Go Multus merges/);
    expect(reason('renamed-eth0')).toMatch(/Go Multus renames the cluster interface/);
  });

  it('-n and --node narrow the pods; a namespace where all is well exits 0', async () => {
    const narrowed = await kubectlMultus(['preflight', '--conf', conf, '-n', other, '-o', 'json'], '', env);
    expect((JSON.parse(narrowed.stdout) as { pods: { name: string }[] }).pods.map((p) => p.name)).toEqual([
      'elsewhere',
    ]);
    const node = await kubectlMultus(['preflight', '--conf', conf, '--node', 'node-b'], '', env);
    expect(node.stdout).toMatch(/^fails {3}pf-other-\d+\/elsewhere: /);
    expect(node.code).toBe(1);
    const empty = await kubectlMultus(['preflight', '--conf', conf, '--node', 'node-none'], '', env);
    expect(empty.stdout).toBe('0 pods with networks checked, 0 would fail or differ\n');
    expect(empty.code).toBe(0);
  });

  it('--kubeconfig and --context pick the cluster as kubectl does; no cluster or a bad one is exit 2', async () => {
    const text = readFileSync(cluster.adminKubeconfig, 'utf8').replace(
      /current-context: .*/,
      'current-context: nowhere',
    );
    const file = join(cluster.dir, 'two-contexts.kubeconfig');
    writeFileSync(file, text, { mode: 0o600 });
    const wrong = await kubectlMultus(['preflight', '--kubeconfig', file], '', {});
    expect(wrong.stderr).toMatch(/context was not found for specified context: nowhere/);
    expect(wrong.code).toBe(2);
    const right = await kubectlMultus(
      ['preflight', '--kubeconfig', file, '--context', 'admin-context', '-n', other],
      '',
      {},
    );
    expect(right.code).toBe(1);
    expect((await kubectlMultus(['preflight'], '', { HOME: '/nonexistent' })).code).toBe(2);
    // an API error (no RBAC to list pods) is exit 2, with the API's answer
    const forbidden = await kubectlMultus(['preflight', '--kubeconfig', cluster.noRoleKubeconfig], '', {});
    expect(forbidden.stderr).toMatch(/forbidden|Forbidden|403/);
    expect(forbidden.code).toBe(2);
  });

  it('status prints network-status as a table, and as JSON', async () => {
    const r = await kubectlMultus(['status', 'attached', '-n', other], '', env);
    const rows = r.stdout
      .trimEnd()
      .split('\n')
      .map((l) => l.split(/\s+/));
    expect(rows).toEqual([
      ['INTERFACE', 'NETWORK', 'IPS', 'MAC', 'DEFAULT', 'DEVICE'],
      ['eth0', 'cbr0', '10.244.0.5', '0a:58:0a:f4:00:05', 'true'],
      ['net1', `${ns}/v4`, '10.1.0.7', '52:54:00:00:00:01', 'false'],
    ]);
    expect(r.code).toBe(0);
    const json = await kubectlMultus(['status', 'attached', '-n', other, '-o', 'json'], '', env);
    expect((JSON.parse(json.stdout) as { interface: string }[]).map((s) => s.interface)).toEqual(['eth0', 'net1']);
    const none = await kubectlMultus(['status', 'fine', '-n', ns], '', env);
    expect(none.code).toBe(1);
    expect((await kubectlMultus(['status', 'nope', '-n', ns], '', env)).code).toBe(2);
  });

  it('plan POD reads the pod and its NADs from the API', async () => {
    const r = await kubectlMultus(['plan', 'missing-nad', '-n', ns, '--conf', conf], '', env);
    expect(r.stdout).toMatch(/cannot find a network-attachment-definition \(absent\)/);
    expect(r.code).toBe(1);
    expect((await kubectlMultus(['plan', 'fine', '-n', ns, '--conf', conf], '', env)).code).toBe(0);
  });
});
