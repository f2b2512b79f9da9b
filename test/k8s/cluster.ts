/**
 * A real Kubernetes control plane for tests: etcd + kube-apiserver built from Go modules by test/k8s/build.sh
 * (see docs/archive/kubernetes-tests.md), started on 127.0.0.1 with free ports, certificates made with openssl, RBAC
 * on, an audit log at level Metadata, the NetworkAttachmentDefinition CRD installed and the Multus service
 * account ready with kubeconfigs. No kubelet, scheduler or controller-manager: pods stay Pending, which is all
 * a CNI plugin's API traffic needs.
 *
 * Every child process is started with an argument array (no shell), everything lives in one temp dir, and
 * `stop()` kills the processes and removes the dir. Processes are also killed on the test runner's 'exit' and
 * by a small watchdog when the runner dies without running its exit handlers (SIGKILL, crash).
 *
 * Set MULTUS_TS_K8S_KEEP=1 to keep the temp dir (logs, certificates, audit log) after stop().
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, existsSync, readFileSync, rmSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import https from 'node:https';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { type Requirement, fileExists } from '../helpers/skip.ts';

const execFileP = promisify(execFile);

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
/** Where test/k8s/build.sh puts the binaries. */
export const K8S_BIN_DIR = join(process.env.MULTUS_TS_CACHE_DIR || join(REPO_ROOT, '.cache'), 'k8s');
export const KUBE_APISERVER_BIN = join(K8S_BIN_DIR, 'kube-apiserver');
export const ETCD_BIN = join(K8S_BIN_DIR, 'etcd');
export const BUILD_SCRIPT = join(REPO_ROOT, 'test/k8s/build.sh');

/** Requirements for `needs(...)`: the binaries that test/k8s/build.sh builds. */
export function k8sRequirements(): Requirement[] {
  return [
    fileExists(KUBE_APISERVER_BIN, 'kube-apiserver (bash test/k8s/build.sh)'),
    fileExists(ETCD_BIN, 'etcd (bash test/k8s/build.sh)'),
  ];
}

export const MULTUS_NAMESPACE = 'kube-system';
export const MULTUS_SA = 'multus';
/** A service account with no role at all (for Forbidden tests). */
export const NO_ROLE_SA = 'multus-no-role';
/** The user name the API server (and its audit log) gives a service account's token. */
export const serviceAccountUser = (name: string, namespace = MULTUS_NAMESPACE): string =>
  `system:serviceaccount:${namespace}:${name}`;
export const MULTUS_USER = serviceAccountUser(MULTUS_SA);
export const NO_ROLE_USER = serviceAccountUser(NO_ROLE_SA);
export const ADMIN_USER = 'admin';

export const NAD_API = '/apis/k8s.cni.cncf.io/v1';
/** Path of a NetworkAttachmentDefinition (or of the collection when `name` is omitted). */
export const nadPath = (namespace: string, name?: string): string =>
  `${NAD_API}/namespaces/${namespace}/network-attachment-definitions${name ? `/${name}` : ''}`;
export const podPath = (namespace: string, name?: string): string =>
  `/api/v1/namespaces/${namespace}/pods${name ? `/${name}` : ''}`;

/**
 * The ClusterRole given to the multus service account: what the thin plugin needs (docs/behaviour.md#pod-lookup)
 * plus the list/watch of pods and NADs that the resident daemon's informers need (as Multus thick's manifest
 * grants), and nothing more, so a test fails when the implementation makes a call that the real plugin does
 * not. The upstream deployment manifests grant more (all verbs on k8s.cni.cncf.io, update on events).
 */
export const MULTUS_CLUSTER_ROLE_RULES = [
  { apiGroups: [''], resources: ['pods'], verbs: ['get', 'update', 'list', 'watch'] },
  { apiGroups: [''], resources: ['pods/status'], verbs: ['get', 'update'] },
  { apiGroups: ['k8s.cni.cncf.io'], resources: ['network-attachment-definitions'], verbs: ['get', 'list', 'watch'] },
  { apiGroups: ['', 'events.k8s.io'], resources: ['events'], verbs: ['create', 'patch'] },
  // DRA device IDs (src/devices/dra.ts): GET of the pod's claims, LIST of its node's slices
  { apiGroups: ['resource.k8s.io'], resources: ['resourceclaims'], verbs: ['get'] },
  { apiGroups: ['resource.k8s.io'], resources: ['resourceslices'], verbs: ['list'] },
];

/** The NetworkAttachmentDefinition CRD as in the upstream multus deployment manifest (plus the `nad` short name). */
export const NAD_CRD = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: 'network-attachment-definitions.k8s.cni.cncf.io' },
  spec: {
    group: 'k8s.cni.cncf.io',
    scope: 'Namespaced',
    names: {
      plural: 'network-attachment-definitions',
      singular: 'network-attachment-definition',
      kind: 'NetworkAttachmentDefinition',
      shortNames: ['net-attach-def', 'nad'],
    },
    versions: [
      {
        name: 'v1',
        served: true,
        storage: true,
        schema: {
          openAPIV3Schema: {
            description:
              'NetworkAttachmentDefinition is a CRD schema specified by the Network Plumbing Working Group to express the intent for attaching pods to one or more logical or physical networks. More information available at: https://github.com/k8snetworkplumbingwg/multi-net-spec',
            type: 'object',
            properties: {
              apiVersion: {
                description:
                  'APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values.',
                type: 'string',
              },
              kind: {
                description:
                  'Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to.',
                type: 'string',
              },
              metadata: { type: 'object' },
              spec: {
                description: 'NetworkAttachmentDefinition spec defines the desired state of a network attachment',
                type: 'object',
                properties: {
                  config: {
                    description: 'NetworkAttachmentDefinition config is a JSON-formatted CNI configuration',
                    type: 'string',
                  },
                },
              },
            },
          },
        },
      },
    ],
  },
};

// ---------------------------------------------------------------------------------------------------------
// a tiny JSON client

/** A non-2xx answer of the API server. `body` is the parsed `Status` object when there is one. */
export class ApiError extends Error {
  readonly method: string;
  readonly path: string;
  readonly status: number;
  readonly body: any;
  constructor(method: string, path: string, status: number, body: any) {
    super(
      `${method} ${path}: HTTP ${status}: ${typeof body === 'string' ? body : (body?.message ?? JSON.stringify(body))}`,
    );
    this.name = 'ApiError';
    this.method = method;
    this.path = path;
    this.status = status;
    this.body = body;
  }
}

export interface ApiResponse {
  status: number;
  /** Parsed JSON, or the raw text when the answer is not JSON. */
  body: any;
  headers: Record<string, string | string[] | undefined>;
}

export interface Credentials {
  /** Bearer token. */
  token?: string;
  /** PEM client certificate and key. */
  cert?: string;
  key?: string;
}

/**
 * A minimal Kubernetes REST client over node:https. `get/post/put/del/patch` resolve to the parsed body on 2xx
 * and reject with ApiError otherwise; `request` never rejects on an HTTP status.
 */
export class KubeClient {
  readonly server: string;
  private readonly ca: string;
  private readonly creds: Credentials;
  private readonly agent: https.Agent | false;
  /** `agent`: a kept-alive agent for a caller that makes many requests (default: a connection each). */
  constructor(server: string, ca: string, creds: Credentials, agent: https.Agent | false = false) {
    this.server = server;
    this.ca = ca;
    this.creds = creds;
    this.agent = agent;
  }

  request(
    method: string,
    path: string,
    body?: unknown,
    contentType?: string,
    timeoutMs = 30_000,
  ): Promise<ApiResponse> {
    const url = new URL(path, this.server);
    const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
    const headers: Record<string, string> = { accept: 'application/json' };
    if (payload !== undefined) {
      headers['content-type'] =
        contentType ??
        (method === 'PATCH'
          ? Array.isArray(body)
            ? 'application/json-patch+json'
            : 'application/merge-patch+json'
          : 'application/json');
      headers['content-length'] = String(Buffer.byteLength(payload));
    }
    if (this.creds.token) headers.authorization = `Bearer ${this.creds.token}`;
    return new Promise((resolvePromise, reject) => {
      const req = https.request(
        url,
        {
          method,
          headers,
          ca: this.ca,
          ...(this.creds.cert ? { cert: this.creds.cert, key: this.creds.key } : {}),
          agent: this.agent,
          timeout: timeoutMs,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', reject);
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let parsed: any = text;
            try {
              parsed = text ? JSON.parse(text) : undefined;
            } catch {
              // not JSON (e.g. /readyz): keep the text
            }
            resolvePromise({ status: res.statusCode ?? 0, body: parsed, headers: res.headers });
          });
        },
      );
      req.on('timeout', () => req.destroy(new Error(`${method} ${url.href}: no answer in ${timeoutMs} ms`)));
      req.on('error', reject);
      req.end(payload);
    });
  }

  private async ok(method: string, path: string, body?: unknown, contentType?: string): Promise<any> {
    const res = await this.request(method, path, body, contentType);
    if (res.status < 200 || res.status > 299) throw new ApiError(method, path, res.status, res.body);
    return res.body;
  }

  get(path: string): Promise<any> {
    return this.ok('GET', path);
  }
  post(path: string, body: unknown): Promise<any> {
    return this.ok('POST', path, body);
  }
  put(path: string, body: unknown): Promise<any> {
    return this.ok('PUT', path, body);
  }
  del(path: string): Promise<any> {
    return this.ok('DELETE', path);
  }
  /** Merge patch for an object body, JSON patch for an array, or the given content type. */
  patch(path: string, body: unknown, contentType?: string): Promise<any> {
    return this.ok('PATCH', path, body, contentType);
  }
}

// ---------------------------------------------------------------------------------------------------------
// the cluster

/** One line of the audit log (audit.k8s.io/v1 Event, level Metadata, stage ResponseComplete). */
export interface AuditEvent {
  verb: string;
  requestURI: string;
  stage: string;
  user: { username: string; groups?: string[] };
  objectRef?: { resource?: string; subresource?: string; namespace?: string; name?: string; apiGroup?: string };
  responseStatus?: { code?: number };
  userAgent?: string;
  [k: string]: unknown;
}

export interface Cluster {
  /** https://127.0.0.1:<port> */
  server: string;
  /** PEM CA that signed the serving and client certificates. */
  caFile: string;
  /** Kubeconfig with the admin client certificate (user `admin`, group system:masters). */
  adminKubeconfig: string;
  /** Static token of the admin (also accepted, via --token-auth-file). */
  adminToken: string;
  /** Kubeconfig of the multus service account: `certificate-authority-data` and an inline `token`. */
  multusKubeconfig: string;
  /** Same account, with `certificate-authority: <caFile>` and `tokenFile: <tokenFile>` (rewrite the file to rotate). */
  multusTokenFileKubeconfig: string;
  /** File holding the multus service-account token that `multusTokenFileKubeconfig` points at. */
  tokenFile: string;
  /** The token in `multusKubeconfig` and `tokenFile`. */
  multusToken: string;
  /** Kubeconfig of a service account bound to no role (inline token). */
  noRoleKubeconfig: string;
  noRoleToken: string;
  /** JSON lines, one per request (level Metadata, stage ResponseComplete). */
  auditLog: string;
  /** The temp dir everything lives in (logs: etcd.log, kube-apiserver.log). */
  dir: string;
  /** Milliseconds startCluster() took, and per phase (pki, etcd, apiserver (to /readyz), crd, rbac). */
  startupMs: number;
  startupPhases: Record<string, number>;
  /** Client with the admin certificate. */
  admin: KubeClient;
  /** Client with a bearer token, e.g. `cluster.client(cluster.multusToken)`. */
  client(token: string): KubeClient;
  /** A fresh token for a service account (TokenRequest API), e.g. to rotate `tokenFile`. */
  issueToken(serviceAccount: string, namespace?: string, expirationSeconds?: number): Promise<string>;
  /** Parsed audit events, optionally only those of one user (e.g. MULTUS_USER). */
  auditEvents(username?: string): Promise<AuditEvent[]>;
  /** Stops kube-apiserver only (etcd keeps running); the server then refuses connections. */
  stopApiserver(): Promise<void>;
  /** Starts kube-apiserver again after stopApiserver(), on the same port and flags; resolves once /readyz is 200. */
  startApiserver(): Promise<void>;
  /** Stops everything and removes the temp dir. Safe to call twice. */
  stop(): Promise<void>;
}

export interface StartOptions {
  /** How long to wait for /readyz (default 60 s). */
  readyTimeoutMs?: number;
  /** Extra kube-apiserver flags (`--name=value`), appended last so they win. */
  apiserverArgs?: string[];
  /**
   * Keep the ServiceAccount admission plugin (it gives pods their API token volume): for callers that run a
   * controller-manager, which creates each namespace's "default" service account (test/runtime/node.ts).
   */
  serviceAccountAdmission?: boolean;
}

// Processes and dirs alive in this runner, killed/removed on 'exit'. Kept on globalThis so that the module
// instances vitest makes per test file (isolation) share one registry and one 'exit' listener.
interface Registry {
  children: Set<ChildProcess>;
  dirs: Set<string>;
  hooked: boolean;
}
const REGISTRY = Symbol.for('multus-ts.test.k8s.cluster');
const registry: Registry =
  ((globalThis as Record<symbol, unknown>)[REGISTRY] as Registry | undefined) ??
  ((globalThis as Record<symbol, unknown>)[REGISTRY] = {
    children: new Set(),
    dirs: new Set(),
    hooked: false,
  } as Registry);
const live = registry.children;
const liveDirs = registry.dirs;
function installExitHook(): void {
  if (registry.hooked) return;
  registry.hooked = true;
  process.on('exit', () => {
    for (const child of live) {
      try {
        child.kill('SIGKILL');
      } catch {
        // already gone
      }
    }
    for (const dir of liveDirs) {
      try {
        rmSync(dir, { recursive: true, force: true });
      } catch {
        // best effort
      }
    }
  });
}

/** `n` distinct free ports on 127.0.0.1 (all held open together, then released). */
async function freePorts(n: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<ReturnType<typeof createServer>>((resolvePromise, reject) => {
          const srv = createServer();
          srv.unref();
          srv.on('error', reject);
          srv.listen(0, '127.0.0.1', () => resolvePromise(srv));
        }),
    ),
  );
  const ports = servers.map((srv) => {
    const addr = srv.address();
    return typeof addr === 'object' && addr ? addr.port : 0;
  });
  await Promise.all(servers.map((srv) => new Promise((r) => srv.close(r))));
  return ports;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function openssl(cwd: string, args: string[]): Promise<void> {
  try {
    await execFileP('openssl', args, { cwd, timeout: 60_000 });
  } catch (e: any) {
    if (e?.code === 'ENOENT') throw new Error('openssl is not installed (bash test/k8s/build.sh installs it)');
    throw new Error(`openssl ${args.join(' ')} failed: ${e?.stderr || e?.message}`);
  }
}

/** CA, serving certificate for 127.0.0.1/localhost, admin client certificate, service-account key pair. */
async function makePki(dir: string): Promise<void> {
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  await openssl(dir, [
    'req',
    '-x509',
    ...ec,
    '-keyout',
    'ca.key',
    '-out',
    'ca.crt',
    '-days',
    '3650',
    '-subj',
    '/CN=multus-ts-test-ca',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign,digitalSignature',
  ]);
  const sign = async (name: string, subj: string, ext: string) => {
    await openssl(dir, ['req', '-new', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subj]);
    await writeFile(join(dir, `${name}.ext`), ext);
    await openssl(dir, [
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      'ca.crt',
      '-CAkey',
      'ca.key',
      '-set_serial',
      `0x${randomBytes(16).toString('hex')}`,
      '-out',
      `${name}.crt`,
      '-days',
      '365',
      '-extfile',
      `${name}.ext`,
    ]);
  };
  const serving = sign(
    'apiserver',
    '/CN=kube-apiserver',
    'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' +
      'subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\n',
  );
  const client = sign(
    'admin',
    '/O=system:masters/CN=admin',
    'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n',
  );
  const sa = openssl(dir, ['genpkey', '-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048', '-out', 'sa.key']).then(
    () => openssl(dir, ['pkey', '-in', 'sa.key', '-pubout', '-out', 'sa.pub']),
  );
  await Promise.all([serving, client, sa]);
}

const b64 = (s: string) => Buffer.from(s).toString('base64');

/** A kubeconfig in YAML (the shape multus' thin entrypoint writes). `cluster`/`user` are YAML lines. */
function kubeconfig(server: string, clusterLines: string[], user: string, userLines: string[]): string {
  const ind = (lines: string[]) => lines.map((l) => `    ${l}\n`).join('');
  return (
    'apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n' +
    `    server: ${server}\n${ind(clusterLines)}` +
    `users:\n- name: ${user}\n  user:\n${ind(userLines)}` +
    `contexts:\n- name: ${user}-context\n  context:\n    cluster: local\n    user: ${user}\n` +
    `current-context: ${user}-context\n`
  );
}

async function tail(file: string, lines = 40): Promise<string> {
  try {
    const text = await readFile(file, 'utf8');
    return text.split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

interface Proc {
  child: ChildProcess;
  log: string;
  exited: Promise<void>;
  exitInfo?: string;
}

function startProcess(bin: string, args: string[], log: string, append = false): Proc {
  const out = createWriteStream(log, { flags: append ? 'a' : 'w' });
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env } });
  child.stdout!.pipe(out, { end: false });
  child.stderr!.pipe(out, { end: false });
  live.add(child);
  const proc: Proc = { child, log, exited: Promise.resolve() };
  proc.exited = new Promise((r) => {
    child.on('error', (e) => {
      proc.exitInfo = `could not start ${bin}: ${e.message}`;
      live.delete(child);
      r();
    });
    child.on('close', (code, signal) => {
      proc.exitInfo ??= `exited with ${signal ?? `code ${code}`}`;
      live.delete(child);
      out.end(() => r());
    });
  });
  return proc;
}

async function stopProcess(p: Proc | undefined, graceMs = 5_000): Promise<void> {
  if (!p) return;
  if (p.child.exitCode === null && p.child.signalCode === null && p.exitInfo === undefined) {
    p.child.kill('SIGTERM');
    const timer = setTimeout(() => p.child.kill('SIGKILL'), graceMs);
    await p.exited;
    clearTimeout(timer);
  } else {
    await p.exited;
  }
}

/** A detached shell that kills the processes listed in <dir>/pids and removes <dir> once this runner is gone. */
function startWatchdog(dir: string): ChildProcess {
  const script =
    'parent=$1; dir=$2; while kill -0 "$parent" 2>/dev/null && [ -d "$dir" ]; do sleep 1; done; ' +
    'if [ -d "$dir" ]; then [ -f "$dir/pids" ] && kill -9 $(cat "$dir/pids") 2>/dev/null; ' +
    '[ -f "$dir/keep" ] || rm -rf "$dir"; fi';
  const w = spawn('/bin/sh', ['-c', script, 'multus-ts-k8s-watchdog', String(process.pid), dir], {
    detached: true,
    stdio: 'ignore',
  });
  w.unref();
  return w;
}

/**
 * Starts etcd and kube-apiserver and prepares the CRD, RBAC and service accounts (see the file comment).
 * Takes several seconds (see docs/archive/kubernetes-tests.md); call it once per test file in `beforeAll`.
 */
export async function startCluster(opts: StartOptions = {}): Promise<Cluster> {
  const t0 = performance.now();
  const phases: Record<string, number> = {};
  let tPhase = t0;
  const phase = (name: string) => {
    const t = performance.now();
    phases[name] = Math.round(t - tPhase);
    tPhase = t;
  };
  for (const bin of [KUBE_APISERVER_BIN, ETCD_BIN]) {
    if (!existsSync(bin)) throw new Error(`${bin} is missing: run bash test/k8s/build.sh`);
  }
  installExitHook();
  const keep = process.env.MULTUS_TS_K8S_KEEP === '1';
  const dir = await mkdtemp(join(tmpdir(), 'multus-ts-k8s-'));
  if (!keep) liveDirs.add(dir);
  else await writeFile(join(dir, 'keep'), '');
  const watchdog = startWatchdog(dir);
  let etcd: Proc | undefined;
  let apiserver: Proc | undefined;
  let stopped = false;
  const pids = new Map<string, number>();
  const recordPid = async (role: string, p: Proc) => {
    if (p.child.pid) pids.set(role, p.child.pid);
    await writeFile(join(dir, 'pids'), [...pids.values()].join(' ') + '\n');
  };

  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await stopProcess(apiserver);
    await stopProcess(etcd);
    try {
      watchdog.kill('SIGKILL');
    } catch {
      // gone
    }
    liveDirs.delete(dir);
    if (!keep) await rm(dir, { recursive: true, force: true });
  };

  try {
    const file = (name: string) => join(dir, name);
    await makePki(dir);
    const ca = await readFile(file('ca.crt'), 'utf8');
    const adminCert = await readFile(file('admin.crt'), 'utf8');
    const adminKey = await readFile(file('admin.key'), 'utf8');
    const adminToken = randomBytes(24).toString('hex');
    await writeFile(file('tokens.csv'), `${adminToken},${ADMIN_USER},${ADMIN_USER},system:masters\n`, { mode: 0o600 });
    await writeFile(
      file('audit-policy.yaml'),
      'apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages:\n- RequestReceived\nrules:\n- level: Metadata\n',
    );
    const auditLog = file('audit.log');
    phase('pki');

    // etcd, on free ports (another process may take a port between our probe and etcd's bind: then retry).
    let etcdUrl = '';
    for (let attempt = 1; ; attempt++) {
      const [clientPort, peerPort] = await freePorts(2);
      etcdUrl = `http://127.0.0.1:${clientPort}`;
      await rm(file('etcd-data'), { recursive: true, force: true });
      await mkdir(file('etcd-data'), { mode: 0o700 });
      etcd = startProcess(
        ETCD_BIN,
        [
          '--name=default',
          `--data-dir=${file('etcd-data')}`,
          `--listen-client-urls=${etcdUrl}`,
          `--advertise-client-urls=${etcdUrl}`,
          `--listen-peer-urls=http://127.0.0.1:${peerPort}`,
          `--initial-advertise-peer-urls=http://127.0.0.1:${peerPort}`,
          `--initial-cluster=default=http://127.0.0.1:${peerPort}`,
          // Test data only: skip fsync, it only makes every write slower.
          '--unsafe-no-fsync',
          '--log-level=warn',
        ],
        file('etcd.log'),
      );
      await recordPid('etcd', etcd);
      const url = etcdUrl;
      const ok = await waitFor(
        'etcd /health',
        30_000,
        etcd,
        [etcd.log],
        async () => {
          const res = await fetch(`${url}/health`).catch(() => undefined);
          return res?.ok === true && ((await res.json()) as { health?: string }).health === 'true';
        },
        attempt < 3,
      );
      if (ok) break;
    }

    phase('etcd');

    // kube-apiserver
    const apiserverArgs = (port: number) => [
      `--etcd-servers=${etcdUrl}`,
      '--bind-address=127.0.0.1',
      '--advertise-address=127.0.0.1',
      `--secure-port=${port}`,
      `--tls-cert-file=${file('apiserver.crt')}`,
      `--tls-private-key-file=${file('apiserver.key')}`,
      `--client-ca-file=${file('ca.crt')}`,
      `--token-auth-file=${file('tokens.csv')}`,
      '--authorization-mode=Node,RBAC',
      `--service-account-key-file=${file('sa.pub')}`,
      `--service-account-signing-key-file=${file('sa.key')}`,
      '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
      // Only a range to allocate Service IPs from; no traffic goes there.
      '--service-cluster-ip-range=10.96.0.0/24',
      // The "kubernetes" Service endpoints may not be a loopback address: do not reconcile them.
      '--endpoint-reconciler-type=none',
      // No controller-manager creates the "default" service account of new namespaces, which the
      // ServiceAccount admission plugin requires before it admits a pod (unless the caller runs one).
      ...(opts.serviceAccountAdmission ? [] : ['--disable-admission-plugins=ServiceAccount']),
      '--enable-priority-and-fairness=false',
      '--profiling=false',
      `--audit-log-path=${auditLog}`,
      `--audit-policy-file=${file('audit-policy.yaml')}`,
      '--audit-log-mode=blocking',
      ...(opts.apiserverArgs ?? []),
    ];
    let server = '';
    let admin: KubeClient | undefined;
    for (let attempt = 1; ; attempt++) {
      const [port] = await freePorts(1);
      server = `https://127.0.0.1:${port}`;
      apiserver = startProcess(KUBE_APISERVER_BIN, apiserverArgs(port!), file('kube-apiserver.log'));
      await recordPid('apiserver', apiserver);
      const client = new KubeClient(server, ca, { cert: adminCert, key: adminKey });
      const ok = await waitFor(
        'kube-apiserver /readyz',
        opts.readyTimeoutMs ?? 60_000,
        apiserver,
        [apiserver.log, etcd!.log],
        async () =>
          (await client.request('GET', '/readyz', undefined, undefined, 5_000).catch(() => undefined))?.status === 200,
        attempt < 3,
      );
      if (ok) {
        admin = client;
        break;
      }
    }

    phase('apiserver');

    // The NetworkAttachmentDefinition CRD, until its API is served.
    await createOrKeep(admin, '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', NAD_CRD);
    await waitFor(
      'the NetworkAttachmentDefinition CRD to be Established',
      30_000,
      apiserver!,
      [apiserver!.log],
      async () => {
        const crd = await admin.get(`/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${NAD_CRD.metadata.name}`);
        const established = (crd?.status?.conditions ?? []).some(
          (c: { type: string; status: string }) => c.type === 'Established' && c.status === 'True',
        );
        return established && (await admin.request('GET', nadPath('default'))).status === 200;
      },
    );

    phase('crd');

    // RBAC and service accounts.
    await createOrKeep(admin, '/api/v1/namespaces', {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: MULTUS_NAMESPACE },
    });
    await createOrKeep(admin, '/apis/rbac.authorization.k8s.io/v1/clusterroles', {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'multus' },
      rules: MULTUS_CLUSTER_ROLE_RULES,
    });
    for (const name of [MULTUS_SA, NO_ROLE_SA]) {
      await createOrKeep(admin, `/api/v1/namespaces/${MULTUS_NAMESPACE}/serviceaccounts`, {
        apiVersion: 'v1',
        kind: 'ServiceAccount',
        metadata: { name, namespace: MULTUS_NAMESPACE },
      });
    }
    await createOrKeep(admin, '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'multus' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'multus' },
      subjects: [{ kind: 'ServiceAccount', name: MULTUS_SA, namespace: MULTUS_NAMESPACE }],
    });

    const issueToken = async (sa: string, namespace = MULTUS_NAMESPACE, expirationSeconds = 3600) => {
      const res = await admin.post(`/api/v1/namespaces/${namespace}/serviceaccounts/${sa}/token`, {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: { expirationSeconds },
      });
      const token = res?.status?.token;
      if (typeof token !== 'string' || !token) throw new Error(`TokenRequest for ${namespace}/${sa} returned no token`);
      return token as string;
    };
    // a day: the benches' long runs on a loaded machine outlive an hour (tests that rotate it issue their own)
    const multusToken = await issueToken(MULTUS_SA, MULTUS_NAMESPACE, 24 * 3600);
    const noRoleToken = await issueToken(NO_ROLE_SA);
    const tokenFile = file('multus.token');
    await writeFile(tokenFile, multusToken, { mode: 0o600 });

    const caData = `certificate-authority-data: ${b64(ca)}`;
    const adminKubeconfig = file('admin.kubeconfig');
    await writeFile(
      adminKubeconfig,
      kubeconfig(server, [caData], ADMIN_USER, [
        `client-certificate-data: ${b64(adminCert)}`,
        `client-key-data: ${b64(adminKey)}`,
      ]),
      { mode: 0o600 },
    );
    const multusKubeconfig = file('multus.kubeconfig');
    await writeFile(multusKubeconfig, kubeconfig(server, [caData], 'multus', [`token: "${multusToken}"`]), {
      mode: 0o600,
    });
    const multusTokenFileKubeconfig = file('multus-tokenfile.kubeconfig');
    await writeFile(
      multusTokenFileKubeconfig,
      kubeconfig(server, [`certificate-authority: ${file('ca.crt')}`], 'multus', [`tokenFile: ${tokenFile}`]),
      { mode: 0o600 },
    );
    const noRoleKubeconfig = file('no-role.kubeconfig');
    await writeFile(noRoleKubeconfig, kubeconfig(server, [caData], NO_ROLE_SA, [`token: "${noRoleToken}"`]), {
      mode: 0o600,
    });

    phase('rbac');
    const readyClient = admin;
    const startApiserver = async () => {
      if (apiserver && apiserver.exitInfo === undefined) return;
      const port = Number(new URL(server).port);
      apiserver = startProcess(KUBE_APISERVER_BIN, apiserverArgs(port), file('kube-apiserver.log'), true);
      await recordPid('apiserver', apiserver);
      await waitFor(
        'kube-apiserver /readyz (restarted)',
        opts.readyTimeoutMs ?? 60_000,
        apiserver,
        [apiserver.log, etcd!.log],
        async () =>
          (await readyClient.request('GET', '/readyz', undefined, undefined, 5_000).catch(() => undefined))?.status ===
          200,
      );
    };
    return {
      server,
      caFile: file('ca.crt'),
      adminKubeconfig,
      adminToken,
      multusKubeconfig,
      multusTokenFileKubeconfig,
      tokenFile,
      multusToken,
      noRoleKubeconfig,
      noRoleToken,
      auditLog,
      dir,
      startupMs: Math.round(performance.now() - t0),
      startupPhases: phases,
      admin,
      client: (token: string) => new KubeClient(server, ca, { token }),
      issueToken,
      auditEvents: async (username?: string) => {
        const text = await readFile(auditLog, 'utf8').catch(() => '');
        const events = text
          .split('\n')
          .filter((l) => l.trim())
          .map((l) => JSON.parse(l) as AuditEvent);
        return username === undefined ? events : events.filter((e) => e.user?.username === username);
      },
      stopApiserver: () => stopProcess(apiserver),
      startApiserver,
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}

async function createOrKeep(client: KubeClient, path: string, obj: unknown): Promise<void> {
  const res = await client.request('POST', path, obj);
  if (res.status === 409 || (res.status >= 200 && res.status < 300)) return;
  throw new ApiError('POST', path, res.status, res.body);
}

/**
 * Polls `check` every 250 ms until it returns true. Fails when the deadline passes or `proc` exits, with the
 * tails of `logs` in the error; except that, with `retryOnPortClash`, a process that exited because its port
 * was taken ("address already in use") makes it resolve to false so that the caller retries on other ports.
 */
async function waitFor(
  what: string,
  timeoutMs: number,
  proc: Proc,
  logs: string[],
  check: () => Promise<boolean>,
  retryOnPortClash = false,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  let lastError = '';
  for (;;) {
    if (proc.exitInfo !== undefined) break;
    try {
      if (await check()) return true;
    } catch (e) {
      lastError = (e as Error).message;
    }
    if (Date.now() >= deadline) break;
    await sleep(250);
  }
  if (proc.exitInfo !== undefined) {
    await proc.exited;
    if (retryOnPortClash && /address already in use/.test(await tail(proc.log, 200))) return false;
  }
  const why = proc.exitInfo !== undefined ? `the process ${proc.exitInfo}` : `not ready after ${timeoutMs} ms`;
  let msg = `waiting for ${what}: ${why}${lastError ? ` (last error: ${lastError})` : ''}`;
  for (const log of logs) msg += `\n--- tail of ${log} ---\n${await tail(log)}`;
  throw new Error(msg);
}

/** Reads a kubeconfig written by startCluster and returns its token (inline or from tokenFile). */
export function tokenOf(kubeconfigPath: string): string {
  const text = readFileSync(kubeconfigPath, 'utf8');
  const inline = /^\s*token: "([^"]+)"/m.exec(text);
  if (inline?.[1]) return inline[1];
  const file = /^\s*tokenFile: (.+)$/m.exec(text);
  if (file?.[1]) return readFileSync(file[1].trim(), 'utf8').trim();
  throw new Error(`no token in ${kubeconfigPath}`);
}
