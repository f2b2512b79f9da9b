/**
 * `/delegate` in process (fake plugins, fake Kubernetes): a hot-plugged attachment lands in the scratch cache,
 * the result cache and network-status, a concurrent status writer is retried (409) with the entries recomputed
 * from the fresh pod, and a failure after the cache was written (plugin, status) rolls everything back. The
 * HTTP side: 405 for GET, 400 with the CNI code for a bad body. Real plugins and a real API: test/e2e-k8s.
 */
import type { Server } from 'node:http';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { DelegateDeps } from '../../../src/hotplug/delegate.ts';
import { decodeDelegateBody, delegateCallOf } from '../../../src/daemon/delegate-http.ts';
import { runDelegate, servedConf } from '../../../src/hotplug/delegate.ts';
import { createQueue } from '../../../src/daemon/queue.ts';
import { createCniServer } from '../../../src/daemon/server.ts';
import { listenUnix } from '../../../src/daemon/socket.ts';
import { handle } from '../../../src/host/handle.ts';
import type { Host } from '../../../src/host/host.ts';
import type { CniError } from '../../../src/base/errors.ts';
import { FakeExec, cniErrorReply } from '../../helpers/fake-exec.ts';
import { FakeKube, FakeKubeError } from '../../helpers/fake-kube.ts';
import { closeServer, fakeHost, http } from '../../helpers/daemon.ts';
import { testNetns } from '../../helpers/netns.ts';

const STATUS = 'k8s.v1.cni.cncf.io/network-status';
let dir: string;
let exec: FakeExec;
let kube: FakeKube;
let host: Host;
let server: Server | undefined;

const multusConf = () => ({
  cniVersion: '1.0.0',
  name: 'multus-cni-network',
  type: 'multus',
  kubeconfig: '/fake/kubeconfig',
  cniDir: join(dir, 'multus'),
  delegates: [{ cniVersion: '1.0.0', name: 'cluster', type: 'p0' }],
});

const args = (uid = 'uid-1') => `K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_UID=${uid}`;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'mts-delegate-'));
  exec = new FakeExec('p0', 'mv');
  kube = new FakeKube();
  kube.addPod('ns', 'p', 'uid-1');
  kube.addNad('ns', 'mv', { cniVersion: '1.0.0', type: 'mv' });
  host = fakeHost(exec, kube);
  // the pod's ADD, as the runtime makes it
  const env = {
    CNI_COMMAND: 'ADD',
    CNI_CONTAINERID: 'cid1',
    CNI_NETNS: testNetns(),
    CNI_IFNAME: 'eth0',
    CNI_PATH: '/opt/cni/bin',
    CNI_ARGS: `IgnoreUnknown=1;${args()}`,
  };
  const added = await handle(host, { env, stdin: Buffer.from(JSON.stringify(multusConf())) });
  expect(added.exitCode, added.stdout).toBe(0);
});
afterEach(async () => {
  if (server) await closeServer(server);
  server = undefined;
  rmSync(dir, { recursive: true, force: true });
});

function body(command: string, o: { uid?: string; ifName?: string; attrs?: Record<string, unknown> } = {}): Buffer {
  return Buffer.from(
    JSON.stringify({
      env: {
        CNI_COMMAND: command,
        CNI_CONTAINERID: 'cid1',
        CNI_NETNS: testNetns(),
        CNI_IFNAME: o.ifName ?? 'net1',
        CNI_ARGS: args(o.uid),
      },
      network: 'mv',
      interfaceAttributes: { 'cni-args': null, ...o.attrs },
    }),
  );
}

const deps = (): DelegateDeps => ({ host, links: { names: async () => ['lo', 'eth0'] } });
const run = async (command: string, o: Parameters<typeof body>[1] = {}) =>
  runDelegate(
    delegateCallOf(
      decodeDelegateBody(body(command, o), {}),
      servedConf(() => Buffer.from(JSON.stringify(multusConf()))),
    ),
    deps(),
  );
const scratchNames = () =>
  (JSON.parse(readFileSync(join(dir, 'multus', 'cid1'), 'utf8')) as { Name: string }[]).map((d) => d.Name);
const statusIfaces = () =>
  (JSON.parse(kube.pods.get('ns/p')!.metadata.annotations![STATUS]!) as { interface: string }[]).map(
    (s) => s.interface,
  );
const resultCache = () => existsSync(join(dir, 'multus', 'results', 'mv-cid1-net1'));
const codeOf = async (p: Promise<unknown>) =>
  p.then(
    () => 0,
    (e: unknown) => (e as CniError).code,
  );

describe('/delegate (in process)', () => {
  it('ADD owns the attachment in all three places; DEL removes it from all three', async () => {
    const result = await run('ADD', { attrs: { ips: ['10.9.0.5/24'] } });
    expect(result).toMatchObject({ cniVersion: '1.0.0', interfaces: [{ name: 'net1' }] });
    expect(scratchNames()).toEqual(['cluster', 'ns/mv']);
    expect(resultCache()).toBe(true);
    expect(statusIfaces()).toEqual(['eth0', 'net1']);
    const add = exec.received.find((c) => c.type === 'mv' && c.command === 'ADD')!;
    expect(add.args).toContain('IP=10.9.0.5/24'); // the attribute reached the delegate as at pod creation
    expect(kube.events.map((e) => e.reason)).toContain('AddedInterface');

    expect(await run('DEL')).toBeNull();
    expect(exec.calls()).toContain('DEL mv net1');
    expect(scratchNames()).toEqual(['cluster']);
    expect(resultCache()).toBe(false);
    expect(statusIfaces()).toEqual(['eth0']);
    expect(kube.events.map((e) => e.reason)).toContain('RemovedInterface');
  });

  it('a status conflict re-reads the pod and edits the fresh annotation', async () => {
    kube.beforeUpdate = (pod) => {
      kube.beforeUpdate = undefined;
      // another writer: adds an entry for net9 and bumps the version
      pod.metadata.annotations = {
        ...pod.metadata.annotations,
        [STATUS]: JSON.stringify([
          ...JSON.parse(pod.metadata.annotations![STATUS]!),
          { name: 'x', interface: 'net9', dns: {} },
        ]),
      };
      kube.touch('ns', 'p');
    };
    await run('ADD');
    expect(statusIfaces()).toEqual(['eth0', 'net9', 'net1']);
  });

  it('a failing status write or plugin rolls the ADD back, and refusals change nothing', async () => {
    kube.failures.updatePodStatus = [new FakeKubeError(500, 'etcd is down')];
    expect(await codeOf(run('ADD'))).toBe(11);
    expect(exec.calls().filter((c) => c.includes('mv'))).toEqual(['ADD mv net1', 'DEL mv net1']);
    expect(scratchNames()).toEqual(['cluster']);
    expect(resultCache()).toBe(false);

    exec.returns['mv ADD'] = cniErrorReply(11, 'no address left');
    expect(await codeOf(run('ADD'))).toBe(11);
    expect(scratchNames()).toEqual(['cluster']);

    delete exec.returns['mv ADD'];
    const before = exec.calls().length;
    expect(await codeOf(run('ADD', { uid: 'other' }))).toBe(7);
    expect(await codeOf(run('ADD', { ifName: 'eth0' }))).toBe(7);
    expect(await codeOf(run('ADD', { attrs: { mac: 'nope' } }))).toBe(7);
    expect(await codeOf(run('DEL', { ifName: 'eth0' }))).toBe(7); // the cluster network stays
    expect(exec.calls().length).toBe(before);
    expect(statusIfaces()).toEqual(['eth0']);
  });

  it("namespace isolation refuses another namespace's NAD with ADD's one message, before reading it", async () => {
    kube.addNad('other', 'mv', { cniVersion: '1.0.0', type: 'mv' });
    const conf = servedConf(() => Buffer.from(JSON.stringify({ ...multusConf(), namespaceIsolation: true })));
    const req = { ...decodeDelegateBody(body('ADD'), {}), network: 'other/mv' };
    const err = await runDelegate(delegateCallOf(req, conf), deps()).catch((e: unknown) => e as CniError);
    expect((err as CniError).msg).toBe(
      'pod ns/p: error loading k8s delegates: GetNetworkDelegates: namespace isolation enabled, annotation violates permission, pod is in namespace ns but refers to target namespace other (network "other/mv" in k8s.v1.cni.cncf.io/networks); use a NetworkAttachmentDefinition in namespace ns or in a global namespace (default)',
    );
    expect(kube.received).not.toContain('getNad other/mv');
    expect(scratchNames()).toEqual(['cluster']);
  });

  it("gives a hot-plugged NAD its pool's next device, never one the pod's attachments hold", async () => {
    const checkpointFile = join(dir, 'checkpoint');
    const ids = ['0000:af:00.1', '0000:af:00.2'];
    const entries = [{ PodUID: 'uid-1', ContainerName: 'c', ResourceName: 'intel.com/sriov', DeviceIDs: { '0': ids } }];
    writeFileSync(checkpointFile, JSON.stringify({ Data: { PodDeviceEntries: entries, RegisteredDevices: {} } }));
    const devices = {
      podResourcesSocket: join(dir, 'no.sock'),
      checkpointFile,
      cniDevinfoDir: join(dir, 'devinfo-cni'),
      dpDevinfoDir: join(dir, 'devinfo-dp'),
    };
    host = { ...fakeHost(exec, kube), devices };
    kube.addNad(
      'ns',
      'vf',
      { cniVersion: '1.0.0', type: 'mv' },
      { 'k8s.v1.cni.cncf.io/resourceName': 'intel.com/sriov' },
    );
    const conf = servedConf(() => Buffer.from(JSON.stringify(multusConf())));
    const plug = (ifName: string) =>
      runDelegate(delegateCallOf({ ...decodeDelegateBody(body('ADD', { ifName }), {}), network: 'vf' }, conf), deps());
    for (const ifName of ['net1', 'net2', 'net3']) await plug(ifName);
    const added = exec.received.filter((c) => c.stdin.type === 'mv');
    // net3: the NAD's pool alone is best effort, as at pod creation: attached without a device
    expect(added.map((c) => c.stdin.deviceID)).toEqual([...ids, undefined]);
  });

  it('HTTP: 405 for GET, 400 with the CNI code for a bad body, 404 when not enabled', async () => {
    const start = async (withConf: boolean) => {
      server = createCniServer({
        host,
        daemonEnv: {},
        log: { error() {}, warn() {}, verbose() {}, debug() {}, enabled: () => false },
        queue: createQueue(0),
        notReady: () => undefined,
        ...(withConf ? { multusConf: () => Buffer.from(JSON.stringify(multusConf())) } : {}),
      });
      return listenUnix(server, join(dir, withConf ? 'run' : 'run2'));
    };
    const socket = await start(true);
    expect((await http(socket, '/delegate', { method: 'GET' })).status).toBe(405);
    const bad = await http(socket, '/delegate', { body: '{"env": {"CNI_COMMAND": "GC"}}' });
    expect(bad.status).toBe(400);
    expect(bad.json()).toMatchObject({ code: 4 });
    const refused = await http(socket, '/delegate', { body: body('ADD', { uid: 'other' }) });
    expect(refused.status).toBe(400);
    expect(refused.json()).toMatchObject({ code: 7, msg: expect.stringContaining('UID') });
    await closeServer(server!);
    expect((await http(await start(false), '/delegate', { body: body('ADD') })).status).toBe(404);
  });
});
