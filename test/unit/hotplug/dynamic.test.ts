/**
 * Dynamic networks in process (fake plugins, fake Kubernetes, a fake pod informer): an informer update whose
 * networks annotation changed plugs or unplugs at once, with no resync pass (the resync period is an hour
 * here); updates that leave the annotation alone (status writes, kubelet's) cost nothing; ten pods edited in
 * one burst are all reconciled; a failed plug is retried by its own timer, not by the resync; a bad element is
 * reported once per annotation value, across redeliveries, resyncs and a restart; a pod whose
 * sandbox appeared after the last listing is found; without informer events the resync pass does the work. Real plugins,
 * a real API and informer: test/e2e-k8s/hotplug.test.ts and the kubelet tier.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../../../src/base/log.ts';
import type { DynamicNetworks } from '../../../src/hotplug/dynamic.ts';
import { startDynamicNetworks } from '../../../src/hotplug/dynamic.ts';
import { createQueue } from '../../../src/daemon/queue.ts';
import { handle } from '../../../src/host/handle.ts';
import type { Host } from '../../../src/host/host.ts';
import { fakeHost } from '../../helpers/daemon.ts';
import type { Pod } from '../../../src/k8s/types.ts';
import { FakeExec, cniErrorReply } from '../../helpers/fake-exec.ts';
import { FakeKube } from '../../helpers/fake-kube.ts';
import { testNetns } from '../../helpers/netns.ts';

const NETWORKS = 'k8s.v1.cni.cncf.io/networks';
const HOUR = 3_600_000;
let dir: string;
let exec: FakeExec;
let kube: FakeKube;
let host: Host;
let dynamic: DynamicNetworks | undefined;
/** The fake informer: the listener dynamic networks subscribed. */
let listener: ((pod: Pod, deleted: boolean) => void) | undefined;
let unsubscribed = 0;

const multusConf = () => ({
  cniVersion: '1.0.0',
  name: 'multus-cni-network',
  type: 'multus',
  kubeconfig: '/fake/kubeconfig',
  cniDir: join(dir, 'multus'),
  delegates: [{ cniVersion: '1.0.0', name: 'cluster', type: 'p0' }],
});

/** The runtime's ADD of pod `name` (container `cid-<name>`), as the pod is created. */
async function runPod(name: string, annotation?: string): Promise<void> {
  kube.addPod('ns', name, `uid-${name}`, annotation ? { [NETWORKS]: annotation } : {});
  const env = {
    CNI_COMMAND: 'ADD',
    CNI_CONTAINERID: `cid-${name}`,
    CNI_NETNS: testNetns(),
    CNI_IFNAME: 'eth0',
    CNI_PATH: '/opt/cni/bin',
    CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=${name};K8S_POD_UID=uid-${name}`,
  };
  const added = await handle(host, { env, stdin: Buffer.from(JSON.stringify(multusConf())) });
  expect(added.exitCode, added.stdout).toBe(0);
}

/** The API server's side of an annotation edit: the stored pod changes, the informer delivers it. */
function edit(name: string, annotation: string, deliver = true): void {
  const pod = kube.pods.get(`ns/${name}`)!;
  pod.metadata.annotations = { ...pod.metadata.annotations, [NETWORKS]: annotation };
  kube.touch('ns', name);
  if (deliver) listener!(structuredClone(pod), false);
}

const scratchNames = (name: string) =>
  (JSON.parse(readFileSync(join(dir, 'multus', `cid-${name}`), 'utf8')) as { Name: string }[]).map((d) => d.Name);
const plugCalls = () => exec.calls().filter((c) => / mv /.test(c));

function start(o: { events?: boolean; now?: () => number } = {}): DynamicNetworks {
  dynamic = startDynamicNetworks({
    host,
    queue: createQueue(0),
    log: silentLogger,
    daemonEnv: {},
    multusConf: () => Buffer.from(JSON.stringify(multusConf())),
    intervalMs: HOUR,
    links: { names: async () => ['lo', 'eth0'] },
    ...(o.now ? { now: o.now } : {}),
    ...(o.events === false
      ? {}
      : {
          events: (l: (pod: Pod, deleted: boolean) => void) => {
            listener = l;
            return () => {
              unsubscribed++;
              listener = undefined;
            };
          },
        }),
  });
  return dynamic;
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mts-dynamic-'));
  exec = new FakeExec('p0', 'mv');
  kube = new FakeKube();
  kube.addNad('ns', 'mv', { cniVersion: '1.0.0', type: 'mv' });
  host = fakeHost(exec, kube);
  listener = undefined;
  unsubscribed = 0;
});
afterEach(async () => {
  await dynamic?.stop();
  dynamic = undefined;
  vi.useRealTimers();
  rmSync(dir, { recursive: true, force: true });
});

describe('dynamic networks driven by the pod informer', () => {
  it('an update that changes the annotation plugs, then unplugs, with no resync pass', async () => {
    await runPod('p');
    const d = start();
    await d.tick(); // the start-up pass (nothing to do); the next one is an hour away
    expect(plugCalls()).toEqual([]);

    edit('p', 'mv');
    await d.settled();
    expect(plugCalls()).toEqual(['ADD mv net1']);
    expect(scratchNames('p')).toEqual(['cluster', 'ns/mv']);
    const status = JSON.parse(kube.pods.get('ns/p')!.metadata.annotations!['k8s.v1.cni.cncf.io/network-status']!);
    expect(status.map((s: { interface: string }) => s.interface)).toEqual(['eth0', 'net1']);

    edit('p', '');
    await d.settled();
    expect(plugCalls()).toEqual(['ADD mv net1', 'DEL mv net1']);
    expect(scratchNames('p')).toEqual(['cluster']);
  });

  it('updates that leave the annotation as it was cost no request and run nothing', async () => {
    await runPod('p', 'mv');
    const d = start();
    await d.tick();
    const pod = kube.pods.get('ns/p')!;
    listener!(structuredClone(pod), false); // first sight of the pod: looked at once
    await d.settled();
    const requests = kube.received.length;
    const calls = exec.received.length;
    for (let i = 0; i < 5; i++) {
      kube.touch('ns', 'p'); // a status write, kubelet's or ours
      listener!(structuredClone(kube.pods.get('ns/p')!), false);
    }
    await d.settled();
    expect(kube.received.length - requests).toBe(0);
    expect(exec.received.length - calls).toBe(0);
  });

  it('ten pods edited in one burst are all plugged', async () => {
    const names = Array.from({ length: 10 }, (_, i) => `q${i}`);
    for (const n of names) await runPod(n);
    const d = start();
    await d.tick();
    for (const n of names) edit(n, 'mv@net3');
    await d.settled();
    expect(plugCalls()).toHaveLength(10);
    for (const n of names) expect(scratchNames(n)).toEqual(['cluster', 'ns/mv']);
  });

  it('a pod whose sandbox appeared after the last listing is found by the event', async () => {
    const d = start();
    await d.tick(); // no sandbox yet
    await runPod('late');
    edit('late', 'mv');
    await d.settled();
    expect(plugCalls()).toEqual(['ADD mv net1']);
  });

  it('a failed plug is retried by its own timer (backoff), not by the resync', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    let clock = 1_000_000;
    await runPod('p');
    exec.returns['mv ADD'] = () => {
      delete exec.returns['mv ADD'];
      return cniErrorReply(11, 'try again later');
    };
    const d = start({ now: () => clock });
    await d.tick();
    edit('p', 'mv');
    await d.settled();
    expect(plugCalls()).toEqual(['ADD mv net1', 'DEL mv net1']); // the failed ADD, rolled back
    expect(kube.events.map((e) => [e.reason, e.message])).toContainEqual([
      'NetworkChangeFailed',
      expect.stringContaining('(will retry)'),
    ]);
    clock += 1000;
    vi.advanceTimersByTime(1000);
    await d.settled();
    expect(plugCalls()).toEqual(['ADD mv net1', 'DEL mv net1', 'ADD mv net1']);
    expect(scratchNames('p')).toEqual(['cluster', 'ns/mv']);
  });

  it('a bad element is reported once per annotation value: informer redeliveries, resyncs, restarts', async () => {
    await runPod('p');
    const failures = () => kube.events.filter((e) => e.reason === 'NetworkChangeFailed');
    let d = start();
    await d.tick();
    edit('p', 'mv@net1,nosuch@net5');
    await d.settled();
    expect(plugCalls()).toEqual(['ADD mv net1']);
    expect(failures().map((e) => e.message)).toEqual([expect.stringContaining('nosuch')]);
    // a restarted watch delivers the pod again; a resync pass looks at it again
    listener!(structuredClone(kube.pods.get('ns/p')!), false);
    await d.settled();
    await d.tick();
    // a restarted daemon remembers nothing: its report has the same name, which the API server refuses
    await d.stop();
    d = start();
    await d.tick();
    listener!(structuredClone(kube.pods.get('ns/p')!), false);
    await d.settled();
    expect(failures()).toHaveLength(1);
    expect(kube.received.filter((r) => r === 'createEvent NetworkChangeFailed')).toHaveLength(2);
    // another value with the same bad element: reported once more, under another name
    edit('p', 'nosuch@net5,mv@net1');
    await d.settled();
    expect(failures()).toHaveLength(2);
    expect(new Set(failures().map((e) => e.name)).size).toBe(2);
    expect(plugCalls()).toEqual(['ADD mv net1']);
  });

  it('stop() unsubscribes from the informer', async () => {
    const d = start();
    await d.stop();
    expect(unsubscribed).toBe(1);
    expect(listener).toBeUndefined();
  });
});

describe('dynamic networks without informer events', () => {
  it('the resync pass plugs what the annotation asks for', async () => {
    await runPod('p');
    const d = start({ events: false });
    await d.tick();
    edit('p', 'mv', false);
    expect(plugCalls()).toEqual([]);
    await d.tick();
    expect(plugCalls()).toEqual(['ADD mv net1']);
  });
});
