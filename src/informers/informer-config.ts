/**
 * informers/informer-config.ts: @kubernetes/client-node's KubeConfig for the informers, from the same kubeconfig as the
 * lean client (or the in-cluster account), with a token file re-read before every list and watch (client-node
 * reads `token-file` once).
 * Tested by test/k8s/warm.test.ts (against a real kube-apiserver).
 */
import type { IncomingMessage } from 'node:http';
import type { KubeConfig } from '@kubernetes/client-node/dist/config.js';
import type { KubernetesListObject, KubernetesObject } from '@kubernetes/client-node/dist/types.js';
import type { Watch } from '@kubernetes/client-node/dist/watch.js';
import { CniCode, CniError, messageOf } from '../base/errors.ts';
import type { Env } from '../cni/request.ts';
import { loadKubeconfigFile, readTokenFile } from '../k8s/kubeconfig-files.ts';
import { onBoundedBody } from '../k8s/transport.ts';

/** How long one page of a list may take, and how large it may be. */
const LIST_TIMEOUT_MS = 60_000;
const MAX_LIST_BYTES = 256 << 20;

/** An object of a list, as raw JSON. */
/** What the informers report to the daemon's metrics (daemon/metrics.ts). */
export interface InformerMetrics {
  apiCall(verb: string, resource: string, seconds: number, ok: boolean): void;
  informerSynced(name: string, synced: boolean): void;
}

export type Obj = KubernetesObject & Record<string, unknown>;

/** client-node's classes, imported when the informers start (not when the daemon's bundle loads). */
export interface ClientNode {
  KubeConfig: typeof KubeConfig;
  Watch: typeof Watch;
}

/** Where the informers' credentials come from. */
export interface InformerSource {
  /** The `kubeconfig` key of the daemon's config ('' for the in-cluster service account). */
  kubeconfig: string;
  env: Env;
}

// ---------------------------------------------------------------------------------------------------------------
// client-node's KubeConfig for the informers

/**
 * The same kubeconfig as the lean client, or the in-cluster account. client-node reads `token-file` once and
 * does not know client-go's `tokenFile`: a kubeconfig with `tokenFile` gets an authenticator that reads the
 * file for every list and watch, so a rotated service-account token keeps working (as in the lean client).
 */
export async function informerConfig(o: InformerSource, cn: ClientNode): Promise<KubeConfig> {
  const kc = new cn.KubeConfig();
  try {
    if (o.kubeconfig) {
      kc.loadFromFile(o.kubeconfig);
      const lean = await loadKubeconfigFile(o.kubeconfig).catch(() => undefined);
      const tokenFile = lean?.auth.tokenFile;
      const user = kc.getCurrentUser();
      if (tokenFile && user && !user.token && !user.exec && !user.authProvider) {
        kc.addAuthenticator({
          isAuthProvider: (u) => u.name === user.name,
          applyAuthentication: async (_u, opts) => {
            opts.headers = { ...opts.headers, Authorization: `Bearer ${readTokenFile(tokenFile)}` };
          },
        });
      }
    } else if (o.env.KUBERNETES_SERVICE_HOST && o.env.KUBERNETES_SERVICE_PORT) {
      kc.loadFromCluster();
    } else {
      throw new Error('no kubeconfig and no KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT');
    }
  } catch (err) {
    const what = o.kubeconfig ? `the kubeconfig ${o.kubeconfig}` : 'the in-cluster configuration';
    throw new CniError(CniCode.Internal, `informers: cannot use ${what}: ${messageOf(err)}`, { cause: err });
  }
  if (!kc.getCurrentCluster()) {
    throw new CniError(CniCode.Internal, `informers: the kubeconfig ${o.kubeconfig} names no current cluster`);
  }
  return kc;
}

/** One page of a list, as raw JSON (the same objects a GET returns: no typed-model conversion). */
export async function getJson(kc: KubeConfig, path: string): Promise<KubernetesListObject<Obj>> {
  const server = kc.getCurrentCluster()!.server;
  const url = new URL(server.replace(/\/+$/, '') + path);
  const opts: Record<string, unknown> = { headers: { Accept: 'application/json', 'User-Agent': 'multus-ts-daemon' } };
  await kc.applyToHTTPSOptions(opts);
  const mod = url.protocol === 'http:' ? process.getBuiltinModule('node:http') : process.getBuiltinModule('node:https');
  const agent = opts.agent as { destroy?: () => void } | undefined;
  try {
    return await new Promise((resolve, reject) => {
      const req = mod.request(url, { ...opts, method: 'GET', timeout: LIST_TIMEOUT_MS }, (res: IncomingMessage) => {
        res.on('error', reject);
        onBoundedBody(res, MAX_LIST_BYTES, 'list', (body) => {
          const text = body.toString('utf8');
          if ((res.statusCode ?? 0) < 200 || (res.statusCode ?? 0) > 299) {
            let msg = `HTTP ${res.statusCode}`;
            try {
              msg += `: ${(JSON.parse(text) as { message?: string }).message ?? ''}`;
            } catch {
              // not a Status object
            }
            reject(Object.assign(new Error(msg), { statusCode: res.statusCode }));
            return;
          }
          try {
            resolve(JSON.parse(text) as KubernetesListObject<Obj>);
          } catch (err) {
            reject(err);
          }
        });
      });
      req.on('timeout', () => req.destroy(new Error(`no answer within ${LIST_TIMEOUT_MS} ms`)));
      req.on('error', reject);
      req.end();
    });
  } finally {
    agent?.destroy?.();
  }
}
