/**
 * kubeconfig.ts: the service account kubeconfig Multus' entrypoint writes to <conf dir>/multus.d (pure).
 *
 * The text is Multus v4.3.0's template: server from KUBERNETES_SERVICE_PROTOCOL (default https), _HOST and
 * _PORT (IPv6 in brackets), the CA inline as base64, the token quoted. Unlike Multus, an unset host or port, or
 * a token that cannot be written inside YAML quotes, is an error (Multus writes `https://:` or a broken file),
 * and the token's trailing newline, if any, is dropped (docs/install.md).
 */
import { InstallError } from './options.ts';
import type { Env } from '../cni/request.ts';

export interface KubeconfigInputs {
  env: Readonly<Env>;
  ca: Buffer;
  token: Buffer;
  skipTlsVerify: boolean;
  /** paths, for messages */
  caPath: string;
  tokenPath: string;
}

/** The API server's URL from KUBERNETES_SERVICE_PROTOCOL (default https), _HOST and _PORT. */
export function apiServerUrl(env: Readonly<Env>): string {
  const protocol = env.KUBERNETES_SERVICE_PROTOCOL || 'https';
  const host = env.KUBERNETES_SERVICE_HOST ?? '';
  const port = env.KUBERNETES_SERVICE_PORT ?? '';
  if (host === '' || port === '') {
    throw new InstallError(
      'KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set (the kubelet sets them in a pod): ' +
        'they give the API server address for the kubeconfig',
    );
  }
  if (!/^[a-z][a-z0-9+.-]*$/i.test(protocol) || /[\s"'\\]/.test(host + port)) {
    throw new InstallError(
      `KUBERNETES_SERVICE_PROTOCOL/HOST/PORT "${protocol}", "${host}", "${port}" are not a URL part`,
    );
  }
  return `${protocol}://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

export function renderKubeconfig(i: KubeconfigInputs): string {
  const server = apiServerUrl(i.env);
  const token = i.token.toString('utf8').replace(/\r?\n$/, '');
  if (token === '') throw new InstallError(`service account token ${i.tokenPath} is empty: is the token mounted?`);
  if (!/^[\x21-\x7e]+$/.test(token) || token.includes('"') || token.includes('\\')) {
    throw new InstallError(
      `service account token ${i.tokenPath} has characters a token cannot have (a JWT is base64url)`,
    );
  }
  if (!i.skipTlsVerify && i.ca.length === 0) {
    throw new InstallError(`service account CA ${i.caPath} is empty: is the service account mounted?`);
  }
  const tls = i.skipTlsVerify
    ? 'insecure-skip-tls-verify: true'
    : `certificate-authority-data: ${i.ca.toString('base64')}`;
  return `# Kubeconfig file for Multus CNI plugin.
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: ${server}
    ${tls}
users:
- name: multus
  user:
    token: "${token}"
contexts:
- name: multus-context
  context:
    cluster: local
    user: multus
current-context: multus-context
`;
}
