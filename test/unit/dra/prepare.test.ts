/**
 * src/dra/prepare.ts and checkpoint.ts with the fake API (fake-driver-api.ts) and real checkpoint files in a temp
 * dir: a good claim answered with its devices and checkpointed (0600 in a 0700 dir), answered again from the
 * checkpoint without the API (a retry, a restarted daemon); a claim the API does not have, one re-created under
 * its name (another UID), a bad config and a missing NAD each answered with an error, the last two refused:
 * Ready=False on each device of our driver (field manager = the driver) and one Warning event per reserved pod;
 * every claim of a request answered; unprepare removes the checkpoint and is idempotent.
 */
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/base/log.ts';
import { fileCheckpoints } from '../../../src/dra/checkpoint.ts';
import { preparer } from '../../../src/dra/prepare.ts';
import { FakeKubeError } from '../../helpers/fake-kube.ts';
import { DRIVER, FakeDriverApi, claim, selection } from './fake-driver-api.ts';

const NOW = new Date('2026-12-07T21:00:00Z');

let dir: string;
let api: FakeDriverApi;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mts-dra-prep-'));
  api = new FakeDriverApi();
  api.addNad('ns1', 'net1', { cniVersion: '1.0.0', name: 'net1', type: 'macvlan' });
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const make = (checkpointDir = join(dir, 'dra')) =>
  preparer({
    kube: api,
    checkpoints: fileCheckpoints(checkpointDir),
    driver: DRIVER,
    allowInlineFromClaim: false,
    log: silentLogger,
    now: () => NOW,
  });
const ref = (name: string, uid: string) => ({ namespace: 'ns1', name, uid });
const UID1 = '0a0a0a0a-0000-4000-8000-000000000001';
const UID2 = '0a0a0a0a-0000-4000-8000-000000000002';
const UID3 = '0a0a0a0a-0000-4000-8000-000000000003';

describe('prepare', () => {
  it('answers a good claim with its devices of our driver and keeps a 0600 checkpoint in a 0700 dir', async () => {
    api.claims.set(
      'ns1/c1',
      claim(
        'c1',
        UID1,
        [
          ['net', DRIVER, 'any', 'share-1'],
          ['gpu', 'gpu.example.com', 'gpu-0'],
        ],
        [{ requests: ['net'], parameters: selection('net1', { interface: 'dra0' }) }],
      ),
    );
    const answers = await make().prepare([ref('c1', UID1)]);
    expect(answers).toEqual({
      [UID1]: {
        devices: [
          { requestNames: ['net'], poolName: 'node-1', deviceName: 'any', cdiDeviceIds: [], shareId: 'share-1' },
        ],
        error: '',
      },
    });
    expect(statSync(join(dir, 'dra')).mode & 0o777).toBe(0o700);
    expect(statSync(join(dir, 'dra', `${UID1}.json`)).mode & 0o777).toBe(0o600);
    expect(api.applied.size).toBe(0);
  });

  it('answers a retry, and a restarted daemon, from the checkpoint without asking the API', async () => {
    api.claims.set(
      'ns1/c1',
      claim('c1', UID1, [['net', DRIVER, 'any']], [{ requests: ['net'], parameters: selection('net1') }]),
    );
    const first = await make().prepare([ref('c1', UID1)]);
    const asked = api.received.length;
    api.claims.delete('ns1/c1');
    expect(await make().prepare([ref('c1', UID1)])).toEqual(first);
    expect(api.received.length).toBe(asked);
  });

  it('answers every claim of a request: unknown, re-created and transient failures are errors of their own', async () => {
    api.claims.set(
      'ns1/good',
      claim('good', UID1, [['net', DRIVER, 'any']], [{ requests: ['net'], parameters: selection('net1') }]),
    );
    api.claims.set('ns1/again', claim('again', 'ffff0000-0000-4000-8000-000000000009', [['net', DRIVER, 'any']]));
    const answers = await make().prepare([ref('missing', UID2), ref('good', UID1), ref('again', UID3)]);
    expect(Object.keys(answers).sort()).toEqual([UID1, UID2, UID3].sort());
    expect(answers[UID1]!.error).toBe('');
    expect(answers[UID2]).toEqual({
      devices: [],
      error: expect.stringMatching(/^cannot read ResourceClaim ns1\/missing: .*not found/),
    });
    expect(answers[UID3]!.error).toMatch(/has uid ffff0000-.*, not 0a0a0a0a-0000-4000-8000-000000000003/);
    api.failures.getResourceClaim = [new FakeKubeError(503, 'etcd is down')];
    const retry = await make().prepare([ref('missing', UID2)]);
    expect(retry[UID2]!.error).toContain('(the kubelet tries again)');
    expect(api.applied.size).toBe(0);
    expect(api.events).toEqual([]);
  });

  it('refuses a bad config: Ready=False on each device of ours, a Warning event per pod, no checkpoint', async () => {
    const inline = {
      apiVersion: 'cni.networking.x-k8s.io/v1alpha1',
      kind: 'CNI',
      ifName: 'x',
      config: { type: 'macvlan' },
    };
    api.claims.set(
      'ns1/bad',
      claim(
        'bad',
        UID1,
        [
          ['net', DRIVER, 'any', 's1'],
          ['gpu', 'gpu.example.com', 'gpu-0'],
        ],
        [{ requests: ['net'], parameters: inline }],
        ['pod-a', 'pod-b'],
      ),
    );
    const answers = await make().prepare([ref('bad', UID1)]);
    expect(answers[UID1]!.devices).toEqual([]);
    expect(answers[UID1]!.error).toMatch(/^ResourceClaim ns1\/bad: /);
    const applied = api.applied.get(`ns1/bad ${DRIVER}`) as Record<string, unknown>[];
    expect(applied).toEqual([
      {
        driver: DRIVER,
        pool: 'node-1',
        device: 'any',
        shareID: 's1',
        conditions: [
          {
            type: 'Ready',
            status: 'False',
            reason: expect.stringMatching(/^[A-Za-z][A-Za-z0-9_,:]*$/),
            message: expect.any(String),
            lastTransitionTime: '2026-12-07T21:00:00Z',
          },
        ],
      },
    ]);
    expect(api.events.map((e) => [e.pod.metadata.name, e.pod.metadata.uid, e.type, e.reason])).toEqual([
      ['pod-a', 'uid-pod-a', 'Warning', 'ClaimNetworkRefused'],
      ['pod-b', 'uid-pod-b', 'Warning', 'ClaimNetworkRefused'],
    ]);
    expect(readdirSync(dir)).toEqual([]);
    // the kubelet's retry: the same answer, and the events are not repeated (named after what they report)
    expect(await make().prepare([ref('bad', UID1)])).toEqual(answers);
    expect(api.events).toHaveLength(2);
  });

  it('refuses a claim that names a NAD that does not exist, saying which', async () => {
    api.claims.set(
      'ns1/c',
      claim('c', UID1, [['net', DRIVER, 'any']], [{ requests: ['net'], parameters: selection('nope') }]),
    );
    const answers = await make().prepare([ref('c', UID1)]);
    expect(answers[UID1]!.error).toBe(
      'ResourceClaim ns1/c: request net: NetworkAttachmentDefinition ns1/nope not found: create it or name another network',
    );
    const applied = api.applied.get(`ns1/c ${DRIVER}`) as { conditions: { reason: string }[] }[];
    expect(applied[0]!.conditions[0]!.reason).toBe('NetworkNotFound');
  });
});

describe('unprepare', () => {
  it('removes the checkpoint; again, and an unknown claim, are success', async () => {
    api.claims.set(
      'ns1/c1',
      claim('c1', UID1, [['net', DRIVER, 'any']], [{ requests: ['net'], parameters: selection('net1') }]),
    );
    const p = make();
    await p.prepare([ref('c1', UID1)]);
    expect(readdirSync(join(dir, 'dra'))).toEqual([`${UID1}.json`]);
    expect(await p.unprepare([ref('c1', UID1), ref('never', UID2)])).toEqual({
      [UID1]: { error: '' },
      [UID2]: { error: '' },
    });
    expect(readdirSync(join(dir, 'dra'))).toEqual([]);
    expect(await p.unprepare([ref('c1', UID1)])).toEqual({ [UID1]: { error: '' } });
  });

  it('answers a claim whose checkpoint cannot be removed with an error of its own', async () => {
    const p = preparer({
      kube: api,
      checkpoints: {
        get: () => undefined,
        put: () => {},
        remove: () => {
          throw new Error('read-only file system');
        },
      },
      driver: DRIVER,
      allowInlineFromClaim: false,
      log: silentLogger,
    });
    expect(await p.unprepare([ref('c1', UID1)])).toEqual({
      [UID1]: { error: 'ResourceClaim ns1/c1: read-only file system' },
    });
  });
});

describe('one call at a time', () => {
  it('runs a second call after the first has finished', async () => {
    const order: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const slow = new FakeDriverApi();
    slow.getResourceClaim = async (_ns, name) => {
      order.push(`start ${name}`);
      if (name === 'first') await gate;
      order.push(`end ${name}`);
      throw new FakeKubeError(404, 'not found');
    };
    const p = preparer({
      kube: slow,
      checkpoints: fileCheckpoints(join(dir, 'dra')),
      driver: DRIVER,
      allowInlineFromClaim: false,
      log: silentLogger,
    });
    const a = p.prepare([ref('first', UID1)]);
    const b = p.prepare([ref('second', UID2)]);
    await new Promise((r) => setTimeout(r, 10));
    release();
    await Promise.all([a, b]);
    expect(order).toEqual(['start first', 'end first', 'start second', 'end second']);
  });
});
