/**
 * The daemon's informers (src/informers/informer.ts) against a kube-apiserver with the WatchList feature off (as
 * 1.33 shipped it): the watch with initial events is refused, each informer falls back to a LIST and a watch from
 * its resourceVersion, and syncs with the objects that existed before it started.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/base/log.ts';
import type { WarmKube } from '../../src/informers/informers.ts';
import { startWarmKube } from '../../src/informers/informers.ts';
import { needs } from '../helpers/skip.ts';
import { type Cluster, MULTUS_USER, k8sRequirements, nadPath, podPath, startCluster } from './cluster.ts';

const ready = needs(...k8sRequirements());
const NODE = 'node-wl-off';

describe.skipIf(!ready)('daemon informers: an API server without watch-list', () => {
  let cluster: Cluster;
  let warm: WarmKube;
  const ns = `wl-off-${process.pid}`;
  let uid = '';

  beforeAll(async () => {
    cluster = await startCluster({ apiserverArgs: ['--feature-gates=WatchList=false'] });
    await cluster.admin.post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
    const pod = await cluster.admin.post(podPath(ns), {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'early', namespace: ns },
      spec: { nodeName: NODE, containers: [{ name: 'c', image: 'example.invalid/none' }] },
    });
    uid = pod.metadata.uid;
    await cluster.admin.post(nadPath(ns), {
      apiVersion: 'k8s.cni.cncf.io/v1',
      kind: 'NetworkAttachmentDefinition',
      metadata: { name: 'net-a', namespace: ns },
      spec: { config: '{"cniVersion":"1.0.0","type":"p1"}' },
    });
    warm = await startWarmKube({
      kubeconfig: cluster.multusKubeconfig,
      env: {},
      nodeName: NODE,
      log: silentLogger,
    });
  }, 120_000);

  afterAll(async () => {
    warm?.close();
    await cluster?.stop();
  });

  it('both informers fall back to LIST + watch and serve the objects that existed before they started', async () => {
    expect(await warm.waitForSync(30_000)).toBe(true);
    const before = warm.client.requestCount;
    expect((await warm.client.getPod(ns, 'early', { uid })).metadata.uid).toBe(uid);
    expect((await warm.client.getNad(ns, 'net-a')).metadata.name).toBe('net-a');
    expect(warm.client.requestCount - before).toBe(0);
    const seen = (await cluster.auditEvents(MULTUS_USER)).map((e) => `${e.verb} ${e.objectRef?.resource}`);
    for (const r of ['pods', 'network-attachment-definitions']) {
      expect(seen, r).toContain(`list ${r}`);
      expect(seen, r).toContain(`watch ${r}`);
    }
  });
});
