/**
 * cni/result-cache.ts: libcni's result cache codec against literal Go-written bytes, and the file wrappers
 * (modes, atomic writes, missing vs corrupt, listing) in fresh temp directories.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  decodeResultCache,
  encodeResultCache,
  listResultCaches,
  readResultCache,
  removeResultCache,
  resultCachePath,
  writeResultCache,
} from '../../../src/cni/result-cache.ts';
import type { ReadOutcome } from '../../../src/base/files.ts';
import type { ResultCacheEntry } from '../../../src/cni/result-cache.ts';
import type { CniError } from '../../../src/base/errors.ts';
import { thrown } from '../../helpers/errors.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'multus-ts-cache-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

const modeOf = (path: string): number => statSync(path).mode & 0o777;

function corruptError<T>(outcome: ReadOutcome<T>): CniError {
  if (outcome.kind !== 'corrupt') throw new Error(`expected a corrupt outcome, got ${outcome.kind}`);
  return outcome.error;
}

// ---------------------------------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------------------------------
// libcni result cache

const MACVLAN_LIST = '{"cniVersion":"1.0.0","name":"macvlan-conf","plugins":[{"type":"macvlan","master":"eth0"}]}';
const MACVLAN_LIST_B64 =
  'eyJjbmlWZXJzaW9uIjoiMS4wLjAiLCJuYW1lIjoibWFjdmxhbi1jb25mIiwicGx1Z2lucyI6W3sidHlwZSI6Im1hY3ZsYW4iLCJtYXN0ZXIiOiJldGgwIn1dfQ==';

function macvlanEntry(): ResultCacheEntry {
  return {
    kind: 'cniCacheV1',
    containerId: '3f2a9c0d',
    config: Buffer.from(MACVLAN_LIST),
    ifName: 'net1',
    networkName: 'macvlan-conf',
    netns: '/var/run/netns/cni-1234',
    cniArgs: [
      ['IgnoreUnknown', 'true'],
      ['K8S_POD_NAMESPACE', 'default'],
      ['K8S_POD_NAME', 'web-0'],
    ],
    capabilityArgs: { mac: 'c2:b0:57:49:47:f1', ips: ['10.1.1.5/24'] },
    result: {
      ips: [{ interface: 0, address: '10.1.1.5/24' }],
      interfaces: [{ sandbox: '/var/run/netns/cni-1234', name: 'net1', mac: 'c2:b0:57:49:47:f1' }],
      cniVersion: '1.0.0',
    },
  };
}

// What libcni cacheAdd writes for macvlanEntry(): struct order at the top, sorted keys inside Go maps.
const MACVLAN_CACHE_FILE =
  `{"kind":"cniCacheV1","containerId":"3f2a9c0d","config":"${MACVLAN_LIST_B64}","ifName":"net1","networkName":"macvlan-conf",` +
  '"netns":"/var/run/netns/cni-1234","cniArgs":[["IgnoreUnknown","true"],["K8S_POD_NAMESPACE","default"],["K8S_POD_NAME","web-0"]],' +
  '"capabilityArgs":{"ips":["10.1.1.5/24"],"mac":"c2:b0:57:49:47:f1"},' +
  '"result":{"cniVersion":"1.0.0","interfaces":[{"mac":"c2:b0:57:49:47:f1","name":"net1","sandbox":"/var/run/netns/cni-1234"}],' +
  '"ips":[{"address":"10.1.1.5/24","interface":0}]}}';

describe('resultCachePath', () => {
  it('is <cniDir>/results/<net>-<id>-<if>', () => {
    expect(resultCachePath('/var/lib/cni/multus', 'macvlan-conf', '3f2a', 'net1')).toBe(
      '/var/lib/cni/multus/results/macvlan-conf-3f2a-net1',
    );
  });

  it.each([
    ['..', 'c', 'eth0', 'network name ".."'],
    ['n', 'a/b', 'eth0', 'container ID "a/b"'],
    ['n', 'c', '', 'interface name ""'],
  ])('rejects unsafe components (%j, %j, %j)', (net, id, ifName, message) => {
    const err = thrown(() => resultCachePath('/x', net, id, ifName));
    expect(err.code).toBe(4);
    expect(err.msg).toContain(message);
  });
});

describe('encodeResultCache / decodeResultCache', () => {
  it('writes exactly what libcni writes: key order, base64 config, sorted map keys', () => {
    expect(encodeResultCache(macvlanEntry())).toBe(MACVLAN_CACHE_FILE);
  });

  it('omits empty netns, cniArgs, capabilityArgs and result (omitempty), keeps an empty config as ""', () => {
    const entry: ResultCacheEntry = {
      kind: 'cniCacheV1',
      containerId: 'c1',
      config: Buffer.alloc(0),
      ifName: 'eth0',
      networkName: 'n',
      netns: '',
      cniArgs: [],
      capabilityArgs: {},
      result: {},
    };
    expect(encodeResultCache(entry)).toBe(
      '{"kind":"cniCacheV1","containerId":"c1","config":"","ifName":"eth0","networkName":"n"}',
    );
  });

  it('escapes <, > and & as Go does', () => {
    const entry = { ...macvlanEntry(), netns: '', cniArgs: [], capabilityArgs: {}, result: { note: 'a<b>&c' } };
    expect(encodeResultCache(entry)).toContain('"result":{"note":"a\\u003cb\\u003e\\u0026c"}');
  });

  it('decodes a libcni file and round-trips', () => {
    const decoded = decodeResultCache(Buffer.from(MACVLAN_CACHE_FILE));
    expect(decoded).toEqual(macvlanEntry());
    expect(decoded.config.toString()).toBe(MACVLAN_LIST);
    expect(encodeResultCache(decoded)).toBe(MACVLAN_CACHE_FILE);
  });

  it('reads a file Multus rewrote (sorted top-level keys, null-free) the same way', () => {
    const rewritten = JSON.stringify(
      Object.fromEntries(Object.entries(JSON.parse(MACVLAN_CACHE_FILE) as object).sort()),
    );
    expect(decodeResultCache(rewritten)).toEqual(macvlanEntry());
  });

  it('treats absent and null optional fields as empty', () => {
    const decoded = decodeResultCache(
      '{"kind":"cniCacheV1","containerId":"c","config":null,"ifName":"eth0","networkName":"n","netns":null}',
    );
    expect(decoded).toEqual({
      kind: 'cniCacheV1',
      containerId: 'c',
      config: Buffer.alloc(0),
      ifName: 'eth0',
      networkName: 'n',
      netns: '',
      cniArgs: [],
      capabilityArgs: {},
      result: {},
    });
  });

  it.each([
    ['a 0.2.0 raw result', '{"cniVersion":"0.2.0","ip4":{"ip":"10.0.0.2/24","gateway":"10.0.0.1"}}'],
    ['a raw result without cniVersion', '{"ip4":{"ip":"10.0.0.2/24"}}'],
    ['an unknown kind', '{"kind":"cniCacheV2","containerId":"c","ifName":"eth0"}'],
  ])('reads a legacy file (%s) as a result only', (_name, text) => {
    expect(decodeResultCache(text)).toEqual({
      kind: 'cniCacheV1',
      containerId: '',
      config: Buffer.alloc(0),
      ifName: '',
      networkName: '',
      netns: '',
      cniArgs: [],
      capabilityArgs: {},
      result: JSON.parse(text) as Record<string, unknown>,
    });
  });

  it.each([
    ['not JSON', 'garbage', 'libcni result cache is not valid JSON: '],
    ['truncated', MACVLAN_CACHE_FILE.slice(0, 80), 'libcni result cache is not valid JSON: '],
    ['empty', '', 'libcni result cache is not valid JSON: '],
    ['an array', '[]', 'libcni result cache: expected a JSON object'],
    ['null', 'null', 'libcni result cache: expected a JSON object'],
    ['a number containerId', '{"kind":"cniCacheV1","containerId":5}', '"containerId" must be a string'],
    ['bad base64 config', '{"kind":"cniCacheV1","config":"not base64!"}', '"config" must be a base64 string'],
    ['unpadded base64 config', '{"kind":"cniCacheV1","config":"YWJj="}', '"config" must be a base64 string'],
    [
      'a short cniArgs pair',
      '{"kind":"cniCacheV1","cniArgs":[["K8S_POD_NAME"]]}',
      '"cniArgs" must be an array of [key, value] string pairs',
    ],
    ['an array result', '{"kind":"cniCacheV1","result":[]}', '"result" must be a JSON object'],
  ])('rejects %s with code 6', (_name, text, message) => {
    const err = thrown(() => decodeResultCache(text));
    expect(err.code).toBe(6);
    expect(err.msg).toContain(message);
  });
});

describe('result cache files', () => {
  it('writes 0600 under a 0700 results dir and reads it back', () => {
    const cniDir = join(dir, 'multus');
    writeResultCache(cniDir, macvlanEntry());
    const path = join(cniDir, 'results', 'macvlan-conf-3f2a9c0d-net1');
    expect(readFileSync(path, 'utf8')).toBe(MACVLAN_CACHE_FILE);
    expect(modeOf(path)).toBe(0o600);
    expect(modeOf(join(cniDir, 'results'))).toBe(0o700);
    expect(modeOf(cniDir)).toBe(0o700);
    expect(readdirSync(join(cniDir, 'results'))).toEqual(['macvlan-conf-3f2a9c0d-net1']);
    expect(readResultCache(cniDir, 'macvlan-conf', '3f2a9c0d', 'net1')).toEqual({ kind: 'ok', value: macvlanEntry() });
  });

  it('reports a missing file (and a missing cniDir) as missing', () => {
    expect(readResultCache(dir, 'n', 'c', 'eth0')).toEqual({ kind: 'missing' });
    expect(readResultCache(join(dir, 'nope'), 'n', 'c', 'eth0')).toEqual({ kind: 'missing' });
  });

  it.each([
    ['truncated', MACVLAN_CACHE_FILE.slice(0, MACVLAN_CACHE_FILE.length / 2)],
    ['empty', ''],
  ])('reports a %s file as corrupt (code 6, naming the path), not missing', (_name, content) => {
    const path = join(dir, 'results', 'n-c-eth0');
    mkdirSync(join(dir, 'results'));
    writeFileSync(path, content);
    const err = corruptError(readResultCache(dir, 'n', 'c', 'eth0'));
    expect(err.code).toBe(6);
    expect(err.msg).toMatch(
      new RegExp(
        `^corrupt libcni result cache ${path}: libcni result cache is not valid JSON: .* \\(remove the file if its container is gone\\)$`,
      ),
    );
  });

  it('reports an unreadable path (a directory) as corrupt with code 5', () => {
    mkdirSync(join(dir, 'results', 'n-c-eth0'), { recursive: true });
    const err = corruptError(readResultCache(dir, 'n', 'c', 'eth0'));
    expect(err.code).toBe(5);
    expect(err.msg).toContain(`cannot read libcni result cache ${join(dir, 'results', 'n-c-eth0')}: `);
  });

  it('removes a file, and removing a missing one is fine', () => {
    writeResultCache(dir, macvlanEntry());
    removeResultCache(dir, 'macvlan-conf', '3f2a9c0d', 'net1');
    expect(readdirSync(join(dir, 'results'))).toEqual([]);
    expect(() => removeResultCache(dir, 'macvlan-conf', '3f2a9c0d', 'net1')).not.toThrow();
    expect(thrown(() => removeResultCache(dir, 'macvlan-conf', '..', 'net1')).code).toBe(4);
  });
});

describe('listResultCaches', () => {
  function entry(networkName: string, containerId: string, ifName: string): ResultCacheEntry {
    return { ...macvlanEntry(), networkName, containerId, ifName };
  }

  it('is empty when results/ does not exist', () => {
    expect(listResultCaches(dir)).toEqual([]);
    expect(listResultCaches(dir, { containerId: 'abc' })).toEqual([]);
  });

  it('lists every file sorted, skipping temp files and directories; filters on the containerId field', () => {
    const results = join(dir, 'results');
    writeResultCache(dir, entry('net-b', 'abc', 'net1'));
    writeResultCache(dir, entry('cluster', 'abc', 'eth0'));
    writeResultCache(dir, entry('foo-abc', 'x', 'eth0')); // file name contains "-abc-" but belongs to x
    writeFileSync(join(results, 'legacy-abc-net2'), '{"cniVersion":"0.2.0","ip4":{"ip":"10.0.0.2/24"}}');
    writeFileSync(join(results, 'broken-abc-net3'), '{"kind":"cniCacheV1","contai');
    writeFileSync(join(results, 'broken-x-net3'), '{');
    writeFileSync(join(results, '.cluster-abc-eth0.tmp-1-2-3-4'), '{');
    mkdirSync(join(results, 'subdir'));

    const all = listResultCaches(dir);
    expect(all.map((e) => [e.path.slice(results.length + 1), e.outcome.kind])).toEqual([
      ['broken-abc-net3', 'corrupt'],
      ['broken-x-net3', 'corrupt'],
      ['cluster-abc-eth0', 'ok'],
      ['foo-abc-x-eth0', 'ok'],
      ['legacy-abc-net2', 'ok'],
      ['net-b-abc-net1', 'ok'],
    ]);

    const mine = listResultCaches(dir, { containerId: 'abc' });
    expect(mine.map((e) => [e.path.slice(results.length + 1), e.outcome.kind])).toEqual([
      ['broken-abc-net3', 'corrupt'],
      ['cluster-abc-eth0', 'ok'],
      ['net-b-abc-net1', 'ok'],
    ]);
    const first = mine[1]?.outcome;
    expect(first).toEqual({ kind: 'ok', value: entry('cluster', 'abc', 'eth0') });
  });

  it('with a containerId, takes only the files whose name carries it, as libcni names them', () => {
    const results = join(dir, 'results');
    writeResultCache(dir, entry('cluster', 'abc', 'eth0'));
    // abc's content under a name libcni would never give it: not this container's (the name is checked first)
    writeFileSync(join(results, 'renamed'), readFileSync(join(results, 'cluster-abc-eth0')));
    writeResultCache(dir, entry('cluster', 'other', 'eth0'));
    const mine = listResultCaches(dir, { containerId: 'abc' });
    expect(mine.map((e) => e.path.slice(results.length + 1))).toEqual(['cluster-abc-eth0']);
    expect(listResultCaches(dir).map((e) => e.path.slice(results.length + 1))).toContain('renamed');
  });
});
