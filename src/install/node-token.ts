/**
 * node-token.ts: a service account token bound to the node, for `multus install --token-binding=node`
 * (docs/install.md, "Tokens").
 *
 * The token kubelet mounts in the DaemonSet's pod is bound to that pod: the API server refuses it once the pod
 * is gone, so during an upgrade (old pod deleted, new one not yet running) every CNI call on the node that
 * needs the API fails with Unauthorized. Instead, the installer asks the TokenRequest API, with the mounted
 * token, for a token of the same service account bound to the Node object: valid while the node exists and
 * until it expires (the installer renews it before that). The account is read from the mounted token's claims.
 *
 * `accountOf` is pure; `requestNodeToken` is the one HTTP call, over the Kubernetes client's transport (10 s).
 */
import { messageOf } from '../base/errors.ts';
import { silentLogger } from '../base/log.ts';
import { type Call, DeadlineError } from '../k8s/calls.ts';
import type { ClientConfig } from '../k8s/kubeconfig.ts';
import { Credentials, type Transport, createTransport, requestOptions, send } from '../k8s/transport.ts';
import { InstallError } from './options.ts';

export interface ServiceAccountRef {
  namespace: string;
  name: string;
}

export interface NodeTokenRequest extends ServiceAccountRef {
  /** https://host:port */
  server: string;
  /** PEM CA of the API server; null skips verification (--skip-tls-verify) */
  ca: Buffer | null;
  /** the mounted (pod-bound) token, the credential of the request */
  token: string;
  nodeName: string;
  expirationSeconds: number;
}

export interface NodeToken {
  token: string;
  /** ms since the epoch */
  expiresAt: number;
}

/** What the installer asks for; the API server may shorten it (--service-account-max-token-expiration). */
export const NODE_TOKEN_SECONDS = 24 * 3600;

/** The service account of a Kubernetes service account JWT (its `kubernetes.io` claim). */
export function accountOf(token: string): ServiceAccountRef {
  const payload = token.split('.')[1] ?? '';
  let claims: unknown;
  try {
    claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  } catch {
    claims = undefined;
  }
  const k8s = (
    claims as { 'kubernetes.io'?: { namespace?: unknown; serviceaccount?: { name?: unknown } } } | undefined
  )?.['kubernetes.io'];
  const namespace = k8s?.namespace;
  const name = k8s?.serviceaccount?.name;
  if (typeof namespace !== 'string' || typeof name !== 'string' || namespace === '' || name === '') {
    throw new InstallError(
      'the mounted service account token names no service account (no kubernetes.io claims): ' +
        '--token-binding=node needs the projected token kubelet mounts',
    );
  }
  return { namespace, name };
}

/** What a call made with the pod's own credentials needs: the API server, its CA (null: not verified), the token. */
export interface PodCredentials {
  /** https://host:port */
  server: string;
  ca: Buffer | null;
  token: string;
}

/**
 * One API call with the pod's credentials over the Kubernetes client's transport (k8s/transport.ts: TLS options,
 * the 32 MiB answer limit, a 10 s deadline). Rejects with `what` and a one-line reason when there is no answer.
 */
export async function callAsPod(
  r: PodCredentials,
  call: Call,
  body: Buffer | undefined,
  what: string,
): Promise<{ status: number; body: Buffer }> {
  const cfg: ClientConfig = {
    source: 'in-cluster',
    path: '',
    contextName: '',
    clusterName: '',
    userName: 'pod',
    server: r.server,
    tls: r.ca === null ? { insecureSkipTlsVerify: true } : { insecureSkipTlsVerify: false, caData: r.ca },
    auth: { token: r.token },
  };
  let transport: Transport | undefined;
  try {
    transport = createTransport(cfg, undefined);
    const auth = await new Credentials(cfg, undefined, silentLogger).forRequest();
    return await send(transport, requestOptions(transport, call, auth, body), body, 10_000);
  } catch (e) {
    const why = e instanceof DeadlineError ? 'no answer within 10 s' : messageOf(e);
    throw new Error(`${what}: ${why}`, { cause: e });
  } finally {
    transport?.agent.destroy();
  }
}

/** POST .../serviceaccounts/<name>/token with a Node boundObjectRef. Rejects with a one-line reason. */
export async function requestNodeToken(r: NodeTokenRequest): Promise<NodeToken> {
  const what = `TokenRequest for ${r.namespace}/${r.name} bound to node ${r.nodeName}`;
  const call: Call = {
    verb: 'create',
    method: 'POST',
    group: '',
    resource: 'serviceaccounts/token',
    namespace: r.namespace,
    name: r.name,
    path: `/api/v1/namespaces/${encodeURIComponent(r.namespace)}/serviceaccounts/${encodeURIComponent(r.name)}/token`,
  };
  const body = Buffer.from(
    JSON.stringify({
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: {
        expirationSeconds: r.expirationSeconds,
        boundObjectRef: { apiVersion: 'v1', kind: 'Node', name: r.nodeName },
      },
    }),
  );
  const wire = await callAsPod(r, call, body, what);
  const text = wire.body.toString('utf8');
  let answer: { message?: unknown; status?: { token?: unknown; expirationTimestamp?: unknown } } = {};
  try {
    answer = JSON.parse(text);
  } catch {
    // reported below
  }
  const token = answer.status?.token;
  const expiresAt = Date.parse(String(answer.status?.expirationTimestamp ?? ''));
  if (
    wire.status >= 200 &&
    wire.status < 300 &&
    typeof token === 'string' &&
    token !== '' &&
    !Number.isNaN(expiresAt)
  ) {
    return { token, expiresAt };
  }
  const why = typeof answer.message === 'string' ? answer.message : text.slice(0, 200).replace(/\s+/g, ' ');
  throw new Error(`${what}: HTTP ${wire.status}: ${why}`);
}
