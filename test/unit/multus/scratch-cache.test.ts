/**
 * multus/scratch-cache.ts: Multus' scratch cache codec against literal Go-written bytes, and the file wrappers
 * (modes, atomic writes, missing vs corrupt) in fresh temp directories.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  decodeScratchCache,
  encodeScratchCache,
  readScratchCache,
  removeScratchCache,
  scratchCachePath,
  writeScratchCache,
} from '../../../src/multus/scratch-cache.ts';
import type { CachedDelegate } from '../../../src/multus/scratch-cache.ts';
import type { AttachmentRequest } from '../../../src/multus/fields.ts';
import type { ReadOutcome } from '../../../src/base/files.ts';
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
// Multus scratch cache

const MACVLAN_CONF =
  '{"cniVersion":"0.3.1","name":"macvlan-conf","type":"macvlan","master":"eth0","mode":"bridge",' +
  '"ipam":{"type":"host-local","subnet":"10.1.1.0/24"},"capabilities":{"mac":true,"ips":true}}';
const MACVLAN_CONF_B64 =
  'eyJjbmlWZXJzaW9uIjoiMC4zLjEiLCJuYW1lIjoibWFjdmxhbi1jb25mIiwidHlwZSI6Im1hY3ZsYW4iLCJtYXN0ZXIiOiJldGgwIiwibW9kZSI6ImJyaWRnZSIsImlwYW0iOnsidHlwZSI6Imhvc3QtbG9jYWwiLCJzdWJuZXQiOiIxMC4xLjEuMC8yNCJ9LCJjYXBhYmlsaXRpZXMiOnsibWFjIjp0cnVlLCJpcHMiOnRydWV9fQ==';
const CALICO_LIST =
  '{"name":"k8s-pod-network","cniVersion":"0.3.1","plugins":[{"type":"calico","datastore_type":"kubernetes",' +
  '"ipam":{"type":"calico-ipam"},"kubernetes":{"kubeconfig":"/etc/cni/net.d/calico-kubeconfig"}},' +
  '{"type":"portmap","snat":true,"capabilities":{"portMappings":true}}]}';
const CALICO_LIST_B64 =
  'eyJuYW1lIjoiazhzLXBvZC1uZXR3b3JrIiwiY25pVmVyc2lvbiI6IjAuMy4xIiwicGx1Z2lucyI6W3sidHlwZSI6ImNhbGljbyIsImRhdGFzdG9yZV90eXBlIjoia3ViZXJuZXRlcyIsImlwYW0iOnsidHlwZSI6ImNhbGljby1pcGFtIn0sImt1YmVybmV0ZXMiOnsia3ViZWNvbmZpZyI6Ii9ldGMvY25pL25ldC5kL2NhbGljby1rdWJlY29uZmlnIn19LHsidHlwZSI6InBvcnRtYXAiLCJzbmF0Ijp0cnVlLCJjYXBhYmlsaXRpZXMiOnsicG9ydE1hcHBpbmdzIjp0cnVlfX1dfQ==';

/** The scratch cache's fields as Go Multus names them, turned into a CachedDelegate (its request by field). */
interface FlatDelegate {
  bytes: Buffer;
  name: string;
  isList: boolean;
  isFilterV4Gateway: boolean;
  isFilterV6Gateway: boolean;
  ifnameRequest: string;
  macRequest: string;
  ipRequest: string[];
  infinibandGUIDRequest: string;
  defaultRoute: string[] | undefined;
  deviceID: string;
  resourceName: string;
  portMappingsRequest: unknown[];
  bandwidthRequest: Record<string, unknown>;
  cniArgsRequest: Record<string, unknown>;
}

function delegate(overrides: Partial<FlatDelegate>): CachedDelegate {
  const f: Partial<FlatDelegate> = {
    bytes: Buffer.from(CALICO_LIST),
    name: 'k8s-pod-network',
    isList: true,
    isFilterV4Gateway: false,
    isFilterV6Gateway: false,
    ...overrides,
  };
  const request: AttachmentRequest = {};
  if (f.ifnameRequest) request.ifname = f.ifnameRequest;
  if (f.macRequest) request.mac = f.macRequest;
  if (f.ipRequest?.length) request.ips = f.ipRequest;
  if (f.infinibandGUIDRequest) request.infinibandGUID = f.infinibandGUIDRequest;
  if (f.defaultRoute) request.defaultRoute = f.defaultRoute;
  if (f.deviceID) request.deviceID = f.deviceID;
  if (f.resourceName) request.resourceName = f.resourceName;
  if (f.portMappingsRequest) request.portMappings = f.portMappingsRequest;
  if (f.bandwidthRequest) request.bandwidth = f.bandwidthRequest;
  if (f.cniArgsRequest) request.configArgs = f.cniArgsRequest;
  return {
    bytes: f.bytes!,
    name: f.name!,
    isList: f.isList!,
    request,
    isFilterV4Gateway: f.isFilterV4Gateway!,
    isFilterV6Gateway: f.isFilterV6Gateway!,
  };
}

const CLUSTER = delegate({});
const MACVLAN = delegate({
  bytes: Buffer.from(MACVLAN_CONF),
  name: 'default/macvlan-conf',
  isList: false,
  ifnameRequest: 'eth1',
  macRequest: 'c2:b0:57:49:47:f1',
  ipRequest: ['10.1.1.5/24'],
  defaultRoute: ['10.1.1.1'],
});

// json.Marshal([]*DelegateNetConf) from Go Multus HEAD (cni v1.3 PluginConf.MarshalJSON for Conf and plugins).
const CLUSTER_JSON =
  '{"Conf":{"cniVersion":"0.3.1","ipam":{},"name":"k8s-pod-network"},' +
  '"ConfList":{"cniVersion":"0.3.1","name":"k8s-pod-network","plugins":[{"ipam":{"type":"calico-ipam"},"type":"calico"},' +
  '{"capabilities":{"portMappings":true},"ipam":{},"type":"portmap"}]},' +
  `"Name":"k8s-pod-network","IsFilterV4Gateway":false,"IsFilterV6Gateway":false,"Bytes":"${CALICO_LIST_B64}"}`;
const MACVLAN_JSON =
  '{"Conf":{"capabilities":{"ips":true,"mac":true},"cniVersion":"0.3.1","ipam":{"type":"host-local"},"name":"macvlan-conf","type":"macvlan"},' +
  '"ConfList":{},"Name":"default/macvlan-conf","ifnameRequest":"eth1","macRequest":"c2:b0:57:49:47:f1",' +
  '"ipRequest":["10.1.1.5/24"],"default-route":["10.1.1.1"],"IsFilterV4Gateway":false,"IsFilterV6Gateway":false,' +
  `"Bytes":"${MACVLAN_CONF_B64}"}`;

describe('scratchCachePath', () => {
  it('is <cniDir>/<containerId> and refuses unsafe IDs', () => {
    expect(scratchCachePath('/var/lib/cni/multus', '3f2a')).toBe('/var/lib/cni/multus/3f2a');
    expect(thrown(() => scratchCachePath('/var/lib/cni/multus', '../x')).code).toBe(4);
  });
});

describe('encodeScratchCache', () => {
  it('writes exactly what Go Multus writes', () => {
    expect(encodeScratchCache([CLUSTER, MACVLAN])).toBe(`[${CLUSTER_JSON},${MACVLAN_JSON}]`);
  });

  it('writes an empty list as []', () => {
    expect(encodeScratchCache([])).toBe('[]');
  });

  it('keeps an empty default-route (non-nil pointer), deviceID and resourceName, and appends our extensions', () => {
    const d = delegate({
      bytes: Buffer.from(
        '{"cniVersion":"1.0.0","name":"sriov","type":"sriov","dns":{"nameservers":["10.0.0.10"],"domain":"x"}}',
      ),
      name: 'ns/sriov',
      isList: false,
      defaultRoute: [],
      isFilterV4Gateway: true,
      deviceID: '0000:03:00.1',
      resourceName: 'intel.com/sriov',
      infinibandGUIDRequest: 'c2:b0:57:49:47:f1:00:01',
      portMappingsRequest: [{ hostPort: 8080, containerPort: 80, protocol: 'tcp' }],
      bandwidthRequest: { ingressRate: 1000, ingressBurst: 10, egressRate: 1000, egressBurst: 10 },
      cniArgsRequest: { foo: 'bar' },
    });
    const text = encodeScratchCache([d]);
    const b64 = d.bytes.toString('base64');
    expect(text).toBe(
      '[{"Conf":{"cniVersion":"1.0.0","dns":{"domain":"x","nameservers":["10.0.0.10"]},"ipam":{},"name":"sriov","type":"sriov"},' +
        '"ConfList":{},"Name":"ns/sriov","infinibandGUIDRequest":"c2:b0:57:49:47:f1:00:01","default-route":[],' +
        '"IsFilterV4Gateway":true,"IsFilterV6Gateway":false,"deviceID":"0000:03:00.1","resourceName":"intel.com/sriov",' +
        `"Bytes":"${b64}","portMappingsRequest":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}],` +
        '"bandwidthRequest":{"ingressRate":1000,"ingressBurst":10,"egressRate":1000,"egressBurst":10},"cniArgsRequest":{"foo":"bar"}}]',
    );
    expect(decodeScratchCache(text)).toEqual([d]);
  });

  it('refuses config bytes that are not a JSON object', () => {
    const err = thrown(() => encodeScratchCache([delegate({ bytes: Buffer.from('[1]') })]));
    expect(err.code).toBe(6);
    expect(err.msg).toBe('delegate 0 config bytes: expected a JSON object');
  });
});

describe('decodeScratchCache', () => {
  it('round-trips', () => {
    expect(decodeScratchCache(encodeScratchCache([CLUSTER, MACVLAN]))).toEqual([CLUSTER, MACVLAN]);
  });

  it('reads a file written by Go Multus (cluster conflist with disableCheck, annotation network)', () => {
    // As found in /var/lib/cni/multus/<id> after an ADD by multus v4.2 thin.
    const list =
      '{"cniVersion":"1.0.0","name":"cbr0","disableCheck":true,"plugins":[{"type":"flannel","delegate":{"hairpinMode":true,"isDefaultGateway":true}},{"type":"portmap","capabilities":{"portMappings":true}}]}';
    const single =
      '{"cniVersion":"0.3.1","name":"ipvlan-def","type":"ipvlan","master":"eth1","ipam":{"type":"whereabouts","range":"192.168.2.0/24"}}';
    const file =
      `[{"Conf":{"cniVersion":"1.0.0","ipam":{},"name":"cbr0"},"ConfList":{"cniVersion":"1.0.0","name":"cbr0","disableCheck":true,` +
      `"plugins":[{"ipam":{},"type":"flannel"},{"capabilities":{"portMappings":true},"ipam":{},"type":"portmap"}]},` +
      `"Name":"cbr0","IsFilterV4Gateway":true,"IsFilterV6Gateway":false,"Bytes":"${Buffer.from(list).toString('base64')}"},` +
      `{"Conf":{"cniVersion":"0.3.1","ipam":{"type":"whereabouts"},"name":"ipvlan-def","type":"ipvlan"},"ConfList":{},` +
      `"Name":"kube-system/ipvlan-def","ifnameRequest":"ipvl0","ipRequest":["192.168.2.10/24"],"default-route":["192.168.2.1"],` +
      `"IsFilterV4Gateway":false,"IsFilterV6Gateway":false,"deviceID":"0000:00:05.0","resourceName":"example.com/ipvlan",` +
      `"Bytes":"${Buffer.from(single).toString('base64')}"}]`;
    expect(decodeScratchCache(Buffer.from(file))).toEqual([
      delegate({ bytes: Buffer.from(list), name: 'cbr0', isList: true, isFilterV4Gateway: true }),
      delegate({
        bytes: Buffer.from(single),
        name: 'kube-system/ipvlan-def',
        isList: false,
        ifnameRequest: 'ipvl0',
        ipRequest: ['192.168.2.10/24'],
        defaultRoute: ['192.168.2.1'],
        deviceID: '0000:00:05.0',
        resourceName: 'example.com/ipvlan',
      }),
    ]);
  });

  it('rebuilds bytes from Conf or ConfList when Bytes is missing or empty', () => {
    const file =
      '[{"Conf":{"cniVersion":"0.3.1","name":"a","type":"bridge","ipam":{}},"ConfList":{},"Name":"a","IsFilterV4Gateway":false,"IsFilterV6Gateway":false},' +
      '{"Conf":{},"ConfList":{"cniVersion":"0.3.1","name":"l","plugins":[{"type":"ptp"}]},"Name":"l","IsFilterV4Gateway":false,"IsFilterV6Gateway":false,"Bytes":""}]';
    const [a, l] = decodeScratchCache(file);
    expect(a?.isList).toBe(false);
    expect(a?.bytes.toString()).toBe('{"cniVersion":"0.3.1","name":"a","type":"bridge","ipam":{}}');
    expect(l?.isList).toBe(true);
    expect(l?.bytes.toString()).toBe('{"cniVersion":"0.3.1","name":"l","plugins":[{"type":"ptp"}]}');
  });

  it('restores lossless conflist bytes from a pre-#1521 CNINetworkConfigList, keeping injected deviceID and args.cni', () => {
    const listBytes = '{"cniVersion":"0.4.0","name":"sriov-net","plugins":[]}';
    const plugin0 = '{"type":"sriov","kubernetes":{"kubeconfig":"/etc/kube.conf"},"args":{"cni":{"keep":"me"}}}';
    const plugin1 = '{"type":"tuning","sysctl":{"net.ipv4.conf.all.rp_filter":"0"}}';
    const lossy =
      '{"cniVersion":"0.4.0","name":"sriov-net","plugins":[{"type":"sriov","deviceID":"0000:03:00.2","args":{"cni":{"extra":"x"}}},{"type":"tuning"}]}';
    const b64 = (s: string): string => Buffer.from(s).toString('base64');
    const file =
      `[{"Conf":{"ipam":{}},"ConfList":{"cniVersion":"0.4.0","name":"sriov-net","plugins":[{"ipam":{},"type":"sriov"},{"ipam":{},"type":"tuning"}]},` +
      `"CNINetworkConfigList":{"Name":"sriov-net","CNIVersion":"0.4.0","DisableCheck":false,"DisableGC":false,"LoadOnlyInlinedPlugins":false,` +
      `"Plugins":[{"Network":{"ipam":{},"type":"sriov"},"Bytes":"${b64(plugin0)}"},{"Network":{"ipam":{},"type":"tuning"},"Bytes":"${b64(plugin1)}"}],` +
      `"Bytes":"${b64(listBytes)}"},"Name":"default/sriov-net","IsFilterV4Gateway":false,"IsFilterV6Gateway":false,` +
      `"deviceID":"0000:03:00.2","resourceName":"intel.com/sriov","Bytes":"${b64(lossy)}"}]`;
    const [d] = decodeScratchCache(file);
    expect(d?.isList).toBe(true);
    expect(d?.bytes.toString()).toBe(
      '{"cniVersion":"0.4.0","name":"sriov-net","plugins":[' +
        '{"args":{"cni":{"extra":"x","keep":"me"}},"deviceID":"0000:03:00.2","kubernetes":{"kubeconfig":"/etc/kube.conf"},"type":"sriov"},' +
        '{"sysctl":{"net.ipv4.conf.all.rp_filter":"0"},"type":"tuning"}]}',
    );
  });

  it('ignores an empty CNINetworkConfigList (direct plugins in old caches carried one)', () => {
    const file =
      '[{"Conf":{"ipam":{},"name":"a","type":"bridge"},"ConfList":{},"CNINetworkConfigList":{"Name":"","CNIVersion":"","DisableCheck":false,' +
      `"DisableGC":false,"LoadOnlyInlinedPlugins":false,"Plugins":null,"Bytes":null},"Name":"a","IsFilterV4Gateway":false,"IsFilterV6Gateway":false,"Bytes":"${MACVLAN_CONF_B64}"}]`;
    expect(decodeScratchCache(file)[0]?.bytes.toString()).toBe(MACVLAN_CONF);
  });

  it.each([
    ['not JSON', 'garbage', 'Multus scratch cache is not valid JSON: '],
    ['truncated', `[${CLUSTER_JSON}`.slice(0, 120), 'Multus scratch cache is not valid JSON: '],
    ['an object', '{}', 'Multus scratch cache: expected a JSON array of delegates'],
    ['null', 'null', 'Multus scratch cache: expected a JSON array of delegates'],
    ['a number element', `[${CLUSTER_JSON},1]`, 'Multus scratch cache delegate 1: expected a JSON object'],
    ['a null element', '[null]', 'Multus scratch cache delegate 0: expected a JSON object'],
    ['bad base64 Bytes', '[{"Bytes":"%%%%"}]', 'Multus scratch cache delegate 0: "Bytes" must be a base64 string'],
    ['a string ipRequest', '[{"ipRequest":"10.0.0.1"}]', '"ipRequest" must be an array'],
    ['a non-string ipRequest item', '[{"ipRequest":[1]}]', '"ipRequest" must be an array of strings'],
    ['a string filter flag', '[{"IsFilterV4Gateway":"yes"}]', '"IsFilterV4Gateway" must be true or false'],
    ['an array Conf', '[{"Conf":[]}]', '"Conf" must be a JSON object'],
    [
      'Bytes that decode to non-JSON with a legacy list',
      `[{"CNINetworkConfigList":{"Bytes":"${Buffer.from('{"a"').toString('base64')}"}}]`,
      'CNINetworkConfigList Bytes is not valid JSON',
    ],
    [
      'a legacy list whose plugin count differs from Bytes',
      `[{"CNINetworkConfigList":{"Plugins":[{"Bytes":"${Buffer.from('{"type":"a"}').toString('base64')}"}],"Bytes":"${Buffer.from('{"name":"l"}').toString('base64')}"},"Bytes":"${Buffer.from('{"plugins":[]}').toString('base64')}"}]`,
      'plugin count differs between CNINetworkConfigList (1) and Bytes (0)',
    ],
  ])('rejects %s with code 6', (_name, text, message) => {
    const err = thrown(() => decodeScratchCache(text));
    expect(err.code).toBe(6);
    expect(err.msg).toContain(message);
  });
});

describe('scratch cache files', () => {
  it('writes 0600 in a created 0700 cniDir, reads back, removes idempotently', () => {
    const cniDir = join(dir, 'var', 'multus');
    writeScratchCache(cniDir, 'abc123', [CLUSTER, MACVLAN]);
    const path = join(cniDir, 'abc123');
    expect(readFileSync(path, 'utf8')).toBe(`[${CLUSTER_JSON},${MACVLAN_JSON}]`);
    expect(modeOf(path)).toBe(0o600);
    expect(modeOf(cniDir)).toBe(0o700);
    expect(modeOf(join(dir, 'var'))).toBe(0o700);
    expect(readdirSync(cniDir)).toEqual(['abc123']);
    expect(readScratchCache(cniDir, 'abc123')).toEqual({ kind: 'ok', value: [CLUSTER, MACVLAN] });
    removeScratchCache(cniDir, 'abc123');
    expect(readScratchCache(cniDir, 'abc123')).toEqual({ kind: 'missing' });
    expect(() => removeScratchCache(cniDir, 'abc123')).not.toThrow();
  });

  it('reports a truncated file as corrupt with code 6, not missing', () => {
    writeFileSync(join(dir, 'abc'), `[${CLUSTER_JSON},${MACVLAN_JSON}]`.slice(0, 200));
    const err = corruptError(readScratchCache(dir, 'abc'));
    expect(err.code).toBe(6);
    expect(err.msg).toContain(
      `corrupt Multus scratch cache ${join(dir, 'abc')}: Multus scratch cache is not valid JSON`,
    );
  });

  it('refuses unsafe container IDs with code 4 before touching the disk', () => {
    expect(thrown(() => readScratchCache(dir, '..')).code).toBe(4);
    expect(thrown(() => writeScratchCache(dir, 'a/b', [])).code).toBe(4);
    expect(thrown(() => removeScratchCache(dir, '')).code).toBe(4);
    expect(readdirSync(dir)).toEqual([]);
  });
});
