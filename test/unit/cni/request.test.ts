/**
 * request.ts: the env table per command, the container ID / ifname / network-name rules, stdin decoding and
 * the version gate, each rejection with its skel code and exact message.
 */
import { describe, expect, it } from 'vitest';
import { jsonSyntaxMessage } from '../../../src/base/json-syntax.ts';
import { CniError } from '../../../src/base/errors.ts';
import { aboutText, formatVersionInfo, parseCommand, parseRequest } from '../../../src/cni/request.ts';
import { validateContainerId, validateIfName, validateNetworkName } from '../../../src/base/names.ts';

type Env = Record<string, string | undefined>;

const FULL_ENV: Env = {
  CNI_CONTAINERID: 'abc123',
  CNI_NETNS: '/var/run/netns/x',
  CNI_IFNAME: 'eth0',
  CNI_PATH: '/opt/cni/bin',
  CNI_ARGS: 'K8S_POD_NAME=p',
};

const conf = (extra: Record<string, unknown> = {}): Buffer =>
  Buffer.from(JSON.stringify({ name: 'multus-cni-network', type: 'multus', cniVersion: '1.1.0', ...extra }));

/** Runs `fn` and returns the CniError it throws, failing the test if it does not throw one. */
function thrown(fn: () => unknown): CniError {
  try {
    fn();
  } catch (err) {
    if (err instanceof CniError) return err;
    throw err;
  }
  throw new Error('expected a CniError, nothing was thrown');
}

describe('parseCommand', () => {
  it.each(['ADD', 'DEL', 'CHECK', 'STATUS', 'GC', 'VERSION'] as const)('accepts %s', (cmd) => {
    expect(parseCommand({ CNI_COMMAND: cmd })).toBe(cmd);
  });

  it.each([[{}], [{ CNI_COMMAND: '' }], [{ CNI_COMMAND: undefined }]])('returns "" for unset or empty (%j)', (env) => {
    expect(parseCommand(env)).toBe('');
  });

  it.each(['add', 'FOO', ' ADD'])('rejects %j with code 4', (cmd) => {
    const err = thrown(() => parseCommand({ CNI_COMMAND: cmd }));
    expect(err.code).toBe(4);
    expect(err.msg).toBe(
      `unknown CNI_COMMAND ${JSON.stringify(cmd)}: expected one of ADD, DEL, CHECK, STATUS, GC, VERSION`,
    );
  });
});

describe('parseRequest: env table', () => {
  it.each([
    ['ADD', {}, 'required env variables [CNI_CONTAINERID,CNI_NETNS,CNI_IFNAME,CNI_PATH] missing'],
    ['CHECK', {}, 'required env variables [CNI_CONTAINERID,CNI_NETNS,CNI_IFNAME,CNI_PATH] missing'],
    ['DEL', {}, 'required env variables [CNI_CONTAINERID,CNI_IFNAME,CNI_PATH] missing'],
    ['STATUS', {}, 'required env variables [CNI_PATH] missing'],
    ['GC', {}, 'required env variables [CNI_PATH] missing'],
    [
      'ADD',
      { ...FULL_ENV, CNI_NETNS: '', CNI_IFNAME: undefined },
      'required env variables [CNI_NETNS,CNI_IFNAME] missing',
    ],
    ['ADD', { ...FULL_ENV, CNI_PATH: '' }, 'required env variables [CNI_PATH] missing'],
  ] as const)('%s with %j → code 4 %s', (cmd, env, msg) => {
    const err = thrown(() => parseRequest(cmd, env, conf()));
    expect(err.code).toBe(4);
    expect(err.msg).toBe(msg);
  });

  it('DEL does not need CNI_NETNS and keeps an empty netns', () => {
    const req = parseRequest('DEL', { ...FULL_ENV, CNI_NETNS: undefined }, conf());
    expect(req.netns).toBe('');
    expect(req.containerId).toBe('abc123');
  });

  it('ADD returns every field', () => {
    const stdin = conf();
    const req = parseRequest('ADD', { ...FULL_ENV, CNI_NETNS_OVERRIDE: '1' }, stdin);
    expect(req).toEqual({
      command: 'ADD',
      containerId: 'abc123',
      netns: '/var/run/netns/x',
      ifName: 'eth0',
      args: 'K8S_POD_NAME=p',
      path: ['/opt/cni/bin'],
      netnsOverride: true,
      config: { name: 'multus-cni-network', type: 'multus', cniVersion: '1.1.0' },
      cniVersion: '1.1.0',
      stdin,
    });
    expect(req.stdin).toBe(stdin);
  });

  it.each(['STATUS', 'GC'] as const)('%s leaves the container fields empty even when set', (cmd) => {
    const req = parseRequest(cmd, { ...FULL_ENV, CNI_CONTAINERID: 'bad id!', CNI_IFNAME: 'a/b' }, conf());
    expect([req.containerId, req.netns, req.ifName, req.netnsOverride]).toEqual(['', '', '', false]);
    expect(req.path).toEqual(['/opt/cni/bin']);
    expect(req.args).toBe('K8S_POD_NAME=p');
  });

  it.each([
    ['/opt/cni/bin', ['/opt/cni/bin']],
    ['/a:/b', ['/a', '/b']],
    [':/a::/b:', ['/a', '/b']],
  ])('CNI_PATH %j → %j', (path, dirs) => {
    expect(parseRequest('ADD', { ...FULL_ENV, CNI_PATH: path }, conf()).path).toEqual(dirs);
  });

  it.each([
    [undefined, false],
    ['', false],
    ['1', true],
    ['true', true],
    ['TRUE', true],
    ['True', true],
    ['0', false],
    ['yes', false],
  ])('CNI_NETNS_OVERRIDE %j → %s', (value, expected) => {
    expect(parseRequest('ADD', { ...FULL_ENV, CNI_NETNS_OVERRIDE: value }, conf()).netnsOverride).toBe(expected);
  });

  it('checks missing variables before validating present ones', () => {
    const err = thrown(() => parseRequest('ADD', { ...FULL_ENV, CNI_CONTAINERID: 'bad id', CNI_PATH: '' }, conf()));
    expect(err.msg).toBe('required env variables [CNI_PATH] missing');
  });

  it.each([
    ['CNI_CONTAINERID', '-abc', 4, 'invalid characters in containerID "-abc"'],
    ['CNI_IFNAME', 'eth:0', 4, 'interface name "eth:0" contains ":": "/", ":" and whitespace are not allowed'],
  ])('validates %s=%j → code %i', (name, value, code, msg) => {
    const err = thrown(() => parseRequest('DEL', { ...FULL_ENV, [name]: value }, conf()));
    expect([err.code, err.msg]).toEqual([code, msg]);
  });
});

describe('parseRequest: stdin', () => {
  it.each([
    ['', 'line 1, column 1: unexpected end of the text'],
    ['{', null],
    ['not json', null],
  ])('bad JSON %j → code 6', (text, jsonMsg) => {
    const expected = jsonMsg ?? jsonSyntaxMessage(text);
    const err = thrown(() => parseRequest('ADD', FULL_ENV, Buffer.from(text)));
    expect(err.code).toBe(6);
    expect(err.msg).toBe(`failed to decode network config from stdin: ${expected}`);
    expect(err.cause).toBeInstanceOf(SyntaxError);
  });

  it.each([
    ['[]', 'want a JSON object, got an array'],
    ['null', 'want a JSON object, got null'],
    ['"x"', 'want a JSON object, got string'],
    ['3', 'want a JSON object, got number'],
    ['{"name":5}', '"name" must be a string, got 5'],
    ['{"name":"n","cniVersion":1.1}', '"cniVersion" must be a string, got 1.1'],
  ])('%s → code 6 %s', (text, rest) => {
    const err = thrown(() => parseRequest('ADD', FULL_ENV, Buffer.from(text)));
    expect([err.code, err.msg]).toEqual([6, `failed to decode network config from stdin: ${rest}`]);
  });

  it.each([
    ['{}', 'missing network name'],
    ['{"name":""}', 'missing network name'],
    ['{"name":null}', 'missing network name'],
    ['{"name":"has space"}', 'invalid characters found in network name "has space"'],
    ['{"name":"_x"}', 'invalid characters found in network name "_x"'],
  ])('%s → code 7 %s', (text, msg) => {
    const err = thrown(() => parseRequest('ADD', FULL_ENV, Buffer.from(text)));
    expect([err.code, err.msg]).toEqual([7, msg]);
  });
});

describe('parseRequest: versions', () => {
  const SUPPORTED = '[0.1.0, 0.2.0, 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0]';

  it.each([
    [undefined, '0.1.0'],
    [null, '0.1.0'],
    ['', '0.1.0'],
    ['0.3.1', '0.3.1'],
    ['1.0.0', '1.0.0'],
  ])('cniVersion %j is read as %s', (cniVersion, expected) => {
    expect(parseRequest('ADD', FULL_ENV, conf({ cniVersion })).cniVersion).toBe(expected);
  });

  it.each([
    ['ADD', '0.5.0', `incompatible CNI versions: config is "0.5.0", plugin supports ${SUPPORTED}`],
    ['DEL', '2.0.0', `incompatible CNI versions: config is "2.0.0", plugin supports ${SUPPORTED}`],
    ['ADD', '1.0', `incompatible CNI versions: config is "1.0", plugin supports ${SUPPORTED}`],
    ['CHECK', 'x', `incompatible CNI versions: config is "x", plugin supports ${SUPPORTED}`],
    ['CHECK', '1.2.0', `incompatible CNI versions: config is "1.2.0", plugin supports ${SUPPORTED}`],
    ['CHECK', '0.3.1', 'config version does not allow CHECK'],
    ['CHECK', undefined, 'config version does not allow CHECK'],
    ['CHECK', '0.3.5', 'config version does not allow CHECK'],
    ['STATUS', '1.0.0', 'config version does not allow STATUS'],
    ['GC', '0.4.0', 'config version does not allow GC'],
  ] as const)('%s with cniVersion %j → code 1 %s', (cmd, cniVersion, msg) => {
    const err = thrown(() => parseRequest(cmd, FULL_ENV, conf({ cniVersion })));
    expect([err.code, err.msg]).toEqual([1, msg]);
  });

  it.each([
    ['CHECK', '0.4.0'],
    ['CHECK', '1.1.0'],
    ['STATUS', '1.1.0'],
    ['GC', '1.1.0'],
    ['DEL', '0.1.0'],
  ] as const)('%s allows cniVersion %s', (cmd, cniVersion) => {
    expect(parseRequest(cmd, FULL_ENV, conf({ cniVersion })).cniVersion).toBe(cniVersion);
  });
});

describe('validateContainerId', () => {
  it.each(['a', '0', 'abc-DEF_1.2', 'f'.repeat(64)])('accepts %j', (id) => {
    expect(() => validateContainerId(id)).not.toThrow();
  });

  it('empty → code 3', () => {
    const err = thrown(() => validateContainerId(''));
    expect([err.code, err.msg]).toEqual([3, 'missing containerID']);
  });

  it.each(['-a', '.a', '_a', 'a b', 'a/b', 'a:b', 'a\n', 'é'])('rejects %j with code 4', (id) => {
    const err = thrown(() => validateContainerId(id));
    expect([err.code, err.msg]).toEqual([4, `invalid characters in containerID ${JSON.stringify(id)}`]);
    expect(err.details).toBe('use letters, digits, "_", "." and "-", starting with a letter or digit');
  });
});

describe('validateIfName', () => {
  it.each(['eth0', 'net1', 'a', '123456789012345', 'eth0.100', 'veth-_@#'])('accepts %j', (name) => {
    expect(() => validateIfName(name)).not.toThrow();
  });

  it.each([
    ['', 'interface name is empty'],
    ['1234567890123456', 'interface name "1234567890123456" is too long: 16 bytes, at most 15 allowed'],
    ['ééééééé12', 'interface name "ééééééé12" is too long: 16 bytes, at most 15 allowed'],
    ['.', 'interface name "." is not allowed: "." and ".." are reserved'],
    ['..', 'interface name ".." is not allowed: "." and ".." are reserved'],
    ['a/b', 'interface name "a/b" contains "/": "/", ":" and whitespace are not allowed'],
    ['a:b', 'interface name "a:b" contains ":": "/", ":" and whitespace are not allowed'],
    ['a b', 'interface name "a b" contains " ": "/", ":" and whitespace are not allowed'],
    ['a\tb/', 'interface name "a\\tb/" contains "\\t": "/", ":" and whitespace are not allowed'],
    ['a\u00a0b', 'interface name "a\u00a0b" contains "\u00a0": "/", ":" and whitespace are not allowed'],
    ['a\u0085b', 'interface name "a\u0085b" contains "\u0085": "/", ":" and whitespace are not allowed'],
  ])('rejects %j with code 4', (name, msg) => {
    const err = thrown(() => validateIfName(name));
    expect([err.code, err.msg]).toEqual([4, msg]);
  });

  it('accepts U+FEFF, which Go does not count as whitespace', () => {
    expect(() => validateIfName('a\ufeffb')).not.toThrow();
  });
});

describe('validateNetworkName', () => {
  it.each(['multus-cni-network', 'a', 'A.b_c-1'])('accepts %j', (name) => {
    expect(() => validateNetworkName(name)).not.toThrow();
  });

  it.each([
    ['', 'missing network name'],
    ['-x', 'invalid characters found in network name "-x"'],
    ['a/b', 'invalid characters found in network name "a/b"'],
  ])('rejects %j with code 7', (name, msg) => {
    const err = thrown(() => validateNetworkName(name));
    expect([err.code, err.msg]).toEqual([7, msg]);
  });
});

describe('VERSION and about', () => {
  it('formatVersionInfo is skel’s reply', () => {
    expect(formatVersionInfo()).toBe(
      '{"cniVersion":"1.1.0","supportedVersions":["0.1.0","0.2.0","0.3.0","0.3.1","0.4.0","1.0.0","1.1.0"]}',
    );
  });

  it('aboutText names the plugin, what it is and the versions', () => {
    expect(aboutText('0.1.0')).toBe(
      'multus-ts 0.1.0: meta-plugin that delegates to other CNI plugins\n' +
        'CNI protocol versions supported: 0.1.0, 0.2.0, 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0\n',
    );
  });
});
