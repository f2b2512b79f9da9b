/**
 * The objects of deployments/*.yml (or of another manifest file: Multus' own, read from Go's module cache) and
 * the API collection each is created in, for the tests that send them to a real kube-apiserver
 * (test/install/manifests.test.ts, test/runtime/kubelet-suite.ts, test/runtime/multus-lane.ts).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import yaml from 'js-yaml';

export const DEPLOYMENTS_DIR = join(import.meta.dirname, '..', '..', 'deployments');

export interface Obj {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
  [k: string]: unknown;
}

/** The documents of a file of deployments/ (or of a manifest at an absolute path). */
export const docs = (file: string): Obj[] =>
  yaml
    .loadAll(readFileSync(isAbsolute(file) ? file : join(DEPLOYMENTS_DIR, file), 'utf8'))
    .filter((d): d is Obj => d !== null && d !== undefined);

/**
 * The directory of Go Multus' module (the version test/peers/gomultus/go.mod pins) in Go's module cache, where
 * test/peers/build-gomultus.sh put it: its deployments/ and images/ are read there, never copied into the repo.
 */
export function multusModuleDir(): string {
  const goMod = readFileSync(join(import.meta.dirname, '..', 'peers', 'gomultus', 'go.mod'), 'utf8');
  const version = /^require gopkg\.in\/k8snetworkplumbingwg\/multus-cni\.v4 (\S+)$/m.exec(goMod)?.[1] ?? 'v4.3.0';
  const env = { ...process.env, PATH: `${process.env.PATH ?? '/usr/bin:/bin'}:/usr/local/go/bin` };
  const fromGo = spawnSync('go', ['env', 'GOMODCACHE'], { encoding: 'utf8', env }).stdout?.trim();
  const cache = process.env.GOMODCACHE || fromGo || join(homedir(), 'go', 'pkg', 'mod');
  return join(cache, 'gopkg.in', 'k8snetworkplumbingwg', `multus-cni.v4@${version}`);
}

/** The collection URL of an object's kind (the few kinds the manifests use). */
export function collection(o: Obj): string {
  const ns = o.metadata.namespace;
  const base = o.apiVersion === 'v1' ? '/api/v1' : `/apis/${o.apiVersion}`;
  const plural: Record<string, string> = {
    ServiceAccount: 'serviceaccounts',
    ConfigMap: 'configmaps',
    DaemonSet: 'daemonsets',
    ClusterRole: 'clusterroles',
    ClusterRoleBinding: 'clusterrolebindings',
    Role: 'roles',
    RoleBinding: 'rolebindings',
    CustomResourceDefinition: 'customresourcedefinitions',
    ValidatingAdmissionPolicy: 'validatingadmissionpolicies',
    ValidatingAdmissionPolicyBinding: 'validatingadmissionpolicybindings',
    Deployment: 'deployments',
    Service: 'services',
    ValidatingWebhookConfiguration: 'validatingwebhookconfigurations',
    Issuer: 'issuers',
    Certificate: 'certificates',
    DeviceClass: 'deviceclasses',
    ResourceClaim: 'resourceclaims',
    ResourceClaimTemplate: 'resourceclaimtemplates',
    Pod: 'pods',
  };
  const p = plural[o.kind];
  if (!p) throw new Error(`no URL for kind ${o.kind}`);
  return ns ? `${base}/namespaces/${ns}/${p}` : `${base}/${p}`;
}

/**
 * Names the API server in the environment of every container of the DaemonSets among `objs` (in place), the one
 * change an operator without kube-proxy makes: no proxy serves the `kubernetes` Service IP on the tests' nodes.
 */
export function withApiServer<T extends Obj>(objs: T[], port: string): T[] {
  for (const o of objs) {
    if (o.kind !== 'DaemonSet') continue;
    const spec = (o as any).spec.template.spec;
    for (const c of [...(spec.initContainers ?? []), ...spec.containers]) {
      c.env = [
        ...(c.env ?? []),
        { name: 'KUBERNETES_SERVICE_HOST', value: '127.0.0.1' },
        { name: 'KUBERNETES_SERVICE_PORT', value: port },
      ];
    }
  }
  return objs;
}
