/**
 * host/prepare.ts `prepare()`, the front door every door goes through, given typed input (no CNI wire): the
 * sandbox and the typed pod reach the context as handed in, the container's lock serialises ADD, CHECK and DEL of
 * one container whichever door they come through (STATUS and GC take none), a CNI_* value Node could not carry is
 * refused but on DEL, and the netns rule of the operation. The CNI door's edge (CNI_ARGS parsed once) is
 * `doorInputOf`; handle.test.ts runs the whole CNI path.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CniCode, CniError } from '../../../src/base/errors.ts';
import { podK8sArgs } from '../../../src/cni/cniargs.ts';
import { parseRequest } from '../../../src/cni/request.ts';
import type { RequestCommand } from '../../../src/cni/request.ts';
import { doorInputOf } from '../../../src/host/handle.ts';
import type { Host } from '../../../src/host/host.ts';
import { prepare } from '../../../src/host/prepare.ts';
import type { DoorInput } from '../../../src/multus/call-context.ts';
import { parseMultusConf } from '../../../src/multus/conf.ts';
import { fakeHost } from '../../helpers/daemon.ts';
import { FakeExec } from '../../helpers/fake-exec.ts';
import { FakeKube } from '../../helpers/fake-kube.ts';
import { testNetns } from '../../helpers/netns.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mts-prepare-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** An in-process lock (the real one binds a socket under Bun only): a held path waits, until `waitMs` is over. */
function memoryLock(): Host['lock'] {
  const held = new Map<string, Promise<void>>();
  return async (path, waitMs) => {
    const deadline = Date.now() + waitMs;
    while (held.has(path)) {
      if (Date.now() >= deadline) return 'timeout';
      await Promise.race([held.get(path), new Promise((r) => setTimeout(r, 10))]);
    }
    let release = () => {};
    held.set(path, new Promise<void>((r) => (release = r)));
    return {
      release: () => {
        held.delete(path);
        release();
      },
    };
  };
}

const host = (): Host => ({ ...fakeHost(new FakeExec('p0'), new FakeKube()), lock: memoryLock() });
const conf = () =>
  parseMultusConf({
    cniVersion: '1.0.0',
    name: 'multus-cni-network',
    type: 'multus',
    cniDir: join(dir, 'cni'),
    delegateTimeoutSeconds: 1,
    delegates: [{ cniVersion: '1.0.0', name: 'cluster', type: 'p0' }],
  });

function input(op: RequestCommand, extra: Partial<DoorInput> = {}): DoorInput {
  const pod = podK8sArgs({ namespace: 'ns', name: 'p', uid: 'u' });
  return {
    op,
    sandbox: { containerId: 'cid1', netns: testNetns(), ifName: 'net1', pod },
    conf: conf(),
    env: {},
    ...extra,
  };
}

/** Resolves once `fn` has started (so a second call meets its lock), with a way to let it finish. */
function held(): { started: Promise<void>; release: () => void; run: () => Promise<string> } {
  let release = () => {};
  let started = () => {};
  const startedP = new Promise<void>((r) => (started = r));
  const done = new Promise<void>((r) => (release = r));
  return {
    started: startedP,
    release: () => release(),
    run: async () => {
      started();
      await done;
      return 'first';
    },
  };
}

describe('prepare()', () => {
  it('hands the sandbox and the typed pod to the context as the door gave them', async () => {
    const ctx = await prepare(host(), input('ADD', { runtimePairs: [['FOO', 'bar']] }), async (c) => c);
    expect(ctx.op).toBe('ADD');
    expect(ctx.sandbox).toMatchObject({
      containerId: 'cid1',
      ifName: 'net1',
      pod: { podNamespace: 'ns', podName: 'p' },
    });
    expect(ctx.podRef).toBe('ns/p/u');
    expect(ctx.runtimePairs).toEqual([['FOO', 'bar']]);
  });

  it('runs ADD, CHECK and DEL of one container one at a time, whichever door they come through', async () => {
    const h = host();
    const first = held();
    const order: string[] = [];
    const add = prepare(h, input('ADD'), first.run).then((v) => order.push(v));
    await first.started;
    const del = prepare(h, input('DEL'), async () => 'second').then((v) => order.push(v));
    const status = prepare(h, input('STATUS'), async () => 'status').then((v) => order.push(v));
    await status;
    expect(order).toEqual(['status']); // STATUS takes no lock
    first.release();
    await Promise.all([add, del]);
    expect(order).toEqual(['status', 'first', 'second']);
  });

  it('fails with code 11 when the container stays locked past delegateTimeoutSeconds', async () => {
    const h = host();
    const first = held();
    const add = prepare(h, input('ADD'), first.run);
    await first.started;
    const err = await prepare(h, input('CHECK'), async () => 'x').catch((e: unknown) => e as CniError);
    expect(err).toBeInstanceOf(CniError);
    expect([(err as CniError).code, (err as CniError).msg]).toEqual([
      CniCode.TryAgainLater,
      'another call for container cid1 is still running after 1 s',
    ]);
    first.release();
    await add;
  });

  it('refuses a CNI_* value Node could not carry, but on DEL', async () => {
    const envProblem = new CniError(CniCode.InvalidEnv, 'CNI_IFNAME holds bytes that are not UTF-8');
    await expect(prepare(host(), input('ADD', { envProblem }), async () => 'ran')).rejects.toBe(envProblem);
    expect(await prepare(host(), input('DEL', { envProblem }), async () => 'ran')).toBe('ran');
  });

  it('keeps the netns rule of the operation: ADD needs it, DEL goes without it', async () => {
    const gone = { ...input('ADD').sandbox, netns: join(dir, 'no-such-netns') };
    await expect(prepare(host(), input('ADD', { sandbox: gone }), async () => 'ran')).rejects.toMatchObject({
      code: CniCode.InvalidEnv,
    });
    expect(await prepare(host(), input('DEL', { sandbox: gone }), async (c) => c.sandbox.netns)).toBe(gone.netns);
  });
});

describe('doorInputOf (the CNI door edge)', () => {
  it('parses CNI_ARGS once into the pod and the pairs passed on', () => {
    const env = {
      CNI_CONTAINERID: 'cid1',
      CNI_NETNS: '/var/run/netns/x',
      CNI_IFNAME: 'eth0',
      CNI_PATH: '/opt/cni/bin',
      CNI_ARGS: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_UID=u;FOO=bar',
    };
    const stdin = Buffer.from(
      JSON.stringify({
        cniVersion: '1.0.0',
        name: 'multus-cni-network',
        type: 'multus',
        delegates: [{ name: 'c', type: 'p0' }],
      }),
    );
    const req = parseRequest('ADD', env, stdin);
    const x = doorInputOf(req, parseMultusConf(stdin), env);
    expect(x.op).toBe('ADD');
    expect(x.sandbox).toMatchObject({ containerId: 'cid1', ifName: 'eth0', pod: { podNamespace: 'ns', podUid: 'u' } });
    expect(x.pluginPath).toEqual(['/opt/cni/bin']);
    expect(x.runtimePairs).toContainEqual(['FOO', 'bar']);
  });
});
