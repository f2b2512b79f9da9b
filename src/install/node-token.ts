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
 * `accountOf` is pure; `requestNodeToken` is the one HTTP call (node:https, 10 s deadline, 1 MiB answer).
 */
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

const MAX_ANSWER = 1 << 20;

/** POST .../serviceaccounts/<name>/token with a Node boundObjectRef. Rejects with a one-line reason. */
export async function requestNodeToken(r: NodeTokenRequest): Promise<NodeToken> {
  const path =
    `/api/v1/namespaces/${encodeURIComponent(r.namespace)}/serviceaccounts/` + `${encodeURIComponent(r.name)}/token`;
  const url = new URL(path, r.server);
  const body = JSON.stringify({
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: {
      expirationSeconds: r.expirationSeconds,
      boundObjectRef: { apiVersion: 'v1', kind: 'Node', name: r.nodeName },
    },
  });
  // getBuiltinModule, not import(): this bundle is evaluated by vm.Script inside the executable (daemon/load.ts),
  // where a dynamic import has no callback
  const mod =
    url.protocol === 'https:' ? process.getBuiltinModule('node:https') : process.getBuiltinModule('node:http');
  const what = `TokenRequest for ${r.namespace}/${r.name} bound to node ${r.nodeName}`;
  return new Promise<NodeToken>((resolve, reject) => {
    const req = mod.request(
      url,
      {
        method: 'POST',
        headers: {
          Authorization: `Bearer ${r.token}`,
          'Content-Type': 'application/json',
          Accept: 'application/json',
        },
        ...(url.protocol === 'https:' ? { ca: r.ca ?? undefined, rejectUnauthorized: r.ca !== null } : {}),
        timeout: 10_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > MAX_ANSWER) req.destroy(new Error(`${what}: the answer is over 1 MiB`));
          else chunks.push(c);
        });
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let answer: { message?: unknown; status?: { token?: unknown; expirationTimestamp?: unknown } } = {};
          try {
            answer = JSON.parse(text);
          } catch {
            // reported below
          }
          const token = answer.status?.token;
          const expiresAt = Date.parse(String(answer.status?.expirationTimestamp ?? ''));
          const status = res.statusCode ?? 0;
          if (status >= 200 && status < 300 && typeof token === 'string' && token !== '' && !Number.isNaN(expiresAt)) {
            resolve({ token, expiresAt });
            return;
          }
          const why = typeof answer.message === 'string' ? answer.message : text.slice(0, 200).replace(/\s+/g, ' ');
          reject(new Error(`${what}: HTTP ${status}: ${why}`));
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${what}: no answer within 10 s`)));
    req.on('error', (e) => reject(e.message.startsWith(what) ? e : new Error(`${what}: ${e.message}`)));
    req.end(body);
  });
}
