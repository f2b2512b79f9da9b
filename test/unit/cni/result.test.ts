/**
 * Tests for src/result.ts: parsing a plugin's result, converting between every pair of CNI versions (against
 * output recorded from libcni v1.3.0 itself), and turning a failing plugin's output into a CniError.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CniError } from '../../../src/base/errors.ts';
import { type CniResult, resultFamily } from '../../../src/cni/result-model.ts';
import { type PluginOutput, parsePluginError } from '../../../src/cni/plugin-error.ts';
import { PluginResult, convertResult, normalizeResult, parseResult } from '../../../src/cni/result.ts';

const resultInterfaces = (r: CniResult) => PluginResult.of(r).interfaces();
const resultIps = (r: CniResult) => PluginResult.of(r).ips();
import {
  ALL_VERSIONS,
  familyOf,
  hasCheck,
  hasGc,
  hasInterfaces,
  hasIpVersionField,
  hasLegacyIpFields,
  hasStatus,
  versionPairs,
  versionsWhere,
} from '../../helpers/versions.ts';

interface Fixture {
  family: string;
  result: Record<string, unknown>;
}
interface Conversion {
  fixture: string;
  from: string;
  to: string;
  output?: string;
  error?: string;
}

const dir = new URL('../../data/results/', import.meta.url);
const fixtures = JSON.parse(readFileSync(new URL('inputs.json', dir), 'utf8')) as Record<string, Fixture>;
const libcni = JSON.parse(readFileSync(new URL('libcni-conversions.json', dir), 'utf8')) as {
  conversions: Conversion[];
};

/** A fixture's result labelled `version` (as the generator did), parsed like a plugin's stdout. */
function input(name: string, version: string): CniResult {
  const fixture = fixtures[name];
  if (!fixture) throw new Error(`no fixture ${name}`);
  return parseResult(JSON.stringify({ ...fixture.result, cniVersion: version }), version);
}

function thrown(fn: () => unknown): CniError {
  try {
    fn();
  } catch (err) {
    if (err instanceof CniError) return err;
    throw err;
  }
  throw new Error('expected a CniError, nothing was thrown');
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    Object.values(value).forEach(deepFreeze);
    Object.freeze(value);
  }
  return value;
}

describe('resultFamily', () => {
  it.each([
    ['0.1.0', '02x'],
    ['0.2.0', '02x'],
    ['0.3.0', '04x'],
    ['0.3.1', '04x'],
    ['0.4.0', '04x'],
    ['1.0.0', '1x'],
    ['1.1.0', '1x'],
  ])('%s uses the %s layout', (version, family) => {
    expect(resultFamily(version)).toBe(family);
  });

  it.each(['0.5.0', '1.2.0', '', 'constructor', '1.0'])('rejects %j with code 1', (version) => {
    const err = thrown(() => resultFamily(version));
    expect(err.code).toBe(1);
    expect(err.msg).toBe(
      `unsupported CNI result version "${version}": supported versions are 0.1.0, 0.2.0, 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0`,
    );
  });
});

describe('convertResult matches libcni v1.3.0', () => {
  const different = libcni.conversions.filter((c) => c.from !== c.to);
  const same = libcni.conversions.filter((c) => c.from === c.to);

  it('the recorded matrix covers every (from, to) pair with a full fixture of each layout', () => {
    const full = libcni.conversions.filter((c) => c.fixture.startsWith('full-'));
    const pairs = full.map((c) => `${c.from}>${c.to}`).sort();
    expect(pairs).toEqual(
      versionPairs()
        .map(([from, to]) => `${from}>${to}`)
        .sort(),
    );
  });

  it.each(different.filter((c) => c.output !== undefined))(
    '$fixture $from → $to: same JSON, key order included',
    ({ fixture, from, to, output }) => {
      expect(JSON.stringify(convertResult(input(fixture, from), to))).toBe(output);
    },
  );

  it.each(different.filter((c) => c.error !== undefined))(
    '$fixture $from → $to fails: $error',
    ({ fixture, from, to, error }) => {
      const err = thrown(() => convertResult(input(fixture, from), to));
      expect(err.code).toBe(1);
      expect(err.msg).toBe(
        `${error} (a 0.1.0/0.2.0 result must carry an IP address; set the network's cniVersion to 0.3.0 or later)`,
      );
    },
  );

  it.each(same)('$fixture $from → $from is a deep copy of the input, unknown keys kept', ({ fixture, from }) => {
    const original = input(fixture, from);
    const copy = convertResult(original, from);
    expect(copy).toEqual(original);
    expect(copy).not.toBe(original);
    expect(JSON.stringify(copy)).toBe(JSON.stringify(original));
  });

  it.each(same)('normalizeResult($fixture at $from) prints what libcni prints', ({ fixture, from, output }) => {
    expect(JSON.stringify(normalizeResult(input(fixture, from)))).toBe(output);
  });
});

describe('convertResult properties', () => {
  it.each(versionPairs())('%s → %s never changes its input and shares nothing with it', (from, to) => {
    const fixture = `full-${familyOf(from)}`;
    const frozen = deepFreeze(input(fixture, from));
    const before = JSON.stringify(frozen);
    const out = convertResult(frozen, to);
    expect(JSON.stringify(frozen)).toBe(before);
    expect(Object.isFrozen(out)).toBe(false);
    for (const value of Object.values(out)) {
      if (typeof value === 'object' && value !== null) expect(Object.isFrozen(value)).toBe(false);
    }
  });

  it('1.1.0 → 0.4.0 → 1.1.0 loses only interface mtu, socketPath and pciID (libcni keeps 1.1 route fields)', () => {
    const original = input('full-1x', '1.1.0');
    const back = convertResult(convertResult(original, '0.4.0'), '1.1.0');
    const expected = normalizeResult(original);
    expected.interfaces = [
      { mac: 'aa:bb:cc:00:00:01', name: 'veth1234' },
      { mac: 'aa:bb:cc:00:00:02', name: 'eth0', sandbox: '/var/run/netns/cni-1' },
    ];
    expect(back).toEqual(expected);
    expect(back.routes).toEqual(normalizeResult(original).routes);
  });

  it('1.0.0 ↔ 1.1.0 only relabels', () => {
    const original = input('full-1x', '1.0.0');
    const relabelled = convertResult(original, '1.1.0');
    expect({ ...relabelled, cniVersion: '1.0.0' }).toEqual(normalizeResult(original));
  });

  it('0.4.0 → 1.1.0 → 0.4.0 is lossless when every ip version matches its address', () => {
    const original = input('full-04x', '0.4.0');
    expect(convertResult(convertResult(original, '1.1.0'), '0.4.0')).toEqual(normalizeResult(original));
  });

  it('0.2.0 → 0.4.0 → 0.2.0 keeps IPs and gateways but only dst and gw of routes', () => {
    const original = input('full-02x', '0.2.0');
    const back = convertResult(convertResult(original, '0.4.0'), '0.2.0');
    const expected = normalizeResult(original) as CniResult & { ip4: { routes: unknown[] } };
    expected.ip4.routes = [{ dst: '0.0.0.0/0', gw: '10.1.2.1' }, { dst: '192.168.0.0/16' }];
    expect(back).toEqual(expected);
  });

  it('a 0.4.0 result keeps only the first IPv4 and first IPv6 in 0.2.0', () => {
    const out = convertResult(input('full-04x', '0.4.0'), '0.2.0');
    expect(out.ip4).toEqual({
      ip: '10.1.2.3/24',
      gateway: '10.1.2.1',
      routes: [
        { dst: '0.0.0.0/0', gw: '10.1.2.1' },
        { dst: '192.168.0.0/16', gw: '10.1.2.254' },
      ],
    });
    expect(out.ip6).toEqual({ ip: 'fd00:1::3/64', gateway: 'fd00:1::1', routes: [{ dst: '::/0', gw: 'fd00:1::1' }] });
    expect(out.interfaces).toBeUndefined();
  });

  it('"" as the target means 0.1.0, as in libcni', () => {
    expect(convertResult(input('minimal-02x', '0.2.0'), '').cniVersion).toBe('0.1.0');
  });

  it.each([
    ['an unsupported target', { cniVersion: '1.0.0' }, '2.0.0', 1, 'unsupported CNI result version "2.0.0"'],
    ['an unsupported source', { cniVersion: '0.9.0' }, '1.0.0', 1, 'unsupported CNI result version "0.9.0"'],
    ['a malformed source', { cniVersion: '1.0.0', ips: [{}] }, '0.4.0', 6, 'invalid CNI 1.0.0 result: ips[0].address'],
    [
      'a malformed same-version source',
      { cniVersion: '0.4.0', routes: 'x' },
      '0.4.0',
      6,
      'invalid CNI 0.4.0 result: routes',
    ],
  ])('rejects %s', (_what, result, to, code, msgStart) => {
    const err = thrown(() => convertResult(result as CniResult, to));
    expect(err.code).toBe(code);
    expect(err.msg.startsWith(msgStart)).toBe(true);
  });
});

describe('parseResult', () => {
  it.each([
    ['missing', '{"ips":[{"address":"10.0.0.2/24"}]}', '1.0.0', '1.0.0'],
    ['empty', '{"cniVersion":"","ips":[{"address":"10.0.0.2/24"}]}', '1.0.0', '1.0.0'],
    ['not a string', '{"cniVersion":1,"ips":[{"address":"10.0.0.2/24"}]}', '0.4.0', '0.4.0'],
    ['its own', '{"cniVersion":"0.3.1","ips":[{"address":"10.0.0.2/24"}]}', '1.1.0', '0.3.1'],
    ['missing, config version empty', '{"ip4":{"ip":"10.0.0.2/24"}}', '', '0.1.0'],
  ])('cniVersion %s: the result is labelled as libcni fixupResultVersion does', (_what, stdout, fallback, expected) => {
    expect(parseResult(stdout, fallback).cniVersion).toBe(expected);
  });

  it('keeps unknown keys, puts cniVersion first, and accepts a Buffer', () => {
    const out = parseResult(Buffer.from('{"x-vendor":{"a":1},"ips":[{"address":"10.0.0.2/24","zone":"z"}]}'), '1.1.0');
    expect(out).toEqual({ cniVersion: '1.1.0', 'x-vendor': { a: 1 }, ips: [{ address: '10.0.0.2/24', zone: 'z' }] });
    expect(Object.keys(out)).toEqual(['cniVersion', 'x-vendor', 'ips']);
  });

  it('keeps addresses as the plugin wrote them (conversion canonicalises them)', () => {
    const out = parseResult('{"cniVersion":"1.0.0","ips":[{"address":"FD00:0::1/64"}]}', '1.0.0');
    expect(out.ips).toEqual([{ address: 'FD00:0::1/64' }]);
  });

  it('"null" is an empty result of the fallback version, as libcni accepts it', () => {
    expect(parseResult('null', '0.4.0')).toEqual({ cniVersion: '0.4.0' });
  });

  it.each([
    ['', 'plugin returned no result: a successful ADD must print a CNI result on stdout'],
    [' \n\t', 'plugin returned no result: a successful ADD must print a CNI result on stdout'],
    ['[1,2]', 'plugin output is not a CNI result (expected a JSON object, got an array): "[1,2]"'],
    ['"ok"', 'plugin output is not a CNI result (expected a JSON object, got string): "\\"ok\\""'],
    ['42', 'plugin output is not a CNI result (expected a JSON object, got number): "42"'],
  ])('stdout %j → code 6: %s', (stdout, msg) => {
    const err = thrown(() => parseResult(stdout, '1.0.0'));
    expect(err.code).toBe(6);
    expect(err.msg).toBe(msg);
  });

  it('output that is not JSON is quoted, at most 200 characters of it', () => {
    const garbage = `Error: ${'x'.repeat(300)}`;
    const err = thrown(() => parseResult(garbage, '1.0.0'));
    expect(err.code).toBe(6);
    expect(err.msg.startsWith('plugin output is not a CNI result (invalid JSON: ')).toBe(true);
    expect(err.msg.endsWith(`): ${JSON.stringify(`${garbage.slice(0, 200)}…`)}`)).toBe(true);
  });

  it.each(['0.5.0', '2.0.0', '1.1'])('an unsupported cniVersion %s is code 1', (version) => {
    const err = thrown(() => parseResult(JSON.stringify({ cniVersion: version }), '1.0.0'));
    expect(err.code).toBe(1);
    expect(err.msg.startsWith(`unsupported CNI result version "${version}"`)).toBe(true);
  });

  it('no cniVersion and an unsupported fallback is code 1', () => {
    expect(thrown(() => parseResult('{}', '9.9.9')).code).toBe(1);
  });

  const CIDR = 'an address with prefix length such as "10.1.2.3/24"';
  const IP = 'an IP address such as "10.1.2.1"';
  it.each([
    ['1.0.0', { ips: {} }, `ips must be an array, got {}`],
    ['1.0.0', { ips: [5] }, `ips[0] must be an object, got 5`],
    ['1.0.0', { ips: [{ gateway: '10.0.0.1' }] }, `ips[0].address must be ${CIDR}, got nothing`],
    ['1.0.0', { ips: [{ address: '10.0.0.2' }] }, `ips[0].address must be ${CIDR}, got "10.0.0.2"`],
    ['1.0.0', { ips: [{ address: '010.0.0.2/24' }] }, `ips[0].address must be ${CIDR}, got "010.0.0.2/24"`],
    ['1.0.0', { ips: [{ address: '10.0.0.2/33' }] }, `ips[0].address must be ${CIDR}, got "10.0.0.2/33"`],
    ['1.0.0', { ips: [{ address: 'fe80::1%eth0/64' }] }, `ips[0].address must be ${CIDR}, got "fe80::1%eth0/64"`],
    ['1.0.0', { ips: [{ address: '1::2::3/64' }] }, `ips[0].address must be ${CIDR}, got "1::2::3/64"`],
    [
      '1.0.0',
      { ips: [{ address: '1:2:3:4:5:6:7:8::/64' }] },
      `ips[0].address must be ${CIDR}, got "1:2:3:4:5:6:7:8::/64"`,
    ],
    ['1.0.0', { ips: [{ address: '1.2.3.4::/64' }] }, `ips[0].address must be ${CIDR}, got "1.2.3.4::/64"`],
    ['1.0.0', { ips: [{ address: '10.0.0.2/24', gateway: 'gw' }] }, `ips[0].gateway must be ${IP}, got "gw"`],
    ['1.0.0', { ips: [{ address: '10.0.0.2/24', interface: 0.5 }] }, `ips[0].interface must be an integer, got 0.5`],
    ['1.0.0', { ips: [{ address: '10.0.0.2/24', interface: '0' }] }, `ips[0].interface must be an integer, got "0"`],
    ['1.1.0', { interfaces: [{ name: 'eth0', mtu: '1500' }] }, `interfaces[0].mtu must be an integer, got "1500"`],
    ['1.1.0', { interfaces: [{ name: 7 }] }, `interfaces[0].name must be a string, got 7`],
    ['1.1.0', { routes: [{ gw: '10.0.0.1' }] }, `routes[0].dst must be ${CIDR}, got nothing`],
    ['1.1.0', { routes: [{ dst: '0.0.0.0/0', table: 'main' }] }, `routes[0].table must be an integer, got "main"`],
    ['1.1.0', { dns: { nameservers: '10.0.0.10' } }, `dns.nameservers must be an array, got "10.0.0.10"`],
    ['1.1.0', { dns: { search: [1] } }, `dns.search[0] must be a string, got 1`],
    ['1.1.0', { dns: [] }, `dns must be an object, got []`],
    ['0.4.0', { ips: [{ version: 4, address: '10.0.0.2/24' }] }, `ips[0].version must be a string, got 4`],
    ['0.3.1', { interfaces: [{ name: 'eth0', sandbox: {} }] }, `interfaces[0].sandbox must be a string, got {}`],
    ['0.2.0', { ip4: '10.0.0.2/24' }, `ip4 must be an object, got "10.0.0.2/24"`],
    ['0.2.0', { ip4: { gateway: '10.0.0.1' } }, `ip4.ip must be ${CIDR}, got nothing`],
    [
      '0.1.0',
      { ip6: { ip: 'fd00::2/64', routes: [{ dst: 'fd00::/8', gw: 'x' }] } },
      `ip6.routes[0].gw must be ${IP}, got "x"`,
    ],
  ])('a %s result with a bad field is code 6: %s', (version, fields, detail) => {
    const err = thrown(() => parseResult(JSON.stringify({ cniVersion: version, ...fields }), version));
    expect(err.code).toBe(6);
    expect(err.msg).toBe(`invalid CNI ${version} result: ${detail}`);
  });

  it.each([
    ['1.1.0', { ips: null, interfaces: null, routes: null, dns: null }],
    ['1.1.0', { ips: [{ address: '10.0.0.2/24', gateway: '', interface: null }] }],
    ['0.4.0', { interfaces: [{ name: 'eth0', mtu: 'ignored in 0.4.0' }], ips: [{ address: '::/0', version: 'x' }] }],
    ['1.0.0', { ips: [{ address: '10.0.0.2/24', version: 4 }] }], // `version` is not a 1.x field
    ['0.2.0', { ip4: null, ip6: { ip: '::1/128' }, interfaces: 'not a 0.2.0 field' }],
  ])('accepts what libcni accepts: %s %j', (version, fields) => {
    const stdout = JSON.stringify({ cniVersion: version, ...fields });
    expect(parseResult(stdout, version)).toEqual({ cniVersion: version, ...fields });
  });
});

describe('resultInterfaces and resultIps (1.x form for any version)', () => {
  it.each(['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'])('interfaces of a %s result', (version) => {
    const name = version.startsWith('1.') ? 'full-1x' : 'full-04x';
    const extra = version.startsWith('1.') ? { mtu: 1450, pciID: '0000:3b:00.1', socketPath: '/run/vhost/sock0' } : {};
    expect(resultInterfaces(input(name, version))).toEqual([
      { mac: 'aa:bb:cc:00:00:01', name: 'veth1234', ...(version.startsWith('1.') ? { mtu: 1500 } : {}) },
      { mac: 'aa:bb:cc:00:00:02', name: 'eth0', sandbox: '/var/run/netns/cni-1', ...extra },
    ]);
  });

  it.each(['0.1.0', '0.2.0'])('a %s result has no interfaces, and its ips are ip4 then ip6', (version) => {
    const result = input('full-02x', version);
    expect(resultInterfaces(result)).toEqual([]);
    expect(resultIps(result)).toEqual([
      { address: '10.1.2.3/24', gateway: '10.1.2.1' },
      { address: 'fd00:1::3/64', gateway: 'fd00:1::1' },
    ]);
  });

  it('ips of a 0.4.0 result drop `version` and keep the interface index, keys sorted', () => {
    const ips = resultIps(input('full-04x', '0.4.0'));
    expect(ips).toEqual([
      { address: '10.1.2.3/24', gateway: '10.1.2.1', interface: 1 },
      { address: 'fd00:1::3/64', gateway: 'fd00:1::1', interface: 1 },
      { address: '10.9.9.9/32', interface: 1 },
      { address: 'fd00:2::3/64' },
    ]);
    expect(Object.keys(ips[0]!)).toEqual(['address', 'gateway', 'interface']);
  });

  it('a raw 1.1.0 result comes back canonical and without unknown keys', () => {
    expect(resultIps(input('quirks-1x', '1.1.0'))).toEqual([
      { address: '10.0.0.7/24', interface: 0 },
      { address: 'fd00::7/64', gateway: 'fd00::1' },
      { address: '2001:db8:0:1::1/64' },
      { address: '10.0.0.8/24', gateway: '10.0.0.1' },
    ]);
    expect(resultInterfaces(input('quirks-1x', '1.1.0'))).toEqual([{ name: 'eth0', sandbox: '/var/run/netns/q' }]);
  });
});

describe('parsePluginError', () => {
  const base: PluginOutput = {
    stdout: Buffer.alloc(0),
    stderr: Buffer.alloc(0),
    exitCode: 1,
    signal: null,
    timedOut: false,
    plugin: 'bridge',
  };
  const fail = (over: Partial<PluginOutput>) => parsePluginError({ ...base, ...over });
  const text = (s: string) => Buffer.from(s);

  it.each([
    [
      'a CNI error on stdout keeps code, msg and details',
      { stdout: text('{"cniVersion":"1.0.0","code":7,"msg":"bad config","details":"field x"}') },
      7,
      'bad config',
      'field x',
    ],
    [
      'a CNI error plus stderr appends the stderr tail to details',
      { stdout: text('{"code":11,"msg":"busy","details":"lock"}'), stderr: text('waiting for lock\n') },
      11,
      'busy',
      'lock; stderr: waiting for lock',
    ],
    [
      'a plugin-specific code is kept',
      { stdout: text('{"code":117,"msg":"vlan in use"}') },
      117,
      'vlan in use',
      undefined,
    ],
    [
      'a CNI error without msg gets one',
      { stdout: text('{"code":11}') },
      11,
      'plugin bridge failed with error code 11 and no message',
      undefined,
    ],
    [
      'empty stdout uses stderr',
      { stderr: text('  failed to open /run/x: permission denied\n') },
      999,
      'plugin bridge failed: failed to open /run/x: permission denied',
      'stderr: failed to open /run/x: permission denied',
    ],
    [
      'both empty names the exit status',
      { exitCode: 2 },
      999,
      'plugin bridge failed with no error message (exit status 2)',
      undefined,
    ],
    [
      'whitespace-only output counts as empty',
      { stdout: text('\n'), stderr: text(' \n'), exitCode: 3 },
      999,
      'plugin bridge failed with no error message (exit status 3)',
      undefined,
    ],
    [
      'no exit code and no signal',
      { exitCode: null },
      999,
      'plugin bridge failed with no error message (exit status unknown)',
      undefined,
    ],
    [
      'stdout that is not JSON is quoted',
      { stdout: text('panic: oops\n'), stderr: text('goroutine 1') },
      999,
      'plugin bridge failed and its output is not a CNI error: "panic: oops"',
      'stderr: goroutine 1',
    ],
    [
      'a JSON result is not a CNI error',
      { stdout: text('{"cniVersion":"1.0.0","ips":[]}') },
      999,
      'plugin bridge failed and its output is not a CNI error: "{\\"cniVersion\\":\\"1.0.0\\",\\"ips\\":[]}"',
      undefined,
    ],
    [
      'a string code is not a CNI error',
      { stdout: text('{"code":"7","msg":"x"}') },
      999,
      'plugin bridge failed and its output is not a CNI error: "{\\"code\\":\\"7\\",\\"msg\\":\\"x\\"}"',
      undefined,
    ],
    [
      'a non-string msg is not a CNI error',
      { stdout: text('{"code":7,"msg":{"a":1}}') },
      999,
      'plugin bridge failed and its output is not a CNI error: "{\\"code\\":7,\\"msg\\":{\\"a\\":1}}"',
      undefined,
    ],
    [
      'a signal is named, whatever stdout says',
      { exitCode: null, signal: 'SIGSEGV', stdout: text('{"code":7,"msg":"x"}'), stderr: text('segfault') },
      999,
      'plugin bridge was killed by signal SIGSEGV',
      'stderr: segfault',
    ],
    [
      'a timeout gives the limit in seconds',
      { exitCode: null, signal: 'SIGKILL', timedOut: true, timeoutMs: 1500 },
      999,
      'plugin bridge did not finish within 1.5s and was killed',
      undefined,
    ],
    [
      'a timeout of whole seconds',
      { exitCode: null, signal: 'SIGKILL', timedOut: true, timeoutMs: 30000, stderr: text('still waiting') },
      999,
      'plugin bridge did not finish within 30s and was killed',
      'stderr: still waiting',
    ],
    [
      'a timeout without a known limit',
      { exitCode: null, signal: 'SIGKILL', timedOut: true },
      999,
      'plugin bridge did not finish in time and was killed',
      undefined,
    ],
  ])('%s', (_what, over, code, msg, details) => {
    const err = fail(over as Partial<PluginOutput>);
    expect(err).toBeInstanceOf(CniError);
    expect([err.code, err.msg, err.details]).toEqual([code, msg, details]);
  });

  it('details carry only the last 2 KiB of a long stderr', () => {
    const stderr = `${'a'.repeat(5000)}THE END`;
    const err = fail({ stdout: text('{"code":7,"msg":"m"}'), stderr: text(stderr) });
    expect(err.details).toBe(`stderr: …${stderr.slice(-2048)}`);
  });

  it('a multi-byte character cut at the 2 KiB boundary leaves no replacement character', () => {
    const stderr = Buffer.concat([text('é'.repeat(1500)), text('end')]); // 2 bytes each: the cut splits one
    const err = fail({ stdout: text('{"code":7,"msg":"m"}'), stderr });
    expect(err.details).toBe(`stderr: …${'é'.repeat(1022)}end`);
  });

  it('a long stderr is cut to 512 characters in msg', () => {
    const stderr = 'e'.repeat(600);
    const err = fail({ stderr: text(stderr) });
    expect(err.msg).toBe(`plugin bridge failed: ${'e'.repeat(512)}…`);
  });

  it('long non-JSON stdout is quoted up to 200 characters', () => {
    const stdout = 'x'.repeat(250);
    expect(fail({ stdout: text(stdout) }).msg).toBe(
      `plugin bridge failed and its output is not a CNI error: "${'x'.repeat(200)}…"`,
    );
  });

  it('serialises on the wire with the plugin code', () => {
    const err = fail({ stdout: text('{"code":7,"msg":"bad","details":"d"}'), stderr: text('log') });
    expect(err.toJSON('0.4.0')).toEqual({ cniVersion: '0.4.0', code: 7, msg: 'bad', details: 'd; stderr: log' });
  });
});

describe('test/helpers/versions.ts', () => {
  it('lists every supported version in order', () => {
    expect(ALL_VERSIONS).toEqual(['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0']);
  });

  it.each([
    ['hasInterfaces', hasInterfaces, ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0']],
    ['hasIpVersionField', hasIpVersionField, ['0.3.0', '0.3.1', '0.4.0']],
    ['hasLegacyIpFields', hasLegacyIpFields, ['0.1.0', '0.2.0']],
    ['hasCheck', hasCheck, ['0.4.0', '1.0.0', '1.1.0']],
    ['hasStatus', hasStatus, ['1.1.0']],
    ['hasGc', hasGc, ['1.1.0']],
  ] as const)('%s holds for exactly %j', (_name, predicate, versions) => {
    expect(versionsWhere(predicate)).toEqual(versions);
  });

  it.each(ALL_VERSIONS)('familyOf(%s) agrees with resultFamily', (version) => {
    expect(familyOf(version)).toBe(resultFamily(version));
  });

  it('versionPairs has all 49 pairs', () => {
    expect(versionPairs()).toHaveLength(49);
    expect(new Set(versionPairs().map((p) => p.join('>'))).size).toBe(49);
  });
});
