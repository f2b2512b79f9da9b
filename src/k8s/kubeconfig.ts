/**
 * kubeconfig.ts: what a Kubernetes client needs from a kubeconfig (pure resolution; the file reads and the
 * pod's service account are kubeconfig-files.ts', the text's parsing yaml.ts').
 *
 * A kubeconfig's text is read by yaml.ts' `parseKubeconfigText` (JSON, or YAML in the block style kubectl,
 * kubeadm, kind, k3s and Multus' entrypoint write; anything else goes to js-yaml in the lazily loaded fallback).
 * `resolveKubeconfig` follows current-context to its cluster and user the way client-go's ClientConfig does
 * (paths relative to the kubeconfig's directory, data fields before file fields, the same validation
 * messages) and says whether the lean client can serve it (`fallback` undefined) or the user needs
 * @kubernetes/client-node (`exec`, `auth-provider`) or a proxy (`proxy-url`). Tokens, passwords and keys are kept as values and never put into a message.
 */
import { dirname, isAbsolute, join } from 'node:path';
import { isObject } from '../base/json.ts';
import { isDns1123Label } from '../base/names.ts';

// ---------------------------------------------------------------------------------------------------------------
// Types

/** TLS material: `*Data` from the kubeconfig (decoded), `*File` absolute paths read when a client is built. */
export interface TlsSettings {
  caData?: Buffer;
  caFile?: string;
  certData?: Buffer;
  certFile?: string;
  keyData?: Buffer;
  keyFile?: string;
  insecureSkipTlsVerify: boolean;
  serverName?: string;
}

/** Credentials of the lean path. `tokenFile` wins over `token` and is re-read for every request. */
export interface AuthSettings {
  token?: string;
  tokenFile?: string;
  username?: string;
  password?: string;
}

export interface Impersonation {
  user: string;
  uid?: string;
  groups: string[];
  extra: Record<string, string[]>;
}

export interface ClientConfig {
  source: 'kubeconfig' | 'in-cluster';
  /** The kubeconfig file, or the service-account directory. */
  path: string;
  contextName: string;
  clusterName: string;
  userName: string;
  /** `https://host:port[/prefix]`, as written (no trailing slash). */
  server: string;
  namespace?: string;
  tls: TlsSettings;
  auth: AuthSettings;
  impersonate?: Impersonation;
  /** Set when @kubernetes/client-node must supply the credentials or the (proxy) agent; undefined: all lean. */
  fallback?: FallbackNeed;
}

export interface FallbackNeed {
  /** `user.exec`, `user.auth-provider (<name>)`, `cluster.proxy-url` (joined by `, `). */
  reason: string;
  auth: boolean;
  proxy: boolean;
}

/** The text is valid YAML that the lean reader does not handle; parse it with a full YAML parser. */
export class YamlSubsetError extends Error {}
Object.defineProperty(YamlSubsetError.prototype, 'name', { value: 'YamlSubsetError', enumerable: false });

/** A kubeconfig that client-go would refuse too; `message` is the detail after Multus' prefix. */
export class KubeconfigError extends Error {}
Object.defineProperty(KubeconfigError.prototype, 'name', { value: 'KubeconfigError', enumerable: false });

// ---------------------------------------------------------------------------------------------------------------
// Resolution: current-context → cluster and user (pure)

type Obj = Record<string, unknown>;
export const fail = (msg: string): never => {
  throw new KubeconfigError(msg);
};

/** `clusters`/`users`/`contexts`: a list of `{name, <inner>: {...}}`, as a map by name. */
function namedEntries(doc: Obj, list: string, inner: string): Map<string, Obj> {
  const out = new Map<string, Obj>();
  const v = doc[list];
  if (v === undefined || v === null) return out;
  if (!Array.isArray(v)) return fail(`${list} must be a list`);
  v.forEach((entry: unknown, i) => {
    if (!isObject(entry) || typeof entry.name !== 'string') return fail(`${list}[${i}] must be an object with a name`);
    if (out.has(entry.name)) fail(`duplicate name "${entry.name}" in ${list}`);
    const body = entry[inner] ?? {};
    if (!isObject(body)) fail(`${list}[${i}].${inner} must be an object`);
    out.set(entry.name, body as Obj);
  });
  return out;
}

function str(o: Obj, key: string, where: string): string | undefined {
  const v = o[key];
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') return fail(`${where}: ${key} must be a string`);
  return v;
}

function bool(o: Obj, key: string, where: string): boolean {
  const v = o[key];
  if (v === undefined || v === null) return false;
  if (typeof v !== 'boolean') return fail(`${where}: ${key} must be true or false`);
  return v;
}

/** A `*-data` field: base64 as Go's encoding/json reads []byte (line breaks ignored). */
function b64(o: Obj, key: string, where: string): Buffer | undefined {
  const v = str(o, key, where)?.replace(/[\r\n]/g, '');
  if (v === undefined) return undefined;
  if (v.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(v)) return fail(`${where}: ${key} is not valid base64`);
  return Buffer.from(v, 'base64');
}

const absolute = (dir: string, p: string | undefined): string | undefined =>
  p === undefined || isAbsolute(p) || dir === '' ? p : join(dir, p);

function stringList(o: Obj, key: string, where: string): string[] {
  const v = o[key];
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string'))
    return fail(`${where}: ${key} must be a list of strings`);
  return v as string[];
}

function impersonation(user: Obj, where: string): Impersonation | undefined {
  const name = str(user, 'as', where);
  const groups = stringList(user, 'as-groups', where);
  const rawExtra = user['as-user-extra'] ?? {};
  if (!isObject(rawExtra)) return fail(`${where}: as-user-extra must be a map of string lists`);
  const extra: Record<string, string[]> = {};
  for (const k of Object.keys(rawExtra)) extra[k] = stringList(rawExtra, k, `${where}: as-user-extra`);
  const uid = str(user, 'as-uid', where);
  if (name === undefined) {
    if (groups.length > 0 || Object.keys(extra).length > 0)
      fail(`requesting groups or user-extra for ${where} without impersonating a user`);
    return undefined;
  }
  return { user: name, groups, extra, ...(uid === undefined ? {} : { uid }) };
}

export interface ServerAddress {
  protocol: 'http:' | 'https:';
  /** Without brackets: `10.96.0.1`, `fd00::1`, `api.example`. */
  hostname: string;
  port: number;
  /** The server URL's path (`/k8s/clusters/c-1`), no trailing slash; '' for none. */
  pathPrefix: string;
}

const SERVER = /^(https?):\/\/(\[[0-9A-Fa-f:.%a-z]+\]|[-A-Za-z0-9._~%]+)(?::([0-9]{1,5}))?(\/[^?#]*)?$/i;

/**
 * `scheme://host[:port][/path]` as Go's url.Parse reads a kubeconfig server, which (unlike WHATWG URL) accepts an
 * IPv4 address in brackets: Multus' entrypoint writes `https://[10.96.0.1]:443`. Undefined when it is not one.
 */
export function parseServer(server: string): ServerAddress | undefined {
  const m = SERVER.exec(server);
  if (!m) return undefined;
  const scheme = (m[1] ?? '').toLowerCase();
  const host = m[2] ?? '';
  const port = m[3] === undefined ? (scheme === 'http' ? 80 : 443) : Number(m[3]);
  if (port < 1 || port > 65535) return undefined;
  const hostname = host.startsWith('[') ? host.slice(1, -1) : host;
  return {
    protocol: scheme === 'http' ? 'http:' : 'https:',
    hostname,
    port,
    pathPrefix: (m[4] ?? '').replace(/\/+$/, ''),
  };
}

/** client-go's DefaultServerURL: a server without a scheme is https when TLS is configured, else http. */
function serverUrl(raw: string, tlsConfigured: boolean, where: string): string {
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(raw) ? raw : `${tlsConfigured ? 'https' : 'http'}://${raw}`;
  if (!/^https?:/i.test(withScheme)) fail(`${where}: server "${raw}" is not an http(s) URL`);
  if (!parseServer(withScheme)) fail(`${where}: server "${raw}" is not a URL of the form https://host[:port][/path]`);
  return withScheme.replace(/\/+$/, '');
}

function resolveCluster(name: string, cluster: Obj, dir: string): { server: string; tls: TlsSettings; proxy: boolean } {
  const where = `cluster "${name}"`;
  const caData = b64(cluster, 'certificate-authority-data', where);
  const caFile = absolute(dir, str(cluster, 'certificate-authority', where));
  const insecure = bool(cluster, 'insecure-skip-tls-verify', where);
  const serverName = str(cluster, 'tls-server-name', where);
  if (caData && caFile)
    fail(
      `certificate-authority-data and certificate-authority are both specified for ${name}. certificate-authority-data will override.`,
    );
  if ((caData || caFile) && insecure) fail('specifying a root certificates file with the insecure flag is not allowed');
  const rawServer = str(cluster, 'server', where) ?? fail(`no server found for cluster "${name}"`);
  const server = serverUrl(rawServer, Boolean(caData || caFile || insecure || serverName), where);
  const tls: TlsSettings = { insecureSkipTlsVerify: insecure };
  if (caData) tls.caData = caData;
  if (caFile) tls.caFile = caFile;
  if (serverName) tls.serverName = serverName;
  return { server, tls, proxy: str(cluster, 'proxy-url', where) !== undefined };
}

interface ResolvedUser {
  auth: AuthSettings;
  certs: Pick<TlsSettings, 'certData' | 'certFile' | 'keyData' | 'keyFile'>;
  impersonate?: Impersonation;
  fallback?: string;
}

function userCerts(name: string, user: Obj, dir: string): ResolvedUser['certs'] {
  const where = `user "${name}"`;
  const certData = b64(user, 'client-certificate-data', where);
  const certFile = absolute(dir, str(user, 'client-certificate', where));
  const keyData = b64(user, 'client-key-data', where);
  const keyFile = absolute(dir, str(user, 'client-key', where));
  if (certData && certFile)
    fail(`client-cert-data and client-cert are both specified for ${name}. client-cert-data will override.`);
  if (keyData && keyFile)
    fail(`client-key-data and client-key are both specified for ${name}; client-key-data will override`);
  const hasCert = Boolean(certData || certFile);
  const hasKey = Boolean(keyData || keyFile);
  if (hasCert && !hasKey)
    fail(`client-key-data or client-key must be specified for ${name} to use the clientCert authentication method.`);
  if (hasKey && !hasCert) {
    fail(
      `client-certificate-data or client-certificate must be specified for ${name} to use the clientCert authentication method.`,
    );
  }
  const out: ResolvedUser['certs'] = {};
  if (certData) out.certData = certData;
  if (certFile) out.certFile = certFile;
  if (keyData) out.keyData = keyData;
  if (keyFile) out.keyFile = keyFile;
  return out;
}

function resolveUser(name: string, user: Obj, dir: string): ResolvedUser {
  const where = `user "${name}"`;
  const auth: AuthSettings = {};
  const token = str(user, 'token', where);
  const tokenFile = absolute(dir, str(user, 'tokenFile', where));
  const username = str(user, 'username', where);
  const password = str(user, 'password', where);
  if (token) auth.token = token;
  if (tokenFile) auth.tokenFile = tokenFile;
  if (username !== undefined) auth.username = username;
  if (password !== undefined) auth.password = password;
  if ((token || tokenFile) && (username !== undefined || password !== undefined)) {
    fail(`more than one authentication method found for ${name}; found [token basicAuth], only one is allowed`);
  }
  const exec = user.exec;
  const provider = user['auth-provider'];
  if (exec != null && provider != null)
    fail(`authProvider cannot be provided in combination with an exec plugin for ${name}`);
  if (exec != null && !isObject(exec)) fail(`${where}: exec must be an object`);
  if (provider != null && !isObject(provider)) fail(`${where}: auth-provider must be an object`);
  const out: ResolvedUser = { auth, certs: userCerts(name, user, dir) };
  const imp = impersonation(user, name);
  if (imp) out.impersonate = imp;
  if (isObject(exec)) out.fallback = 'user.exec';
  if (isObject(provider))
    out.fallback = `user.auth-provider (${typeof provider.name === 'string' ? provider.name : 'unnamed'})`;
  return out;
}

/**
 * The client settings of a parsed kubeconfig's current-context. Relative file paths resolve against
 * `dirname(path)`. `context` (kubectl's --context) replaces current-context. An http:// server gets no credentials, as client-go sends them only over TLS. Throws
 * `KubeconfigError` with client-go's wording where client-go refuses the file too.
 */
export function resolveKubeconfig(doc: unknown, path: string, context?: string): ClientConfig {
  if (!isObject(doc)) return fail('invalid configuration: no configuration has been provided');
  const contexts = namedEntries(doc, 'contexts', 'context');
  const clusters = namedEntries(doc, 'clusters', 'cluster');
  const users = namedEntries(doc, 'users', 'user');
  const contextName =
    context || (str(doc, 'current-context', 'kubeconfig') ?? fail('invalid configuration: current-context is not set'));
  const ctx =
    contexts.get(contextName) ??
    fail(`invalid configuration: context was not found for specified context: ${contextName}`);
  const where = `context "${contextName}"`;
  const clusterName =
    str(ctx, 'cluster', where) ?? fail(`invalid configuration: cluster was not specified for context "${contextName}"`);
  const cluster =
    clusters.get(clusterName) ??
    fail(`invalid configuration: cluster "${clusterName}" was not found for context "${contextName}"`);
  const userName = str(ctx, 'user', where) ?? '';
  const user = userName === '' ? {} : users.get(userName);
  if (!user) return fail(`invalid configuration: user "${userName}" was not found for context "${contextName}"`);
  const namespace = str(ctx, 'namespace', where);
  if (namespace !== undefined && !isDns1123Label(namespace)) {
    fail(`namespace "${namespace}" for context "${contextName}" does not conform to the kubernetes DNS_LABEL rules`);
  }
  const dir = dirname(path);
  const c = resolveCluster(clusterName, cluster, dir);
  const u = resolveUser(userName, user, dir);
  const cfg: ClientConfig = {
    source: 'kubeconfig',
    path,
    contextName,
    clusterName,
    userName,
    server: c.server,
    tls: c.tls,
    auth: {},
  };
  if (namespace !== undefined) cfg.namespace = namespace;
  const tls = parseServer(c.server)?.protocol === 'https:'; // client-go sends credentials only over TLS
  if (tls) {
    Object.assign(cfg.tls, u.certs);
    cfg.auth = u.auth;
    if (u.impersonate) cfg.impersonate = u.impersonate;
  }
  const auth = tls && u.fallback !== undefined;
  if (auth || c.proxy) {
    const reason = [auth ? u.fallback : undefined, c.proxy ? 'cluster.proxy-url' : undefined]
      .filter(Boolean)
      .join(', ');
    cfg.fallback = { reason, auth, proxy: c.proxy };
  }
  return cfg;
}
