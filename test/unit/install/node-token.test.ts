/**
 * node-token.ts: the service account named by a mounted token's claims, and the TokenRequest call (against a
 * local HTTP server standing in for the API server; the real one answers it in test/runtime/kubelet-*.test.ts).
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { accountOf, requestNodeToken } from '../../../src/install/node-token.ts';

const jwt = (claims: unknown): string =>
  ['e30', Buffer.from(JSON.stringify(claims)).toString('base64url'), 'sig'].join('.');

describe('accountOf', () => {
  it("reads the namespace and the service account of a projected token's kubernetes.io claim", () => {
    const t = jwt({ 'kubernetes.io': { namespace: 'kube-system', serviceaccount: { name: 'multus-ts', uid: 'u' } } });
    expect(accountOf(t)).toEqual({ namespace: 'kube-system', name: 'multus-ts' });
  });

  it('refuses a token without those claims, saying what is needed', () => {
    for (const t of ['token-1', jwt({ sub: 'x' }), jwt({ 'kubernetes.io': { namespace: 'a' } }), 'a.!!!.b']) {
      expect(() => accountOf(t)).toThrow(/names no service account .*--token-binding=node needs the projected token/);
    }
  });
});

describe('requestNodeToken', () => {
  let server: Server | undefined;
  afterEach(() => new Promise<void>((r) => (server ? server.close(() => r()) : r())));

  /** A server answering every request with `status` and `body`; the requests are recorded. */
  async function serve(
    status: number,
    body: string,
  ): Promise<{ url: string; seen: Array<{ req: IncomingMessage; body: string }> }> {
    const seen: Array<{ req: IncomingMessage; body: string }> = [];
    server = createServer((req, res) => {
      let text = '';
      req.on('data', (c: Buffer) => (text += c.toString()));
      req.on('end', () => {
        seen.push({ req, body: text });
        res.writeHead(status, { 'Content-Type': 'application/json' }).end(body);
      });
    });
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
    const port = (server!.address() as { port: number }).port;
    return { url: `http://127.0.0.1:${port}`, seen };
  }
  const request = (server: string) => ({
    server,
    ca: null,
    token: 'mounted-token',
    namespace: 'kube-system',
    name: 'multus-ts',
    nodeName: 'node-a',
    expirationSeconds: 86400,
  });

  it('POSTs a TokenRequest bound to the node with the mounted token, and returns the token and its expiry', async () => {
    const { url, seen } = await serve(
      201,
      JSON.stringify({ status: { token: 'node-token', expirationTimestamp: '2026-12-01T10:00:00Z' } }),
    );
    expect(await requestNodeToken(request(url))).toEqual({
      token: 'node-token',
      expiresAt: Date.parse('2026-12-01T10:00:00Z'),
    });
    expect(seen).toHaveLength(1);
    expect(seen[0]!.req.method).toBe('POST');
    expect(seen[0]!.req.url).toBe('/api/v1/namespaces/kube-system/serviceaccounts/multus-ts/token');
    expect(seen[0]!.req.headers.authorization).toBe('Bearer mounted-token');
    expect(JSON.parse(seen[0]!.body)).toEqual({
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: { expirationSeconds: 86400, boundObjectRef: { apiVersion: 'v1', kind: 'Node', name: 'node-a' } },
    });
  });

  it("rejects with the API server's message on an error status, without the token", async () => {
    const { url } = await serve(
      403,
      JSON.stringify({ kind: 'Status', message: 'serviceaccounts "multus-ts" is forbidden: cannot create token' }),
    );
    const e = await requestNodeToken(request(url)).catch((x: Error) => x);
    expect((e as Error).message).toBe(
      'TokenRequest for kube-system/multus-ts bound to node node-a: HTTP 403: serviceaccounts "multus-ts" is forbidden: cannot create token',
    );
    expect((e as Error).message).not.toContain('mounted-token');
  });

  it('rejects an answer without a token or expiry, and a refused connection, naming the request', async () => {
    const { url } = await serve(201, '{"status":{}}');
    await expect(requestNodeToken(request(url))).rejects.toThrow(/bound to node node-a: HTTP 201: \{"status":\{\}\}/);
    await expect(requestNodeToken(request('http://127.0.0.1:1'))).rejects.toThrow(
      /^TokenRequest for kube-system\/multus-ts bound to node node-a: connect ECONNREFUSED/,
    );
  });
});
