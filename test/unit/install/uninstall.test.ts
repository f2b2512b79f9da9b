/**
 * uninstall.ts: how the one GET of the installer's own DaemonSet is read (against a local HTTP server standing in
 * for the API server; the real one answers it after a real `helm uninstall` in test/runtime/kubelet-helm.test.ts).
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { deletionState } from '../../../src/install/uninstall.ts';

describe('deletionState', () => {
  let server: Server | undefined;
  afterEach(() => new Promise<void>((r) => (server ? server.close(() => r()) : r())));

  /** A server answering every request with `status` and `body`; the requests are recorded. */
  async function serve(status: number, body: string): Promise<{ url: string; seen: IncomingMessage[] }> {
    const seen: IncomingMessage[] = [];
    server = createServer((req, res) => {
      seen.push(req);
      res.writeHead(status, { 'Content-Type': 'application/json' }).end(body);
    });
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
    return { url: `http://127.0.0.1:${(server!.address() as { port: number }).port}`, seen };
  }
  const ask = (server: string) =>
    deletionState({ server, ca: null, token: 'pod-token', namespace: 'kube-system', name: 'kube-multus-ds' });

  it('GETs its own DaemonSet with the pod token', async () => {
    const { url, seen } = await serve(200, JSON.stringify({ metadata: { name: 'kube-multus-ds' } }));
    expect(await ask(url)).toBe('present');
    expect(seen.map((r) => [r.method, r.url, r.headers.authorization])).toEqual([
      ['GET', '/apis/apps/v1/namespaces/kube-system/daemonsets/kube-multus-ds', 'Bearer pod-token'],
    ]);
  });

  it.each([
    ['404: deleted', 404, '{"kind":"Status"}', 'deleted'],
    ['a deletionTimestamp: deleted', 200, '{"metadata":{"deletionTimestamp":"2026-12-02T02:00:00Z"}}', 'deleted'],
    ['401 (its account deleted by helm uninstall): revoked', 401, '{"kind":"Status"}', 'revoked'],
    ['403 (its role deleted): revoked', 403, '{"kind":"Status"}', 'revoked'],
  ])('%s', async (_title, status, body, want) => {
    const { url } = await serve(status, body);
    expect(await ask(url)).toBe(want);
  });

  it('anything else is unknown, with the reason (so the files are kept)', async () => {
    let { url } = await serve(500, '{}');
    expect(await ask(url)).toEqual({ unknown: 'GET daemonset kube-system/kube-multus-ds: HTTP 500' });
    await new Promise<void>((r) => server!.close(() => r()));
    ({ url } = await serve(200, 'not json'));
    expect(await ask(url)).toEqual({ unknown: 'GET daemonset kube-system/kube-multus-ds: the answer is not JSON' });
    await new Promise<void>((r) => server!.close(() => r()));
    server = undefined;
    const r = await ask('http://127.0.0.1:1');
    expect(r).toEqual({ unknown: expect.stringMatching(/GET daemonset kube-system\/kube-multus-ds.*ECONNREFUSED/) });
  });
});
