/**
 * multus/plan-add.ts, the one ADD planner: every config of this table runs through ADD (cmdAdd, FakeExec,
 * FakeKube) and through `multus plan` (explainAdd on the same FakeKube), and both must give the same verdict: ADD
 * succeeds exactly when the plan has no error, with the same attachments; ADD's error is the plan's first error,
 * word for word, code included.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { toCniError } from '../../../src/base/errors.ts';
import { silentLogger } from '../../../src/base/log.ts';
import { parseRequest } from '../../../src/cni/request.ts';
import { cmdAdd } from '../../../src/multus/commands/add.ts';
import type { TestSeams } from '../../helpers/commands.ts';
import { parseMultusConf } from '../../../src/multus/conf.ts';
import { explainAdd } from '../../../src/multus/explain.ts';
import { kubeDeps, withContext } from '../../helpers/commands.ts';
import { FakeExec } from '../../helpers/fake-exec.ts';
import { FakeKube } from '../../helpers/fake-kube.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mts-plan-add-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const NETWORKS = 'k8s.v1.cni.cncf.io/networks';
const DEFAULT_NETWORK = 'v1.multus-cni.io/default-network';

interface Case {
  annotations?: Record<string, string>;
  conf?: Record<string, unknown>;
  /** The cluster network as a file (for clusterNetwork paths and the auxiliary chain). */
  clusterFile?: boolean;
  auxChain?: boolean;
  /** The pod's devices: `intel.com/sriov` IDs from the kubelet, and a DRA claim "nics" with `claimed` NICs. */
  devices?: { kubelet?: string[]; claimed?: string[] };
}

const POOL = 'intel.com/sriov';
const DRA_POOL = 'example.com/nic';
const pick = (name: string, extra: Record<string, unknown>) => JSON.stringify([{ name, ...extra }]);
const claimed = (request = 'nic') => ({ resourceClaim: { claimName: 'nics', requestName: request } });

const CASES: [string, Case][] = [
  ['no annotation', {}],
  ['two NADs by name', { annotations: { [NETWORKS]: 'net-a,net-b' } }],
  ['a NAD in another namespace', { annotations: { [NETWORKS]: 'other/net-c' } }],
  ['a missing NAD', { annotations: { [NETWORKS]: 'net-a,missing' } }],
  [
    'namespace isolation',
    { annotations: { [NETWORKS]: 'other/net-c' }, conf: { namespaceIsolation: true, globalNamespaces: 'kube-system' } },
  ],
  ['one interface name asked twice', { annotations: { [NETWORKS]: 'net-a@x1,net-b@x1' } }],
  ['an element that is not a name', { annotations: { [NETWORKS]: 'net-a,BAD_NAME' } }],
  ['JSON that does not parse', { annotations: { [NETWORKS]: '[{"name": "net-a"' } }],
  ['a mac no plugin declares', { annotations: { [NETWORKS]: '[{"name":"net-a","mac":"02:00:00:00:00:01"}]' } }],
  [
    'a mac no plugin declares, strictCapabilities',
    {
      annotations: { [NETWORKS]: '[{"name":"net-a","mac":"02:00:00:00:00:01"}]' },
      conf: { strictCapabilities: true },
    },
  ],
  ['a mac the plugin declares', { annotations: { [NETWORKS]: '[{"name":"net-caps","mac":"02:00:00:00:00:01"}]' } }],
  [
    'two default routes of one family',
    {
      annotations: {
        [NETWORKS]: '[{"name":"net-a","default-route":["10.1.1.1"]},{"name":"net-b","default-route":["10.2.2.1"]}]',
      },
    },
  ],
  ['a default-network override', { annotations: { [DEFAULT_NETWORK]: 'net-b' } }],
  ['a default-network override that is missing', { annotations: { [DEFAULT_NETWORK]: 'missing' } }],
  ['a version-less conflist NAD', { annotations: { [NETWORKS]: 'net-list' } }],
  ['the cluster network as a NAD', { conf: { clusterNetwork: 'cluster-nad', multusNamespace: 'kube-system' } }],
  [
    'the cluster network as a NAD that is missing',
    { conf: { clusterNetwork: 'gone-nad', multusNamespace: 'kube-system' } },
  ],
  ['defaultNetworks as NADs', { conf: { clusterNetwork: 'cluster-nad', defaultNetworks: ['net-a'] } }],
  ['the auxiliary chain', { clusterFile: true, auxChain: true, annotations: { [NETWORKS]: 'net-a' } }],
  ['the auxiliary chain without a clusterNetwork path', { conf: { auxiliaryCNIChainName: 'aux' } }],
  ['a network name too long for its result cache', { annotations: { [NETWORKS]: 'net-long' } }],
  ['a NAD pool with a device', { annotations: { [NETWORKS]: 'net-pool' }, devices: { kubelet: ['0000:af:00.1'] } }],
  ['a NAD pool with no device left (best effort)', { annotations: { [NETWORKS]: 'net-pool,net-pool@x2' } }],
  [
    'an element picking a pool with no device left',
    {
      annotations: {
        [NETWORKS]: `[{"name":"net-pool","resourceName":"${POOL}"},{"name":"net-pool","resourceName":"${POOL}","interface":"x2"}]`,
      },
      devices: { kubelet: ['0000:af:00.1'] },
    },
  ],
  [
    'an element picking a pool the pod has no device of',
    { annotations: { [NETWORKS]: pick('net-pool', { resourceName: POOL }) }, devices: { kubelet: [] } },
  ],
  [
    'a claim request with a device',
    { annotations: { [NETWORKS]: pick('net-a', claimed()) }, devices: { claimed: ['0000:3b:00.2'] } },
  ],
  [
    'a claim request with no device left',
    {
      annotations: {
        [NETWORKS]: JSON.stringify([
          { name: 'net-a', ...claimed() },
          { name: 'net-b', ...claimed() },
        ]),
      },
      devices: { claimed: ['0000:3b:00.2'] },
    },
  ],
  [
    'a claim request the claim does not have',
    { annotations: { [NETWORKS]: pick('net-a', claimed('gpu')) }, devices: { claimed: ['0000:3b:00.2'] } },
  ],
  [
    'a claim request and the pool of its device',
    {
      annotations: { [NETWORKS]: JSON.stringify([{ name: 'net-a', ...claimed() }, { name: 'net-dra' }]) },
      devices: { claimed: ['0000:3b:00.2', '0000:3b:00.3'] },
    },
  ],
];

/** The pod's device checkpoint and its DRA claim "nics" (one request "nic" with `ids`), on node-1. */
function giveDevices(kube: FakeKube, devices: Case['devices'] = {}) {
  const pod = kube.pods.get('ns1/pod1')!;
  pod.spec = { nodeName: 'node-1' };
  const ids = devices.claimed ?? [];
  if (ids.length > 0) {
    pod.spec.resourceClaims = [{ name: 'nics', resourceClaimName: 'nics' }];
    const results = ids.map((_, i) => ({
      request: 'nic',
      driver: 'nic.example.com',
      pool: 'node-1',
      device: `vf${i}`,
    }));
    kube.claims.set('ns1/nics', {
      metadata: { namespace: 'ns1', name: 'nics' },
      spec: { devices: { requests: [{ name: 'nic', exactly: { deviceClassName: 'x' } }] } },
      status: { allocation: { devices: { results } } },
    });
    const attrs = (id: string) => ({
      'k8s.cni.cncf.io/deviceID': { string: id },
      'k8s.cni.cncf.io/resourceName': { string: DRA_POOL },
    });
    kube.slices.push({
      metadata: { name: 'nic-slice' },
      spec: {
        driver: 'nic.example.com',
        nodeName: 'node-1',
        pool: { name: 'node-1', generation: 1, resourceSliceCount: 1 },
        devices: ids.map((id, i) => ({ name: `vf${i}`, attributes: attrs(id) })),
      },
    });
  }
  const checkpointFile = join(dir, 'checkpoint');
  const entries = (devices.kubelet ?? []).length
    ? [{ PodUID: 'uid-1', ContainerName: 'c', ResourceName: POOL, DeviceIDs: { '0': devices.kubelet } }]
    : [];
  const registered = { [POOL]: ['0000:af:00.1'] };
  writeFileSync(checkpointFile, JSON.stringify({ Data: { PodDeviceEntries: entries, RegisteredDevices: registered } }));
  return { podResourcesSocket: join(dir, 'no.sock'), checkpointFile };
}

function world(c: Case) {
  const kube = new FakeKube();
  kube.addPod('ns1', 'pod1', 'uid-1', c.annotations ?? {});
  kube.addNad('ns1', 'net-a', { cniVersion: '1.0.0', type: 'pa' });
  kube.addNad('ns1', 'net-b', { cniVersion: '1.0.0', name: 'bee', type: 'pb' });
  kube.addNad('ns1', 'net-caps', { cniVersion: '1.0.0', type: 'pa', capabilities: { mac: true } });
  kube.addNad('ns1', 'net-list', { name: 'listed', plugins: [{ type: 'pa' }] });
  kube.addNad('ns1', 'net-long', { cniVersion: '1.0.0', name: 'n'.repeat(180), type: 'pa' });
  kube.addNad('ns1', 'net-pool', { cniVersion: '1.0.0', type: 'pa' }, { 'k8s.v1.cni.cncf.io/resourceName': POOL });
  kube.addNad('ns1', 'net-dra', { cniVersion: '1.0.0', type: 'pb' }, { 'k8s.v1.cni.cncf.io/resourceName': DRA_POOL });
  kube.addNad('other', 'net-c', { cniVersion: '1.0.0', type: 'pc' });
  kube.addNad('kube-system', 'cluster-nad', { cniVersion: '1.0.0', type: 'pk' });
  kube.addNad('kube-system', 'net-a', { cniVersion: '1.0.0', name: 'sys-a', type: 'pa' });
  const cluster = { cniVersion: '1.0.0', name: 'cluster', type: 'p0' };
  const netd = join(dir, 'net.d');
  mkdirSync(join(netd, 'aux'), { recursive: true });
  writeFileSync(join(netd, '10-cluster.conf'), JSON.stringify(cluster));
  if (c.auxChain) {
    writeFileSync(join(netd, 'aux', '10-tuning.conf'), JSON.stringify({ type: 'tuning' }));
  }
  const conf = {
    cniVersion: '1.0.0',
    name: 'multus-cni-network',
    type: 'multus',
    kubeconfig: '/fake/kubeconfig',
    cniDir: join(dir, 'cni'),
    confDir: netd,
    binDir: '/opt/test/bin',
    ...(c.clusterFile ? { clusterNetwork: join(netd, '10-cluster.conf') } : { delegates: [cluster] }),
    ...(c.auxChain ? { auxiliaryCNIChainName: 'aux' } : {}),
    ...c.conf,
  };
  const exec = new FakeExec('p0', 'pa', 'pb', 'pc', 'pk', 'passthru', 'tuning');
  const devices = giveDevices(kube, c.devices);
  const devinfo = { cniDevinfoDir: join(dir, 'devinfo-cni'), dpDevinfoDir: join(dir, 'devinfo-dp') };
  const deps: TestSeams = { ...kubeDeps(exec, kube), devices: { ...devices, ...devinfo } };
  const stdin = Buffer.from(JSON.stringify(conf));
  const env = {
    CNI_CONTAINERID: 'c1d'.repeat(21) + 'f', // 64 hex characters, as runtimes send
    CNI_NETNS: '/var/run/netns/x',
    CNI_IFNAME: 'eth0',
    CNI_PATH: '/usr/lib/cni',
    CNI_ARGS:
      'IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=pod1;K8S_POD_INFRA_CONTAINER_ID=c1d;K8S_POD_UID=uid-1',
  };
  const add = async () => {
    try {
      await cmdAdd(...withContext(parseRequest('ADD', env, stdin), parseMultusConf(stdin), deps));
      const deviceIds = exec.received.map((c) => c.stdin.deviceID);
      return { ok: true as const, ran: exec.calls(), deviceIds };
    } catch (e) {
      const error = toCniError(e);
      return { ok: false as const, code: error.code, msg: error.msg };
    }
  };
  const plan = () => explainAdd(parseMultusConf(stdin), 'ns1', 'pod1', kube, silentLogger, { devices });
  return { add, plan };
}

describe('planAdd: ADD and `multus plan` give the same verdict for every config', () => {
  it.each(CASES)('%s', async (_name, c) => {
    const w = world(c);
    const plan = await w.plan();
    const added = await w.add();
    if (added.ok) {
      expect(plan.errors).toEqual([]);
      expect(added.ran).toEqual(plan.attachments.flatMap((a) => a.plugins.map((p) => `ADD ${p.type} ${a.ifName}`)));
      expect(added.deviceIds).toEqual(plan.attachments.flatMap((a) => a.plugins.map(() => a.deviceId)));
    } else {
      expect(plan.errors[0]).toMatchObject({ code: added.code, msg: added.msg });
    }
  });

  it('covers both verdicts', async () => {
    const verdicts = await Promise.all(CASES.map(async ([, c]) => (await world(c).add()).ok));
    expect(verdicts.filter(Boolean).length).toBeGreaterThan(5);
    expect(verdicts.filter((ok) => !ok).length).toBeGreaterThan(5);
  });

  it('assigns devices in the plan as ADD does, and names the device errors', async () => {
    const plan = async (name: string) => await world(CASES.find(([n]) => n === name)![1]).plan();
    const both = await plan('a claim request and the pool of its device');
    expect(both.attachments.map((a) => a.deviceId)).toEqual([undefined, '0000:3b:00.2', '0000:3b:00.3']);
    expect((await plan('a NAD pool with a device')).attachments[1]!.deviceId).toBe('0000:af:00.1');
    const left = await plan('a claim request with no device left');
    expect(left.errors.map((e) => e.msg)).toEqual([
      'pod ns1/pod1: the selection element for network ns1/net-b: resourceClaim {claimName: "nics", requestName: "nic"} has no device left: its 1 device(s) went to earlier attachments',
    ]);
    const empty = await plan('an element picking a pool the pod has no device of');
    expect(empty.errors[0]!.msg).toContain('pool "intel.com/sriov" is on the node, but neither its device plugins');
  });
});
