/**
 * k8s/fallback.ts: the @kubernetes/client-node side of the Kubernetes client, loaded only on demand.
 *
 * The lean client (client.ts, transport.ts) serves token, tokenFile, client-certificate and basic-auth kubeconfigs itself. It loads this
 * module (from the SEA asset `k8s-fallback.cjs`, a `k8s-fallback.cjs` beside the bundle, or this file) only for
 * what it does not do: credentials from `user.exec` or `user.auth-provider` (OIDC, GCP, Azure), agents for
 * `cluster.proxy-url`, and YAML that its own block-style reader refuses. Requests still go through transport.ts' one
 * transport, timeout and error mapping: this module only hands over headers, TLS material and an agent.
 *
 * It imports client-node's `dist/config.js` rather than the package root so that the bundle
 * (scripts/build-k8s-fallback.mjs) leaves out the generated API classes; the version is pinned in package.json.
 * Never put a credential into an error message or log line.
 * Tested by test/unit/k8s/k8s.test.ts (the client-node fallback), test/k8s/cluster.test.ts.
 */
import type { Agent } from 'node:http';
import { KubeConfig } from '@kubernetes/client-node/dist/config.js';
import yaml from 'js-yaml';

/** What transport.ts merges into a request: headers (Authorization, Impersonate-*) and TLS options. */
export interface FallbackCredentials {
  headers: Record<string, string>;
  ca?: string | Buffer;
  cert?: string | Buffer;
  key?: string | Buffer;
  rejectUnauthorized?: boolean;
  servername?: string;
}

export interface FallbackSession {
  /** Runs the exec plugin / auth provider when its cached credential has expired. */
  credentials(): Promise<FallbackCredentials>;
  /** The proxy agent for `cluster.proxy-url` (undefined without one). */
  agent(): Agent | undefined;
}

/** Full YAML (js-yaml, as client-node). The error names the line, never the text around it. */
export function parseYaml(text: string): unknown {
  try {
    return yaml.load(text);
  } catch (err) {
    throw yamlError(err);
  }
}

function yamlError(err: unknown): Error {
  const e = err as { reason?: unknown; mark?: { line?: unknown } };
  const line = typeof e.mark?.line === 'number' ? ` at line ${e.mark.line + 1}` : '';
  return new Error(`invalid YAML${line}: ${typeof e.reason === 'string' ? e.reason : 'cannot parse'}`, { cause: err });
}

/** Every document of a YAML stream (js-yaml's loadAll; `kubectl multus validate -f`), errors as `parseYaml`'s. */
export function parseYamlDocuments(text: string): unknown[] {
  try {
    return yaml.loadAll(text);
  } catch (err) {
    throw yamlError(err);
  }
}

interface HttpsOptionsOut {
  headers: Record<string, unknown>;
  auth?: string;
  ca?: string | Buffer;
  cert?: string | Buffer;
  key?: string | Buffer;
  rejectUnauthorized?: boolean;
  servername?: string;
}

function toCredentials(o: HttpsOptionsOut): FallbackCredentials {
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(o.headers)) if (typeof v === 'string') headers[k] = v;
  if (o.auth) headers.Authorization = `Basic ${Buffer.from(o.auth).toString('base64')}`;
  const out: FallbackCredentials = { headers };
  if (o.ca) out.ca = o.ca;
  if (o.cert) out.cert = o.cert;
  if (o.key) out.key = o.key;
  if (o.rejectUnauthorized !== undefined) out.rejectUnauthorized = o.rejectUnauthorized;
  if (o.servername) out.servername = o.servername;
  return out;
}

const CREDENTIAL_TTL_MS = 60_000;

/** A client-node KubeConfig for `path` (current-context), kept for the life of the client. */
export function openKubeconfig(path: string, context?: string): FallbackSession {
  const kc = new KubeConfig();
  kc.loadFromFile(path);
  if (context) kc.setCurrentContext(context);
  let agent: Agent | undefined;
  let cached: { at: number; value: Promise<FallbackCredentials> } | undefined;
  return {
    // client-node runs an exec plugin again for every request when its credential has no expiry (7 runs per
    // ADD measured); one call needs one credential: keep it for a minute (also bounds a future daemon).
    credentials() {
      if (!cached || Date.now() - cached.at > CREDENTIAL_TTL_MS) {
        const value = (async () => {
          const opts: HttpsOptionsOut = { headers: {} };
          await kc.applyToHTTPSOptions(opts as never);
          return toCredentials(opts);
        })();
        value.catch(() => (cached = undefined));
        cached = { at: Date.now(), value };
      }
      return cached.value;
    },
    agent() {
      const cluster = kc.getCurrentCluster();
      if (!cluster?.proxyUrl) return undefined;
      // createAgent is private in the typings; it builds the socks/http(s) proxy agent client-node itself uses.
      const make = (kc as unknown as { createAgent(c: unknown, o: object): Agent }).createAgent.bind(kc);
      agent ??= make(cluster, { keepAlive: true });
      return agent;
    },
  };
}
