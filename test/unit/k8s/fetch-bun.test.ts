/**
 * The lean client's requests on Bun, the runtime of build/multus, where they go through Bun's fetch
 * (src/k8s/fetch.ts) instead of node:https (docs/archive/performance.md). vitest runs under Node, so each case runs in
 * test/helpers/bun-driver.ts under the pinned Bun against a stub API server of this file (certificates from
 * openssl): a token over TLS verified with a CA file, one connection for a call's requests, bodies and headers,
 * client certificates, tls-server-name, insecure-skip-tls-verify, a rotated token file, the error mapping
 * (wrong CA, refused, deadline, reset, oversized body, 404), proxy variables of the environment ignored, and
 * headers with several values (impersonation groups), which fetch would join into one line, sent through
 * node:https.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { type Server, createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { haveBun, onBun } from '../../helpers/bun-run.ts';
import { kubeconfigText } from '../../helpers/kubeconfig-text.ts';
import { fileExists, needs } from '../../helpers/skip.ts';

const ready = needs(haveBun(), fileExists('/usr/bin/openssl', "openssl (Debian's openssl)"));

let pki = '';
const file = (name: string) => join(pki, name);

function makePki(): void {
  const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: pki, stdio: 'pipe' });
  const key = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  for (const ca of ['ca', 'other-ca']) {
    ssl('req', '-x509', ...key, '-keyout', `${ca}.key`, '-out', `${ca}.crt`, '-subj', `/CN=${ca}`, '-days', '2');
  }
  const sign = (name: string, subj: string, ext: string) => {
    writeFileSync(file(`${name}.ext`), `${ext}\n`);
    ssl('req', ...key, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subj);
    const ca = ['-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2'];
    ssl('x509', '-req', '-in', `${name}.csr`, ...ca, '-out', `${name}.crt`, '-extfile', `${name}.ext`);
  };
  sign('server', '/CN=kube-apiserver', 'subjectAltName=IP:127.0.0.1');
  sign('named', '/CN=kube-apiserver', 'subjectAltName=DNS:api.cluster.example');
  sign('client', '/CN=system:node:worker-1', 'extendedKeyUsage=clientAuth');
}

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['rawHeaders'];
  auth: string | undefined;
  body: string;
  clientCn: string | undefined;
  servername: string | undefined;
}

interface Stub {
  server: Server;
  port: number;
  seen: Seen[];
  connections: number;
}

const POD = { metadata: { name: 'web-0', namespace: 'default', uid: 'uid-1', resourceVersion: '7' }, spec: {} };

function route(seen: Seen, res: ServerResponse): void {
  const json = (code: number, body: unknown) => {
    res.writeHead(code, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  if (seen.url.endsWith('/pods/silent')) return; // never answers
  if (seen.url.endsWith('/pods/reset')) {
    res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': '1000' });
    res.write('{"metadata":');
    setTimeout(() => res.socket?.destroy(), 50);
    return;
  }
  if (seen.url.endsWith('/pods/sized')) {
    // a declared length (the other answers here are chunked): read whole, not through the web stream
    const body = JSON.stringify({ ...POD, metadata: { ...POD.metadata, name: 'sized' } });
    res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(body)) });
    res.end(body);
    return;
  }
  if (seen.url.endsWith('/pods/huge')) {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    const chunk = Buffer.alloc(1 << 20, 0x20);
    for (let i = 0; i < 33; i++) res.write(chunk);
    res.end();
    return;
  }
  if (seen.url.endsWith('/pods/missing')) {
    json(404, {
      kind: 'Status',
      status: 'Failure',
      reason: 'NotFound',
      message: 'pods "missing" not found',
      code: 404,
    });
    return;
  }
  if (seen.method === 'PUT' || seen.method === 'POST') json(seen.method === 'POST' ? 201 : 200, JSON.parse(seen.body));
  else json(200, POD);
}

function startStub(cert: string): Promise<Stub> {
  const stub: Stub = { server: undefined as unknown as Server, port: 0, seen: [], connections: 0 };
  const opts = {
    key: readFileSync(file(`${cert}.key`)),
    cert: readFileSync(file(`${cert}.crt`)),
    ca: readFileSync(file('ca.crt')),
    requestCert: true,
    rejectUnauthorized: false,
  };
  stub.server = createServer(opts, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const sock = req.socket as TLSSocket;
      const peer = sock.getPeerCertificate();
      const seen: Seen = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.rawHeaders,
        auth: req.headers.authorization,
        body: Buffer.concat(chunks).toString(),
        clientCn: sock.authorized && peer?.subject ? String(peer.subject.CN) : undefined,
        servername: (sock as TLSSocket & { servername?: string | false }).servername || undefined,
      };
      stub.seen.push(seen);
      route(seen, res);
    });
  });
  stub.server.on('secureConnection', () => stub.connections++);
  return new Promise((resolve) =>
    stub.server.listen(0, '127.0.0.1', () => {
      stub.port = (stub.server.address() as AddressInfo).port;
      resolve(stub);
    }),
  );
}

let plain: Stub;
let named: Stub;

beforeAll(async () => {
  if (!ready) return;
  pki = mkdtempSync(join(tmpdir(), 'mts-fetch-bun-'));
  makePki();
  writeFileSync(file('token'), 'token-1\n');
  plain = await startStub('server');
  named = await startStub('named');
});
afterAll(() => {
  plain?.server.closeAllConnections();
  plain?.server.close();
  named?.server.closeAllConnections();
  named?.server.close();
  if (pki) rmSync(pki, { recursive: true, force: true });
});

interface KubeOptions {
  server?: string;
  cluster?: string[];
  user?: string[];
}

/** A kubeconfig for the stub (the CA file and the token file unless told otherwise); returns its path. */
function kubeconfig(name: string, o: KubeOptions = {}): string {
  const cluster = o.cluster ?? [`certificate-authority: ${file('ca.crt')}`];
  const user = o.user ?? [`tokenFile: ${file('token')}`];
  const path = file(`${name}.kubeconfig`);
  writeFileSync(path, kubeconfigText(o.server ?? `https://127.0.0.1:${plain.port}`, cluster, user));
  return path;
}

interface Answer {
  results: { ok?: Record<string, unknown>; error?: { code: number; msg: string; status: number; reason: string } }[];
  requestCount: number;
}

const call = (fn: string, ...args: unknown[]) => ({ fn, args });
const getPod = (name = 'web-0') => call('getPod', 'default', name);
const kube = (kc: string, calls: { fn: string; args: unknown[] }[], env: Record<string, string> = {}, timeoutMs = 0) =>
  onBun<Answer>({ op: 'kube', kubeconfig: kc, calls, ...(timeoutMs ? { timeoutMs } : {}) }, env);

describe.runIf(ready)('the lean client on Bun (fetch)', () => {
  it("sends a call's requests over one verified TLS connection, with the token, bodies and headers", async () => {
    const before = plain.connections;
    const n = plain.seen.length;
    const event = { pod: POD, type: 'Normal', reason: 'AddedInterface', message: 'Add eth0' };
    const a = await kube(kubeconfig('basic'), [
      getPod(),
      call('getNad', 'default', 'net-a'),
      call('updatePodStatus', POD),
      call('createEvent', event),
    ]);
    expect(a.results.map((r) => r.error)).toEqual([undefined, undefined, undefined, undefined]);
    expect(a.results[0]!.ok).toMatchObject({ metadata: { uid: 'uid-1' } });
    expect(a.requestCount).toBe(4);
    expect(plain.connections - before, 'one TLS connection for the four requests').toBe(1);
    const seen = plain.seen.slice(n);
    expect(seen.map((s) => `${s.method} ${s.url}`)).toEqual([
      'GET /api/v1/namespaces/default/pods/web-0',
      'GET /apis/k8s.cni.cncf.io/v1/namespaces/default/network-attachment-definitions/net-a',
      'PUT /api/v1/namespaces/default/pods/web-0/status',
      'POST /api/v1/namespaces/default/events',
    ]);
    expect(seen.every((s) => s.auth === 'Bearer token-1')).toBe(true);
    expect(JSON.parse(seen[2]!.body)).toMatchObject({ metadata: { name: 'web-0', resourceVersion: '7' } });
    const h = seen[2]!.headers;
    expect(h[h.findIndex((x) => x.toLowerCase() === 'content-type') + 1]).toBe('application/json');
    expect(h[h.findIndex((x) => x.toLowerCase() === 'user-agent') + 1]).toBe('multus-ts');
  });

  it('reads the token file again for every request (a rotated token is used)', async () => {
    const kc = kubeconfig('rotate');
    writeFileSync(file('token'), 'token-2\n');
    const n = plain.seen.length;
    await kube(kc, [getPod()]);
    writeFileSync(file('token'), 'token-1\n');
    expect(plain.seen[n]!.auth).toBe('Bearer token-2');
  });

  it('authenticates with a client certificate from files', async () => {
    const kc = kubeconfig('cert', {
      user: [`client-certificate: ${file('client.crt')}`, `client-key: ${file('client.key')}`],
    });
    const n = plain.seen.length;
    const a = await kube(kc, [getPod()]);
    expect(a.results[0]!.error).toBeUndefined();
    expect(plain.seen[n]!.clientCn).toBe('system:node:worker-1');
    expect(plain.seen[n]!.auth).toBeUndefined();
  });

  it('sends tls-server-name as SNI and verifies the certificate against that name', async () => {
    const server = `https://127.0.0.1:${named.port}`;
    const kc = kubeconfig('sni', {
      server,
      cluster: [`certificate-authority: ${file('ca.crt')}`, 'tls-server-name: api.cluster.example'],
    });
    const a = await kube(kc, [getPod()]);
    expect(a.results[0]!.error).toBeUndefined();
    expect(named.seen.at(-1)!.servername).toBe('api.cluster.example');
    const without = await kube(kubeconfig('nosni', { server }), [getPod()]);
    expect(without.results[0]!.error).toMatchObject({ code: 999, reason: 'TLSError' });
  });

  it('refuses a server its CA does not sign (999, not transient), unless insecure-skip-tls-verify', async () => {
    const wrong = await kube(kubeconfig('wrongca', { cluster: [`certificate-authority: ${file('other-ca.crt')}`] }), [
      getPod(),
    ]);
    expect(wrong.results[0]!.error).toMatchObject({ code: 999, status: 0, reason: 'TLSError' });
    expect(wrong.results[0]!.error!.msg).toContain('other-ca.crt');
    const insecure = await kube(kubeconfig('insecure', { cluster: ['insecure-skip-tls-verify: true'] }), [getPod()]);
    expect(insecure.results[0]!.error).toBeUndefined();
  });

  it('maps refused, a deadline, a reset and a 404 as node:https did', async () => {
    const refused = await kube(kubeconfig('refused', { server: 'https://127.0.0.1:1' }), [getPod()]);
    expect(refused.results[0]!.error).toMatchObject({ code: 11, reason: 'ConnectionRefused' });
    const a = await kube(kubeconfig('errors'), [getPod('silent'), getPod('reset'), getPod('missing')], {}, 700);
    expect(a.results[0]!.error).toMatchObject({ code: 11, reason: 'Timeout' });
    expect(a.results[0]!.error!.msg).toContain('within 700 ms');
    expect(a.results[1]!.error).toMatchObject({ code: 11, reason: 'ConnectionReset' });
    expect(a.results[2]!.error).toMatchObject({ status: 404, reason: 'NotFound', msg: 'pods "missing" not found' });
  });

  it('reads a body of a declared length as a chunked one', async () => {
    const a = await kube(kubeconfig('sized'), [getPod('sized'), getPod()]);
    expect(a.results.map((r) => r.error)).toEqual([undefined, undefined]);
    expect(a.results[0]!.ok).toMatchObject({ metadata: { name: 'sized', uid: 'uid-1', resourceVersion: '7' } });
    expect(a.results[1]!.ok).toMatchObject({ metadata: { name: 'web-0', uid: 'uid-1' } });
  });

  it('refuses a response body over the limit', async () => {
    const a = await kube(kubeconfig('huge'), [getPod('huge')]);
    expect(a.results[0]!.error!.msg).toContain('larger than');
  });

  it('ignores HTTP(S)_PROXY in its environment, as node:https did (nothing but the CNI contract changes it)', async () => {
    const dead = 'http://127.0.0.1:1';
    const env = { HTTPS_PROXY: dead, https_proxy: dead, HTTP_PROXY: dead, http_proxy: dead };
    const a = await kube(kubeconfig('proxyenv'), [getPod(), getPod()], env);
    expect(a.results.map((r) => r.error)).toEqual([undefined, undefined]);
  });

  it('sends each impersonated group on a header line of its own (through node:https: fetch would join them)', async () => {
    const kc = kubeconfig('groups', {
      user: [`tokenFile: ${file('token')}`, 'as: someone', 'as-groups:', '    - g1', '    - g2'],
    });
    const n = plain.seen.length;
    const a = await kube(kc, [getPod()]);
    expect(a.results[0]!.error).toBeUndefined();
    const h = plain.seen[n]!.headers;
    const groups = h.filter((_, i) => i % 2 === 1 && h[i - 1]!.toLowerCase() === 'impersonate-group');
    expect(groups).toEqual(['g1', 'g2']);
  });
});
