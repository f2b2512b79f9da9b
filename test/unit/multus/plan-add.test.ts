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
import type { CommandDeps } from '../../../src/multus/commands/context.ts';
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
}

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
];

function world(c: Case) {
  const kube = new FakeKube();
  kube.addPod('ns1', 'pod1', 'uid-1', c.annotations ?? {});
  kube.addNad('ns1', 'net-a', { cniVersion: '1.0.0', type: 'pa' });
  kube.addNad('ns1', 'net-b', { cniVersion: '1.0.0', name: 'bee', type: 'pb' });
  kube.addNad('ns1', 'net-caps', { cniVersion: '1.0.0', type: 'pa', capabilities: { mac: true } });
  kube.addNad('ns1', 'net-list', { name: 'listed', plugins: [{ type: 'pa' }] });
  kube.addNad('ns1', 'net-long', { cniVersion: '1.0.0', name: 'n'.repeat(180), type: 'pa' });
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
  const deps: CommandDeps = kubeDeps(exec, kube);
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
      return { ok: true as const, ran: exec.calls() };
    } catch (e) {
      const error = toCniError(e);
      return { ok: false as const, code: error.code, msg: error.msg };
    }
  };
  const plan = () => explainAdd(parseMultusConf(stdin), 'ns1', 'pod1', kube, silentLogger);
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
    } else {
      expect(plan.errors[0]).toMatchObject({ code: added.code, msg: added.msg });
    }
  });

  it('covers both verdicts', async () => {
    const verdicts = await Promise.all(CASES.map(async ([, c]) => (await world(c).add()).ok));
    expect(verdicts.filter(Boolean).length).toBeGreaterThan(5);
    expect(verdicts.filter((ok) => !ok).length).toBeGreaterThan(5);
  });
});
