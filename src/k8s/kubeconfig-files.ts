/**
 * k8s/kubeconfig-files.ts: the file side of a client config (I/O): reading a kubeconfig, token and certificate
 * files with client-go's messages, and the pod's service account (client-go's rest.InClusterConfig).
 * Tested by test/unit/k8s/kubeconfig.test.ts.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseKubeconfigText } from './yaml.ts';
import type { ClientConfig } from './kubeconfig.ts';
import { YamlSubsetError, fail, parseServer, resolveKubeconfig } from './kubeconfig.ts';
import type { Env } from '../cni/request.ts';

// ---------------------------------------------------------------------------------------------------------------
// Files (I/O)

const errText = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** A token file's current content, whitespace trimmed (client-go's file token source). */
export function readTokenFile(file: string): string {
  return readFileSync(file, 'utf8').trim();
}

function mustRead(file: string | undefined, what: (err: string) => string): void {
  if (file === undefined) return;
  try {
    readFileSync(file);
  } catch (err) {
    fail(what(errText(err)));
  }
}

/** The files a resolved config names are readable now (client-go opens them while building its config). */
export function checkFiles(cfg: ClientConfig): void {
  const { tls, auth } = cfg;
  mustRead(tls.caFile, (e) => `unable to read certificate-authority ${tls.caFile} for ${cfg.clusterName} due to ${e}`);
  mustRead(tls.certFile, (e) => `unable to read client-cert ${tls.certFile} for ${cfg.userName} due to ${e}`);
  mustRead(tls.keyFile, (e) => `unable to read client-key ${tls.keyFile} for ${cfg.userName} due to ${e}`);
  if (auth.tokenFile !== undefined && auth.token === undefined) {
    mustRead(auth.tokenFile, (e) => `unable to read tokenFile ${auth.tokenFile} for ${cfg.userName} due to ${e}`);
  }
}

export interface KubeconfigLoadDeps {
  /** A full YAML parser for what `parseYamlSubset` refuses (js-yaml from the fallback module). */
  parseYaml?: (text: string) => Promise<unknown>;
  /** The context to use instead of current-context (kubectl's --context). */
  context?: string;
}

/** Reads, parses and resolves the kubeconfig at `path` and checks the files it names. */
export async function loadKubeconfigFile(path: string, deps: KubeconfigLoadDeps = {}): Promise<ClientConfig> {
  const text = readFileSync(path, 'utf8');
  let doc: unknown;
  try {
    doc = parseKubeconfigText(text);
  } catch (err) {
    if (!(err instanceof YamlSubsetError) || !deps.parseYaml) throw err;
    doc = await deps.parseYaml(text);
  }
  const cfg = resolveKubeconfig(doc, path, deps.context);
  checkFiles(cfg);
  return cfg;
}

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/**
 * client-go's rest.InClusterConfig: undefined unless KUBERNETES_SERVICE_HOST and _PORT are both non-empty;
 * `https://host:port` (IPv6 in brackets); the token file must be readable and is re-read per request; a CA that
 * cannot be read is a warning (system roots are used), as in client-go; the namespace file is optional.
 */
export function inClusterConfig(
  env: Env,
  saDir: string = SERVICE_ACCOUNT_DIR,
): { config: ClientConfig; warnings: string[] } | undefined {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port) return undefined;
  const tokenFile = join(saDir, 'token');
  readTokenFile(tokenFile); // throws: no service account token, no client (as client-go)
  const server = `https://${host.includes(':') ? `[${host}]` : host}:${port}`;
  const addr = parseServer(server);
  if (addr?.hostname !== host || addr.pathPrefix !== '')
    fail(`KUBERNETES_SERVICE_HOST/PORT do not form a URL: ${server}`);
  const config: ClientConfig = {
    source: 'in-cluster',
    path: saDir,
    contextName: '',
    clusterName: '',
    userName: '',
    server,
    tls: { insecureSkipTlsVerify: false },
    auth: { tokenFile },
  };
  const warnings: string[] = [];
  const caFile = join(saDir, 'ca.crt');
  try {
    readFileSync(caFile);
    config.tls.caFile = caFile;
  } catch (err) {
    warnings.push(`Expected to load root CA config from ${caFile}, but got err: ${errText(err)}`);
  }
  try {
    const ns = readFileSync(join(saDir, 'namespace'), 'utf8').trim();
    if (ns) config.namespace = ns;
  } catch {
    // optional
  }
  return { config, warnings };
}
