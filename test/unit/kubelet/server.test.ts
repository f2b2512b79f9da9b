/**
 * src/kubelet/server.ts with a service other than registration: the DRA plugin API v1 (services.ts'
 * `draV1`), served with stand-in handlers and called by a grpc-js client that @grpc/proto-loader builds from the
 * kubelet's dra/v1 api.proto, as the kubelet calls a DRA driver. Shows that a new service is its line in
 * services.ts plus handlers; messages reach the handlers in camelCase with every field present, and a map field
 * (`claims`, keyed by claim UID) goes back as a plain object.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { serviceDefinition } from '../../../src/kubelet/grpc.ts';
import { serveUnix } from '../../../src/kubelet/server.ts';
import { SERVICES } from '../../../src/kubelet/services.ts';

const PROTO = fileURLToPath(new URL('../../../src/kubelet/protos/dra/v1/api.proto', import.meta.url));

type Callback = (err: grpc.ServiceError | null, value?: Record<string, unknown>) => void;
type DraClient = grpc.Client & Record<'NodePrepareResources', (request: object, callback: Callback) => void>;

interface Claim {
  namespace: string;
  uid: string;
  name: string;
}

let dir: string;
let controller: AbortController;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mts-dra-'));
  controller = new AbortController();
});
afterEach(() => {
  controller.abort();
  rmSync(dir, { recursive: true, force: true });
});

it('serves the DRA v1 service from its services.ts line; the kubelet-side client gets every claim answered', async () => {
  const socketPath = join(dir, 'plugins', 'dra.sock');
  const seen: Claim[][] = [];
  const serving = await serveUnix({
    socketPath,
    signal: controller.signal,
    services: [
      {
        service: serviceDefinition(SERVICES.draV1),
        handlers: {
          NodePrepareResources: (call: { request: { claims: Claim[] } }, callback: grpc.sendUnaryData<object>) => {
            seen.push(call.request.claims);
            const claims = Object.fromEntries(
              call.request.claims.map((c) => [
                c.uid,
                c.name === 'bad'
                  ? { error: 'no such network' }
                  : { devices: [{ requestNames: ['net'], poolName: 'node-1', deviceName: 'net-a', cdiDeviceIds: [] }] },
              ]),
            );
            callback(null, { claims });
          },
          NodeUnprepareResources: (_call: unknown, callback: grpc.sendUnaryData<object>) => callback(null, {}),
        },
      },
    ],
  });
  const definition = protoLoader.loadSync(PROTO, { keepCase: true, defaults: true });
  const Client = grpc.makeGenericClientConstructor(
    definition['k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin'] as grpc.ServiceDefinition,
    'DRAPlugin',
  ) as unknown as new (address: string, creds: grpc.ChannelCredentials) => DraClient;
  const client = new Client(`unix:${socketPath}`, grpc.credentials.createInsecure());
  const claims = [
    { namespace: 'ns1', uid: 'u-1', name: 'good' },
    { namespace: 'ns1', uid: 'u-2', name: 'bad' },
  ];
  const response = await new Promise<Record<string, unknown>>((resolve, reject) =>
    client.NodePrepareResources({ claims }, (err, value) => (err ? reject(err) : resolve(value ?? {}))),
  );
  client.close();
  expect(seen).toEqual([claims]);
  expect(response).toEqual({
    claims: {
      'u-1': {
        devices: [{ request_names: ['net'], pool_name: 'node-1', device_name: 'net-a', cdi_device_ids: [] }],
        error: '',
      },
      'u-2': { devices: [], error: 'no such network' },
    },
  });
  controller.abort();
  await serving.stopped;
});
