/**
 * src/dra/plugin.ts over its unix sockets, as the kubelet calls it: grpc-js clients that @grpc/proto-loader builds
 * from the kubelet's own .proto files (src/kubelet/protos/pluginregistration/v1 and dra/v1, dra/v1beta1). GetInfo
 * on the registration socket names the service socket, which answers prepare for known, unknown and refused claims
 * (every claim answered, with snake_case fields as Go sees them), the same again when repeated, unprepare
 * idempotent; both versions served; NotifyRegistrationStatus kicks the slice sync; the signal removes both sockets.
 */
import type * as grpc from '@grpc/grpc-js';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/base/log.ts';
import { networkDeviceName } from '../../../src/dra/device-names.ts';
import { startDraPlugin } from '../../../src/dra/plugin.ts';
import type { DraPlugin } from '../../../src/dra/plugin.ts';
import { call, draClient, registrationClient } from '../../helpers/dra-client.ts';
import type { ProtoClient } from '../../helpers/dra-client.ts';
import { DRIVER, FakeDriverApi, claim, nad, nadSource, selection } from './fake-driver-api.ts';

const UID1 = '0b0b0b0b-0000-4000-8000-000000000001';
const UID2 = '0b0b0b0b-0000-4000-8000-000000000002';
const UID3 = '0b0b0b0b-0000-4000-8000-000000000003';

let dir: string;
let controller: AbortController;
let api: FakeDriverApi;
const clients: grpc.Client[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mts-dra-plugin-'));
  controller = new AbortController();
  api = new FakeDriverApi();
  api.addNad('ns1', 'net1', { cniVersion: '1.0.0', name: 'net1', type: 'macvlan' });
  api.claims.set(
    'ns1/good',
    claim('good', UID1, [['net', DRIVER, 'any']], [{ requests: ['net'], parameters: selection('net1') }]),
  );
  api.claims.set(
    'ns1/nonad',
    claim('nonad', UID3, [['net', DRIVER, 'any']], [{ requests: ['net'], parameters: selection('nope') }]),
  );
});
afterEach(() => {
  for (const c of clients.splice(0)) c.close();
  controller.abort();
  rmSync(dir, { recursive: true, force: true });
});

async function start(slices = false): Promise<DraPlugin> {
  const source = nadSource([nad('ns1', 'net1')]);
  return startDraPlugin({
    settings: {
      driver: DRIVER,
      kubeletDir: join(dir, 'kubelet'),
      checkpointDir: join(dir, 'multus', 'dra'),
      allowInlineFromClaim: false,
      maxDevices: 512,
      nodeName: 'node-1',
    },
    api,
    nads: { ...source, get: (ns, name) => api.getNad(ns, name) },
    log: silentLogger,
    signal: controller.signal,
    slices,
  });
}

/** A kubelet-side client (test/helpers/dra-client.ts), closed after the test. */
const kubelet = (make: (socket: string) => ProtoClient, socket: string) => {
  const c = make(socket);
  clients.push(c);
  return c;
};
const DRA_V1 = (socket: string) => draClient(socket, 'v1');
const DRA_V1BETA1 = (socket: string) => draClient(socket, 'v1beta1');
const claims = [
  { namespace: 'ns1', uid: UID1, name: 'good' },
  { namespace: 'ns1', uid: UID2, name: 'unknown' },
  { namespace: 'ns1', uid: UID3, name: 'nonad' },
];

describe('the DRA plugin on its sockets', () => {
  it('registers as a DRAPlugin whose endpoint is the service socket, both 0600', async () => {
    const plugin = await start();
    const reg = kubelet(registrationClient, plugin.registrationSocket);
    expect(plugin.registrationSocket).toBe(join(dir, 'kubelet', 'plugins_registry', `${DRIVER}-reg.sock`));
    expect(await call(reg, 'GetInfo', {})).toEqual({
      type: 'DRAPlugin',
      name: DRIVER,
      endpoint: join(dir, 'kubelet', 'plugins', DRIVER, 'dra.sock'),
      supported_versions: ['v1.DRAPlugin', 'v1beta1.DRAPlugin'],
    });
    expect(await call(reg, 'NotifyRegistrationStatus', { plugin_registered: true })).toEqual({});
    expect(statSync(plugin.socket).mode & 0o777).toBe(0o600);
    expect(statSync(plugin.registrationSocket).mode & 0o777).toBe(0o600);
  });

  it('prepares known, unknown and refused claims, each answered, the same when repeated; unprepare is idempotent', async () => {
    const plugin = await start();
    const dra = kubelet(DRA_V1, plugin.socket);
    const first = await call(dra, 'NodePrepareResources', { claims });
    const answers = first.claims as Record<string, { devices: unknown[]; error: string }>;
    expect(Object.keys(answers).sort()).toEqual([UID1, UID2, UID3]);
    expect(answers[UID1]).toEqual({
      devices: [{ request_names: ['net'], pool_name: 'node-1', device_name: 'any', cdi_device_ids: [] }],
      error: '',
    });
    expect(answers[UID2]!.error).toMatch(/^cannot read ResourceClaim ns1\/unknown: /);
    expect(answers[UID3]!.error).toContain('NetworkAttachmentDefinition ns1/nope not found');
    expect(await call(dra, 'NodePrepareResources', { claims })).toEqual(first);
    const unprepare = { claims: claims.slice(0, 2) };
    const gone = { claims: { [UID1]: { error: '' }, [UID2]: { error: '' } } };
    expect(await call(dra, 'NodeUnprepareResources', unprepare)).toEqual(gone);
    expect(await call(dra, 'NodeUnprepareResources', unprepare)).toEqual(gone);
  });

  it("prepares a claim on a NAD's own device without a config: the device is the network", async () => {
    const device = networkDeviceName('ns1', 'net1');
    const uid = '0b0b0b0b-0000-4000-8000-000000000004';
    api.claims.set('ns1/bynad', claim('bynad', uid, [['net', DRIVER, device]]));
    const plugin = await start();
    const one = [{ namespace: 'ns1', uid, name: 'bynad' }];
    const answers = (await call(kubelet(DRA_V1, plugin.socket), 'NodePrepareResources', { claims: one })).claims;
    expect(answers).toEqual({
      [uid]: {
        devices: [{ request_names: ['net'], pool_name: 'node-1', device_name: device, cdi_device_ids: [] }],
        error: '',
      },
    });
  });

  it('serves v1beta1 with the same answers', async () => {
    const plugin = await start();
    const answers = (
      await call(kubelet(DRA_V1BETA1, plugin.socket), 'NodePrepareResources', { claims: claims.slice(0, 1) })
    ).claims as Record<string, unknown>;
    expect(answers[UID1]).toEqual({
      devices: [{ request_names: ['net'], pool_name: 'node-1', device_name: 'any', cdi_device_ids: [] }],
      error: '',
    });
  });

  it('publishes the slices, syncs them again when the kubelet says it registered, and removes both sockets on the signal', async () => {
    const plugin = await start(true);
    await plugin.sliceSync!.synced();
    expect(api.slices).toHaveLength(1);
    api.slices.splice(0); // the kubelet wiped them at its start
    const reg = kubelet(registrationClient, plugin.registrationSocket);
    const again = plugin.sliceSync!.synced();
    await call(reg, 'NotifyRegistrationStatus', { plugin_registered: true });
    await again;
    expect(api.slices).toHaveLength(1);
    controller.abort();
    await plugin.stopped;
    expect(existsSync(plugin.socket)).toBe(false);
    expect(existsSync(plugin.registrationSocket)).toBe(false);
  });
});
