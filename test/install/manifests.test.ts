/**
 * deployments/*.yml against a real kube-apiserver (test/k8s/cluster.ts) with server-side dry-run
 * (`?dryRun=All`): every object is validated by the API server's schemas (the DaemonSets' probes, mounts and
 * security contexts included), so a schema error fails here. Also: the thin ClusterRole holds exactly the thin
 * plugin's calls, and the resident one adds only list/watch for the daemon's informers.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseDaemonConfig } from '../../src/daemon/config.ts';
import { type Cluster, k8sRequirements, startCluster } from '../k8s/cluster.ts';
import { needs } from '../helpers/skip.ts';
import { DEPLOYMENTS_DIR, collection, docs } from '../helpers/manifests.ts';

const DIR = DEPLOYMENTS_DIR;
const ready = needs(...k8sRequirements());

const FILES = readdirSync(DIR)
  .filter((f) => f.endsWith('.yml'))
  .sort();

describe('deployments/', () => {
  it('has the CRD and both modes', () => {
    expect(FILES).toEqual([
      'multus-ts-claim-network-data.yml',
      'multus-ts-dra-networks.yml',
      'multus-ts-resident.yml',
      'multus-ts-thin.yml',
      'multus-ts-webhook.yml',
      'nad-crd.yml',
    ]);
  });

  const rules = (file: string): Array<{ resources: string[]; verbs: string[] }> =>
    docs(file).find((d) => d.kind === 'ClusterRole')!.rules as Array<{ resources: string[]; verbs: string[] }>;
  const verbs = (file: string): string[] =>
    rules(file)
      .flatMap((r) => r.resources.flatMap((res) => r.verbs.map((v) => `${v} ${res}`)))
      .sort();

  it("grants the thin plugin exactly its calls, the resident mode those plus its informers' list/watch", () => {
    const thin = [
      'create events',
      'get network-attachment-definitions',
      'get pods',
      'update pods/status',
      'get resourceclaims',
      'list resourceslices',
    ].sort();
    expect(verbs('multus-ts-thin.yml')).toEqual(thin);
    expect(verbs('multus-ts-resident.yml')).toEqual(
      [
        ...thin,
        'list pods',
        'watch pods',
        'list network-attachment-definitions',
        'watch network-attachment-definitions',
      ].sort(),
    );
  });

  it("the resident ConfigMap is a daemon config the daemon reads, with the sidecar's kubeconfig", () => {
    const cm = docs('multus-ts-resident.yml').find((d) => d.kind === 'ConfigMap')!;
    const conf = parseDaemonConfig((cm.data as Record<string, string>)['daemon-config.json']!);
    expect(conf).toMatchObject({
      chrootDir: '/hostroot',
      delegateExec: 'caller',
      cniConfigDir: '/etc/cni/net.d',
      socketDir: '/run/multus/',
    });
    expect(JSON.stringify(conf)).toContain('/etc/cni/net.d/multus.d/multus.kubeconfig');
  });

  it("the resident DaemonSet's grace period covers the daemon's drain and its requests in flight", () => {
    const cm = docs('multus-ts-resident.yml').find((d) => d.kind === 'ConfigMap')!;
    const conf = parseDaemonConfig((cm.data as Record<string, string>)['daemon-config.json']!);
    const ds = docs('multus-ts-resident.yml').find((d) => d.kind === 'DaemonSet')!;
    const grace = (ds.spec as { template: { spec: { terminationGracePeriodSeconds: number } } }).template.spec
      .terminationGracePeriodSeconds;
    expect(grace * 1000).toBeGreaterThan(conf.shutdownDrainMs + conf.shutdownGraceMs);
  });

  it("the resident daemon's readiness probe is the static shim asking the daemon on its socket, a mounted path", () => {
    const cm = docs('multus-ts-resident.yml').find((d) => d.kind === 'ConfigMap')!;
    const conf = parseDaemonConfig((cm.data as Record<string, string>)['daemon-config.json']!);
    const ds = docs('multus-ts-resident.yml').find((d) => d.kind === 'DaemonSet')!;
    type Container = {
      name: string;
      readinessProbe?: { exec: { command: string[] }; timeoutSeconds?: number };
      volumeMounts: Array<{ mountPath: string }>;
    };
    const pod = (ds.spec as { template: { spec: { containers: Container[] } } }).template.spec;
    const daemon = pod.containers.find((c) => c.readinessProbe)!;
    // not `multus --is-default-ready`: a second Bun process in the daemon's 100m / 50Mi every 10 s
    expect(daemon.readinessProbe!.exec.command).toEqual([
      '/usr/src/multus-cni/bin/multus-shim',
      '--ready',
      `--socket-dir=${conf.socketDir}`,
    ]);
    expect(daemon.readinessProbe!.timeoutSeconds).toBeGreaterThanOrEqual(5); // a throttled daemon answers late
    expect(daemon.volumeMounts.map((m) => m.mountPath.replace(/\/?$/, '/'))).toContain(conf.socketDir);
  });

  it.each(['multus-ts-thin.yml', 'multus-ts-resident.yml'])(
    "%s: the TokenRequest right comes with the chart's policy (pod token, own node, 24 h), for multus-ts",
    (file) => {
      const objs = docs(file);
      const policy = objs.find((d) => d.kind === 'ValidatingAdmissionPolicy') as any;
      expect(policy?.metadata.name).toBe('multus-ts-node-token');
      expect(policy.spec.matchConditions[0].expression).toBe(
        'request.userInfo.username == "system:serviceaccount:kube-system:multus-ts"',
      );
      // the same rules as the chart's template, which test/k8s/token-policy.test.ts runs on a kube-apiserver
      const chart = readFileSync(join(DIR, 'helm', 'multus', 'templates', 'tokenPolicy.yaml'), 'utf8');
      const block = chart.slice(chart.indexOf('  validations:'), chart.indexOf('\n---'));
      const dedented = block.replace(/^ {2}/gm, '');
      expect(policy.spec.validations).toEqual((yaml.load(dedented) as { validations: unknown }).validations);
      const binding = objs.find((d) => d.kind === 'ValidatingAdmissionPolicyBinding') as any;
      expect(binding?.spec).toMatchObject({ policyName: 'multus-ts-node-token', validationActions: ['Deny'] });
    },
  );

  it("the resident DaemonSet's init container and kubeconfig sidecar: uid 0, no capability", () => {
    const ds = docs('multus-ts-resident.yml').find((d) => d.kind === 'DaemonSet') as any;
    for (const c of ds.spec.template.spec.initContainers) {
      expect(c.securityContext, c.name).toEqual({
        runAsUser: 0,
        privileged: false,
        allowPrivilegeEscalation: false,
        capabilities: { drop: ['ALL'] },
      });
    }
  });

  it('mounts only /etc/cni/net.d and /opt/cni/bin in the thin mode', () => {
    const ds = docs('multus-ts-thin.yml').find((d) => d.kind === 'DaemonSet')!;
    const vols = (ds.spec as { template: { spec: { volumes: Array<{ hostPath?: { path: string } }> } } }).template.spec
      .volumes;
    expect(vols.map((v) => v.hostPath?.path)).toEqual(['/etc/cni/net.d', '/opt/cni/bin']);
  });
});

describe.runIf(ready)('deployments/ on a real kube-apiserver (server-side dry-run)', () => {
  let cluster: Cluster;
  beforeAll(async () => {
    // As on a real cluster's API server, privileged containers are allowed (the resident daemon is one).
    cluster = await startCluster({ apiserverArgs: ['--allow-privileged=true'] });
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  it.each(FILES)('%s is accepted', async (file) => {
    // cert-manager's kinds (the webhook's certificate) need cert-manager's CRDs, which the test cluster has not
    for (const o of docs(file).filter((d) => !d.apiVersion.startsWith('cert-manager.io/'))) {
      // The CRD exists in the test cluster already: dry-run its replacement; everything else is created.
      const exists = o.kind === 'CustomResourceDefinition';
      const url = exists ? `${collection(o)}/${o.metadata.name}` : collection(o);
      let body: unknown = o;
      if (exists) {
        const current = (await cluster.admin.request('GET', url)).body as { metadata: { resourceVersion: string } };
        body = { ...o, metadata: { ...o.metadata, resourceVersion: current.metadata.resourceVersion } };
      }
      const query = '?dryRun=All&fieldValidation=Strict';
      const res = await cluster.admin.request(exists ? 'PUT' : 'POST', `${url}${query}`, body);
      expect(res.status, `${file}: ${o.kind} ${o.metadata.name}: ${JSON.stringify(res.body)}`).toBeLessThan(300);
    }
  });

  it('rejects a broken manifest (the check can fail)', async () => {
    const ds = docs('multus-ts-thin.yml').find((d) => d.kind === 'DaemonSet')!;
    type Ds = { spec: { template: { spec: { containers: Array<Record<string, unknown>> } } } };
    const broken = JSON.parse(JSON.stringify(ds)) as Ds;
    broken.spec.template.spec.containers[0]!.volumeMounts = [{ name: 'nope', mountPath: '/x' }];
    const res = await cluster.admin.request('POST', `${collection(ds)}?dryRun=All&fieldValidation=Strict`, broken);
    expect(res.status).toBe(422);
  });
});
