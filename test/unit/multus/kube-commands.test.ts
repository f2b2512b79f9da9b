/**
 * Kubernetes mode of the commands, in-process, with the FakeKube and FakeExec seams: pod lookup policy,
 * NAD resolution and order, network-status writes with conflicts, API economy, rollback on failures.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cmdAdd } from '../../../src/multus/commands/add.ts';
import type { TestSeams } from '../../helpers/commands.ts';
import { cmdDel } from '../../../src/multus/commands/del.ts';
import { cmdStatus } from '../../../src/multus/commands/status.ts';
import { parseMultusConf } from '../../../src/multus/conf.ts';
import { parseRequest } from '../../../src/cni/request.ts';
import { silentLogger } from '../../../src/base/log.ts';
import { kubeDeps, withContext } from '../../helpers/commands.ts';
import { FakeExec, cniErrorReply } from '../../helpers/fake-exec.ts';
import { FakeKube, FakeKubeError } from '../../helpers/fake-kube.ts';
import { startPodResourcesServer } from '../../devices/podresources-server.ts';

let dir: string;
let cniDir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mts-kube-'));
  cniDir = join(dir, 'cni');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const STATUS = 'k8s.v1.cni.cncf.io/network-status';

function setup(annotations: Record<string, string> = {}, confExtra: Record<string, unknown> = {}, uid = 'uid-1') {
  const kube = new FakeKube();
  kube.addPod('ns1', 'pod1', 'uid-1', annotations);
  kube.addNad('ns1', 'net-a', { cniVersion: '1.0.0', type: 'pa' });
  kube.addNad('ns1', 'net-b', { cniVersion: '1.0.0', name: 'bee', type: 'pb' });
  kube.addNad('other', 'net-c', { cniVersion: '1.0.0', type: 'pc' });
  kube.addNad('kube-system', 'cluster-nad', { cniVersion: '1.0.0', type: 'pk' });
  const exec = new FakeExec('p0', 'pa', 'pb', 'pc', 'pk');
  const conf = {
    cniVersion: '1.0.0',
    name: 'multus-cni-network',
    type: 'multus',
    kubeconfig: '/fake/kubeconfig',
    cniDir,
    binDir: '/opt/test/bin',
    delegates: [{ cniVersion: '1.0.0', name: 'cluster', type: 'p0' }],
    ...confExtra,
  };
  const deps: TestSeams = kubeDeps(exec, kube);
  const call = (command: 'ADD' | 'DEL') => {
    const stdin = Buffer.from(JSON.stringify(conf));
    const env = {
      CNI_COMMAND: command,
      CNI_CONTAINERID: 'cid1',
      CNI_NETNS: '/var/run/netns/x',
      CNI_IFNAME: 'eth0',
      CNI_PATH: '/usr/lib/cni',
      CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=pod1;K8S_POD_INFRA_CONTAINER_ID=cid1;K8S_POD_UID=${uid}`,
    };
    return { req: parseRequest(command, env, stdin), conf: parseMultusConf(stdin) };
  };
  const add = () => {
    const { req, conf: c } = call('ADD');
    return cmdAdd(...withContext(req, c, deps));
  };
  const del = () => {
    const { req, conf: c } = call('DEL');
    return cmdDel(...withContext(req, c, deps));
  };
  return { kube, exec, deps, add, del };
}

describe('ADD with Kubernetes', () => {
  it('attaches the annotation networks in order, writes network-status, and makes N+2 requests', async () => {
    const t = setup({ 'k8s.v1.cni.cncf.io/networks': 'net-a,net-b@data1,other/net-c' });
    await t.add();
    expect(t.exec.calls()).toEqual(['ADD p0 eth0', 'ADD pa net1', 'ADD pb data1', 'ADD pc net3']);
    expect(t.exec.received[2]!.stdin.name).toBe('bee');
    expect(t.exec.received[1]!.stdin.name).toBe('net-a');
    expect(t.kube.received.filter((r) => !r.startsWith('createEvent'))).toEqual([
      'getPod ns1/pod1',
      'getNad ns1/net-a',
      'getNad ns1/net-b',
      'getNad other/net-c',
      'updatePodStatus ns1/pod1',
    ]);
    const status = JSON.parse(t.kube.pods.get('ns1/pod1')!.metadata.annotations![STATUS]!);
    expect(
      status.map((s: { name: string; interface: string; default?: boolean }) => [
        s.name,
        s.interface,
        s.default ?? false,
      ]),
    ).toEqual([
      ['cluster', 'eth0', true],
      ['ns1/net-a', 'net1', false],
      ['ns1/net-b', 'data1', false],
      ['other/net-c', 'net3', false],
    ]);
    expect(t.kube.events.map((e) => e.message)).toEqual([
      'Add eth0 [10.1.0.2/24] from cluster',
      'Add net1 [10.1.0.2/24] from ns1/net-a',
      'Add data1 [10.1.0.2/24] from ns1/net-b',
      'Add net3 [10.1.0.2/24] from other/net-c',
    ]);
  });

  it('re-reads the pod and retries the status write after a conflict', async () => {
    const t = setup({ 'k8s.v1.cni.cncf.io/networks': 'net-a' });
    let touched = false;
    t.kube.beforeUpdate = () => {
      if (!touched) t.kube.touch('ns1', 'pod1');
      touched = true;
    };
    await t.add();
    expect(t.kube.received.filter((r) => !r.startsWith('createEvent'))).toEqual([
      'getPod ns1/pod1',
      'getNad ns1/net-a',
      'updatePodStatus ns1/pod1',
      'getPod ns1/pod1',
      'updatePodStatus ns1/pod1',
    ]);
    expect(t.kube.pods.get('ns1/pod1')!.metadata.annotations![STATUS]).toContain('ns1/net-a');
  });

  it('tolerates a pod deleted before the status write', async () => {
    const t = setup({ 'k8s.v1.cni.cncf.io/networks': 'net-a' });
    t.kube.failures.updatePodStatus = [new FakeKubeError(404, 'pods "pod1" not found')];
    const result = await t.add();
    expect(result.cniVersion).toBe('1.0.0');
    expect(readdirSync(join(cniDir, 'results'))).toHaveLength(2);
  });

  it('rolls everything back when the status write fails for another reason', async () => {
    const t = setup({ 'k8s.v1.cni.cncf.io/networks': 'net-a' });
    t.kube.failures.updatePodStatus = [new FakeKubeError(403, 'forbidden: cannot update pods/status')];
    await expect(t.add()).rejects.toMatchObject({ msg: expect.stringContaining('error setting the networks status') });
    expect(t.exec.calls()).toEqual(['ADD p0 eth0', 'ADD pa net1', 'DEL pa net1', 'DEL p0 eth0']);
    expect(readdirSync(join(cniDir, 'results'))).toEqual([]);
    expect(existsSync(join(cniDir, 'cid1'))).toBe(false);
  });

  it('posts each AddedInterface event as its attachment is added, before the next delegate runs', async () => {
    const t = setup({ 'k8s.v1.cni.cncf.io/networks': 'net-a,net-b' });
    const postedBefore: Record<string, string[]> = {};
    for (const type of ['pa', 'pb']) {
      t.exec.returns[`${type} ADD`] = () => {
        postedBefore[type] = t.kube.events.map((e) => e.message);
        return undefined as never; // the default result
      };
    }
    await t.add();
    expect(postedBefore).toEqual({
      pa: ['Add eth0 [10.1.0.2/24] from cluster'],
      pb: ['Add eth0 [10.1.0.2/24] from cluster', 'Add net1 [10.1.0.2/24] from ns1/net-a'],
    });
    expect(t.kube.events.map((e) => e.message)).toEqual([
      'Add eth0 [10.1.0.2/24] from cluster',
      'Add net1 [10.1.0.2/24] from ns1/net-a',
      'Add net2 [10.1.0.2/24] from ns1/net-b',
    ]);
  });

  it('a later delegate failing rolls back; the events of the attachments already added stay, as Multus leaves its own', async () => {
    const t = setup({ 'k8s.v1.cni.cncf.io/networks': 'net-a,net-b' });
    t.exec.returns['pb ADD'] = cniErrorReply(11, 'no address left');
    const post = t.kube.createEvent.bind(t.kube);
    t.kube.createEvent = async (event) => {
      await new Promise((r) => setTimeout(r, 20));
      return post(event);
    };
    await expect(t.add()).rejects.toMatchObject({ code: 11 });
    expect(t.exec.calls()).toEqual([
      'ADD p0 eth0',
      'ADD pa net1',
      'ADD pb net2',
      'DEL pb net2',
      'DEL pa net1',
      'DEL p0 eth0',
    ]);
    // both posted before the ADD answered, slow as they were
    expect(t.kube.events.map((e) => e.message)).toEqual([
      'Add eth0 [10.1.0.2/24] from cluster',
      'Add net1 [10.1.0.2/24] from ns1/net-a',
    ]);
  });

  it('returns once the status write and every AddedInterface event are done', async () => {
    const t = setup({ 'k8s.v1.cni.cncf.io/networks': 'net-a' });
    const update = t.kube.updatePodStatus.bind(t.kube);
    const post = t.kube.createEvent.bind(t.kube);
    let postedDuringWrite = -1;
    // the write waits for both events (or 5 s): it can see them only if the events do not wait for the write
    let bothPosted: () => void = () => undefined;
    const eventsDone = new Promise<void>((r) => (bothPosted = r));
    t.kube.updatePodStatus = async (pod) => {
      await Promise.race([eventsDone, new Promise((r) => setTimeout(r, 5000))]);
      postedDuringWrite = t.kube.events.length;
      return update(pod);
    };
    t.kube.createEvent = async (event) => {
      await new Promise((r) => setTimeout(r, 10));
      const out = await post(event);
      if (t.kube.events.length === 2) bothPosted();
      return out;
    };
    await t.add();
    expect(postedDuringWrite).toBe(2);
    expect(t.kube.events.map((e) => e.message)).toEqual([
      'Add eth0 [10.1.0.2/24] from cluster',
      'Add net1 [10.1.0.2/24] from ns1/net-a',
    ]);
    // slow events, quick write: the ADD still waits for the last event
    const u = setup({ 'k8s.v1.cni.cncf.io/networks': 'net-a' });
    const postU = u.kube.createEvent.bind(u.kube);
    u.kube.createEvent = async (event) => {
      await new Promise((r) => setTimeout(r, 30));
      return postU(event);
    };
    await u.add();
    expect(u.kube.events).toHaveLength(2);
  });

  it('a failed status write rolls back; the events already posted stay, as Multus leaves its own', async () => {
    const t = setup({ 'k8s.v1.cni.cncf.io/networks': 'net-a' });
    t.kube.failures.updatePodStatus = [new FakeKubeError(403, 'forbidden: cannot update pods/status')];
    await expect(t.add()).rejects.toMatchObject({ msg: expect.stringContaining('error setting the networks status') });
    expect(t.exec.calls()).toEqual(['ADD p0 eth0', 'ADD pa net1', 'DEL pa net1', 'DEL p0 eth0']);
    expect(t.kube.events.map((e) => e.reason)).toEqual(['AddedInterface', 'AddedInterface']);
  });

  it('fails before any delegate runs when a NAD is missing, with a NoNetworkFound event', async () => {
    const t = setup({ 'k8s.v1.cni.cncf.io/networks': 'net-a,missing' });
    await expect(t.add()).rejects.toMatchObject({
      code: 7,
      msg: expect.stringContaining('cannot find a network-attachment-definition (missing) in namespace (ns1)'),
    });
    expect(t.exec.received).toEqual([]);
    expect(t.kube.events).toEqual([expect.objectContaining({ type: 'Warning', reason: 'NoNetworkFound' })]);
    expect(existsSync(join(cniDir, 'cid1'))).toBe(false);
  });

  it("a delegate's plugin missing from the bin dir (Multus #1413): rolled back, a warning in the log and a PluginNotFound event", async () => {
    const t = setup({ 'k8s.v1.cni.cncf.io/networks': 'net-a,net-m' });
    t.kube.addNad('ns1', 'net-m', { cniVersion: '1.0.0', type: 'macvlan' });
    const warnings: string[] = [];
    t.deps.log = { ...silentLogger, warn: (m) => warnings.push(m) };
    await expect(t.add()).rejects.toMatchObject({
      code: 7,
      msg: expect.stringContaining('failed to find plugin "macvlan" in path [/opt/test/bin /usr/lib/cni]'),
    });
    expect(t.exec.calls()).toEqual(['ADD p0 eth0', 'ADD pa net1', 'DEL pa net1', 'DEL p0 eth0']);
    const msg =
      'CNI plugin "macvlan" is not in /opt/test/bin, /usr/lib/cni on this node: install it there (multus runs the plugins it is ' +
      'given, it ships none; a resident daemon without chrootDir looks in its own container)';
    expect(warnings).toEqual([`[ns1/pod1/uid-1]: ${msg}`]);
    // the attachments added before it keep their events, as Multus'
    expect(t.kube.events).toEqual([
      expect.objectContaining({
        type: 'Normal',
        reason: 'AddedInterface',
        message: 'Add eth0 [10.1.0.2/24] from cluster',
      }),
      expect.objectContaining({
        type: 'Normal',
        reason: 'AddedInterface',
        message: 'Add net1 [10.1.0.2/24] from ns1/net-a',
      }),
      expect.objectContaining({ type: 'Warning', reason: 'PluginNotFound', message: msg }),
    ]);
  });

  it.each([
    ['a malformed annotation', { 'k8s.v1.cni.cncf.io/networks': 'net-a,BAD_NAME' }, {}, 'BAD_NAME'],
    [
      'namespace isolation',
      { 'k8s.v1.cni.cncf.io/networks': 'other/net-c' },
      { namespaceIsolation: true },
      'pod is in namespace ns1 but refers to target namespace other',
    ],
  ])('rejects %s naming the pod, before anything runs', async (_t, annotations, extra, text) => {
    const t = setup(annotations, extra);
    await expect(t.add()).rejects.toMatchObject({ msg: expect.stringContaining(text) });
    await expect(t.add()).rejects.toMatchObject({ msg: expect.stringContaining('pod ns1/pod1') });
    expect(t.exec.received).toEqual([]);
  });

  it('lets globalNamespaces allow a namespace under isolation', async () => {
    const t = setup(
      { 'k8s.v1.cni.cncf.io/networks': 'other/net-c' },
      { namespaceIsolation: true, globalNamespaces: 'default,other' },
    );
    await t.add();
    expect(t.exec.calls()).toEqual(['ADD p0 eth0', 'ADD pc net1']);
  });

  it('replaces the cluster network with the default-network annotation, keeping CNI_IFNAME', async () => {
    const t = setup({
      'v1.multus-cni.io/default-network': 'cluster-nad@weird0',
      'k8s.v1.cni.cncf.io/networks': 'net-a',
    });
    await t.add();
    expect(t.exec.calls()).toEqual(['ADD pk eth0', 'ADD pa net1']);
  });

  it('resolves clusterNetwork as a NAD in multusNamespace', async () => {
    const t = setup({}, { clusterNetwork: 'cluster-nad', delegates: undefined });
    await t.add();
    expect(t.exec.calls()).toEqual(['ADD pk eth0']);
    const status = JSON.parse(t.kube.pods.get('ns1/pod1')!.metadata.annotations![STATUS]!);
    expect(status[0]).toMatchObject({ name: 'kube-system/cluster-nad', default: true });
  });

  it('writes no network-status for pods in systemNamespaces (compared by namespace, not name)', async () => {
    const t = setup({}, { systemNamespaces: ['ns1'] });
    await t.add();
    expect(t.kube.received.filter((r) => r.startsWith('updatePodStatus'))).toEqual([]);
    const u = setup({}, { systemNamespaces: ['pod1'] });
    await u.add();
    expect(u.kube.received.filter((r) => r.startsWith('updatePodStatus'))).toEqual(['updatePodStatus ns1/pod1']);
  });

  it.each([
    [false, ['ADD p0 eth0', 'ADD pa net1']],
    [true, []],
  ])('a MAC request no plugin declares: strictCapabilities=%s', async (strict, calls) => {
    const t = setup(
      { 'k8s.v1.cni.cncf.io/networks': '[{"name":"net-a","mac":"02:00:00:00:00:09"}]' },
      { strictCapabilities: strict },
    );
    if (strict)
      await expect(t.add()).rejects.toMatchObject({
        code: 7,
        msg: expect.stringContaining('requests mac but no plugin of network "net-a" declares that capability'),
      });
    else await t.add();
    expect(t.exec.calls()).toEqual(calls);
  });

  it('merges cni-args into the delegate config and keeps them for DEL', async () => {
    const t = setup({ 'k8s.v1.cni.cncf.io/networks': '[{"name":"net-a","cni-args":{"foo":"bar"}}]' });
    await t.add();
    expect(t.exec.received[1]!.stdin.args).toEqual({ cni: { foo: 'bar' } });
    t.exec.received.length = 0;
    await t.del();
    expect(t.exec.received[0]!.stdin.args).toEqual({ cni: { foo: 'bar' } });
  });

  it('moves the default route to the requested gateway in the netns and rewrites the cluster cache', async () => {
    const t = setup({ 'k8s.v1.cni.cncf.io/networks': '[{"name":"net-a","default-route":["10.1.0.1"]}]' });
    const commands: string[] = [];
    t.deps.routes = {
      tools: { nsenter: '/nsenter', ip: '/ip' },
      run: async (_file, args) => {
        commands.push(args.slice(2).join(' '));
        const del = args.includes('del');
        return {
          exitCode: del && commands.filter((c) => c === commands.at(-1)).length > 1 ? 2 : 0,
          signal: null,
          stdout: '',
          stderr: del ? 'RTNETLINK answers: No such process' : '',
        };
      },
    };
    await t.add();
    expect(commands).toEqual([
      '/ip -4 route del default dev eth0',
      '/ip -4 route del default dev eth0',
      '/ip -4 route del default dev net1',
      '/ip -4 route del default dev net1',
      '/ip -4 route replace default via 10.1.0.1 dev net1',
    ]);
    const cache = JSON.parse(readFileSync(join(cniDir, 'results', 'cluster-cid1-eth0'), 'utf8'));
    expect(cache.result.routes).toBeUndefined();
    const netA = JSON.parse(readFileSync(join(cniDir, 'results', 'net-a-cid1-net1'), 'utf8'));
    expect(netA.result.routes).toEqual([{ dst: '0.0.0.0/0', gw: '10.1.0.1' }]);
  });

  it('rolls the ADD back when the default route cannot be set', async () => {
    const t = setup({ 'k8s.v1.cni.cncf.io/networks': '[{"name":"net-a","default-route":["10.1.0.1"]}]' });
    t.deps.routes = {
      tools: { nsenter: '/nsenter', ip: '/ip' },
      run: async (_f, args) => ({
        exitCode: 2,
        signal: null,
        stdout: '',
        stderr: args.includes('replace')
          ? 'RTNETLINK answers: Network is unreachable'
          : 'RTNETLINK answers: No such process',
      }),
    };
    await expect(t.add()).rejects.toMatchObject({ msg: expect.stringContaining('error setting the default route') });
    expect(t.exec.calls()).toEqual(['ADD p0 eth0', 'ADD pa net1', 'DEL pa net1', 'DEL p0 eth0']);
    expect(readdirSync(join(cniDir, 'results'))).toEqual([]);
  });

  it('fails on a UID mismatch naming both UIDs, before anything runs', async () => {
    const t = setup({ 'k8s.v1.cni.cncf.io/networks': 'net-a' }, {}, 'uid-OLD');
    await expect(t.add()).rejects.toMatchObject({ msg: 'expected pod UID "uid-OLD" but got "uid-1" from Kube API' });
    expect(t.exec.received).toEqual([]);
  });

  it('exempts static pods from the UID check', async () => {
    const t = setup({ 'kubernetes.io/config.source': 'file' }, {}, 'uid-mirror');
    await t.add();
    expect(t.exec.calls()).toEqual(['ADD p0 eth0']);
  });

  it('retries transient errors of the pod GET, then gives up with code 11', async () => {
    const t = setup();
    t.kube.failures.getPod = [new FakeKubeError(503, 'unavailable'), new FakeKubeError(500, 'etcd')];
    await t.add();
    expect(t.kube.received.filter((r) => r.startsWith('getPod'))).toHaveLength(3);
    const u = setup();
    u.kube.failures.getPod = Array.from({ length: 50 }, () => new FakeKubeError(503, 'unavailable'));
    let now = 0;
    u.deps.clock = { now: () => now, sleep: async (ms) => void (now += ms) };
    await expect(u.add()).rejects.toMatchObject({ code: 11, msg: expect.stringContaining('error waiting for pod') });
    expect(u.kube.received.length).toBeLessThanOrEqual(11);
  });

  it('attaches only the configured networks when the pod is not in the API', async () => {
    const t = setup();
    t.kube.pods.clear();
    await t.add();
    expect(t.exec.calls()).toEqual(['ADD p0 eth0']);
    expect(t.kube.received).toEqual(['getPod ns1/pod1']);
  });
});

describe('device IDs (resourceName)', () => {
  it("assigns the pod's devices in sorted order, injects them, writes and publishes device-info, removes it on DEL", async () => {
    const t = setup({ 'k8s.v1.cni.cncf.io/networks': 'sriov-a,sriov-a' });
    const resource = 'intel.com/sriov';
    t.kube.addNad(
      'ns1',
      'sriov-a',
      { cniVersion: '1.0.0', type: 'pa', capabilities: { CNIDeviceInfoFile: true, deviceID: true } },
      { 'k8s.v1.cni.cncf.io/resourceName': resource },
    );
    const checkpoint = join(dir, 'checkpoint');
    writeFileSync(
      checkpoint,
      JSON.stringify({
        Data: {
          PodDeviceEntries: [
            {
              PodUID: 'uid-1',
              ContainerName: 'c',
              ResourceName: resource,
              DeviceIDs: { '0': ['0000:af:00.3', '0000:af:00.1'] },
            },
            { PodUID: 'other', ContainerName: 'c', ResourceName: resource, DeviceIDs: { '0': ['0000:af:00.0'] } },
          ],
          RegisteredDevices: {},
        },
        Checksum: 1,
      }),
    );
    const dp = join(dir, 'dp');
    mkdirSync(dp);
    writeFileSync(
      join(dp, 'intel.com-sriov-0000:af:00.1-device.json'),
      JSON.stringify({ type: 'pci', version: '1.1.0', pci: { 'pci-address': '0000:af:00.1' } }),
    );
    t.deps.devices = {
      podResourcesSocket: join(dir, 'no.sock'),
      checkpointFile: checkpoint,
      cniDevinfoDir: join(dir, 'cni-devinfo'),
      dpDevinfoDir: dp,
    };
    await t.add();
    const [, first, second] = t.exec.received;
    expect([first!.stdin.deviceID, first!.stdin.pciBusID, second!.stdin.deviceID]).toEqual([
      '0000:af:00.1',
      '0000:af:00.1',
      '0000:af:00.3',
    ]);
    const infoFile = join(dir, 'cni-devinfo', 'ns1-sriov-a-cid1_net1');
    expect(first!.stdin.runtimeConfig).toEqual({ deviceID: '0000:af:00.1', CNIDeviceInfoFile: infoFile });
    const status = JSON.parse(t.kube.pods.get('ns1/pod1')!.metadata.annotations![STATUS]!);
    expect(status[1]['device-info']).toEqual({ type: 'pci', version: '1.1.0', pci: { 'pci-address': '0000:af:00.1' } });
    expect(status[2]['device-info']).toBeUndefined();
    expect(existsSync(infoFile)).toBe(true);
    await t.del();
    expect(existsSync(infoFile)).toBe(false);
  });

  it("asks the kubelet's pod-resources gRPC API when its socket exists, and injects what it allocated", async () => {
    const t = setup({ 'k8s.v1.cni.cncf.io/networks': 'sriov-a,sriov-a' });
    t.kube.addNad(
      'ns1',
      'sriov-a',
      { cniVersion: '1.0.0', name: 'sriov', plugins: [{ type: 'pa' }, { type: 'pb' }] },
      { 'k8s.v1.cni.cncf.io/resourceName': 'nvidia.com/rdma' },
    );
    const socket = join(dir, 'kubelet.sock');
    const server = await startPodResourcesServer(socket, {
      kind: 'answer',
      response: {
        pod_resources: [
          {
            name: 'pod1',
            namespace: 'ns1',
            containers: [
              { name: 'a', devices: [{ resource_name: 'nvidia.com/rdma', device_ids: ['0000:3b:00.7'] }] },
              { name: 'b', devices: [{ resource_name: 'nvidia.com/rdma', device_ids: ['0000:3b:00.2'] }] },
            ],
          },
          {
            name: 'pod2',
            namespace: 'ns1',
            containers: [{ name: 'a', devices: [{ resource_name: 'nvidia.com/rdma', device_ids: ['0000:3b:00.0'] }] }],
          },
        ],
      },
    });
    try {
      t.deps.devices = {
        podResourcesSocket: socket,
        checkpointFile: join(dir, 'unused'),
        cniDevinfoDir: join(dir, 'cni-devinfo'),
        dpDevinfoDir: join(dir, 'dp'),
      };
      await t.add();
    } finally {
      await server.close();
    }
    expect(server.calls).toHaveLength(1);
    expect(t.exec.received.slice(1).map((c) => [c.type, c.ifName, c.stdin.deviceID, c.stdin.pciBusID])).toEqual([
      // container a's device for the first attachment, b's for the second (#1539; v4.3.0's pod-wide sort swapped them)
      ['pa', 'net1', '0000:3b:00.7', '0000:3b:00.7'],
      ['pb', 'net1', '0000:3b:00.7', '0000:3b:00.7'],
      ['pa', 'net2', '0000:3b:00.2', '0000:3b:00.2'],
      ['pb', 'net2', '0000:3b:00.2', '0000:3b:00.2'],
    ]);
  });

  it("takes an element's resourceName pool for that attachment only; a NAD that refuses it fails the ADD with an event", async () => {
    const networks = JSON.stringify([{ name: 'sriov-a', resourceName: 'intel.com/sriov' }, { name: 'sriov-a' }]);
    const t = setup({ 'k8s.v1.cni.cncf.io/networks': networks });
    t.kube.addNad('ns1', 'sriov-a', { cniVersion: '1.0.0', type: 'pa' });
    const checkpoint = join(dir, 'checkpoint');
    const entry = {
      PodUID: 'uid-1',
      ContainerName: 'c',
      ResourceName: 'intel.com/sriov',
      DeviceIDs: { '0': ['0000:af:00.1'] },
    };
    writeFileSync(
      checkpoint,
      JSON.stringify({ Data: { PodDeviceEntries: [entry], RegisteredDevices: {} }, Checksum: 1 }),
    );
    t.deps.devices = {
      podResourcesSocket: join(dir, 'no.sock'),
      checkpointFile: checkpoint,
      cniDevinfoDir: join(dir, 'ci'),
    };
    await t.add();
    expect(t.exec.received.slice(1).map((c) => [c.ifName, c.stdin.deviceID])).toEqual([
      ['net1', '0000:af:00.1'],
      ['net2', undefined],
    ]);

    const u = setup({ 'k8s.v1.cni.cncf.io/networks': networks });
    u.kube.addNad(
      'ns1',
      'sriov-a',
      { cniVersion: '1.0.0', type: 'pa' },
      { 'k8s.v1.cni.cncf.io/resourceName': 'intel.com/other' },
    );
    u.deps.devices = t.deps.devices;
    await expect(u.add()).rejects.toMatchObject({
      code: 7,
      msg: 'pod ns1/pod1: error loading k8s delegates: conflicting resourceName for network ns1/sriov-a: NAD annotation "intel.com/other" does not match NetworkSelectionElement request "intel.com/sriov"',
    });
    expect(u.kube.events.map((e) => [e.type, e.reason])).toEqual([['Warning', 'ResourceNameConflict']]);
    expect(u.exec.received).toEqual([]);
  });

  it('runs none of it when no delegate has a resource name', async () => {
    const t = setup({ 'k8s.v1.cni.cncf.io/networks': 'net-a' });
    t.deps.devices = { podResourcesSocket: join(dir, 'no.sock'), checkpointFile: join(dir, 'garbage') };
    writeFileSync(join(dir, 'garbage'), 'not json');
    await t.add();
    expect(t.exec.calls()).toEqual(['ADD p0 eth0', 'ADD pa net1']);
  });

  it('fails the ADD before anything runs when the checkpoint is garbage', async () => {
    const t = setup({ 'k8s.v1.cni.cncf.io/networks': 'sriov-a' });
    t.kube.addNad(
      'ns1',
      'sriov-a',
      { cniVersion: '1.0.0', type: 'pa' },
      { 'k8s.v1.cni.cncf.io/resourceName': 'intel.com/sriov' },
    );
    writeFileSync(join(dir, 'garbage'), '{"Data":');
    t.deps.devices = { podResourcesSocket: join(dir, 'no.sock'), checkpointFile: join(dir, 'garbage') };
    await expect(t.add()).rejects.toMatchObject({ msg: expect.stringContaining('failed to get resourceMap') });
    expect(t.exec.received).toEqual([]);
  });
});

describe('DEL with Kubernetes', () => {
  it('uses the scratch cache and makes no API request', async () => {
    const t = setup({ 'k8s.v1.cni.cncf.io/networks': 'net-a,net-b' });
    await t.add();
    t.kube.received.length = 0;
    t.exec.received.length = 0;
    t.kube.pods.clear();
    await t.del();
    expect(t.kube.received).toEqual([]);
    expect(t.exec.calls()).toEqual(['DEL pb net2', 'DEL pa net1', 'DEL p0 eth0']);
  });

  it('without a scratch cache and with the API down, still deletes every attachment from the result caches', async () => {
    const t = setup({ 'k8s.v1.cni.cncf.io/networks': 'net-a,net-b' });
    await t.add();
    rmSync(join(cniDir, 'cid1'));
    t.exec.received.length = 0;
    t.kube.failures.getPod = [new FakeKubeError(0, 'connect ECONNREFUSED 127.0.0.1:6443')];
    await t.del();
    expect(t.exec.calls().sort()).toEqual(['DEL p0 eth0', 'DEL pa net1', 'DEL pb net2']);
    expect(readdirSync(join(cniDir, 'results'))).toEqual([]);
  });

  it("returns the delegates' errors", async () => {
    const t = setup({ 'k8s.v1.cni.cncf.io/networks': 'net-a' });
    await t.add();
    t.exec.returns['pa DEL'] = cniErrorReply(11, 'busy');
    await expect(t.del()).rejects.toMatchObject({ code: 11 });
  });
});

describe('STATUS with Kubernetes (docs/behaviour.md#status)', () => {
  function status(clusterNetwork: string, confDir = join(dir, 'net.d')) {
    const kube = new FakeKube();
    kube.addNad('kube-system', 'pod-net', { cniVersion: '1.1.0', type: 'pk' });
    const exec = new FakeExec('pk', 'pf');
    exec.returns['pk STATUS'] = cniErrorReply(50, 'pod-net is not ready');
    const stdin = Buffer.from(
      JSON.stringify({
        cniVersion: '1.1.0',
        name: 'multus-cni-network',
        type: 'multus',
        kubeconfig: '/fake/kubeconfig',
        cniDir,
        confDir,
        clusterNetwork,
      }),
    );
    const req = parseRequest('STATUS', { CNI_COMMAND: 'STATUS', CNI_PATH: '/usr/lib/cni' }, stdin);
    const clients = { made: 0 };
    const deps = { ...kubeDeps(exec, kube), kube: async () => (clients.made++, kube) };
    const run = cmdStatus(...withContext(req, parseMultusConf(stdin), deps));
    return { kube, exec, run, clients };
  }

  it('resolves a clusterNetwork that names a NAD as ADD does, and asks its plugins', async () => {
    const t = status('pod-net');
    await expect(t.run).rejects.toMatchObject({ code: 50, msg: 'pod-net is not ready' });
    expect(t.kube.received).toEqual(['getNad kube-system/pod-net']);
    expect(t.exec.calls()).toEqual(['STATUS pk ']);
  });

  it('makes no Kubernetes client for a clusterNetwork given as a path', async () => {
    mkdirSync(join(dir, 'net.d'), { recursive: true });
    const path = join(dir, 'net.d', 'file.conf');
    writeFileSync(path, JSON.stringify({ cniVersion: '1.1.0', name: 'file-net', type: 'pf' }));
    const t = status(path);
    await t.run;
    expect(t.clients.made).toBe(0);
    expect(t.kube.received).toEqual([]);
    expect(t.exec.calls()).toEqual(['STATUS pf ']);
  });
});
