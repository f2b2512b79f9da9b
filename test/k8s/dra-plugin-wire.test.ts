/**
 * The resident daemon's kubelet DRA plugin on the wire (issue 53 item 1; docs/dra-networks.md): the compiled
 * `build/multus daemon` with `draNetworks: true` against a real kube-apiserver, called on its real sockets by a
 * @grpc/grpc-js client that @grpc/proto-loader builds from the kubelet's own .proto files (src/kubelet/protos:
 * pluginregistration/v1, dra/v1, dra/v1beta1), with the kubelet's (Go's) snake_case field names, as the kubelet's
 * plugin watcher and its DRA manager call a driver. Claims are allocated through their status subresource as the
 * scheduler does. Cases: GetInfo and NotifyRegistrationStatus on `plugins_registry/<driver>-reg.sock`; prepare of
 * a known claim, an unknown one, one whose UID differs and one whose config is refused, in one call (every claim
 * answered; the refused one gets a Ready=False condition); the same call repeated (idempotent) and on v1beta1;
 * unprepare of known and unknown claims, repeated. The kubelet tier runs the same plugin under a real kubelet
 * (test/runtime/kubelet-dra-networks.ts).
 *
 * The daemon runs in a mount namespace of its own with a tmpfs over /var/lib/cni, so its caches and checkpoints
 * never land on the machine.
 */
import type * as grpc from '@grpc/grpc-js';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_DRA_DRIVER } from '../../src/dra/claim-networks.ts';
import { MULTUS_BIN } from '../e2e/helpers.ts';
import { type Answer, call, draClient, registrationClient } from '../helpers/dra-client.ts';
import { fileExists, needs } from '../helpers/skip.ts';
import { type Cluster, k8sRequirements, nadPath, startCluster } from './cluster.ts';

const DRIVER = DEFAULT_DRA_DRIVER;
const NODE = 'node-dra-wire';
const SHARE = '0a0b0c0d-0000-4000-8000-000000000001';
const DRA = '/apis/resource.k8s.io/v1';
const ready = needs(...k8sRequirements(), fileExists(MULTUS_BIN, 'build/multus (npm run build)'));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.skipIf(!ready)("the daemon's DRA plugin on its sockets, called from the kubelet's .proto", () => {
  let cluster: Cluster;
  let dir: string;
  let daemon: ChildProcess;
  let log = '';
  const ns = `dra-wire-${process.pid}`;
  const clients: grpc.Client[] = [];
  const kubeletDir = () => join(dir, 'kubelet');
  const regSock = () => join(kubeletDir(), 'plugins_registry', `${DRIVER}-reg.sock`);
  const draSock = () => join(kubeletDir(), 'plugins', DRIVER, 'dra.sock');
  const dra = (version: 'v1' | 'v1beta1') => {
    const c = draClient(draSock(), version);
    clients.push(c);
    return c;
  };

  /** A claim of one request `net`, allocated on our driver's `any` device with `parameters` as its config. */
  async function allocatedClaim(name: string, parameters: Record<string, unknown>): Promise<Answer> {
    const created = await cluster.admin.post(`${DRA}/namespaces/${ns}/resourceclaims`, {
      apiVersion: 'resource.k8s.io/v1',
      kind: 'ResourceClaim',
      metadata: { name, namespace: ns },
      spec: { devices: { requests: [{ name: 'net', exactly: { deviceClassName: 'multus-network' } }] } },
    });
    created.status = {
      allocation: {
        devices: {
          results: [{ request: 'net', driver: DRIVER, pool: NODE, device: 'any', shareID: SHARE }],
          config: [{ source: 'FromClaim', requests: ['net'], opaque: { driver: DRIVER, parameters } }],
        },
        nodeSelector: {
          nodeSelectorTerms: [{ matchFields: [{ key: 'metadata.name', operator: 'In', values: [NODE] }] }],
        },
      },
      reservedFor: [{ resource: 'pods', name: 'p', uid: '00000000-0000-4000-8000-0000000000aa' }],
    };
    return cluster.admin.put(`${DRA}/namespaces/${ns}/resourceclaims/${name}/status`, created);
  }
  const selection = (name: string) => ({
    apiVersion: 'dra.multus.k8s.cni.cncf.io/v1alpha1',
    kind: 'NetworkSelection',
    name,
    interface: 'net1',
  });
  /** The daemon's checkpoints, in its mount namespace (/var/lib/cni is a tmpfs of its own). */
  const checkpointDir = () => `/proc/${daemon.pid}/root/var/lib/cni/multus/dra`;
  const checkpoints = () => (existsSync(checkpointDir()) ? readdirSync(checkpointDir()).sort() : []);
  const ref = (c: Answer) => ({ namespace: c.metadata.namespace, uid: c.metadata.uid, name: c.metadata.name });

  beforeAll(async () => {
    cluster = await startCluster();
    dir = mkdtempSync(join(tmpdir(), 'mts-dra-wire-'));
    mkdirSync(join(dir, 'net.d'), { mode: 0o700 });
    await cluster.admin.post('/api/v1/nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name: NODE } });
    await cluster.admin.post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
    await cluster.admin.post(nadPath(ns), {
      apiVersion: 'k8s.cni.cncf.io/v1',
      kind: 'NetworkAttachmentDefinition',
      metadata: { name: 'wire-net', namespace: ns },
      spec: { config: JSON.stringify({ cniVersion: '1.0.0', name: 'wire-net', type: 'macvlan', master: 'eth0' }) },
    });
    const config = join(dir, 'daemon-config.json');
    writeFileSync(
      config,
      JSON.stringify({
        socketDir: join(dir, 'run'),
        cniConfigDir: join(dir, 'net.d'),
        kubeconfig: cluster.adminKubeconfig,
        logLevel: 'verbose',
        logToStderr: true,
        draNetworks: true,
        kubeletDir: kubeletDir(),
      }),
    );
    daemon = spawn(
      'unshare',
      ['--mount', '--propagation', 'private', 'sh', '-c', 'mount -t tmpfs tmpfs /var/lib/cni && exec "$0" "$@"'].concat(
        [MULTUS_BIN, 'daemon', '--config', config],
      ),
      { env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', MULTUS_NODE_NAME: NODE }, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    daemon.stderr!.on('data', (d: Buffer) => (log += d.toString()));
    for (let i = 0; i < 600 && !(existsSync(regSock()) && existsSync(draSock())); i++) {
      if (daemon.exitCode !== null) break;
      await sleep(50);
    }
    expect(existsSync(regSock()) && existsSync(draSock()), `the plugin's sockets\n${log}`).toBe(true);
  }, 120_000);

  afterAll(async () => {
    for (const c of clients) c.close();
    if (daemon && daemon.exitCode === null) {
      daemon.kill('SIGTERM');
      await new Promise((r) => daemon.once('exit', r));
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
    await cluster?.stop();
  }, 60_000);

  it('registration: GetInfo names a DRAPlugin, its endpoint and versions; NotifyRegistrationStatus is answered', async () => {
    const reg = registrationClient(regSock());
    clients.push(reg);
    const info = await call(reg, 'GetInfo', {});
    expect(info).toEqual({
      type: 'DRAPlugin',
      name: DRIVER,
      endpoint: draSock(),
      supported_versions: expect.arrayContaining(['v1.DRAPlugin', 'v1beta1.DRAPlugin']),
    });
    expect(await call(reg, 'NotifyRegistrationStatus', { plugin_registered: true, error: '' })).toEqual({});
    // and again: the plugin watcher re-registers after a kubelet restart
    expect(await call(reg, 'GetInfo', {})).toEqual(info);
  });

  it('prepare: every claim answered (known, unknown, wrong UID, refused config), the same when repeated and on v1beta1', async () => {
    const good = await allocatedClaim('good', selection('wire-net'));
    const other = await allocatedClaim('other', selection('wire-net'));
    // a NetworkSelection whose name is no DNS name: the parser's refusal, for this claim alone
    const bad = await allocatedClaim('bad', selection('Not_A_Name!'));
    const unknown = { namespace: ns, uid: '00000000-0000-4000-8000-000000000001', name: 'nope' };
    const wrongUid = { ...ref(other), uid: '00000000-0000-4000-8000-000000000002' };
    const claims = [ref(good), unknown, wrongUid, ref(bad)];

    const v1 = dra('v1');
    const first = await call(v1, 'NodePrepareResources', { claims });
    expect(Object.keys(first.claims).sort(), 'one answer per claim').toEqual(claims.map((c) => c.uid).sort());
    expect(first.claims[good.metadata.uid]).toEqual({
      devices: [
        {
          request_names: ['net'],
          pool_name: NODE,
          device_name: 'any',
          cdi_device_ids: [],
          share_id: SHARE,
        },
      ],
      error: '',
    });
    for (const c of [unknown, wrongUid, ref(bad)]) {
      expect(first.claims[c.uid].devices, c.name).toEqual([]);
      expect(first.claims[c.uid].error, c.name).not.toBe('');
    }
    expect(first.claims[bad.metadata.uid].error).toContain('bad');
    // the prepared claim's checkpoint (dra/checkpoint.ts: <cniDir>/dra/<uid>.json, 0600 in a 0700 dir), no other
    expect(checkpoints()).toEqual([`${good.metadata.uid}.json`]);
    expect(statSync(checkpointDir()).mode & 0o777).toBe(0o700);
    expect(statSync(join(checkpointDir(), `${good.metadata.uid}.json`)).mode & 0o777).toBe(0o600);

    // the kubelet retries: the same answer; v1beta1 is the same service
    expect(await call(v1, 'NodePrepareResources', { claims })).toEqual(first);
    // v1beta1's Device has no share_id
    const beta = await call(dra('v1beta1'), 'NodePrepareResources', { claims });
    const { share_id: _, ...betaDevice } = first.claims[good.metadata.uid].devices[0];
    expect(beta).toEqual({
      claims: { ...first.claims, [good.metadata.uid]: { devices: [betaDevice], error: '' } },
    });

    // the refused claim's device got Ready=False with the reason, written with the driver as field manager
    const got = await cluster.admin.get(`${DRA}/namespaces/${ns}/resourceclaims/bad`);
    const dev = (got.status.devices ?? []).find((d: { driver: string }) => d.driver === DRIVER);
    expect(
      dev?.conditions?.find((c: { type: string }) => c.type === 'Ready'),
      `${JSON.stringify(got.status)}\n${log}`,
    ).toMatchObject({ status: 'False' });
    const managers = (got.metadata.managedFields ?? []).map((f: { manager: string }) => f.manager);
    expect(managers).toContain(DRIVER);
  });

  it('unprepare: known and unknown claims succeed, also repeated', async () => {
    const good = await cluster.admin.get(`${DRA}/namespaces/${ns}/resourceclaims/good`);
    const unknown = { namespace: ns, uid: '00000000-0000-4000-8000-000000000003', name: 'gone' };
    const claims = [ref(good), unknown];
    for (const version of ['v1', 'v1beta1', 'v1'] as const) {
      const answer = await call(dra(version), 'NodeUnprepareResources', { claims });
      expect(answer, version).toEqual({
        claims: { [good.metadata.uid]: { error: '' }, [unknown.uid]: { error: '' } },
      });
    }
    expect(checkpoints(), 'no checkpoint left').toEqual([]);
    // prepared again after an unprepare: as the first time
    const again = await call(dra('v1'), 'NodePrepareResources', { claims: [ref(good)] });
    expect(again.claims[good.metadata.uid].error).toBe('');
    expect(again.claims[good.metadata.uid].devices.map((d: Answer) => d.device_name)).toEqual(['any']);
    await call(dra('v1'), 'NodeUnprepareResources', { claims: [ref(good)] });
  });
});
