/**
 * Tests for src/k8s.ts against an in-process node:https API server stub (a CA, server and client certificate
 * made by openssl at test time) and a node:http one: paths and bodies of the four calls, token / tokenFile
 * (re-read after rotation) / client certificate / basic auth, keep-alive, the error mapping (404, 409, 401,
 * 403, 429, 5xx, timeout, refused, TLS) and isTransient, names validated before a URL, in-cluster config,
 * requestCount, that a plain kubeconfig never loads the client-node fallback while an exec user does, and
 * that no credential reaches the log.
 */
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { CniError } from '../../../src/base/errors.ts';
import { eventBody, nodeEvent } from '../../../src/k8s/calls.ts';
import { isTransient, KubeApiError } from '../../../src/k8s/types.ts';
import { loadFallbackModule } from '../../../src/k8s/fallback-loader.ts';
import { loadKubeClient } from '../../../src/k8s/client.ts';
import type { FallbackModule } from '../../../src/k8s/fallback-loader.ts';
import type { KubeClient, Pod } from '../../../src/k8s/types.ts';
import type { LoadKubeClientOptions } from '../../../src/k8s/client.ts';
import type { Logger } from '../../../src/base/log.ts';
import { silentLogger } from '../../../src/base/log.ts';

// ---------------------------------------------------------------------------------------------------------------
// Certificates and the stub API server

let pki: string;
const pem = (name: string): string => readFileSync(join(pki, name), 'utf8');
const b64 = (name: string): string => Buffer.from(pem(name)).toString('base64');

function openssl(args: string[]): void {
  execFileSync('openssl', args, { cwd: pki, stdio: 'pipe' });
}

function makeCert(name: string, subject: string, ext: string, ca = 'ca'): void {
  writeFileSync(join(pki, `${name}.ext`), `${ext}\n`);
  openssl([
    'req',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.csr`,
    '-subj',
    subject,
  ]);
  openssl([
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    `${ca}.crt`,
    '-CAkey',
    `${ca}.key`,
    '-CAcreateserial',
    '-out',
    `${name}.crt`,
    '-days',
    '2',
    '-extfile',
    `${name}.ext`,
  ]);
}

beforeAll(() => {
  pki = mkdtempSync(join(tmpdir(), 'multus-ts-k8s-pki-'));
  for (const ca of ['ca', 'other-ca']) {
    openssl([
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      `${ca}.key`,
      '-out',
      `${ca}.crt`,
      '-subj',
      `/CN=${ca}`,
      '-days',
      '2',
    ]);
  }
  makeCert('server', '/CN=kube-apiserver', 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc');
  makeCert('client', '/O=system:nodes/CN=system:node:worker-1', 'extendedKeyUsage=clientAuth');
});
afterAll(() => {
  rmSync(pki, { recursive: true, force: true });
});

interface Seen {
  method: string;
  url: string;
  authorization: string | undefined;
  headers: IncomingMessage['headers'];
  body: string;
  clientCn: string | undefined;
  servername: string | undefined;
}

type Handler = (req: Seen, res: ServerResponse) => void;

interface Stub {
  server: Server;
  url: string;
  seen: Seen[];
  connections: number;
  handle: Handler;
}

const POD: Pod = {
  metadata: { name: 'web-0', namespace: 'default', uid: 'uid-1', resourceVersion: '42', annotations: {} },
  spec: {},
  status: {},
};

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify(body));
}

const status = (code: number, reason: string, message: string) => ({
  kind: 'Status',
  apiVersion: 'v1',
  status: 'Failure',
  code,
  reason,
  message,
});

function startStub(kind: 'https' | 'http' = 'https'): Promise<Stub> {
  const stub = { seen: [] as Seen[], connections: 0, handle: ((_q, res) => json(res, 200, POD)) as Handler } as Stub;
  const listener = (req: IncomingMessage, res: ServerResponse): void => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const sock = req.socket as TLSSocket;
      const peer = kind === 'https' ? sock.getPeerCertificate() : undefined;
      const seen: Seen = {
        method: req.method ?? '',
        url: req.url ?? '',
        authorization: req.headers.authorization,
        headers: req.headers,
        body: Buffer.concat(chunks).toString(),
        clientCn: peer && 'subject' in peer && peer.subject ? String(peer.subject.CN) : undefined,
        servername: kind === 'https' && typeof sock.servername === 'string' ? sock.servername : undefined,
      };
      stub.seen.push(seen);
      stub.handle(seen, res);
    });
  };
  stub.server =
    kind === 'https'
      ? createHttpsServer(
          {
            key: pem('server.key'),
            cert: pem('server.crt'),
            ca: pem('ca.crt'),
            requestCert: true,
            rejectUnauthorized: false,
          },
          listener,
        )
      : createHttpServer(listener);
  stub.server.on('connection', () => stub.connections++);
  return new Promise((resolve) => {
    stub.server.listen(0, '127.0.0.1', () => {
      stub.url = `${kind}://127.0.0.1:${(stub.server.address() as AddressInfo).port}`;
      resolve(stub);
    });
  });
}

// ---------------------------------------------------------------------------------------------------------------
// Per-test kubeconfigs

let dir: string;
let stub: Stub;
const clients: KubeClient[] = [];

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'multus-ts-k8s-'));
  stub = await startStub();
});
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  stub.server.closeAllConnections();
  await new Promise((r) => stub.server.close(r));
  rmSync(dir, { recursive: true, force: true });
});

function writeKubeconfig(
  user: string,
  cluster = `    certificate-authority-data: ${b64('ca.crt')}`,
  server = stub.url,
): string {
  const file = join(dir, 'multus.kubeconfig');
  writeFileSync(
    file,
    [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      '- name: local',
      '  cluster:',
      `    server: ${server}`,
      cluster,
      'users:',
      '- name: multus',
      '  user:',
      user,
      'contexts:',
      '- name: ctx',
      '  context:',
      '    cluster: local',
      '    user: multus',
      'current-context: ctx',
      '',
    ].join('\n'),
  );
  return file;
}

/** A fallback loader that fails the test if anything asks for client-node. */
const noFallback = async (): Promise<FallbackModule> => {
  throw new Error('the client-node fallback must not load for this kubeconfig');
};

async function client(kubeconfig: string, extra: Partial<LoadKubeClientOptions> = {}): Promise<KubeClient> {
  const c = await loadKubeClient({ kubeconfig, env: {}, log: silentLogger, loadFallback: noFallback, ...extra });
  if (!c) throw new Error('no client');
  clients.push(c);
  return c;
}

async function rejection(p: Promise<unknown>): Promise<KubeApiError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(KubeApiError);
    return err as KubeApiError;
  }
  throw new Error('expected a rejection');
}

// ---------------------------------------------------------------------------------------------------------------

describe('requests', () => {
  it('GETs a pod with a bearer token over verified TLS, without loading client-node', async () => {
    const c = await client(writeKubeconfig('    token: tok-static'));
    expect(await c.getPod('default', 'web-0')).toEqual(POD);
    expect(stub.seen).toMatchObject([
      { method: 'GET', url: '/api/v1/namespaces/default/pods/web-0', authorization: 'Bearer tok-static' },
    ]);
    expect(stub.seen[0]?.headers.accept).toBe('application/json');
    expect(c.requestCount).toBe(1);
    expect(c.info).toMatchObject({ source: 'kubeconfig', server: stub.url, auth: 'token', fallback: false });
  });

  it('GETs a NetworkAttachmentDefinition', async () => {
    const nad = { metadata: { name: 'macvlan', namespace: 'ns1' }, spec: { config: '{"type":"macvlan"}' } };
    stub.handle = (_q, res) => json(res, 200, nad);
    const c = await client(writeKubeconfig('    token: t'));
    expect(await c.getNad('ns1', 'macvlan')).toEqual(nad);
    expect(stub.seen[0]?.url).toBe('/apis/k8s.cni.cncf.io/v1/namespaces/ns1/network-attachment-definitions/macvlan');
  });

  it('PUTs the pod to the status subresource and returns the answer', async () => {
    stub.handle = (q, res) =>
      json(res, 200, { ...JSON.parse(q.body), metadata: { ...POD.metadata, resourceVersion: '43' } });
    const c = await client(writeKubeconfig('    token: t'));
    const updated = await c.updatePodStatus(POD);
    expect(stub.seen[0]).toMatchObject({ method: 'PUT', url: '/api/v1/namespaces/default/pods/web-0/status' });
    expect(stub.seen[0]?.headers['content-type']).toBe('application/json');
    expect(JSON.parse(stub.seen[0]?.body ?? '').metadata.resourceVersion).toBe('42');
    expect(updated.metadata.resourceVersion).toBe('43');
  });

  it('POSTs an Event about the pod from component multus', async () => {
    stub.handle = (q, res) => json(res, 201, JSON.parse(q.body));
    const c = await client(writeKubeconfig('    token: t'));
    await c.createEvent({
      pod: POD,
      type: 'Normal',
      reason: 'AddedInterface',
      message: 'Add net1 [10.1.1.2/24] from ns1/macvlan',
    });
    const ev = JSON.parse(stub.seen[0]?.body ?? '');
    expect(stub.seen[0]).toMatchObject({ method: 'POST', url: '/api/v1/namespaces/default/events' });
    expect(ev).toMatchObject({
      kind: 'Event',
      type: 'Normal',
      reason: 'AddedInterface',
      count: 1,
      source: { component: 'multus' },
      involvedObject: { kind: 'Pod', namespace: 'default', name: 'web-0', uid: 'uid-1', resourceVersion: '42' },
      metadata: { namespace: 'default' },
    });
    expect(ev.metadata.name).toMatch(/^web-0\.[0-9a-f]+$/);
  });

  it('a Node event as kubelet records one: namespace default, cluster-scoped involved object, uid = the name', () => {
    const ev = eventBody(nodeEvent('node-1', 'Warning', 'MultusConfigRenamed', 'm'));
    expect(ev).toMatchObject({
      involvedObject: { kind: 'Node', name: 'node-1', uid: 'node-1', apiVersion: 'v1' },
      metadata: { namespace: 'default' },
      type: 'Warning',
      reason: 'MultusConfigRenamed',
    });
    expect(ev.involvedObject).not.toHaveProperty('namespace');
    expect((ev.metadata as { name: string }).name).toMatch(/^node-1\.[0-9a-f]+$/);
  });

  it('names events like client-go (<pod>.<unix nanos in hex>), unique within one millisecond', () => {
    const at = new Date(Date.UTC(2026, 0, 2, 3, 4, 5, 678));
    const names = [1, 2, 3].map(
      () =>
        (
          eventBody({ pod: POD, type: 'Warning', reason: 'NoNetworkFound', message: 'm' }, at).metadata as {
            name: string;
          }
        ).name,
    );
    expect(new Set(names).size).toBe(3);
    for (const name of names) {
      const nanos = BigInt(`0x${name.slice('web-0.'.length)}`);
      expect(nanos / 1_000_000n).toBe(BigInt(at.getTime()));
    }
    const ev = eventBody({ pod: POD, type: 'Warning', reason: 'NoNetworkFound', message: 'm' }, at);
    expect(ev.firstTimestamp).toBe('2026-01-02T03:04:05Z');
    // a caller's fixed name (a report made once, hotplug/dynamic-plan.ts reportName) is kept
    const named = eventBody({ pod: POD, type: 'Warning', reason: 'R', message: 'm', name: 'web-0.abc' }, at);
    expect((named.metadata as { name: string }).name).toBe('web-0.abc');
  });

  it('reuses one keep-alive connection for consecutive requests', async () => {
    const c = await client(writeKubeconfig('    token: t'));
    await c.getPod('default', 'a');
    await c.getPod('default', 'b');
    await c.getNad('default', 'n');
    expect(c.requestCount).toBe(3);
    expect(stub.connections).toBe(1);
  });

  it('opens at most 8 connections for 30 requests at once; the rest wait and reuse them (docs/resident.md, "Memory")', async () => {
    const c = await client(writeKubeconfig('    token: t'));
    // answers are held until no new request came for 100 ms, so every connection the client opens is seen
    const held: ServerResponse[] = [];
    let timer: NodeJS.Timeout | undefined;
    const release = () => held.splice(0).forEach((res) => json(res, 200, POD));
    stub.handle = (_q, res) => {
      held.push(res);
      clearTimeout(timer);
      timer = setTimeout(release, 100);
    };
    const pods = await Promise.all(Array.from({ length: 30 }, (_, i) => c.getPod('default', `p-${i}`)));
    expect(pods).toHaveLength(30);
    expect(stub.seen).toHaveLength(30);
    expect(stub.connections).toBe(8);
  });

  it('keeps the server URL path as a prefix', async () => {
    const c = await client(
      writeKubeconfig('    token: t', undefined, `${stub.url}/k8s/clusters/c-1/`).replace(/$/, ''),
      {},
    );
    await c.getPod('default', 'web-0');
    expect(stub.seen[0]?.url).toBe('/k8s/clusters/c-1/api/v1/namespaces/default/pods/web-0');
  });
});

describe('credentials', () => {
  it('re-reads tokenFile for every request, so a rotated token is used (Multus #852)', async () => {
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, 'tok-1\n');
    const c = await client(writeKubeconfig('    tokenFile: token'));
    await c.getPod('default', 'web-0');
    writeFileSync(`${tokenFile}.new`, 'tok-2');
    execFileSync('mv', [`${tokenFile}.new`, tokenFile]); // atomic replace, as kubelet's projected volume does
    await c.getPod('default', 'web-0');
    expect(stub.seen.map((s) => s.authorization)).toEqual(['Bearer tok-1', 'Bearer tok-2']);
    expect(c.info.auth).toBe('tokenFile');
  });

  it("reloadKubeconfig: an inline token rewritten in the kubeconfig is used once read again (an upgrade's new pod)", async () => {
    const path = writeKubeconfig('    token: old-token');
    const c = await client(path);
    expect(await c.reloadKubeconfig!(), 'the same bytes').toBe(false);
    await c.getPod('default', 'web-0');
    writeFileSync(`${path}.half`, 'apiVersion: v1\nkind: Con');
    execFileSync('mv', [`${path}.half`, path]); // a file being written that cannot be used yet: no change
    expect(await c.reloadKubeconfig!()).toBe(false);
    writeKubeconfig('    token: new-token');
    expect(await c.reloadKubeconfig!()).toBe(true);
    expect(await c.reloadKubeconfig!(), 'read once').toBe(false);
    await c.getPod('default', 'web-0');
    expect(stub.seen.map((s) => s.authorization)).toEqual(['Bearer old-token', 'Bearer new-token']);
    // a token file is read for every request anyway; the in-cluster config has no kubeconfig to read again
    writeFileSync(join(dir, 'token'), 'tok');
    expect((await client(writeKubeconfig('    tokenFile: token'))).reloadKubeconfig).toBeUndefined();
  });

  it('keeps the last token when the token file disappears between requests', async () => {
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, 'tok-1');
    const c = await client(writeKubeconfig(`    tokenFile: ${tokenFile}`));
    await c.getPod('default', 'web-0');
    rmSync(tokenFile);
    await c.getPod('default', 'web-0');
    expect(stub.seen.map((s) => s.authorization)).toEqual(['Bearer tok-1', 'Bearer tok-1']);
  });

  it('authenticates with a client certificate from relative files and a CA file', async () => {
    mkdirSync(join(dir, 'pki'));
    for (const f of ['ca.crt', 'client.crt', 'client.key']) writeFileSync(join(dir, 'pki', f), pem(f));
    const c = await client(
      writeKubeconfig(
        '    client-certificate: pki/client.crt\n    client-key: pki/client.key',
        '    certificate-authority: pki/ca.crt',
      ),
    );
    await c.getPod('default', 'web-0');
    expect(stub.seen[0]).toMatchObject({ clientCn: 'system:node:worker-1', authorization: undefined });
    expect(c.info.auth).toBe('client-certificate');
  });

  it('a client certificate missing or empty during its rotation: a kept client uses the last good one (Multus #1483)', async () => {
    mkdirSync(join(dir, 'pki'));
    for (const f of ['ca.crt', 'client.crt', 'client.key']) writeFileSync(join(dir, 'pki', f), pem(f));
    const kubeconfig = writeKubeconfig(
      '    client-certificate: pki/client.crt\n    client-key: pki/client.key',
      '    certificate-authority: pki/ca.crt',
    );
    const c = await client(kubeconfig);
    await c.getPod('default', 'web-0');
    rmSync(join(dir, 'pki', 'client.crt')); // the rotation's gap
    writeFileSync(join(dir, 'pki', 'client.key'), '');
    await c.getPod('default', 'web-0');
    expect(stub.seen.map((s) => s.clientCn)).toEqual(['system:node:worker-1', 'system:node:worker-1']);
  });

  it('authenticates with client certificate data', async () => {
    const c = await client(
      writeKubeconfig(`    client-certificate-data: ${b64('client.crt')}\n    client-key-data: ${b64('client.key')}`),
    );
    await c.getPod('default', 'web-0');
    expect(stub.seen[0]?.clientCn).toBe('system:node:worker-1');
  });

  it('sends basic auth and impersonation headers', async () => {
    const c = await client(
      writeKubeconfig('    username: admin\n    password: "p:w"\n    as: bob\n    as-groups:\n    - g1\n    - g2'),
    );
    await c.getPod('default', 'web-0');
    expect(stub.seen[0]?.authorization).toBe(`Basic ${Buffer.from('admin:p:w').toString('base64')}`);
    expect(stub.seen[0]?.headers['impersonate-user']).toBe('bob');
    expect(stub.seen[0]?.headers['impersonate-group']).toBe('g1, g2');
  });

  it('sends the tls-server-name as SNI', async () => {
    const c = await client(
      writeKubeconfig(
        '    token: t',
        `    certificate-authority-data: ${b64('ca.crt')}\n    tls-server-name: kubernetes.default.svc`,
      ),
    );
    await c.getPod('default', 'web-0');
    expect(stub.seen[0]?.servername).toBe('kubernetes.default.svc');
  });

  it('skips verification only with insecure-skip-tls-verify', async () => {
    const c = await client(writeKubeconfig('    token: t', '    insecure-skip-tls-verify: true'));
    await c.getPod('default', 'web-0');
    expect(stub.seen).toHaveLength(1);
  });

  it('sends no credentials to a plain http server', async () => {
    const plain = await startStub('http');
    try {
      const c = await client(writeKubeconfig('    token: t', '    insecure-skip-tls-verify: false', plain.url));
      expect(await c.getPod('default', 'web-0')).toEqual(POD);
      expect(plain.seen[0]?.authorization).toBeUndefined();
      expect(c.info.auth).toBe('anonymous');
    } finally {
      plain.server.closeAllConnections();
      plain.server.close();
    }
  });
});

describe('errors', () => {
  it('maps 404 to a not-found KubeApiError with the API message', async () => {
    stub.handle = (_q, res) =>
      json(res, 404, status(404, 'NotFound', 'network-attachment-definitions.k8s.cni.cncf.io "net1" not found'));
    const c = await client(writeKubeconfig('    token: t'));
    const err = await rejection(c.getNad('test', 'net1'));
    expect(err).toMatchObject({ status: 404, reason: 'NotFound', code: 999 });
    expect(err.msg).toBe('network-attachment-definitions.k8s.cni.cncf.io "net1" not found');
    expect(err).toBeInstanceOf(CniError);
    expect(isTransient(err)).toBe(false);
  });

  it('maps a 409 on the status write to status 409', async () => {
    stub.handle = (_q, res) =>
      json(
        res,
        409,
        status(409, 'Conflict', 'Operation cannot be fulfilled on pods "web-0": the object has been modified'),
      );
    const c = await client(writeKubeconfig('    token: t'));
    const err = await rejection(c.updatePodStatus(POD));
    expect(err).toMatchObject({ status: 409, reason: 'Conflict', code: 999 });
    expect(err.msg).toMatch(/the object has been modified/);
  });

  it('maps 403 to 999 naming the user, the verb, the resource and the RBAC rule', async () => {
    const apiMsg =
      'pods "web-0" is forbidden: User "system:serviceaccount:kube-system:multus" cannot get resource "pods" in API group "" in the namespace "default"';
    stub.handle = (_q, res) => json(res, 403, status(403, 'Forbidden', apiMsg));
    const c = await client(writeKubeconfig('    token: t'));
    const err = await rejection(c.getPod('default', 'web-0'));
    expect(err).toMatchObject({ status: 403, reason: 'Forbidden', code: 999 });
    expect(err.msg).toContain(apiMsg);
    expect(err.msg).toContain('user "multus" of kubeconfig');
    expect(err.msg).toContain('get pods default/web-0');
    expect(err.msg).toContain('apiGroups: [""], resources: ["pods"], verbs: ["get"]');
  });

  it('says which rule the status write and events need', async () => {
    stub.handle = (_q, res) => json(res, 403, status(403, 'Forbidden', 'forbidden'));
    const c = await client(writeKubeconfig('    token: t'));
    expect((await rejection(c.updatePodStatus(POD))).msg).toContain('resources: ["pods/status"], verbs: ["update"]');
    expect((await rejection(c.createEvent({ pod: POD, type: 'Normal', reason: 'r', message: 'm' }))).msg).toContain(
      'apiGroups: ["", "events.k8s.io"], resources: ["events"], verbs: ["create"]',
    );
  });

  it('maps 401 to 999 pointing at token rotation', async () => {
    stub.handle = (_q, res) => json(res, 401, status(401, 'Unauthorized', 'Unauthorized'));
    const c = await client(writeKubeconfig('    token: expired-token'));
    const err = await rejection(c.getPod('default', 'web-0'));
    expect(err).toMatchObject({ status: 401, reason: 'Unauthorized', code: 999 });
    expect(err.msg).toMatch(/^Unauthorized: .*user "multus".*tokenFile/);
    expect(err.msg).not.toContain('expired-token');
  });

  it.each([
    [500, 'InternalError'],
    [502, 'InternalError'],
    [503, 'ServiceUnavailable'],
    [504, 'Timeout'],
    [429, 'TooManyRequests'],
  ])('maps %i to code 11, transient', async (code, reason) => {
    stub.handle = (_q, res) => {
      res.writeHead(code, { 'Content-Type': 'text/html' });
      res.end('<html>proxy page</html>');
    };
    const c = await client(writeKubeconfig('    token: t'));
    const err = await rejection(c.getPod('default', 'web-0'));
    expect(err).toMatchObject({ status: code, reason, code: 11 });
    expect(isTransient(err)).toBe(true);
  });

  it('gives up on a server that never answers within the deadline, code 11', async () => {
    stub.handle = () => {}; // never answers
    const c = await client(writeKubeconfig('    token: t'), { timeoutMs: 5_000 });
    const t0 = Date.now();
    const err = await rejection(c.getPod('default', 'web-0', { timeoutMs: 300 }));
    const took = Date.now() - t0;
    expect(err).toMatchObject({ status: 0, reason: 'Timeout', code: 11 });
    expect(err.msg).toMatch(/within 300 ms \(get pods default\/web-0\)/);
    expect(took).toBeGreaterThanOrEqual(280);
    expect(took).toBeLessThan(2_000);
    expect(isTransient(err)).toBe(true);
  });

  it('applies the client timeout to a server that accepts but never finishes the body', async () => {
    stub.handle = (_q, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': '1000' });
      res.write('{"metadata":');
    };
    const c = await client(writeKubeconfig('    token: t'), { timeoutMs: 300 });
    const t0 = Date.now();
    expect(await rejection(c.getPod('default', 'web-0'))).toMatchObject({ reason: 'Timeout', code: 11 });
    expect(Date.now() - t0).toBeLessThan(2_000);
  });

  it('maps connection refused to code 11, transient', async () => {
    const closed = await startStub();
    const url = closed.url;
    await new Promise((r) => closed.server.close(r));
    const c = await client(writeKubeconfig('    token: t', undefined, url));
    const err = await rejection(c.getPod('default', 'web-0'));
    expect(err).toMatchObject({ status: 0, reason: 'ConnectionRefused', code: 11 });
    expect(isTransient(err)).toBe(true);
  });

  it('maps a connection reset mid-response to code 11', async () => {
    stub.handle = (_q, res) => res.socket?.destroy();
    const c = await client(writeKubeconfig('    token: t'));
    expect(await rejection(c.getPod('default', 'web-0'))).toMatchObject({ reason: 'ConnectionReset', code: 11 });
  });

  it('maps a certificate the CA does not sign to a TLS error (999, not transient)', async () => {
    const c = await client(writeKubeconfig('    token: t', `    certificate-authority-data: ${b64('other-ca.crt')}`));
    const err = await rejection(c.getPod('default', 'web-0'));
    expect(err).toMatchObject({ status: 0, reason: 'TLSError', code: 999 });
    expect(err.msg).toMatch(/verified with certificate-authority-data/);
    expect(isTransient(err)).toBe(false);
    expect(stub.seen).toHaveLength(0);
  });

  it('answers NotFound for names that cannot exist, without a request', async () => {
    const c = await client(writeKubeconfig('    token: t'));
    for (const [ns, name] of [
      ['default', '../secrets'],
      ['Default', 'x'],
      ['default', ''],
      ['a/b', 'x'],
      ['default', 'UPPER'],
    ]) {
      const err = await rejection(c.getPod(ns as string, name as string));
      expect(err).toMatchObject({ status: 404, reason: 'NotFound' });
    }
    expect((await rejection(c.getNad('ns', 'Bad_Name'))).msg).toBe(
      'network-attachment-definitions.k8s.cni.cncf.io "Bad_Name" not found',
    );
    expect(c.requestCount).toBe(0);
    expect(stub.seen).toHaveLength(0);
  });

  it('refuses an invalid JSON success body', async () => {
    stub.handle = (_q, res) => {
      res.writeHead(200);
      res.end('not json');
    };
    const c = await client(writeKubeconfig('    token: t'));
    expect(await rejection(c.getPod('default', 'web-0'))).toMatchObject({
      status: 200,
      reason: 'InvalidResponse',
      code: 999,
    });
  });

  it('isTransient is false for anything that is not a KubeApiError', () => {
    expect(isTransient(new Error('ECONNREFUSED'))).toBe(false);
    expect(isTransient(new CniError(11, 'x'))).toBe(false);
  });
});

describe('loadKubeClient', () => {
  it('is undefined without a kubeconfig and without in-cluster env', async () => {
    expect(await loadKubeClient({ kubeconfig: '', env: {}, log: silentLogger })).toBeUndefined();
    expect(
      await loadKubeClient({ kubeconfig: '', env: { KUBERNETES_SERVICE_HOST: '10.0.0.1' }, log: silentLogger }),
    ).toBeUndefined();
  });

  it('reports an unreadable kubeconfig as Multus does (999)', async () => {
    const p = join(dir, 'missing.kubeconfig');
    const err = await loadKubeClient({ kubeconfig: p, env: {}, log: silentLogger }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CniError);
    expect(err).toMatchObject({ code: 999 });
    expect((err as CniError).msg).toMatch(
      new RegExp(`^GetK8sClient: failed to get context for the kubeconfig ${p}: .*ENOENT`),
    );
  });

  it('reports an invalid kubeconfig with client-go wording', async () => {
    const p = writeKubeconfig('    token: t').replace(/$/, '');
    writeFileSync(p, readFileSync(p, 'utf8').replace('current-context: ctx', 'current-context: nope'));
    await expect(loadKubeClient({ kubeconfig: p, env: {}, log: silentLogger })).rejects.toThrow(
      /context was not found for specified context: nope/,
    );
  });

  it('uses the in-cluster service account: host/port from env, token re-read, CA file, namespace', async () => {
    const sa = join(dir, 'sa');
    mkdirSync(sa);
    writeFileSync(join(sa, 'token'), 'sa-token-1');
    writeFileSync(join(sa, 'ca.crt'), pem('ca.crt'));
    writeFileSync(join(sa, 'namespace'), 'kube-system');
    const port = stub.url.split(':').pop();
    const env = { KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: port };
    const c = await client('', { env, serviceAccountDir: sa });
    expect(c.info).toMatchObject({
      source: 'in-cluster',
      server: `https://127.0.0.1:${port}`,
      namespace: 'kube-system',
      auth: 'tokenFile',
    });
    await c.getPod('default', 'web-0');
    writeFileSync(join(sa, 'token'), 'sa-token-2');
    await c.getPod('default', 'web-0');
    expect(stub.seen.map((s) => s.authorization)).toEqual(['Bearer sa-token-1', 'Bearer sa-token-2']);
    const denied = await (async () => {
      stub.handle = (_q, res) => json(res, 403, status(403, 'Forbidden', 'forbidden'));
      return rejection(c.getPod('default', 'web-0'));
    })();
    expect(denied.msg).toContain(`the pod's service account (token ${sa}/token)`);
  });

  it('prefers the kubeconfig over the in-cluster env', async () => {
    const c = await client(writeKubeconfig('    token: t'), {
      env: { KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443' },
    });
    expect(c.info.source).toBe('kubeconfig');
  });
});

describe('logging', () => {
  it('never writes a token, password or key to the log, even at debug', async () => {
    const lines: string[] = [];
    const log: Logger = {
      error: (m) => lines.push(m),
      warn: (m) => lines.push(m),
      verbose: (m) => lines.push(m),
      debug: (m) => lines.push(m),
      enabled: () => true,
    };
    writeFileSync(join(dir, 'token'), 'file-token-secret');
    const c = await client(writeKubeconfig('    tokenFile: token'), { log });
    await c.getPod('default', 'web-0');
    stub.handle = (_q, res) => json(res, 401, status(401, 'Unauthorized', 'Unauthorized'));
    await c.getPod('default', 'web-0').catch(() => {});
    rmSync(join(dir, 'token'));
    stub.handle = (_q, res) => json(res, 200, POD);
    await c.getPod('default', 'web-0');
    expect(lines.length).toBeGreaterThan(2);
    expect(lines.join('\n')).not.toContain('file-token-secret');
  });
});

describe('the @kubernetes/client-node fallback', () => {
  it('serves an exec user: runs the plugin and sends its token over the lean transport', async () => {
    const plugin = join(dir, 'get-token.sh');
    writeFileSync(
      plugin,
      '#!/bin/sh\necho \'{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"exec-token","expirationTimestamp":"2999-01-01T00:00:00Z"}}\'\n',
    );
    chmodSync(plugin, 0o755);
    const user = `    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: ${plugin}\n      interactiveMode: Never`;
    let loads = 0;
    const loadFallback = async () => {
      loads++;
      return loadFallbackModule();
    };
    const c = await client(writeKubeconfig(user), { loadFallback, timeoutMs: 30_000 });
    expect(c.info).toMatchObject({ auth: 'user.exec', fallback: true });
    await c.getPod('default', 'web-0');
    await c.getPod('default', 'web-0');
    expect(stub.seen.map((s) => s.authorization)).toEqual(['Bearer exec-token', 'Bearer exec-token']);
    expect(loads).toBe(1);
  });

  it('runs an exec plugin once per call even when its credential has no expiry', async () => {
    const plugin = join(dir, 'count-token.sh');
    const count = join(dir, 'count');
    writeFileSync(
      plugin,
      `#!/bin/sh\necho run >> ${count}\necho '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"exec-token"}}'\n`,
    );
    chmodSync(plugin, 0o755);
    const user = `    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: ${plugin}\n      interactiveMode: Never`;
    const c = await client(writeKubeconfig(user), { loadFallback: loadFallbackModule, timeoutMs: 30_000 });
    await c.getPod('default', 'web-0');
    await c.getNad('default', 'net-a');
    await c.getPod('default', 'web-0');
    expect(readFileSync(count, 'utf8').trim().split('\n')).toHaveLength(1);
  });

  it('parses YAML beyond the lean subset with js-yaml and still uses the lean credentials', async () => {
    const file = writeKubeconfig('    token: &t anchored-token');
    const c = await client(file, { loadFallback: loadFallbackModule });
    expect(c.info).toMatchObject({ auth: 'token', fallback: false });
    await c.getPod('default', 'web-0');
    expect(stub.seen[0]?.authorization).toBe('Bearer anchored-token');
  });

  it('reports a failing exec plugin as a credentials error (999) without a request', async () => {
    const user = `    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: ${join(dir, 'absent-plugin')}`;
    const c = await client(writeKubeconfig(user), { loadFallback: loadFallbackModule });
    const err = await rejection(c.getPod('default', 'web-0'));
    expect(err).toMatchObject({ status: 0, reason: 'ClientError', code: 999 });
    expect(err.msg).toMatch(/cannot get credentials for user "multus" .* from user\.exec/);
    expect(stub.seen).toHaveLength(0);
  });
});

describe('the built fallback bundle (scripts/build-k8s-fallback.mjs)', () => {
  it('bundles client-node without the generated API and still runs exec plugins', async () => {
    const out = join(dir, 'build');
    execFileSync(
      process.execPath,
      [join(import.meta.dirname, '../../../scripts/build-k8s-fallback.mjs'), '--outdir', out, '--quiet'],
      { stdio: 'pipe' },
    );
    const source = readFileSync(join(out, 'k8s-fallback.cjs'), 'utf8');
    expect(source.length).toBeLessThan(400 * 1024);
    expect(source).not.toContain('punycode');
    const plugin = join(dir, 'plugin.sh');
    writeFileSync(
      plugin,
      '#!/bin/sh\necho \'{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"bundled-exec"}}\'\n',
    );
    chmodSync(plugin, 0o755);
    const kc = writeKubeconfig(
      `    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: ${plugin}`,
    );
    const mod = createRequire(import.meta.url)(join(out, 'k8s-fallback.cjs')) as FallbackModule;
    expect((await mod.openKubeconfig(kc).credentials()).headers.Authorization).toBe('Bearer bundled-exec');
    expect(mod.parseYaml('a: &x 1\nb: *x\n')).toEqual({ a: 1, b: 1 });
    expect(() => mod.parseYaml('a: [\ntoken: secret-value')).toThrow(/^invalid YAML at line \d+: /);
    expect(() => mod.parseYaml('a: [\ntoken: secret-value')).not.toThrow(/secret-value/);
  });
});
