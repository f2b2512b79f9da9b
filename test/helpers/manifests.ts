/**
 * The objects of deployments/*.yml and the API collection each is created in, for the tests that send them to
 * a real kube-apiserver (test/install/manifests.test.ts, test/runtime/kubelet.test.ts).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import yaml from 'js-yaml';

export const DEPLOYMENTS_DIR = join(import.meta.dirname, '..', '..', 'deployments');

export interface Obj {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
  [k: string]: unknown;
}

/** The documents of a file of deployments/. */
export const docs = (file: string): Obj[] =>
  yaml
    .loadAll(readFileSync(join(DEPLOYMENTS_DIR, file), 'utf8'))
    .filter((d): d is Obj => d !== null && d !== undefined);

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
