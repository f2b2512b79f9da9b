/**
 * src/dra/slice-sync.ts against a fake API (fake-driver-api.ts): a sync creates, updates and deletes as planned
 * and a second one writes nothing; the background sync follows NAD changes (and costs no request when the change
 * leaves the devices as they were), syncs again when kicked (the kubelet deleted our slices), retries a failure;
 * other drivers' and nodes' slices are never touched.
 */
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/base/log.ts';
import { startSliceSync, syncSlices } from '../../../src/dra/slice-sync.ts';
import { FakeKubeError } from '../../helpers/fake-kube.ts';
import { FakeDriverApi, nad, nadSource } from './fake-driver-api.ts';

const O = { nodeName: 'node-1', driver: 'multus.k8s.cni.cncf.io', nodeUid: 'node-uid-1' };
const devicesOf = (api: FakeDriverApi) =>
  api.slices.flatMap((s) => (s.spec!.devices as { name: string }[]).map((d) => d.name));

describe('syncSlices', () => {
  it('creates, then writes nothing, then updates and deletes as the NADs change', async () => {
    const api = new FakeDriverApi();
    const nads = Array.from({ length: 200 }, (_, i) => nad('ns', `net${String(i).padStart(3, '0')}`));
    expect(await syncSlices(api, nads, O)).toMatchObject({ created: 2, updated: 0, deleted: 0, published: 200 });
    expect(devicesOf(api)).toHaveLength(201);
    expect(await syncSlices(api, nads, O)).toMatchObject({ created: 0, updated: 0, deleted: 0 });
    expect(await syncSlices(api, nads.slice(0, 10), O)).toMatchObject({ created: 0, updated: 1, deleted: 1 });
    expect(devicesOf(api)).toHaveLength(11);
    expect(api.slices.map((s) => (s.spec!.pool as { generation: number }).generation)).toEqual([2]);
  });

  it("leaves other drivers' and other nodes' slices alone", async () => {
    const api = new FakeDriverApi();
    api.slices.push(
      { metadata: { name: 'gpu' }, spec: { driver: 'gpu.example.com', nodeName: 'node-1' } },
      { metadata: { name: 'other-node' }, spec: { driver: O.driver, nodeName: 'node-2' } },
    );
    expect(await syncSlices(api, [nad('ns', 'a')], O)).toMatchObject({ created: 1 });
    expect(api.slices.map((s) => s.metadata!.name)).toEqual(['gpu', 'other-node', 'node-1-multus.k8s.cni.cncf.io-0']);
    expect(await syncSlices(api, [], O)).toMatchObject({ created: 0, updated: 1, deleted: 0 });
    expect(api.slices.slice(0, 2).map((s) => s.spec)).toEqual([
      { driver: 'gpu.example.com', nodeName: 'node-1' },
      { driver: O.driver, nodeName: 'node-2' },
    ]);
  });
});

/** Resolves once `cond` holds (the sync runs on timers). */
async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !cond(); i++) await new Promise((r) => setTimeout(r, 5));
  expect(cond()).toBe(true);
}

describe('startSliceSync', () => {
  it('follows NAD changes, asks nothing for a change that leaves the devices as they were, and syncs when kicked', async () => {
    const api = new FakeDriverApi();
    const source = nadSource([nad('ns', 'a')]);
    const controller = new AbortController();
    const sync = startSliceSync({
      ...O,
      api,
      nads: source,
      log: silentLogger,
      signal: controller.signal,
      debounceMs: 1,
    });
    await until(() => devicesOf(api).length === 2);
    source.set([nad('ns', 'a'), nad('ns', 'b')]);
    await until(() => devicesOf(api).length === 3);
    const asked = api.received.length;
    source.set([nad('ns', 'a'), nad('ns', 'b'), nad('ns', 'plain', { device: false })]);
    await new Promise((r) => setTimeout(r, 30));
    expect(api.received.length).toBe(asked);
    api.slices.splice(0); // the kubelet wiped them while the plugin was away
    sync.kick();
    await until(() => devicesOf(api).length === 3);
    controller.abort();
  });

  it('waits for the NAD list to be complete before the first sync', async () => {
    const api = new FakeDriverApi();
    let complete = false;
    const source = { ...nadSource([nad('ns', 'a')]), synced: () => complete };
    const controller = new AbortController();
    startSliceSync({ ...O, api, nads: source, log: silentLogger, signal: controller.signal });
    await new Promise((r) => setTimeout(r, 50));
    expect(api.received).toEqual([]);
    complete = true;
    await until(() => devicesOf(api).length === 2);
    expect(api.slices.map((s) => (s.spec!.pool as { generation: number }).generation)).toEqual([1]);
    controller.abort();
  });

  it('tries again after a failure', async () => {
    const api = new FakeDriverApi();
    api.failures.listResourceSlices = [new FakeKubeError(503, 'unavailable')];
    const controller = new AbortController();
    const errors: string[] = [];
    const log = { ...silentLogger, error: (m: string) => void errors.push(m) };
    startSliceSync({ ...O, api, nads: nadSource([nad('ns', 'a')]), log, signal: controller.signal });
    await until(() => devicesOf(api).length === 2);
    expect(errors).toEqual([expect.stringContaining('unavailable): trying again in 1 s')]);
    controller.abort();
  });
});
