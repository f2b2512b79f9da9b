/**
 * Tests for src/devices.ts: the device-plugin checkpoint parser (NUMA-map and array forms, several containers,
 * other pods, garbage), resource maps and their sort order, the per-resource allocator, deviceID/pciBusID
 * injection, device-info file naming and the copy/read/remove rules in fresh temp dirs, and readResourceMap's
 * checkpoint path (its gRPC path is in podresources.test.ts).
 */
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  CNI_DEVINFO_DIR,
  DEVICE_CHECKPOINT_FILE,
  DeviceAllocator,
  DP_DEVINFO_DIR,
  injectDeviceId,
  injectDeviceIdIntoNetwork,
  parseCheckpoint,
  POD_RESOURCES_MAX_MESSAGE_BYTES,
  POD_RESOURCES_SOCKET,
  POD_RESOURCES_TIMEOUT_MS,
  readResourceMap,
  resourceMapFromCheckpoint,
  resourceMapFromPodResources,
} from '../../../src/devices/devices.ts';
import {
  copyDevicePluginInfo,
  deviceInfoPath,
  devicePluginInfoPath,
  readDeviceInfo,
  removeDeviceInfo,
} from '../../../src/devices/device-info.ts';
import type { DeviceEntry, ResourceMap } from '../../../src/devices/devices.ts';
import { parseNetwork } from '../../../src/cni/network.ts';
import { CniCode } from '../../../src/base/errors.ts';
import type { Logger } from '../../../src/base/log.ts';
import type { ListPodResourcesResponse } from '../../../src/kubelet/podresources.ts';
import { thrown, rejection } from '../../helpers/errors.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mts-devices-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** Parsed entries as uid -> resource -> IDs of all its entries in file order (what the file says, unsorted). */
const asObject = (map: Map<string, DeviceEntry[]>): Record<string, Record<string, string[]>> =>
  Object.fromEntries(
    [...map].map(([uid, entries]) => {
      const byResource: Record<string, string[]> = {};
      for (const e of entries) (byResource[e.resourceName] ??= []).push(...e.ids);
      return [uid, byResource];
    }),
  );
const oneEntry = (uid: string, ids: string[]) =>
  new Map<string, DeviceEntry[]>([[uid, [{ container: 'c', resourceName: 'r', ids }]]]);

/** A checkpoint as kubelet >= 1.20 writes it (DeviceIDs per NUMA node), with the fields Multus ignores. */
const CHECKPOINT = JSON.stringify({
  Data: {
    PodDeviceEntries: [
      {
        PodUID: 'uid-a',
        ContainerName: 'app',
        ResourceName: 'intel.com/sriov',
        DeviceIDs: { '1': ['0000:03:02.3'], '0': ['0000:03:02.2', '0000:03:02.0'] },
        AllocResp: 'CiAKFlBDSURFVklDRV9JTlRFTF9DT00=',
      },
      {
        PodUID: 'uid-b',
        ContainerName: 'app',
        ResourceName: 'intel.com/sriov',
        DeviceIDs: { '0': ['0000:03:02.5'] },
        AllocResp: null,
      },
      {
        PodUID: 'uid-a',
        ContainerName: 'sidecar',
        ResourceName: 'intel.com/sriov',
        DeviceIDs: { '0': ['0000:03:02.1'] },
        AllocResp: '',
      },
      {
        PodUID: 'uid-a',
        ContainerName: 'app',
        ResourceName: 'nvidia.com/gpu',
        DeviceIDs: { '-1': ['GPU-2'], '0': null },
      },
    ],
    RegisteredDevices: { 'intel.com/sriov': ['0000:03:02.0', '0000:03:02.1'] },
  },
  Checksum: 3795451617,
});

describe('parseCheckpoint', () => {
  it('groups by pod UID and resource, containers concatenated in file order, NUMA nodes in numeric order', () => {
    expect(asObject(parseCheckpoint(CHECKPOINT))).toEqual({
      'uid-a': {
        'intel.com/sriov': ['0000:03:02.2', '0000:03:02.0', '0000:03:02.3', '0000:03:02.1'],
        'nvidia.com/gpu': ['GPU-2'],
      },
      'uid-b': { 'intel.com/sriov': ['0000:03:02.5'] },
    });
  });

  it.each([
    [
      'the array form of older kubelets',
      [{ PodUID: 'u', ContainerName: 'c', ResourceName: 'r', DeviceIDs: ['b', 'a'] }],
      { u: { r: ['b', 'a'] } },
    ],
    [
      'null DeviceIDs (a resource with no IDs stays present)',
      [{ PodUID: 'u', ContainerName: 'c', ResourceName: 'r', DeviceIDs: null }],
      { u: { r: [] } },
    ],
    ['absent DeviceIDs and ContainerName', [{ PodUID: 'u', ResourceName: 'r' }], { u: { r: [] } }],
    [
      'both forms for one pod',
      [
        { PodUID: 'u', ResourceName: 'r', DeviceIDs: ['x'] },
        { PodUID: 'u', ResourceName: 'r', DeviceIDs: { '0': ['y'] } },
      ],
      { u: { r: ['x', 'y'] } },
    ],
    [
      'NUMA node 10 after node 2',
      [{ PodUID: 'u', ResourceName: 'r', DeviceIDs: { '10': ['ten'], '2': ['two'] } }],
      { u: { r: ['two', 'ten'] } },
    ],
    // kubelet files devices without NUMA affinity under node -1; a JS object lists that key after the others
    [
      'node -1 (no NUMA affinity) before node 0',
      [{ PodUID: 'u', ResourceName: 'r', DeviceIDs: { '0': ['zero'], '-1': ['none'] } }],
      { u: { r: ['none', 'zero'] } },
    ],
    ['no entries (null)', null, {}],
    ['no entries (empty)', [], {}],
  ])('reads %s', (_what, entries, expected) => {
    expect(
      asObject(
        parseCheckpoint(JSON.stringify({ Data: { PodDeviceEntries: entries, RegisteredDevices: null }, Checksum: 1 })),
      ),
    ).toEqual(expected);
  });

  it('reads a checkpoint without PodDeviceEntries as empty, from a Buffer', () => {
    expect(parseCheckpoint(Buffer.from('{"Data":{},"Checksum":0}')).size).toBe(0);
  });

  const entry = (over: Record<string, unknown>): string =>
    JSON.stringify({
      Data: {
        PodDeviceEntries: [{ PodUID: 'u', ContainerName: 'c', ResourceName: 'r', DeviceIDs: { '0': ['a'] }, ...over }],
      },
    });

  it.each([
    ['not JSON', 'garbage', 'not JSON ('],
    ['truncated', CHECKPOINT.slice(0, CHECKPOINT.length / 2), 'it may be truncated'],
    ['empty', '', 'not JSON ('],
    ['a JSON array', '[]', 'expected a JSON object'],
    ['a JSON string', '"x"', 'expected a JSON object'],
    ['without Data', '{"Checksum":1}', '"Data" must be a JSON object'],
    ['with Data an array', '{"Data":[]}', '"Data" must be a JSON object'],
    ['with PodDeviceEntries an object', '{"Data":{"PodDeviceEntries":{}}}', '"Data.PodDeviceEntries" must be an array'],
    [
      'with an entry that is a string',
      '{"Data":{"PodDeviceEntries":["x"]}}',
      'Data.PodDeviceEntries[0] must be a JSON object',
    ],
    ['with a numeric PodUID', entry({ PodUID: 7 }), 'Data.PodDeviceEntries[0].PodUID must be a string'],
    [
      'without ResourceName',
      entry({ ResourceName: undefined }),
      'Data.PodDeviceEntries[0].ResourceName must be a string',
    ],
    [
      'with a numeric ContainerName',
      entry({ ContainerName: 1 }),
      'Data.PodDeviceEntries[0].ContainerName must be a string',
    ],
    [
      'with DeviceIDs a string',
      entry({ DeviceIDs: 'a' }),
      'DeviceIDs must be an object of NUMA node -> IDs, or an array',
    ],
    ['with a number among array DeviceIDs', entry({ DeviceIDs: ['a', 1] }), 'DeviceIDs must hold strings'],
    [
      'with a non-numeric NUMA key',
      entry({ DeviceIDs: { numa0: ['a'] } }),
      'DeviceIDs key "numa0" is not a NUMA node number',
    ],
    [
      'with a NUMA value that is a string',
      entry({ DeviceIDs: { '0': 'a' } }),
      'DeviceIDs["0"] must be an array of strings',
    ],
  ])('rejects a checkpoint %s, naming the file and the problem', (_what, text, problem) => {
    const err = thrown(() => parseCheckpoint(text, '/tmp/cp'));
    expect(err.code).toBe(CniCode.DecodingFailure);
    expect(err.msg).toMatch(/^\/tmp\/cp is not a valid kubelet device-plugin checkpoint: /);
    expect(err.msg).toContain(problem);
  });

  it('names the kubelet path by default', () => {
    expect(thrown(() => parseCheckpoint('{')).msg).toContain(`${DEVICE_CHECKPOINT_FILE} is not a valid`);
  });
});

describe('resource maps', () => {
  it('resourceMapFromCheckpoint picks the pod by UID, sorts per container, keeps container order (#1539)', () => {
    const parsed = parseCheckpoint(CHECKPOINT);
    expect(Object.fromEntries(resourceMapFromCheckpoint(parsed, 'uid-a'))).toEqual({
      // app's three (two NUMA nodes) sorted, then sidecar's: not one pod-wide sort (v4.3.0's #1481)
      'intel.com/sriov': ['0000:03:02.0', '0000:03:02.2', '0000:03:02.3', '0000:03:02.1'],
      'nvidia.com/gpu': ['GPU-2'],
    });
    expect(parsed.get('uid-a')?.[0]?.ids[0]).toBe('0000:03:02.2');
    expect(resourceMapFromCheckpoint(parsed, 'uid-unknown').size).toBe(0);
  });

  it('orders per container (#1539): a container with two entries of a resource (NUMA nodes) is sorted as one', () => {
    const response: ListPodResourcesResponse = {
      podResources: [
        {
          name: 'p',
          namespace: 'n',
          containers: [
            {
              name: 'first',
              devices: [
                { resourceName: 'sriov', deviceIds: ['0000:03:02.7'] },
                { resourceName: 'gpu', deviceIds: ['g1'] },
                { resourceName: 'sriov', deviceIds: ['0000:03:02.5'] },
              ],
            },
            { name: 'second', devices: [{ resourceName: 'sriov', deviceIds: ['0000:03:02.6', '0000:03:02.1'] }] },
          ],
        },
      ],
    };
    const input = JSON.stringify(response);
    expect(Object.fromEntries(resourceMapFromPodResources(response, 'n', 'p'))).toEqual({
      sriov: ['0000:03:02.5', '0000:03:02.7', '0000:03:02.1', '0000:03:02.6'],
      gpu: ['g1'],
    });
    expect(JSON.stringify(response)).toBe(input); // the kubelet's lists are not reordered in place
  });

  it('resourceMapFromCheckpoint refuses an empty pod UID', () => {
    expect(thrown(() => resourceMapFromCheckpoint(oneEntry('', ['a']), '')).msg).toBe(
      'cannot match the device-plugin checkpoint: the pod UID is empty',
    );
  });

  const list: ListPodResourcesResponse = {
    podResources: [
      {
        name: 'p',
        namespace: 'ns',
        containers: [
          { name: 'a', devices: [{ resourceName: 'r', deviceIds: ['2', '1'] }] },
          {
            name: 'b',
            devices: [
              { resourceName: 'r', deviceIds: ['0'] },
              { resourceName: 's', deviceIds: [] },
            ],
          },
        ],
      },
      {
        name: 'p',
        namespace: 'other',
        containers: [{ name: 'a', devices: [{ resourceName: 'r', deviceIds: ['9'] }] }],
      },
      { name: 'q', namespace: 'ns', containers: [{ name: 'a', devices: [{ resourceName: 'r', deviceIds: ['8'] }] }] },
    ],
  };

  it.each([
    ['ns', 'p', { r: ['1', '2', '0'], s: [] }], // container a's sorted, then b's
    ['other', 'p', { r: ['9'] }],
    ['ns', 'q', { r: ['8'] }],
    ['ns', 'absent', {}],
  ])('resourceMapFromPodResources(%s/%s)', (namespace, name, expected) => {
    expect(Object.fromEntries(resourceMapFromPodResources(list, namespace, name))).toEqual(expected);
  });

  it.each([
    ['', 'p'],
    ['ns', ''],
  ])('resourceMapFromPodResources refuses namespace %j name %j', (namespace, name) => {
    expect(thrown(() => resourceMapFromPodResources(list, namespace, name)).code).toBe(CniCode.InvalidConfig);
  });

  it.each([
    [
      'lexicographic, not numeric',
      ['0000:03:02.2', '0000:03:02.10', '0000:03:02.1'],
      ['0000:03:02.1', '0000:03:02.10', '0000:03:02.2'],
    ],
    ['upper case before lower case (bytes)', ['b', 'a', 'B'], ['B', 'a', 'b']],
    ['duplicates kept', ['x', 'x', 'a'], ['a', 'x', 'x']],
    // UTF-16 order would put the astral U+1F600 (surrogates D83D...) before U+FF61; Go's byte order does not
    ['by UTF-8 bytes as Go sort.Strings', ['\u{1F600}', '\uFF61', 'z'], ['z', '\uFF61', '\u{1F600}']],
  ])('sorts device IDs %s', (_what, ids, expected) => {
    const response: ListPodResourcesResponse = {
      podResources: [
        { name: 'p', namespace: 'n', containers: [{ name: 'c', devices: [{ resourceName: 'r', deviceIds: ids }] }] },
      ],
    };
    expect(resourceMapFromPodResources(response, 'n', 'p').get('r')).toEqual(expected);
    expect(resourceMapFromCheckpoint(oneEntry('u', ids), 'u').get('r')).toEqual(expected);
  });
});

describe('DeviceAllocator', () => {
  const map = (): ResourceMap =>
    new Map([
      ['intel.com/sriov', ['a', 'b']],
      ['nvidia.com/gpu', ['g']],
      ['empty', []],
    ]);

  it.each([
    ['one cursor per resource', ['intel.com/sriov', 'nvidia.com/gpu', 'intel.com/sriov'], ['a', 'g', 'b']],
    [
      'exhausted gives undefined, and stays so',
      ['nvidia.com/gpu', 'nvidia.com/gpu', 'nvidia.com/gpu'],
      ['g', undefined, undefined],
    ],
    ['an absent resource gives undefined', ['mellanox.com/rdma', 'intel.com/sriov'], [undefined, 'a']],
    ['a resource with no IDs gives undefined', ['empty'], [undefined]],
    [
      'a miss does not consume another resource',
      ['empty', 'intel.com/sriov', 'empty', 'intel.com/sriov', 'intel.com/sriov'],
      [undefined, 'a', undefined, 'b', undefined],
    ],
  ])('%s', (_what, requests, expected) => {
    const allocator = new DeviceAllocator(map());
    expect(requests.map((r) => allocator.next(r))).toEqual(expected);
  });

  it('owns a copy: changing the map afterwards changes nothing', () => {
    const resources = map();
    const allocator = new DeviceAllocator(resources);
    resources.get('intel.com/sriov')?.splice(0, 2, 'z');
    resources.set('new', ['n']);
    expect([allocator.next('intel.com/sriov'), allocator.next('new')]).toEqual(['a', undefined]);
  });
});

describe('readResourceMap from the checkpoint (no pod-resources socket)', () => {
  const pod = { namespace: 'ns1', name: 'pod-a', uid: 'uid-a' };
  const deps = () => ({
    podResourcesSocket: join(dir, 'no-kubelet.sock'),
    checkpointFile: join(dir, 'kubelet_internal_checkpoint'),
  });

  it('matches the pod by UID and sorts per container, logging the source at debug', async () => {
    writeFileSync(deps().checkpointFile, CHECKPOINT);
    const debug: string[] = [];
    const log = { debug: (m: string) => debug.push(m) } as unknown as Logger;
    const map = await readResourceMap(pod, { ...deps(), log });
    expect(Object.fromEntries(map)).toEqual({
      'intel.com/sriov': ['0000:03:02.0', '0000:03:02.2', '0000:03:02.3', '0000:03:02.1'],
      'nvidia.com/gpu': ['GPU-2'],
    });
    expect(debug).toEqual([expect.stringContaining(`using the device-plugin checkpoint ${deps().checkpointFile}`)]);
  });

  it.each([
    [
      'a missing checkpoint',
      null,
      pod,
      CniCode.IoFailure,
      /^failed to get resourceMap from the device-plugin checkpoint: cannot read .*kubelet_internal_checkpoint: .*ENOENT/,
    ],
    [
      'a corrupt checkpoint',
      '{"Data":',
      pod,
      CniCode.DecodingFailure,
      /^failed to get resourceMap from the device-plugin checkpoint: .*kubelet_internal_checkpoint is not a valid kubelet device-plugin checkpoint: not JSON/,
    ],
    [
      'a pod without UID',
      CHECKPOINT,
      { ...pod, uid: '' },
      CniCode.InvalidConfig,
      /^failed to get resourceMap from the device-plugin checkpoint: cannot match the device-plugin checkpoint: the pod UID is empty$/,
    ],
  ])('%s is a CniError', async (_what, content, who, code, message) => {
    if (content !== null) writeFileSync(deps().checkpointFile, content);
    const err = await rejection(readResourceMap(who, deps()));
    expect(err.code).toBe(code);
    expect(err.msg).toMatch(message);
  });

  it('uses the kubelet defaults when nothing is injected', () => {
    expect([
      POD_RESOURCES_SOCKET,
      DEVICE_CHECKPOINT_FILE,
      POD_RESOURCES_TIMEOUT_MS,
      POD_RESOURCES_MAX_MESSAGE_BYTES,
    ]).toEqual([
      '/var/lib/kubelet/pod-resources/kubelet.sock',
      '/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint',
      10_000,
      16 * 1024 * 1024,
    ]);
  });
});

describe('injectDeviceId', () => {
  const deepFreeze = <T>(value: T): T => {
    if (value && typeof value === 'object') {
      for (const v of Object.values(value)) deepFreeze(v);
      Object.freeze(value);
    }
    return value;
  };

  it.each([
    [
      'a single config: at the top level',
      { cniVersion: '1.0.0', name: 'sriov-net', type: 'sriov', ipam: { type: 'host-local' } },
      {
        cniVersion: '1.0.0',
        name: 'sriov-net',
        type: 'sriov',
        ipam: { type: 'host-local' },
        deviceID: '0000:03:02.1',
        pciBusID: '0000:03:02.1',
      },
    ],
    [
      'a single config that had a deviceID: replaced',
      { name: 'n', type: 'sriov', deviceID: 'old', pciBusID: 'old' },
      { name: 'n', type: 'sriov', deviceID: '0000:03:02.1', pciBusID: '0000:03:02.1' },
    ],
    [
      'a conflist: in every plugin, not at the list level',
      { cniVersion: '1.0.0', name: 'l', plugins: [{ type: 'sriov' }, { type: 'tuning', sysctl: {} }] },
      {
        cniVersion: '1.0.0',
        name: 'l',
        plugins: [
          { type: 'sriov', deviceID: '0000:03:02.1', pciBusID: '0000:03:02.1' },
          { type: 'tuning', sysctl: {}, deviceID: '0000:03:02.1', pciBusID: '0000:03:02.1' },
        ],
      },
    ],
    [
      "an object with both 'type' and 'plugins': single, as parseNetwork reads it",
      { name: 'n', type: 'sriov', plugins: [{ type: 'x' }] },
      { name: 'n', type: 'sriov', plugins: [{ type: 'x' }], deviceID: '0000:03:02.1', pciBusID: '0000:03:02.1' },
    ],
  ])('%s', (_what, config, expected) => {
    const input = deepFreeze(structuredClone(config));
    const out = injectDeviceId(input, '0000:03:02.1');
    expect(out).toEqual(expected);
    expect(input).toEqual(config);
  });

  it('returns a deep copy: changing the result leaves the input alone', () => {
    const input = { name: 'l', plugins: [{ type: 'sriov', ipam: { type: 'static' } }] };
    const out = injectDeviceId(input, 'd') as { plugins: { ipam: { type: string } }[] };
    out.plugins[0]!.ipam.type = 'changed';
    expect(input.plugins[0]!.ipam.type).toBe('static');
  });

  it.each([
    [
      'neither type nor plugins',
      { name: 'x' },
      "cannot set the device ID: the config has neither a 'type' nor a 'plugins' array",
    ],
    [
      'plugins not an array',
      { name: 'x', plugins: {} },
      "cannot set the device ID: the config has neither a 'type' nor a 'plugins' array",
    ],
    [
      'a plugin that is not an object',
      { name: 'x', plugins: [{ type: 'a' }, 'b'] },
      'cannot set the device ID: plugins[1] is not a JSON object',
    ],
  ])('refuses %s', (_what, config, message) => {
    const err = thrown(() => injectDeviceId(config, 'd'));
    expect(err.code).toBe(CniCode.InvalidConfig);
    expect(err.msg).toBe(message);
  });

  it.each([
    ['a single config', '{"cniVersion":"1.0.0","name":"n","type":"sriov"}', false],
    ['a conflist', '{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"sriov"},{"type":"tuning"}]}', true],
  ])('injectDeviceIdIntoNetwork on %s: new bytes and plugins, the old network untouched', (_what, text, isList) => {
    const network = parseNetwork(Buffer.from(text));
    const out = injectDeviceIdIntoNetwork(network, '0000:03:02.1');
    expect(out.isList).toBe(isList);
    expect(out.name).toBe('n');
    expect(out.plugins.every((p) => p.deviceID === '0000:03:02.1' && p.pciBusID === '0000:03:02.1')).toBe(true);
    expect(JSON.parse(out.bytes.toString())).toEqual(injectDeviceId(JSON.parse(text), '0000:03:02.1'));
    expect(network.bytes.toString()).toBe(text);
  });
});

describe('device-info paths', () => {
  it.each([
    ['test-net1', '123456789', 'net1', `${CNI_DEVINFO_DIR}/test-net1-123456789_net1`],
    ['ns/sriov', 'abc', 'net1', `${CNI_DEVINFO_DIR}/ns-sriov-abc_net1`],
    ['a/b/c', 'x/y', 'if/0', `${CNI_DEVINFO_DIR}/a-b-c-x-y_if-0`],
    ['..', '..', '..', `${CNI_DEVINFO_DIR}/..-.._..`],
  ])('deviceInfoPath(%j, %j, %j)', (name, containerId, ifName, expected) => {
    expect(deviceInfoPath(name, containerId, ifName)).toBe(expected);
  });

  it('deviceInfoPath takes another base directory', () => {
    expect(deviceInfoPath('n', 'c', 'i', '/tmp/x')).toBe('/tmp/x/n-c_i');
  });

  it.each([
    ['intel.com/sriov', '0000:03:02.1', `${DP_DEVINFO_DIR}/intel.com-sriov-0000:03:02.1-device.json`],
    ['a/b/c', 'd/e', `${DP_DEVINFO_DIR}/a-b-c-d-e-device.json`],
  ])('devicePluginInfoPath(%j, %j)', (resource, id, expected) => {
    expect(devicePluginInfoPath(resource, id)).toBe(expected);
  });

  it('the default directories are the ones Multus and device plugins share', () => {
    expect([CNI_DEVINFO_DIR, DP_DEVINFO_DIR]).toEqual([
      '/var/run/k8s.cni.cncf.io/devinfo/cni',
      '/var/run/k8s.cni.cncf.io/devinfo/dp',
    ]);
  });
});

describe('copyDevicePluginInfo', () => {
  const DEVINFO = '{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:03:02.1"}}\n';
  let dpDir: string;
  let target: string;
  beforeEach(() => {
    dpDir = join(dir, 'dp');
    mkdirSync(dpDir);
    target = deviceInfoPath('ns/net', 'cid', 'net1', join(dir, 'cni'));
  });
  const writeSource = (content: string): void =>
    writeFileSync(devicePluginInfoPath('intel.com/sriov', '0000:03:02.1', dpDir), content);
  const copy = (): string | undefined => copyDevicePluginInfo('intel.com/sriov', '0000:03:02.1', target, dpDir);

  it('copies the bytes to a new 0444 file whatever the umask, creating the directory, leaving no temp file', () => {
    writeSource(DEVINFO);
    const umask = process.umask(0o077);
    try {
      expect(copy()).toBeUndefined();
    } finally {
      process.umask(umask);
    }
    expect(readFileSync(target, 'utf8')).toBe(DEVINFO);
    expect(statSync(target).mode & 0o777).toBe(0o444);
    expect(statSync(join(dir, 'cni')).mode & 0o777).toBe(0o700);
    expect(readdirSync(join(dir, 'cni'))).toEqual(['ns-net-cid_net1']);
  });

  it('a missing source is no warning and writes nothing', () => {
    expect(copy()).toBeUndefined();
    expect(() => statSync(target)).toThrow(/ENOENT/);
  });

  it('an existing target is kept, with a warning', () => {
    writeSource(DEVINFO);
    mkdirSync(join(dir, 'cni'));
    writeFileSync(target, 'theirs');
    expect(copy()).toMatch(
      /^cannot copy device-plugin info .*intel.com-sriov-0000:03:02.1-device.json to .*ns-net-cid_net1: it already exists$/,
    );
    expect(readFileSync(target, 'utf8')).toBe('theirs');
    expect(readdirSync(join(dir, 'cni'))).toEqual(['ns-net-cid_net1']);
  });

  it.each([
    ['not JSON', '{"type":', /is not JSON \(.*\): not copied$/],
    ['a JSON array', '[]', /is not a JSON object: not copied$/],
  ])('a source that is %s is a warning and writes nothing', (_what, content, warning) => {
    writeSource(content);
    expect(copy()).toMatch(warning);
    expect(() => statSync(target)).toThrow(/ENOENT/);
  });

  it('an unreadable source (a directory) is a warning', () => {
    mkdirSync(devicePluginInfoPath('intel.com/sriov', '0000:03:02.1', dpDir));
    expect(copy()).toMatch(/^cannot read device-plugin info .*: .*EISDIR/);
  });

  it('a target directory that cannot be made is a warning', () => {
    writeSource(DEVINFO);
    writeFileSync(join(dir, 'cni'), 'a file where the directory should be');
    expect(copy()).toMatch(/^cannot copy device-plugin info .* to .*: .*(EEXIST|ENOTDIR)/);
  });
});

describe('readDeviceInfo and removeDeviceInfo', () => {
  it.each([
    [
      'a JSON object',
      '{"type":"pci","pci":{"pci-address":"0000:03:02.1"}}',
      { kind: 'ok', value: { type: 'pci', pci: { 'pci-address': '0000:03:02.1' } } },
    ],
    ['not JSON', 'nope', { kind: 'corrupt', code: CniCode.DecodingFailure, msg: /device info .*\/f is not JSON: / }],
    [
      'a JSON array',
      '[1]',
      { kind: 'corrupt', code: CniCode.DecodingFailure, msg: /device info .*\/f is not a JSON object$/ },
    ],
  ])('readDeviceInfo of %s', (_what, content, expected) => {
    writeFileSync(join(dir, 'f'), content);
    const outcome = readDeviceInfo(join(dir, 'f'));
    expect(outcome.kind).toBe(expected.kind);
    if (outcome.kind === 'ok') expect(outcome.value).toEqual((expected as { value: unknown }).value);
    if (outcome.kind === 'corrupt') {
      expect(outcome.error.code).toBe((expected as { code: number }).code);
      expect(outcome.error.msg).toMatch((expected as { msg: RegExp }).msg);
    }
  });

  it('readDeviceInfo of a missing file is missing, of a directory corrupt', () => {
    expect(readDeviceInfo(join(dir, 'absent'))).toEqual({ kind: 'missing' });
    const outcome = readDeviceInfo(dir);
    expect(outcome.kind === 'corrupt' && outcome.error.code).toBe(CniCode.IoFailure);
  });

  it('removeDeviceInfo removes the file; missing is fine; a failure is a warning', () => {
    writeFileSync(join(dir, 'f'), '{}');
    chmodSync(join(dir, 'f'), 0o444);
    expect(removeDeviceInfo(join(dir, 'f'))).toBeUndefined();
    expect(readdirSync(dir)).toEqual([]);
    expect(removeDeviceInfo(join(dir, 'f'))).toBeUndefined();
    mkdirSync(join(dir, 'd'));
    expect(removeDeviceInfo(join(dir, 'd'))).toMatch(/^cannot remove device info .*\/d: .*(EISDIR|EPERM)/);
  });
});
