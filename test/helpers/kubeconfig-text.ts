/** A kubeconfig of one cluster, one user and one context in the YAML the lean reader takes (k8s/yaml.ts). */
export function kubeconfigText(server: string, cluster: string[], user: string[]): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '- name: c',
    '  cluster:',
    `    server: ${server}`,
    ...cluster.map((l) => `    ${l}`),
    'users:',
    '- name: u',
    '  user:',
    ...user.map((l) => `    ${l}`),
    'contexts:',
    '- name: x',
    '  context: {cluster: c, user: u}',
    'current-context: x',
    '',
  ].join('\n');
}
