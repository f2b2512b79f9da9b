/**
 * Tests for src/kubelet/podresources.ts (and kubelet/client.ts under it) and the gRPC path of readResourceMap
 * (src/devices/devices.ts): the decoding of bytes protobufjs encodes from the kubelet's api.proto, and the client
 * against a @grpc/grpc-js server on a unix socket in a temp dir (test/devices/podresources-server.ts): answers,
 * gRPC errors, a malformed answer, a server that never answers, a cancelled call, a socket that never speaks
 * HTTP/2, size limits.
 */
import { status } from '@grpc/grpc-js';
import { getEventListeners } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readResourceMap } from '../../../src/devices/devices.ts';
import type { ResourceMapDeps } from '../../../src/devices/devices.ts';
import { CniCode, CniError } from '../../../src/base/errors.ts';
import { decodeListPodResourcesResponse, listPodResources } from '../../../src/kubelet/podresources.ts';
import { encodeListResponse, startPodResourcesServer, startSilentSocket } from '../../devices/podresources-server.ts';
import type { ListPodResourcesResponseMessage, PodResourcesServer } from '../../devices/podresources-server.ts';
import { rejection } from '../../helpers/errors.ts';

let dir: string;
let socketPath: string;
const cleanups: (() => Promise<void>)[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mts-podres-'));
  socketPath = join(dir, 'kubelet.sock');
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  rmSync(dir, { recursive: true, force: true });
});

async function serve(behaviour: PodResourcesServer['behaviour']): Promise<PodResourcesServer> {
  const server = await startPodResourcesServer(socketPath, behaviour);
  cleanups.push(() => server.close());
  return server;
}

const answer = (response: ListPodResourcesResponseMessage): PodResourcesServer['behaviour'] => ({
  kind: 'answer',
  response,
});

/** The checkpoint is never the source in these tests: it is absent, so using it would fail loudly. */
const deps = (extra: ResourceMapDeps = {}): ResourceMapDeps => ({
  podResourcesSocket: socketPath,
  checkpointFile: join(dir, 'no-checkpoint'),
  ...extra,
});

const pod = { namespace: 'ns1', name: 'pod-a', uid: 'uid-a' };
const OPTS = { socketPath: '', dialTimeoutMs: 2000, callTimeoutMs: 60_000, maxMessageBytes: 1 << 20 };

// A node the way a real kubelet lists it: other pods, a same-named pod elsewhere, CPU/memory/topology/DRA fields.
const NODE: ListPodResourcesResponseMessage = {
  pod_resources: [
    {
      name: 'pod-a',
      namespace: 'other',
      containers: [{ name: 'c', devices: [{ resource_name: 'intel.com/sriov', device_ids: ['0000:99:00.0'] }] }],
    },
    {
      name: 'pod-a',
      namespace: 'ns1',
      containers: [
        {
          name: 'app',
          cpu_ids: [2, 3],
          memory: [{ memory_type: 'memory', size: 1 << 30, topology: { nodes: [{ ID: 0 }] } }],
          devices: [
            {
              resource_name: 'intel.com/sriov',
              device_ids: ['0000:03:02.3', '0000:03:02.1'],
              topology: { nodes: [{ ID: 1 }] },
            },
            { resource_name: 'nvidia.com/gpu', device_ids: ['GPU-b'] },
          ],
          dynamic_resources: [
            {
              claim_name: 'c1',
              claim_namespace: 'ns1',
              claim_resources: [{ driver_name: 'd', device_name: 'x', cdi_devices: [{ name: 'v/c=x' }] }],
            },
          ],
        },
        { name: 'sidecar', devices: [{ resource_name: 'intel.com/sriov', device_ids: ['0000:03:02.2'] }] },
        { name: 'empty' },
      ],
    },
    {
      name: 'pod-b',
      namespace: 'ns1',
      containers: [{ name: 'c', devices: [{ resource_name: 'nvidia.com/gpu', device_ids: ['GPU-a'] }] }],
    },
  ],
};

describe('decodeListPodResourcesResponse', () => {
  it('decodes what protobufjs encodes, skipping the fields it does not read', () => {
    const decoded = decodeListPodResourcesResponse(encodeListResponse(NODE));
    expect(decoded.podResources.map((p) => `${p.namespace}/${p.name}`)).toEqual([
      'other/pod-a',
      'ns1/pod-a',
      'ns1/pod-b',
    ]);
    expect(decoded.podResources[1]?.containers).toEqual([
      {
        name: 'app',
        devices: [
          { resourceName: 'intel.com/sriov', deviceIds: ['0000:03:02.3', '0000:03:02.1'] },
          { resourceName: 'nvidia.com/gpu', deviceIds: ['GPU-b'] },
        ],
      },
      { name: 'sidecar', devices: [{ resourceName: 'intel.com/sriov', deviceIds: ['0000:03:02.2'] }] },
      { name: 'empty', devices: [] },
    ]);
  });

  it.each([
    ['an empty message', Buffer.alloc(0), { podResources: [] }],
    [
      'proto3 defaults (empty strings omitted)',
      encodeListResponse({ pod_resources: [{}] }),
      { podResources: [{ name: '', namespace: '', containers: [] }] },
    ],
    [
      'unicode names',
      encodeListResponse({ pod_resources: [{ name: 'pöd-€', namespace: 'n' }] }),
      { podResources: [{ name: 'pöd-€', namespace: 'n', containers: [] }] },
    ],
    // field 7 varint, field 8 fixed64, field 9 fixed32 before the pod: unknown fields of every wire type are skipped
    [
      'unknown fields of each wire type',
      Buffer.concat([
        Buffer.from([0x38, 0x96, 0x01, 0x41, 1, 2, 3, 4, 5, 6, 7, 8, 0x4d, 1, 2, 3, 4]),
        encodeListResponse({ pod_resources: [{ name: 'p' }] }),
      ]),
      { podResources: [{ name: 'p', namespace: '', containers: [] }] },
    ],
  ])('decodes %s', (_what, bytes, expected) => {
    expect(decodeListPodResourcesResponse(bytes)).toEqual(expected);
  });

  it.each([
    ['a truncated varint', Buffer.from([0x0a, 0x80])],
    ['a length past the end', Buffer.from([0x0a, 0x05, 0x0a])],
    ['an unknown field as a group (wire type 3)', Buffer.from([0x2b])],
    ['a known field with the wrong wire type', Buffer.from([0x08, 0x01])],
    ['a nested message cut short', Buffer.from([0x0a, 0x02, 0x1a, 0x05])],
    ['an 11-byte varint', Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01])],
  ])('rejects %s', (_what, bytes) => {
    let error: unknown;
    try {
      decodeListPodResourcesResponse(bytes);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(CniError);
    expect((error as CniError).code).toBe(CniCode.DecodingFailure);
    // the library's own words after our prefix (protobufjs: "index out of range", "invalid wire type", ...)
    expect((error as CniError).msg).toMatch(/^malformed ListPodResourcesResponse from the kubelet: \S/);
  });
});

describe('readResourceMap through a pod-resources gRPC server', () => {
  it('matches by namespace and name, sorts each container, containers in order', async () => {
    const server = await serve(answer(NODE));
    const map = await readResourceMap(pod, deps());
    expect([...map]).toEqual([
      ['intel.com/sriov', ['0000:03:02.1', '0000:03:02.3', '0000:03:02.2']],
      ['nvidia.com/gpu', ['GPU-b']],
    ]);
    expect(server.calls).toHaveLength(1);
    expect(server.calls[0]?.userAgent).toMatch(/^multus-ts/);
  });

  it.each([
    ['a pod the kubelet does not list', { namespace: 'ns1', name: 'pod-z', uid: 'u' }, []],
    [
      'the same name in another namespace',
      { namespace: 'other', name: 'pod-a', uid: 'u' },
      [['intel.com/sriov', ['0000:99:00.0']]],
    ],
    ['another pod of the namespace', { namespace: 'ns1', name: 'pod-b', uid: 'u' }, [['nvidia.com/gpu', ['GPU-a']]]],
  ])('%s', async (_what, who, expected) => {
    await serve(answer(NODE));
    expect([...(await readResourceMap(who, deps()))]).toEqual(expected);
  });

  it('sends the call timeout as the gRPC deadline', async () => {
    const server = await serve(answer({}));
    const before = Date.now();
    await readResourceMap(pod, deps({ callTimeoutMs: 5000 }));
    const deadline = server.calls[0]?.deadline ?? 0;
    expect(deadline - before).toBeGreaterThan(4000);
    expect(deadline - before).toBeLessThan(6500);
  });

  it('an empty pod name or namespace is an error before any call', async () => {
    const server = await serve(answer(NODE));
    const err = await rejection(readResourceMap({ namespace: '', name: 'pod-a', uid: 'u' }, deps()));
    expect(err.msg).toMatch(
      /^failed to get resourceMap from the kubelet pod-resources API at .*: cannot match pod resources: the pod name or namespace is empty$/,
    );
    expect(server.calls).toHaveLength(0);
  });

  it.each([
    [
      status.UNAVAILABLE,
      'kubelet is shutting down',
      CniCode.TryAgainLater,
      'List failed with UNAVAILABLE: kubelet is shutting down',
    ],
    [
      status.RESOURCE_EXHAUSTED,
      'rate limit exceeded',
      CniCode.TryAgainLater,
      'List failed with RESOURCE_EXHAUSTED: rate limit exceeded',
    ],
    [status.PERMISSION_DENIED, 'no: 100% sure', CniCode.IoFailure, 'List failed with PERMISSION_DENIED: no: 100% sure'],
    [status.INTERNAL, '', CniCode.IoFailure, 'List failed with INTERNAL'],
  ])('a gRPC status %i from the server is a CniError', async (code, details, cniCode, message) => {
    await serve({ kind: 'fail', code, details });
    const err = await rejection(readResourceMap(pod, deps()));
    expect(err.code).toBe(cniCode);
    expect(err.msg).toBe(`failed to get resourceMap from the kubelet pod-resources API at ${socketPath}: ${message}`);
  });

  it('a response that is not a ListPodResourcesResponse is a DecodingFailure', async () => {
    await serve({ kind: 'bytes', bytes: Buffer.from([0x0a, 0x05, 0x0a]) });
    const err = await rejection(readResourceMap(pod, deps()));
    expect(err.code).toBe(CniCode.DecodingFailure);
    expect(err.msg).toMatch(/: malformed ListPodResourcesResponse from the kubelet: \S/);
  });

  it('a server that never answers fails within the call timeout', async () => {
    const server = await serve({ kind: 'hang' });
    const started = performance.now();
    const err = await rejection(readResourceMap(pod, deps({ callTimeoutMs: 300 })));
    const took = performance.now() - started;
    expect(err.code).toBe(CniCode.TryAgainLater);
    expect(err.msg).toBe(
      `failed to get resourceMap from the kubelet pod-resources API at ${socketPath}: List timed out after 300 ms`,
    );
    expect(server.calls).toHaveLength(1);
    expect(took).toBeGreaterThanOrEqual(250);
    expect(took).toBeLessThan(3000);
  });

  it('a socket that never speaks HTTP/2 fails within the dial timeout', async () => {
    const silent = await startSilentSocket(socketPath);
    cleanups.push(() => silent.close());
    const started = performance.now();
    const err = await rejection(readResourceMap(pod, deps({ dialTimeoutMs: 300, callTimeoutMs: 60_000 })));
    expect(performance.now() - started).toBeLessThan(3000);
    expect(err.code).toBe(CniCode.TryAgainLater);
    expect(err.msg).toBe(
      `failed to get resourceMap from the kubelet pod-resources API at ${socketPath}: connecting to ${socketPath} timed out after 300 ms`,
    );
    expect(silent.connections()).toBe(1);
  });

  it('a socket path with nobody listening is a connect error, not a checkpoint fallback', async () => {
    writeFileSync(socketPath, ''); // a stale path: exists, but is no socket
    const err = await rejection(readResourceMap(pod, deps()));
    expect(err.code).toBe(CniCode.TryAgainLater);
    expect(err.msg).toMatch(
      /^failed to get resourceMap from the kubelet pod-resources API at .*: cannot connect: .*(ECONNREFUSED|ENOTSOCK)/,
    );
  });

  it("accepts a response over grpc-js's 4 MiB default, within the 16 MiB limit", async () => {
    const ids = Array.from({ length: 260_000 }, (_, i) => `0000:${String(i).padStart(8, '0')}.0`); // 17 bytes each encoded: ~4.2 MiB
    const big = {
      pod_resources: [
        {
          name: 'pod-a',
          namespace: 'ns1',
          containers: [{ name: 'c', devices: [{ resource_name: 'r', device_ids: ids }] }],
        },
      ],
    };
    expect(encodeListResponse(big).length).toBeGreaterThan(4 * 1024 * 1024);
    await serve(answer(big));
    const map = await readResourceMap(pod, deps());
    expect(map.get('r')).toHaveLength(260_000);
    expect(map.get('r')?.[0]).toBe('0000:00000000.0');
  });

  it.each([
    ['one byte over the limit', 99, CniCode.IoFailure],
    ['exactly the limit', 100, undefined],
  ])('a response %s', async (_what, limit, code) => {
    const response = {
      pod_resources: [
        {
          name: 'pod-a',
          namespace: 'ns1',
          containers: [{ name: 'c', devices: [{ resource_name: 'r', device_ids: ['x'.repeat(74)] }] }],
        },
      ],
    };
    expect(encodeListResponse(response).length).toBe(100);
    await serve(answer(response));
    const result = readResourceMap(pod, deps({ maxMessageBytes: limit }));
    if (code === undefined) {
      expect((await result).get('r')).toEqual(['x'.repeat(74)]);
    } else {
      const err = await rejection(result);
      expect(err.code).toBe(code);
      expect(err.msg).toMatch(/the response is larger than the 99-byte limit$/);
    }
  });

  it('a closed connection: each call dials afresh and leaves nothing open', async () => {
    const server = await serve(answer(NODE));
    for (let i = 0; i < 3; i++) expect((await readResourceMap(pod, deps())).size).toBe(2);
    expect(server.calls).toHaveLength(3);
  });
});

describe('listPodResources', () => {
  it('a dial cancelled before the socket speaks HTTP/2 ends at once with TryAgainLater', async () => {
    const silent = await startSilentSocket(socketPath);
    cleanups.push(() => silent.close());
    const controller = new AbortController();
    const call = listPodResources({ ...OPTS, socketPath, dialTimeoutMs: 60_000, signal: controller.signal });
    await expect.poll(() => silent.connections()).toBe(1);
    controller.abort();
    const err = await rejection(call);
    expect(err.code).toBe(CniCode.TryAgainLater);
    expect(err.msg).toBe('connecting was cancelled');
  });

  it('a long-lived signal keeps no listener of a finished call (the daemon passes its shutdown signal)', async () => {
    await serve(answer(NODE));
    const controller = new AbortController();
    for (let i = 0; i < 3; i++) await listPodResources({ ...OPTS, socketPath, signal: controller.signal });
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  it('a signal aborted already: no call is made', async () => {
    const server = await serve(answer(NODE));
    const err = await rejection(listPodResources({ ...OPTS, socketPath, signal: AbortSignal.abort() }));
    expect(err.msg).toBe('connecting was cancelled');
    expect(server.calls).toHaveLength(0);
  });

  it('a cancelled call ends at once with TryAgainLater', async () => {
    const server = await serve({ kind: 'hang' });
    const controller = new AbortController();
    const call = listPodResources({ ...OPTS, socketPath, signal: controller.signal });
    await expect.poll(() => server.calls.length).toBe(1);
    controller.abort();
    const err = await rejection(call);
    expect(err.code).toBe(CniCode.TryAgainLater);
    expect(err.msg).toBe('List was cancelled');
  });

  it('returns the decoded response as the server sent it', async () => {
    await serve(answer(NODE));
    const response = await listPodResources({
      socketPath,
      dialTimeoutMs: 2000,
      callTimeoutMs: 2000,
      maxMessageBytes: 1 << 20,
    });
    expect(response).toEqual(decodeListPodResourcesResponse(encodeListResponse(NODE)));
  });

  it('a missing socket is a connect error', async () => {
    const err = await rejection(
      listPodResources({ socketPath, dialTimeoutMs: 2000, callTimeoutMs: 2000, maxMessageBytes: 1 << 20 }),
    );
    expect(err.code).toBe(CniCode.TryAgainLater);
    expect(err.msg).toMatch(/^cannot connect: .*ENOENT/);
  });
});
