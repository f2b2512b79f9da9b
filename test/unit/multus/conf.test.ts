/**
 * conf.test.ts: the multus config parser (defaults, key types, docs/behaviour.md#conf-rules rules, versions), delegate
 * networks
 * (single vs list, name injection, flags, versions) and the file wrappers (conflist subdirectory plugins,
 * loadOnlyInlinedPlugins, directory selection, search by name in confDir, resolveStaticNetworks). File
 * fixtures are written to a fresh directory under os.tmpdir() and removed afterwards.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jsonSyntaxProblem } from '../../../src/base/json-syntax.ts';
import type { MultusConf } from '../../../src/multus/conf.ts';
import type { Delegate } from '../../../src/multus/attachments.ts';
import type { Network } from '../../../src/cni/network.ts';
import { findNetworkInDir, loadNetworkFile, loadNetworkPath, parseNetwork } from '../../../src/cni/network.ts';
import { parseMultusConf, resolveStaticNetworks } from '../../../src/multus/conf.ts';
import { CniError } from '../../../src/base/errors.ts';
import { SUPPORTED_VERSIONS } from '../../../src/base/versions.ts';

const VERSIONS_LIST = SUPPORTED_VERSIONS.join(', ');
const NAME_HINT = 'use letters, digits, "_", "." and "-", starting with a letter or digit';

function caught(fn: () => unknown): { code: number; msg: string } {
  try {
    fn();
  } catch (err) {
    if (err instanceof CniError) return { code: err.code, msg: err.msg };
    throw err;
  }
  throw new Error('expected a CniError, nothing was thrown');
}

/** The JSON problem the decoders report: where, never the bytes (issue 51, finding 7; base/json-syntax.ts). */
function jsonError(text: string): string {
  const problem = jsonSyntaxProblem(text);
  if (problem === undefined) throw new Error(`${text} is valid JSON`);
  return problem;
}

const DELEGATE = { name: 'cbr0', type: 'flannel', cniVersion: '1.0.0' };
const BASE = { name: 'multus-cni-network', type: 'multus', cniVersion: '1.0.0', delegates: [DELEGATE] };

function conf(extra: Record<string, unknown> = {}): MultusConf {
  return parseMultusConf(JSON.stringify({ ...BASE, ...extra }));
}

// ---------------------------------------------------------------------------------------------------------

describe('parseMultusConf: defaults (docs/behaviour.md#conf-keys)', () => {
  it.each<[keyof MultusConf, unknown]>([
    ['name', 'multus-cni-network'],
    ['type', 'multus'],
    ['kubeconfig', ''],
    ['confDir', '/etc/cni/multus/net.d'],
    ['cniDir', '/var/lib/cni/multus'],
    ['binDir', '/opt/cni/bin'],
    ['clusterNetwork', ''],
    ['defaultNetworks', []],
    ['systemNamespaces', ['kube-system']],
    ['multusNamespace', 'kube-system'],
    ['logFile', ''],
    ['logLevel', 'panic'],
    ['logToStderr', true],
    ['logOptions', undefined],
    ['readinessIndicatorFile', ''],
    ['readinessBackoff', { initialMs: 250, factor: 4, jitter: 0.1, steps: 4 }],
    ['namespaceIsolation', false],
    ['globalNamespaces', ['default']],
    ['retryDeleteOnError', false],
    ['auxiliaryCNIChainName', ''],
    ['runtimeConfig', {}],
    ['delegateTimeoutMs', 60_000],
    ['strictCapabilities', false],
    ['warnings', []],
  ])('%s defaults to %j', (field, expected) => {
    expect(conf()[field]).toEqual(expected);
  });

  it('keeps the decoded stdin untouched as raw, and does not share objects with it', () => {
    const parsed = conf({ runtimeConfig: { mac: 'aa' } });
    expect(parsed.raw).toEqual({ ...BASE, runtimeConfig: { mac: 'aa' } });
    expect(parsed.delegates[0]!.plugins[0]).not.toBe((parsed.raw.delegates as unknown[])[0]);
    expect(parsed.runtimeConfig).not.toBe(parsed.raw.runtimeConfig);
  });
});

describe('parseMultusConf: values', () => {
  const portMappings = [{ hostPort: 8080, containerPort: 80, protocol: 'tcp' }];
  it.each<[string, Record<string, unknown>, keyof MultusConf, unknown]>([
    ['confDir set', { confDir: '/x/net.d' }, 'confDir', '/x/net.d'],
    ['empty confDir means the default', { confDir: '' }, 'confDir', '/etc/cni/multus/net.d'],
    ['empty cniDir means the default', { cniDir: '' }, 'cniDir', '/var/lib/cni/multus'],
    ['empty binDir means the default', { binDir: '' }, 'binDir', '/opt/cni/bin'],
    ['empty multusNamespace means the default', { multusNamespace: '' }, 'multusNamespace', 'kube-system'],
    ['null is absent', { logFile: null }, 'logFile', ''],
    ['kubeconfig', { kubeconfig: '/etc/kube.conf' }, 'kubeconfig', '/etc/kube.conf'],
    ['logLevel DEBUG', { logLevel: 'DEBUG' }, 'logLevel', 'debug'],
    ['logLevel Verbose', { logLevel: 'Verbose' }, 'logLevel', 'verbose'],
    ['logLevel error', { logLevel: 'error' }, 'logLevel', 'error'],
    ['logLevel empty', { logLevel: '' }, 'logLevel', 'panic'],
    ['logToStderr false', { logToStderr: false }, 'logToStderr', false],
    [
      'logOptions, unknown inner keys ignored',
      { logOptions: { maxAge: 1, maxSize: 0, compress: false, x: 1 } },
      'logOptions',
      { maxAge: 1, maxSize: 0, compress: false },
    ],
    ['logOptions empty', { logOptions: {} }, 'logOptions', {}],
    ['readinessindicatorfile', { readinessindicatorfile: '/run/ready' }, 'readinessIndicatorFile', '/run/ready'],
    ['globalNamespaces split and trimmed', { globalNamespaces: ' a , b,,c ' }, 'globalNamespaces', ['a', 'b', 'c']],
    ['globalNamespaces replaces the default', { globalNamespaces: 'infra' }, 'globalNamespaces', ['infra']],
    ['globalNamespaces empty', { globalNamespaces: '' }, 'globalNamespaces', ['default']],
    ['systemNamespaces empty list', { systemNamespaces: [] }, 'systemNamespaces', []],
    ['defaultNetworks', { defaultNetworks: ['a', 'b'] }, 'defaultNetworks', ['a', 'b']],
    ['namespaceIsolation', { namespaceIsolation: true }, 'namespaceIsolation', true],
    ['retryDeleteOnError', { retryDeleteOnError: true }, 'retryDeleteOnError', true],
    ['auxiliaryCNIChainName', { auxiliaryCNIChainName: 'aux' }, 'auxiliaryCNIChainName', 'aux'],
    [
      'readinessBackoff partial',
      { readinessBackoff: { steps: 0 } },
      'readinessBackoff',
      { initialMs: 250, factor: 4, jitter: 0.1, steps: 0 },
    ],
    [
      'readinessBackoff full',
      { readinessBackoff: { initialMs: 100, factor: 2, jitter: 1, steps: 20 } },
      'readinessBackoff',
      { initialMs: 100, factor: 2, jitter: 1, steps: 20 },
    ],
    ['delegateTimeoutSeconds', { delegateTimeoutSeconds: 2.5 }, 'delegateTimeoutMs', 2500],
    ['delegateTimeoutSeconds at its minimum', { delegateTimeoutSeconds: 1 }, 'delegateTimeoutMs', 1000],
    ['strictCapabilities', { strictCapabilities: true }, 'strictCapabilities', true],
    ['parallelAttachments', { parallelAttachments: true }, 'parallelAttachments', true],
    ['parallelAttachments off by default', {}, 'parallelAttachments', false],
    ['draNetworks off by default', {}, 'draNetworks', false],
    ['draNetworks', { draNetworks: true }, 'draNetworks', true],
    ['draDriverName default', {}, 'draDriverName', 'multus.k8s.cni.cncf.io'],
    ['draDriverName', { draDriverName: 'net.example.com' }, 'draDriverName', 'net.example.com'],
    ['kubeletDir default', {}, 'kubeletDir', '/var/lib/kubelet'],
    ['kubeletDir', { kubeletDir: '/data/kubelet' }, 'kubeletDir', '/data/kubelet'],
    ['draInlineConfigFromClaims off by default', {}, 'draInlineConfigFromClaims', false],
    ['draInlineConfigFromClaims', { draInlineConfigFromClaims: true }, 'draInlineConfigFromClaims', true],
    [
      'runtimeConfig kept whole',
      { runtimeConfig: { portMappings, 'io.kubernetes.cri.pod-annotations': { a: 'b' } } },
      'runtimeConfig',
      { portMappings, 'io.kubernetes.cri.pod-annotations': { a: 'b' } },
    ],
    ['prevResult accepted', { prevResult: { cniVersion: '1.0.0' } }, 'kubeconfig', ''],
    ['unknown keys ignored', { defaultnetworkwaitseconds: 5, capabilities: { portMappings: true } }, 'warnings', []],
  ])('%s', (_title, extra, field, expected) => {
    expect(conf(extra)[field]).toEqual(expected);
  });

  it('warns about an unknown log level and keeps panic (docs/behaviour.md#logging)', () => {
    const parsed = conf({ logLevel: 'loud' });
    expect([parsed.logLevel, parsed.warnings]).toEqual(['panic', ['multus logging: cannot set logging level to loud']]);
  });

  it.each([
    [
      { readinessIndicatorFile: '/r' },
      '/r',
      ['config key "readinessIndicatorFile" read as "readinessindicatorfile"; spell it "readinessindicatorfile"'],
    ],
    [
      { readinessindicatorfile: '/a', READINESSINDICATORFILE: '/b' },
      '/b',
      ['config key "READINESSINDICATORFILE" read as "readinessindicatorfile"; spell it "readinessindicatorfile"'],
    ],
  ])('reads keys case-insensitively like Go, the last one winning: %j', (extra, expected, warnings) => {
    const parsed = conf(extra);
    expect([parsed.readinessIndicatorFile, parsed.warnings]).toEqual([expected, warnings]);
  });
});

describe('parseMultusConf: the DRA keys (docs/configuration.md)', () => {
  it.each<[string, unknown, RegExp]>([
    [
      'draDriverName',
      'Multus_Driver',
      /^draDriverName "Multus_Driver" is not a DNS subdomain of at most 63 characters/,
    ],
    ['draDriverName', `${'a'.repeat(60)}.com`, /is not a DNS subdomain of at most 63 characters/],
    ['kubeletDir', 'var/lib/kubelet', /^kubeletDir "var\/lib\/kubelet" must be an absolute path without ".."/],
    ['kubeletDir', '/var/../tmp', /^kubeletDir "\/var\/..\/tmp" must be an absolute path/],
  ])('%s = %j is refused (code 7)', (key, value, msg) => {
    const error = caught(() => conf({ [key]: value }));
    expect(error.code).toBe(7);
    expect(error.msg).toMatch(msg);
  });
});

describe('parseMultusConf: key types', () => {
  it.each<[string, unknown, string]>([
    ['name', 1, '`name` must be a string'],
    ['type', true, '`type` must be a string'],
    ['cniVersion', 1, '`cniVersion` must be a string'],
    ['kubeconfig', 1, '`kubeconfig` must be a string'],
    ['confDir', [], '`confDir` must be a string'],
    ['cniDir', {}, '`cniDir` must be a string'],
    ['binDir', 1, '`binDir` must be a string'],
    ['delegates', {}, '`delegates` must be an array of JSON objects'],
    ['delegates', [DELEGATE, 'x'], '`delegates` must be an array of JSON objects'],
    ['clusterNetwork', 5, '`clusterNetwork` must be a string'],
    ['defaultNetworks', 'a,b', '`defaultNetworks` must be an array of non-empty strings'],
    ['defaultNetworks', ['a', ''], '`defaultNetworks` must be an array of non-empty strings'],
    ['systemNamespaces', 'kube-system', '`systemNamespaces` must be an array of strings'],
    ['systemNamespaces', [1], '`systemNamespaces` must be an array of strings'],
    ['multusNamespace', 1, '`multusNamespace` must be a string'],
    ['logFile', 1, '`logFile` must be a string'],
    ['logLevel', 3, '`logLevel` must be a string'],
    ['logToStderr', 'true', '`logToStderr` must be a boolean'],
    ['logOptions', [], '`logOptions` must be a JSON object'],
    ['logOptions', { maxAge: -1 }, '`logOptions.maxAge` must be a whole number >= 0'],
    ['logOptions', { maxSize: 1.5 }, '`logOptions.maxSize` must be a whole number >= 0'],
    ['logOptions', { maxBackups: '3' }, '`logOptions.maxBackups` must be a whole number >= 0'],
    ['logOptions', { compress: 'yes' }, '`logOptions.compress` must be a boolean'],
    ['readinessindicatorfile', 1, '`readinessindicatorfile` must be a string'],
    ['namespaceIsolation', 'false', '`namespaceIsolation` must be a boolean'],
    ['globalNamespaces', ['a'], '`globalNamespaces` must be a string'],
    ['retryDeleteOnError', 1, '`retryDeleteOnError` must be a boolean'],
    ['parallelAttachments', 4, '`parallelAttachments` must be a boolean'],
    ['draNetworks', 'true', '`draNetworks` must be a boolean'],
    ['draDriverName', 1, '`draDriverName` must be a string'],
    ['draInlineConfigFromClaims', 1, '`draInlineConfigFromClaims` must be a boolean'],
    ['auxiliaryCNIChainName', 1, '`auxiliaryCNIChainName` must be a string'],
    ['runtimeConfig', [], '`runtimeConfig` must be a JSON object'],
    ['prevResult', 'x', '`prevResult` must be a JSON object'],
    ['readinessBackoff', 5, '`readinessBackoff` must be a JSON object'],
    ['readinessBackoff', { initialMs: 0 }, '`readinessBackoff.initialMs` must be a number greater than 0'],
    ['readinessBackoff', { factor: -1 }, '`readinessBackoff.factor` must be a number greater than 0'],
    ['readinessBackoff', { jitter: 1.5 }, '`readinessBackoff.jitter` must be a number from 0 to 1'],
    ['readinessBackoff', { steps: 21 }, '`readinessBackoff.steps` must be a whole number from 0 to 20'],
    ['readinessBackoff', { steps: 1.5 }, '`readinessBackoff.steps` must be a whole number from 0 to 20'],
    [
      'readinessBackoff',
      { stepz: 1 },
      'unknown key `readinessBackoff.stepz`: the keys are initialMs, factor, jitter, steps',
    ],
    ['delegateTimeoutSeconds', 0, '`delegateTimeoutSeconds` must be a number greater than 0'],
    ['delegateTimeoutSeconds', '60', '`delegateTimeoutSeconds` must be a number greater than 0'],
    ['strictCapabilities', 'true', '`strictCapabilities` must be a boolean'],
  ])('%s = %j', (key, value, msg) => {
    expect(caught(() => conf({ [key]: value }))).toEqual({ code: 7, msg });
  });
});

describe('parseMultusConf: docs/behaviour.md#conf-rules rules', () => {
  const noDelegates =
    'at least one delegate or clusterNetwork must be specified: add a `delegates` array or set `clusterNetwork`';
  const noTypeOrPlugins =
    "delegate must have the 'type' or 'plugins' field: set 'type' for one plugin or 'plugins' for a chain";
  it.each<[string, string, number, string]>([
    ['not JSON', '{"name": ', 6, `multus config is not valid JSON: ${jsonError('{"name": ')}`],
    ['not an object', '[]', 6, 'multus config must be a JSON object, got an array'],
    ['null', 'null', 6, 'multus config must be a JSON object, got null'],
    ['neither delegates nor clusterNetwork', JSON.stringify({ name: 'm', kubeconfig: '/k' }), 7, noDelegates],
    ['empty delegates', JSON.stringify({ name: 'm', delegates: [] }), 7, noDelegates],
    [
      'delegate without type or plugins',
      JSON.stringify({ delegates: [{ name: 'x' }] }),
      7,
      `failed to load delegate 0 config: ${noTypeOrPlugins}`,
    ],
    [
      'conflist delegate whose plugin has no type',
      JSON.stringify({ delegates: [{ name: 'x', plugins: [{ type: 'bridge' }, { mtu: 1 }] }] }),
      7,
      "failed to load delegate 0 config: a plugin delegate must have the 'type' field: `plugins[1]` has none",
    ],
    [
      'second delegate bad',
      JSON.stringify({ delegates: [DELEGATE, { name: 'bad name', type: 'x' }] }),
      7,
      `failed to load delegate 1 config: invalid characters found in network name "bad name": ${NAME_HINT}`,
    ],
    [
      'delegate version',
      JSON.stringify({ delegates: [{ name: 'x', type: 'x', cniVersion: '0.5.0' }] }),
      1,
      `failed to load delegate 0 config: network "x" has unsupported cniVersion "0.5.0": use one of ${VERSIONS_LIST}`,
    ],
  ])('%s', (_title, stdin, code, msg) => {
    expect(caught(() => parseMultusConf(stdin))).toEqual({ code, msg });
  });

  it('parses each delegate into a Network, in order (docs/behaviour.md#conf-rules rule 6)', () => {
    const list = { name: 'chain', cniVersion: '0.4.0', plugins: [{ type: 'bridge' }, { type: 'portmap' }] };
    const parsed = parseMultusConf(JSON.stringify({ delegates: [DELEGATE, list] }));
    expect(parsed.delegates.map((d) => [d.name, d.isList, d.cniVersion, d.plugins.length, d.bytes.toString()])).toEqual(
      [
        ['cbr0', false, '1.0.0', 1, JSON.stringify(DELEGATE)],
        ['chain', true, '0.4.0', 2, JSON.stringify(list)],
      ],
    );
  });

  it.each([
    ['broken delegates are not parsed', { clusterNetwork: 'cluster', delegates: [{ name: 'x' }] }],
    ['no delegates needed', { clusterNetwork: 'cluster', delegates: undefined }],
  ])('with clusterNetwork set, delegates are ignored (docs/behaviour.md#conf-rules): %s', (_title, extra) => {
    expect(conf(extra).delegates).toEqual([]);
  });

  it('with clusterNetwork set, delegates still must have the right type', () => {
    expect(caught(() => conf({ clusterNetwork: 'cluster', delegates: 'x' }))).toEqual({
      code: 7,
      msg: '`delegates` must be an array of JSON objects',
    });
  });
});

describe('parseMultusConf: cniVersion', () => {
  it.each(SUPPORTED_VERSIONS)('accepts %s', (version) => {
    expect(conf({ cniVersion: version }).cniVersion).toBe(version);
  });

  it.each([
    ['missing', undefined, '0.1.0'],
    ['empty', '', '0.1.0'],
    ['null', null, '0.1.0'],
  ])('%s means 0.1.0, like skel', (_title, version, expected) => {
    expect(conf({ cniVersion: version }).cniVersion).toBe(expected);
  });

  it.each(['0.5.0', '2.0.0', '1.0'])('rejects %s with code 1', (version) => {
    expect(caught(() => conf({ cniVersion: version }))).toEqual({
      code: 1,
      msg: `unsupported cniVersion "${version}" in the multus config: use one of ${VERSIONS_LIST}`,
    });
  });
});

// ---------------------------------------------------------------------------------------------------------

describe('parseNetwork: single config vs conflist', () => {
  it('an object with a type is a single config, a list of one', () => {
    const obj = { name: 'a', type: 'bridge', cniVersion: '0.3.1', bridge: 'br0' };
    expect(parseNetwork(obj)).toEqual<Network>({
      name: 'a',
      cniVersion: '0.3.1',
      isList: false,
      disableCheck: false,
      disableGC: false,
      plugins: [obj],
      bytes: Buffer.from(JSON.stringify(obj)),
    });
  });

  it('an object with plugins is a list', () => {
    const obj = {
      name: 'l',
      cniVersion: '1.1.0',
      disableCheck: true,
      plugins: [{ type: 'bridge' }, { type: 'tuning' }],
    };
    expect(parseNetwork(obj)).toEqual<Network>({
      name: 'l',
      cniVersion: '1.1.0',
      isList: true,
      disableCheck: true,
      disableGC: false,
      plugins: obj.plugins,
      bytes: Buffer.from(JSON.stringify(obj)),
    });
  });

  it('an empty type with plugins is a list', () => {
    expect(parseNetwork({ name: 'l', type: '', plugins: [{ type: 'bridge' }] }).isList).toBe(true);
  });

  it.each([
    ['single', '{ "name": "a",\n  "type": "bridge" }\n'],
    ['list', '{\n  "name": "l", "cniVersion": "1.0.0",\n  "plugins": [ {"type": "bridge"} ]\n}'],
  ])('a %s Buffer keeps its exact bytes', (_title, text) => {
    expect(parseNetwork(Buffer.from(text)).bytes.toString()).toBe(text);
  });

  it('does not share objects with its input', () => {
    const obj = { name: 'a', type: 'bridge', ipam: { type: 'host-local' } };
    const network = parseNetwork(obj);
    expect(network.plugins[0]).toEqual(obj);
    expect(network.plugins[0]).not.toBe(obj);
  });

  it.each<[string, boolean | string | undefined, boolean]>([
    ['absent', undefined, false],
    ['true', true, true],
    ['false', false, false],
    ['"true"', 'true', true],
    ['"TRUE"', 'TRUE', true],
    ['"False"', 'False', false],
  ])('disableCheck and disableGC %s (libcni readBool)', (_title, value, expected) => {
    const network = parseNetwork({ name: 'l', disableCheck: value, disableGC: value, plugins: [{ type: 'bridge' }] });
    expect([network.disableCheck, network.disableGC]).toEqual([expected, expected]);
  });

  it('a single config ignores disableCheck/disableGC, as libcni ConfListFromConf does', () => {
    const network = parseNetwork({ name: 'a', type: 'bridge', disableCheck: true, disableGC: true });
    expect([network.disableCheck, network.disableGC]).toEqual([false, false]);
  });
});

describe('parseNetwork: errors', () => {
  const noTypeOrPlugins =
    "delegate must have the 'type' or 'plugins' field: set 'type' for one plugin or 'plugins' for a chain";
  it.each<[string, Record<string, unknown>, number, string]>([
    ['neither type nor plugins', { name: 'x' }, 7, noTypeOrPlugins],
    ['empty type, no plugins', { name: 'x', type: '' }, 7, noTypeOrPlugins],
    ['type not a string', { name: 'x', type: 5 }, 7, '`type` must be a string'],
    ['plugins not an array', { name: 'x', plugins: {} }, 7, '`plugins` must be an array of plugin objects'],
    ['plugins empty', { name: 'x', plugins: [] }, 7, '`plugins` must not be empty: list at least one plugin'],
    ['plugin not an object', { name: 'x', plugins: [1] }, 7, '`plugins[0]` must be a JSON object'],
    [
      'plugin without type',
      { name: 'x', plugins: [{ type: 'a' }, { type: '' }] },
      7,
      "a plugin delegate must have the 'type' field: `plugins[1]` has none",
    ],
    ['plugin type not a string', { name: 'x', plugins: [{ type: 5 }] }, 7, '`plugins[0].type` must be a string'],
    [
      'capabilities not booleans',
      { name: 'x', type: 'a', capabilities: { portMappings: 'yes' } },
      7,
      '`capabilities` must be an object of booleans',
    ],
    [
      'plugin capabilities not booleans',
      { name: 'x', plugins: [{ type: 'a', capabilities: [] }] },
      7,
      '`plugins[0].capabilities` must be an object of booleans',
    ],
    [
      'disableCheck not a flag',
      { name: 'x', disableCheck: 'yes', plugins: [{ type: 'a' }] },
      7,
      '`disableCheck` must be a boolean or "true"/"false"',
    ],
    [
      'disableGC not a flag',
      { name: 'x', disableGC: 1, plugins: [{ type: 'a' }] },
      7,
      '`disableGC` must be a boolean or "true"/"false"',
    ],
    ['missing name', { type: 'a' }, 7, 'missing network name: set "name"'],
    ['empty list name', { name: '', plugins: [{ type: 'a' }] }, 7, 'missing network name: set "name"'],
    ['name not a string', { name: 5, type: 'a' }, 7, '`name` must be a string'],
    [
      'name with a space',
      { name: 'my net', type: 'a' },
      7,
      `invalid characters found in network name "my net": ${NAME_HINT}`,
    ],
    [
      'name starting with a dash',
      { name: '-net', type: 'a' },
      7,
      `invalid characters found in network name "-net": ${NAME_HINT}`,
    ],
    [
      'name with a slash',
      { name: 'ns/net', plugins: [{ type: 'a' }] },
      7,
      `invalid characters found in network name "ns/net": ${NAME_HINT}`,
    ],
    ['cniVersion not a string', { name: 'x', type: 'a', cniVersion: 1 }, 7, '`cniVersion` must be a string'],
    [
      'unsupported version',
      { name: 'x', type: 'a', cniVersion: '0.5.0' },
      1,
      `network "x" has unsupported cniVersion "0.5.0": use one of ${VERSIONS_LIST}`,
    ],
    [
      'unsupported list version',
      { name: 'x', cniVersion: '2.0.0', plugins: [{ type: 'a' }] },
      1,
      `network "x" has unsupported cniVersion "2.0.0": use one of ${VERSIONS_LIST}`,
    ],
    [
      'cniVersions not strings',
      { name: 'x', cniVersions: [1], plugins: [{ type: 'a' }] },
      7,
      '`cniVersions` must be an array of strings',
    ],
    [
      'cniVersions malformed',
      { name: 'x', cniVersions: ['1.0'], plugins: [{ type: 'a' }] },
      1,
      'invalid CNI version "1.0": expected MAJOR.MINOR.PATCH',
    ],
  ])('%s', (_title, obj, code, msg) => {
    expect(caught(() => parseNetwork(obj))).toEqual({ code, msg });
  });

  it.each([
    ['not JSON', '{"name"', `network config is not valid JSON: ${jsonError('{"name"')}`],
    ['a string', '"x"', 'network config must be a JSON object, got string'],
  ])('a Buffer that is %s is a decoding failure (6)', (_title, text, msg) => {
    expect(caught(() => parseNetwork(Buffer.from(text)))).toEqual({ code: 6, msg });
  });

  it('prefixes errors with the source and keeps the code', () => {
    const bytes = Buffer.from(JSON.stringify({ name: 'x', type: 'a', cniVersion: '9.0.0' }));
    expect(caught(() => parseNetwork(bytes, { source: 'NetworkAttachmentDefinition ns/x' }))).toEqual({
      code: 1,
      msg: `NetworkAttachmentDefinition ns/x: network "x" has unsupported cniVersion "9.0.0": use one of ${VERSIONS_LIST}`,
    });
  });
});

describe('parseNetwork: cniVersion', () => {
  it.each<[string, Record<string, unknown>, string]>([
    ['single without cniVersion', { name: 'x', type: 'a' }, '0.1.0'],
    ['single with empty cniVersion', { name: 'x', type: 'a', cniVersion: '' }, '0.1.0'],
    ['list without cniVersion', { name: 'x', plugins: [{ type: 'a' }] }, '0.1.0'],
    ['list cniVersion', { name: 'x', cniVersion: '0.3.1', plugins: [{ type: 'a' }] }, '0.3.1'],
    [
      'cniVersions: the highest we speak',
      { name: 'x', cniVersion: '0.4.0', cniVersions: ['1.0.0', '2.0.0', '0.3.1'], plugins: [{ type: 'a' }] },
      '1.0.0',
    ],
    [
      'cniVersions: cniVersion may be the highest',
      { name: 'x', cniVersion: '1.1.0', cniVersions: ['1.0.0'], plugins: [{ type: 'a' }] },
      '1.1.0',
    ],
    ['cniVersions alone', { name: 'x', cniVersions: ['0.3.1'], plugins: [{ type: 'a' }] }, '0.3.1'],
    ['cniVersions empty', { name: 'x', cniVersions: [], plugins: [{ type: 'a' }] }, '0.1.0'],
  ])('%s', (_title, obj, expected) => {
    expect(parseNetwork(obj).cniVersion).toBe(expected);
  });
});

describe('parseNetwork: name injection (NAD docs/behaviour.md#nad)', () => {
  it.each<[string, Record<string, unknown>]>([
    ['single, name missing', { type: 'bridge' }],
    ['single, name empty', { name: '', type: 'bridge' }],
    ['list, name missing', { cniVersion: '1.0.0', plugins: [{ type: 'bridge' }] }],
  ])('%s: the default name goes into the network and its bytes', (_title, obj) => {
    for (const input of [obj, Buffer.from(JSON.stringify(obj, null, 2))]) {
      const network = parseNetwork(input, { defaultName: 'nad-name' });
      expect([network.name, JSON.parse(network.bytes.toString()).name]).toEqual(['nad-name', 'nad-name']);
      expect(network.bytes.toString()).toBe(JSON.stringify({ ...obj, name: 'nad-name' }));
    }
  });

  it('a config with a name keeps it and, from a Buffer, its bytes', () => {
    const text = '{"name": "own", "type": "bridge"}';
    const network = parseNetwork(Buffer.from(text), { defaultName: 'nad-name' });
    expect([network.name, network.bytes.toString()]).toEqual(['own', text]);
  });

  it('an injected name is validated like any other', () => {
    expect(caught(() => parseNetwork({ type: 'bridge' }, { defaultName: 'Bad Name' }))).toEqual({
      code: 7,
      msg: `invalid characters found in network name "Bad Name": ${NAME_HINT}`,
    });
  });
});

// ---------------------------------------------------------------------------------------------------------

// Created when the file is collected so table rows can name paths; filled in beforeAll, removed in afterAll.
const root = mkdtempSync(join(tmpdir(), 'multus-ts-conf-'));

function write(rel: string, content: unknown): string {
  const path = join(root, rel);
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content, null, 2));
  return path;
}

function at(rel: string): string {
  return join(root, rel);
}

beforeAll(() => {
  // loadNetworkFile
  write('files/single.conf', { name: 'single', type: 'bridge', cniVersion: '0.3.1' });
  write('files/single.json', { name: 'single-json', type: 'bridge' });
  write('files/notype.conf', { name: 'nt', plugins: [{ type: 'bridge' }] });
  write('files/bad.json', '{ "name": ');
  write('files/array.conf', '[]');
  write('files/plain.conflist', '{"name": "plain",\n "cniVersion": "1.0.0",\n "plugins": [{"type": "bridge"}]}\n');
  write('files/chain.conflist', {
    name: 'chain',
    cniVersion: '1.0.0',
    extra: 'kept',
    plugins: [{ type: 'bridge', bridge: 'br0' }],
  });
  write('files/chain/20-portmap.conf', { type: 'portmap', capabilities: { portMappings: true } });
  write('files/chain/10-tuning.conf', { type: 'tuning', sysctl: { 'net.core.somaxconn': '500' } });
  write('files/chain/30-ignored.json', { type: 'ignored' });
  write('files/chain/40-dir.conf/x.conf', { type: 'ignored' });
  write('files/inlined.conflist', {
    name: 'inlined',
    cniVersion: '1.0.0',
    loadOnlyInlinedPlugins: 'true',
    plugins: [{ type: 'bridge' }],
  });
  write('files/inlined/10-tuning.conf', { type: 'tuning' });
  write('files/onlysub.conflist', { name: 'onlysub', cniVersion: '1.1.0' });
  write('files/onlysub/10-bridge.conf', { type: 'bridge' });
  write('files/empty.conflist', { name: 'empty', cniVersion: '1.0.0' });
  write('files/inlined-none.conflist', { name: 'inlined-none', loadOnlyInlinedPlugins: true });
  write('files/badsub.conflist', { name: 'badsub', plugins: [{ type: 'bridge' }] });
  write('files/badsub/10-x.conf', { mtu: 1400 });
  write('files/badname.conflist', { name: '../files', plugins: [{ type: 'bridge' }] });
  write('files/noname.conflist', { plugins: [{ type: 'bridge' }] });
  write('files/oldver.conflist', { name: 'oldver', cniVersion: '0.5.0', plugins: [{ type: 'bridge' }] });
  // loadNetworkPath
  write('dirs/json-first/b.conf', { name: 'b', type: 'bridge' });
  write('dirs/json-first/a.json', { name: 'a', type: 'bridge' });
  write('dirs/only-json/a.json', { name: 'a', type: 'bridge' });
  mkdirSync(at('dirs/empty'), { recursive: true });
  write('dirs/list-first/a.conflist', { name: 'alist', plugins: [{ type: 'bridge' }] });
  write('dirs/list-first/b.conf', { name: 'b', type: 'bridge' });
  write('dirs/skip-subdirs/0.conf/inner.conf', { name: 'inner', type: 'bridge' });
  write('dirs/skip-subdirs/1.conf', { name: 'one', type: 'bridge' });
  write('dirs/skip-subdirs/0.txt', { name: 'txt', type: 'bridge' });
  // findNetworkInDir
  write('find/10-a.conf', { name: 'alpha', type: 'bridge', cniVersion: '0.4.0' });
  write('find/15-sub.conflist', { name: 'sub', cniVersion: '1.0.0', plugins: [{ type: 'bridge' }] });
  write('find/sub/10-tuning.conf', { type: 'tuning' });
  write('find/20-b.conflist', '{ "name": "beta", "cniVersion": "1.0.0",\n  "plugins": [ { "type": "bridge" } ] }\n');
  write('find/25-b.conf', { name: 'beta', type: 'macvlan' });
  write('find/30-c.json', { name: 'gamma', type: 'ipvlan' });
  write('find/35-d.conf', { name: 'delta', plugins: [{ type: 'bridge' }] });
  write('find/45-e.conf', { name: 'eps', type: 'bridge', cniVersion: '9.9.9' });
  write('find/50-broken.conf', 'not json');
  write('find/60-z.conf', { name: 'zeta', type: 'bridge' });
  write('find/notes.txt', { name: 'txt', type: 'bridge' });
  write('find2/10-v.conflist', { name: 'v', cniVersion: '9.9.9', plugins: [{ type: 'bridge' }] });
  write('find2/15-bad name.conf', { name: 'bad name', type: 'bridge' });
  write('find2/20-w.conf', { name: 'w', type: 'bridge' });
  write('find3/10-bad.conflist', { name: 'bad', plugins: [] });
  write('find3/20-ok.conf', { name: 'ok', type: 'bridge' });
  write('find4/readme.txt', 'no configs here');
});

afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

function summary(network: Network): [string, boolean, string, string[]] {
  return [network.name, network.isList, network.cniVersion, network.plugins.map((p) => p.type)];
}

describe('loadNetworkFile (libcni ConfFromFile / ConfListFromFile)', () => {
  it.each<[string, [string, boolean, string, string[]]]>([
    ['files/single.conf', ['single', false, '0.3.1', ['bridge']]],
    ['files/single.json', ['single-json', false, '0.1.0', ['bridge']]],
    ['files/plain.conflist', ['plain', true, '1.0.0', ['bridge']]],
    ['files/chain.conflist', ['chain', true, '1.0.0', ['bridge', 'tuning', 'portmap']]],
    ['files/inlined.conflist', ['inlined', true, '1.0.0', ['bridge']]],
    ['files/onlysub.conflist', ['onlysub', true, '1.1.0', ['bridge']]],
  ])('%s', (rel, expected) => {
    expect(summary(loadNetworkFile(at(rel)))).toEqual(expected);
  });

  it.each(['files/single.conf', 'files/plain.conflist', 'files/inlined.conflist'])(
    '%s keeps the file bytes when no plugin was added',
    (rel) => {
      expect(loadNetworkFile(at(rel)).bytes.equals(readFileSync(at(rel)))).toBe(true);
    },
  );

  it('appends subdirectory plugins in lexical order, keeping every key, and rebuilds the bytes', () => {
    const network = loadNetworkFile(at('files/chain.conflist'));
    const plugins = [
      { type: 'bridge', bridge: 'br0' },
      { type: 'tuning', sysctl: { 'net.core.somaxconn': '500' } },
      { type: 'portmap', capabilities: { portMappings: true } },
    ];
    expect(network.plugins).toEqual(plugins);
    expect(network.bytes.toString()).toBe(
      JSON.stringify({ name: 'chain', cniVersion: '1.0.0', extra: 'kept', plugins }),
    );
  });

  it('a list made only of subdirectory plugins gets a plugins key in its bytes', () => {
    expect(JSON.parse(loadNetworkFile(at('files/onlysub.conflist')).bytes.toString())).toEqual({
      name: 'onlysub',
      cniVersion: '1.1.0',
      plugins: [{ type: 'bridge' }],
    });
  });

  it.each<[string, number, () => string]>([
    [
      'files/notype.conf',
      7,
      () => `error loading CNI config file ${at('files/notype.conf')}: no 'type'; perhaps this is a .conflist?`,
    ],
    [
      'files/bad.json',
      6,
      () =>
        `error loading CNI config file ${at('files/bad.json')}: network config is not valid JSON: ${jsonError('{ "name": ')}`,
    ],
    [
      'files/array.conf',
      6,
      () =>
        `error loading CNI config file ${at('files/array.conf')}: network config must be a JSON object, got an array`,
    ],
    ['files/missing.conf', 7, () => `CNI config file ${at('files/missing.conf')} does not exist`],
    ['files/missing.conflist', 7, () => `CNI config file ${at('files/missing.conflist')} does not exist`],
    [
      'files/empty.conflist',
      7,
      () =>
        `error loading CNI conflist file ${at('files/empty.conflist')}: no plugins: add a 'plugins' array or *.conf plugin files in ${at('files/empty')}/`,
    ],
    [
      'files/inlined-none.conflist',
      7,
      () =>
        `error loading CNI conflist file ${at('files/inlined-none.conflist')}: \`loadOnlyInlinedPlugins\` is true but there is no 'plugins' array: add one`,
    ],
    [
      'files/badsub.conflist',
      7,
      () =>
        `error loading CNI conflist file ${at('files/badsub.conflist')}: error loading plugin config file ${at('files/badsub/10-x.conf')}: missing 'type': a plugin file holds one plugin object`,
    ],
    [
      'files/badname.conflist',
      7,
      () =>
        `error loading CNI conflist file ${at('files/badname.conflist')}: invalid characters found in network name "../files": ${NAME_HINT}`,
    ],
    [
      'files/noname.conflist',
      7,
      () => `error loading CNI conflist file ${at('files/noname.conflist')}: missing network name: set "name"`,
    ],
    [
      'files/oldver.conflist',
      1,
      () =>
        `error loading CNI conflist file ${at('files/oldver.conflist')}: network "oldver" has unsupported cniVersion "0.5.0": use one of ${VERSIONS_LIST}`,
    ],
  ])('%s fails with code %i', (rel, code, msg) => {
    expect(caught(() => loadNetworkFile(at(rel)))).toEqual({ code, msg: msg() });
  });

  it('another read error (a directory) is an I/O failure (5)', () => {
    const path = at('dirs/empty');
    let nodeMessage = '';
    try {
      readFileSync(path);
    } catch (err) {
      nodeMessage = (err as Error).message;
    }
    expect(caught(() => loadNetworkFile(path))).toEqual({
      code: 5,
      msg: `cannot read CNI config file ${path}: ${nodeMessage}`,
    });
  });
});

describe('loadNetworkPath (docs/behaviour.md#cluster-network path form)', () => {
  it.each<[string, string]>([
    ['dirs/json-first', 'a'],
    ['dirs/list-first', 'alist'],
    ['dirs/skip-subdirs', 'one'],
    ['files/single.conf', 'single'],
    ['files/chain.conflist', 'chain'],
  ])('%s → network %s', (rel, name) => {
    expect(loadNetworkPath(at(rel)).name).toBe(name);
  });

  it.each(['dirs/only-json', 'dirs/empty'])('%s: a directory needs a .conf or .conflist file', (rel) => {
    expect(caught(() => loadNetworkPath(at(rel)))).toEqual({
      code: 7,
      msg: `no .conf or .conflist file in directory ${at(rel)}: put the network's config there`,
    });
  });

  // issue 51, finding 1: a config path is read with a bound, and never from a device or a FIFO
  it('a device (/dev/zero) is refused before it is read', () => {
    expect(caught(() => loadNetworkPath('/dev/zero'))).toEqual({
      code: 7,
      msg: 'CNI config file /dev/zero is not a regular file: point the config at a file',
    });
  });

  it('a file over 1 MiB is refused', () => {
    const big = join(root, 'big.conf');
    writeFileSync(big, `{"name":"big","type":"bridge","pad":"${'x'.repeat(1024 * 1024)}"}`);
    expect(caught(() => loadNetworkPath(big))).toEqual({
      code: 7,
      msg: `CNI config file ${big} is ${1024 * 1024 + 39} bytes, over the 1048576 a config may have`,
    });
  });

  it('a path that does not exist', () => {
    expect(caught(() => loadNetworkPath(at('nope/x.conf')))).toEqual({
      code: 7,
      msg: `network path ${at('nope/x.conf')} does not exist`,
    });
  });
});

describe('findNetworkInDir (docs/behaviour.md#nad)', () => {
  it.each<[string, string, [string, boolean, string, string[]]]>([
    ['a .conf', 'alpha', ['alpha', false, '0.4.0', ['bridge']]],
    ['a .conflist with subdirectory plugins', 'sub', ['sub', true, '1.0.0', ['bridge', 'tuning']]],
    ['the lexically first match', 'beta', ['beta', true, '1.0.0', ['bridge']]],
    ['a .json', 'gamma', ['gamma', false, '0.1.0', ['ipvlan']]],
  ])('finds %s (%s)', (_title, name, expected) => {
    expect(summary(findNetworkInDir(at('find'), name))).toEqual(expected);
  });

  it('a .conflist match keeps the original file bytes', () => {
    expect(findNetworkInDir(at('find'), 'beta').bytes.equals(readFileSync(at('find/20-b.conflist')))).toBe(true);
  });

  it('a .conflist match with subdirectory plugins has them in its bytes', () => {
    expect(JSON.parse(findNetworkInDir(at('find'), 'sub').bytes.toString()).plugins).toEqual([
      { type: 'bridge' },
      { type: 'tuning' },
    ]);
  });

  it('skips non-matching files that only fail validation (version, name)', () => {
    expect(findNetworkInDir(at('find2'), 'w').name).toBe('w');
  });

  it.each<[string, string, string, number, () => string]>([
    [
      'a matching file without type',
      'find',
      'delta',
      7,
      () => `error loading CNI config file ${at('find/35-d.conf')}: no 'type'; perhaps this is a .conflist?`,
    ],
    [
      'a matching file with a bad version',
      'find',
      'eps',
      1,
      () =>
        `error loading CNI config file ${at('find/45-e.conf')}: network "eps" has unsupported cniVersion "9.9.9": use one of ${VERSIONS_LIST}`,
    ],
    [
      'an unparsable file before the match aborts',
      'find',
      'zeta',
      6,
      () =>
        `error loading CNI config file ${at('find/50-broken.conf')}: network config is not valid JSON: ${jsonError('not json')}`,
    ],
    [
      'an unparsable file aborts a search without match',
      'find',
      'nope',
      6,
      () =>
        `error loading CNI config file ${at('find/50-broken.conf')}: network config is not valid JSON: ${jsonError('not json')}`,
    ],
    [
      'a broken conflist before the match aborts',
      'find3',
      'ok',
      7,
      () =>
        `error loading CNI conflist file ${at('find3/10-bad.conflist')}: \`plugins\` must not be empty: list at least one plugin`,
    ],
    [
      'no match',
      'find2',
      'nope',
      7,
      () => `no network named "nope" in ${at('find2')}: add a .conf, .json or .conflist file with "name": "nope"`,
    ],
    [
      'only other extensions',
      'find4',
      'x',
      7,
      () => `no networks found in ${at('find4')}: add a .conf, .json or .conflist file with "name": "x"`,
    ],
    [
      'an empty directory',
      'dirs/empty',
      'x',
      7,
      () => `no networks found in ${at('dirs/empty')}: add a .conf, .json or .conflist file with "name": "x"`,
    ],
    [
      'a missing directory',
      'missing',
      'x',
      7,
      () => `no networks found in ${at('missing')}: add a .conf, .json or .conflist file with "name": "x"`,
    ],
  ])('%s', (_title, dir, name, code, msg) => {
    expect(caught(() => findNetworkInDir(at(dir), name))).toEqual({ code, msg: msg() });
  });
});

// ---------------------------------------------------------------------------------------------------------

describe('resolveStaticNetworks (docs/behaviour.md#cluster-network)', () => {
  function clusterConf(extra: Record<string, unknown>): MultusConf {
    return parseMultusConf(JSON.stringify({ name: 'm', cniVersion: '1.0.0', confDir: at('find'), ...extra }));
  }
  const names = (networks: Delegate[]): [string, string][] => networks.map((n) => [n.network.name, n.displayName]);

  it('without clusterNetwork: the delegates, in order, named by their config', () => {
    const parsed = conf({
      delegates: [DELEGATE, { name: 'second', plugins: [{ type: 'bridge' }] }],
      defaultNetworks: ['alpha'],
    });
    expect(names(resolveStaticNetworks(parsed, { podNamespace: 'default' }))).toEqual([
      ['cbr0', 'cbr0'],
      ['second', 'second'],
    ]);
  });

  it.each<[string, () => string, string]>([
    ['a file path', () => at('files/single.conf'), 'single'],
    ['a conflist path', () => at('files/chain.conflist'), 'chain'],
    ['a directory path', () => at('dirs/json-first'), 'a'],
    ['a config name in confDir', () => 'alpha', 'alpha'],
  ])('clusterNetwork as %s works without a kube client', (_title, value, name) => {
    expect(names(resolveStaticNetworks(clusterConf({ clusterNetwork: value() })))).toEqual([[name, name]]);
  });

  it.each<[string, Record<string, unknown>, { podNamespace?: string; clusterOnly?: boolean }, string[]]>([
    ['a pod outside systemNamespaces', {}, { podNamespace: 'default' }, ['alpha', 'gamma', 'chain']],
    ['no pod namespace given', {}, {}, ['alpha', 'gamma', 'chain']],
    ['a pod in kube-system', {}, { podNamespace: 'kube-system' }, ['alpha']],
    ['a pod in a custom system namespace', { systemNamespaces: ['infra'] }, { podNamespace: 'infra' }, ['alpha']],
    [
      'kube-system when it is not a system namespace',
      { systemNamespaces: ['infra'] },
      { podNamespace: 'kube-system' },
      ['alpha', 'gamma', 'chain'],
    ],
    ['clusterOnly (STATUS, GC)', {}, { podNamespace: 'default', clusterOnly: true }, ['alpha']],
  ])('defaultNetworks after clusterNetwork: %s', (_title, extra, opts, expected) => {
    const parsed = clusterConf({
      clusterNetwork: 'alpha',
      defaultNetworks: ['gamma', at('files/chain.conflist')],
      ...extra,
    });
    expect(resolveStaticNetworks(parsed, opts).map((n) => n.network.name)).toEqual(expected);
  });

  it.each<[string, Record<string, unknown>, number, () => string]>([
    [
      'clusterNetwork name not found',
      { clusterNetwork: 'nope', confDir: at('find2') },
      7,
      () =>
        `failed to get clusterNetwork "nope": no network named "nope" in ${at('find2')}: add a .conf, .json or .conflist file with "name": "nope"`,
    ],
    [
      'clusterNetwork path missing',
      { clusterNetwork: at('none.conf') },
      7,
      () => `failed to get clusterNetwork "${at('none.conf')}": network path ${at('none.conf')} does not exist`,
    ],
    [
      'clusterNetwork bad version keeps code 1',
      { clusterNetwork: 'eps' },
      1,
      () =>
        `failed to get clusterNetwork "eps": error loading CNI config file ${at('find/45-e.conf')}: network "eps" has unsupported cniVersion "9.9.9": use one of ${VERSIONS_LIST}`,
    ],
    [
      'defaultNetwork not found',
      { clusterNetwork: 'alpha', defaultNetworks: ['gamma', 'ns/missing'] },
      7,
      () => 'failed to get defaultNetwork "ns/missing": network path ns/missing does not exist',
    ],
  ])('%s', (_title, extra, code, msg) => {
    expect(caught(() => resolveStaticNetworks(clusterConf(extra), { podNamespace: 'default' }))).toEqual({
      code,
      msg: msg(),
    });
  });

  describe('the lookup seam (NADs, added later)', () => {
    const nad = parseNetwork({ name: 'from-nad', type: 'macvlan' });

    it('is tried first for names, never for paths, and may fall back to confDir', () => {
      const calls: string[] = [];
      const lookup = (name: string): Delegate | undefined => {
        calls.push(name);
        return name === 'nad1'
          ? { network: nad, displayName: 'kube-system/nad1', request: {}, source: 'default' }
          : undefined;
      };
      const parsed = clusterConf({ clusterNetwork: 'nad1', defaultNetworks: ['gamma', at('files/single.conf')] });
      expect(names(resolveStaticNetworks(parsed, { lookup }))).toEqual([
        ['from-nad', 'kube-system/nad1'],
        ['gamma', 'gamma'],
        ['single', 'single'],
      ]);
      expect(calls).toEqual(['nad1', 'gamma']);
    });

    it('a lookup failure aborts with its code', () => {
      const lookup = (): Delegate | undefined => {
        throw new CniError(11, 'API server unreachable');
      };
      expect(caught(() => resolveStaticNetworks(clusterConf({ clusterNetwork: 'alpha' }), { lookup }))).toEqual({
        code: 11,
        msg: 'failed to get clusterNetwork "alpha": API server unreachable',
      });
    });
  });
});
