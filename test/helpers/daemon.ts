/** Helpers for the daemon's tests: HTTP over a unix socket, a started in-process server, a host of fakes. */
import type { Server } from 'node:http';
import { request } from 'node:http';
import { connect } from 'node:net';
import type { Host } from '../../src/host/host.ts';
import { createHost } from '../../src/host/host.ts';
import type { KubeClient } from '../../src/k8s/types.ts';
import type { FakeExec } from './fake-exec.ts';

export interface HttpAnswer {
  status: number;
  body: string;
  json(): Record<string, unknown>;
}

export function http(
  socket: string,
  path: string,
  o: { method?: string; body?: string | Buffer; headers?: Record<string, string> } = {},
): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const headers = { Host: 'dummy', ...o.headers };
    const req = request({ socketPath: socket, path, method: o.method ?? 'POST', headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode ?? 0, body, json: () => JSON.parse(body) as Record<string, unknown> });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(o.body);
  });
}

/** A `/cni` request body as Multus' shim sends it. */
export function cniBody(env: Record<string, string | undefined>, config: unknown): string {
  const bytes = Buffer.from(typeof config === 'string' ? config : JSON.stringify(config));
  const clean = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined));
  return JSON.stringify({ env: clean, config: bytes.toString('base64') });
}

export function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
}

/** A Host over fakes: the plugins' exec, a ready readiness file, a frozen clock, and the given Kubernetes client. */
export function fakeHost(exec: FakeExec, kube: KubeClient): Host {
  return createHost({
    writeStderr: () => {},
    exec,
    readiness: { exists: async () => true, sleep: async () => {} },
    clock: { now: () => 0, sleep: async () => {} },
    connectKube: async () => kube,
  });
}

/** 'CONNECTED' when the socket accepts a connection, else the connect error's code. */
export function connectError(socket: string): Promise<string> {
  return new Promise((r) => {
    const s = connect(socket);
    s.on('connect', () => {
      s.destroy();
      r('CONNECTED');
    });
    s.on('error', (e: NodeJS.ErrnoException) => r(e.code ?? 'error'));
  });
}
