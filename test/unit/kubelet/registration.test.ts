/**
 * Tests for src/kubelet/registration.ts and server.ts: the plugin-registration server on a unix socket, called by
 * a @grpc/grpc-js client built by @grpc/proto-loader from the kubelet's own api.proto (as the kubelet's plugin
 * watcher would call it), the socket's modes, a stale socket replaced, a file that is no socket refused, and the
 * stop on an AbortSignal that removes the socket.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { serveRegistration } from '../../../src/kubelet/registration.ts';
import type { PluginInfo, RegistrationStatus } from '../../../src/kubelet/registration.ts';

const PROTO = fileURLToPath(new URL('../../../src/kubelet/protos/pluginregistration/v1/api.proto', import.meta.url));

type Callback = (err: grpc.ServiceError | null, value?: Record<string, unknown>) => void;
interface RegistrationClient extends grpc.Client {
  GetInfo(request: object, callback: Callback): void;
  NotifyRegistrationStatus(request: object, callback: Callback): void;
}

/** The kubelet's side: a client from the .proto with the kubelet's (Go's) snake_case field names. */
function kubeletClient(socketPath: string): RegistrationClient {
  const definition = protoLoader.loadSync(PROTO, { keepCase: true, defaults: true });
  const pkg = grpc.loadPackageDefinition(definition) as unknown as {
    pluginregistration: { Registration: new (address: string, creds: grpc.ChannelCredentials) => RegistrationClient };
  };
  return new pkg.pluginregistration.Registration(`unix:${socketPath}`, grpc.credentials.createInsecure());
}

function call(client: RegistrationClient, method: 'GetInfo' | 'NotifyRegistrationStatus', request: object) {
  return new Promise<Record<string, unknown>>((resolve, reject) =>
    client[method](request, (err, value) => (err ? reject(err) : resolve(value ?? {}))),
  );
}

const INFO: PluginInfo = {
  type: 'DRAPlugin',
  name: 'multus.k8s.cni.cncf.io',
  endpoint: '/var/lib/kubelet/plugins/multus.k8s.cni.cncf.io/dra.sock',
  supportedVersions: ['v1.DRAPlugin', 'v1beta1.DRAPlugin'],
};

let dir: string;
let controller: AbortController;
const clients: grpc.Client[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mts-reg-'));
  controller = new AbortController();
});
afterEach(() => {
  for (const c of clients.splice(0)) c.close();
  controller.abort();
  rmSync(dir, { recursive: true, force: true });
});

async function start(socketPath: string, statuses: RegistrationStatus[] = []) {
  const serving = await serveRegistration({
    socketPath,
    info: INFO,
    onStatus: (s) => statuses.push(s),
    signal: controller.signal,
  });
  const client = kubeletClient(socketPath);
  clients.push(client);
  return { serving, client };
}

describe('serveRegistration', () => {
  it('answers GetInfo and NotifyRegistrationStatus as the kubelet calls them', async () => {
    const statuses: RegistrationStatus[] = [];
    const { client } = await start(join(dir, 'plugins_registry', 'multus-reg.sock'), statuses);
    expect(await call(client, 'GetInfo', {})).toEqual({
      type: 'DRAPlugin',
      name: 'multus.k8s.cni.cncf.io',
      endpoint: '/var/lib/kubelet/plugins/multus.k8s.cni.cncf.io/dra.sock',
      supported_versions: ['v1.DRAPlugin', 'v1beta1.DRAPlugin'],
    });
    expect(await call(client, 'NotifyRegistrationStatus', { plugin_registered: false, error: 'bad name' })).toEqual({});
    expect(await call(client, 'NotifyRegistrationStatus', { plugin_registered: true })).toEqual({});
    expect(statuses).toEqual([
      { pluginRegistered: false, error: 'bad name' },
      { pluginRegistered: true, error: '' },
    ]);
  });

  it('makes a missing directory 0700 and the socket 0600', async () => {
    const socketPath = join(dir, 'new', 'reg.sock');
    await start(socketPath);
    expect(statSync(join(dir, 'new')).mode & 0o777).toBe(0o700);
    expect(statSync(socketPath).mode & 0o777).toBe(0o600);
  });

  it('stops on the signal and removes its socket', async () => {
    const socketPath = join(dir, 'reg.sock');
    const { serving, client } = await start(socketPath);
    await call(client, 'GetInfo', {});
    controller.abort();
    await serving.stopped;
    expect(existsSync(socketPath)).toBe(false);
    await expect(call(client, 'GetInfo', {})).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
  });

  it('replaces a stale socket left by a plugin that died', async () => {
    const socketPath = join(dir, 'reg.sock');
    // A socket file left behind by a process that died: bound, never listened on, not unlinked.
    const bind = 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])';
    expect(spawnSync('python3', ['-c', bind, socketPath]).status).toBe(0);
    expect(statSync(socketPath).isSocket()).toBe(true);
    const { client } = await start(socketPath);
    expect((await call(client, 'GetInfo', {})).type).toBe('DRAPlugin');
  });

  it('refuses a path that holds a file that is no socket, and leaves it', async () => {
    const socketPath = join(dir, 'reg.sock');
    writeFileSync(socketPath, 'keep');
    await expect(start(socketPath)).rejects.toThrow(/exists and is not a socket/);
    expect(statSync(socketPath).isFile()).toBe(true);
  });
});
