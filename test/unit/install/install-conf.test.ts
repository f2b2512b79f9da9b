/**
 * install/: the pure parts of `multus install` and `--is-default-ready`: options (every bad option), Go's JSON
 * form, the generated 00-multus.conf(list), the master choice, the kubeconfig text, the readiness schedule and
 * the readiness answer with fake deps.
 */
import { describe, expect, it } from 'vitest';
import { DEFAULT_BACKOFF } from '../../../src/base/backoff.ts';
import type { ReadinessDeps } from '../../../src/multus/readiness.ts';
import { goMarshal, goNumber } from '../../../src/base/gojson.ts';
import { type KubeconfigInputs, renderKubeconfig } from '../../../src/install/kubeconfig.ts';
import type { ThinConfOptions } from '../../../src/multus/generate-conf.ts';
import { generateMultusConf as generate, pickMaster as pick } from '../../../src/multus/generate-conf.ts';

/** The one generator in its thin mode (`multus install`). */
const generateMultusConf = (text: string, path: string, o: ThinConfOptions) =>
  generate(text, path, { ...o, mode: 'thin' });
/** The one master rule in its thin mode, null for none. */
const pickMaster = (names: string[], wanted: string, isDir: (n: string) => boolean) =>
  pick(names, wanted, { mode: 'thin', isDir }) ?? null;
import { FLAGS, InstallError, defaultOptions, parseInstallArgs } from '../../../src/install/options.ts';
import { isDefaultReady, parseReadyArgs, readySchedule } from '../../../src/install/ready.ts';

describe('parseInstallArgs', () => {
  it("has Multus' defaults", () => {
    const o = parseInstallArgs([]);
    expect(o).toMatchObject({
      cniBinDir: '/host/opt/cni/bin',
      cniConfDir: '/host/etc/cni/net.d',
      cniVersion: '',
      multusConfFile: 'auto',
      multusBinFile: '/usr/src/multus-cni/bin/multus',
      multusCniConfDir: '/host/etc/cni/multus/net.d',
      multusCniConfDirHost: '/etc/cni/multus/net.d',
      skipMultusBinaryCopy: false,
      multusKubeconfigFileHost: '/etc/cni/net.d/multus.d/multus.kubeconfig',
      multusMasterCniFileName: '',
      namespaceIsolation: false,
      globalNamespaces: '',
      multusAutoconfigDir: '/host/etc/cni/net.d',
      multusLogToStderr: true,
      multusLogLevel: '',
      multusLogFile: '',
      overrideNetworkName: false,
      cleanupConfigOnExit: false,
      skipConfigWatch: false,
      forceConfigWatch: false,
      renameConfFile: false,
      readinessIndicatorFile: '',
      additionalBinDir: '',
      multusBinFileSet: false,
    });
  });

  it('takes --name=value, --name value and pflag booleans', () => {
    const o = parseInstallArgs([
      '--cni-bin-dir=/b',
      '--cni-conf-dir',
      '/c',
      '--namespace-isolation',
      '--multus-log-to-stderr=false',
      '--cleanup-config-on-exit=T',
      '--multus-bin-file=/x',
      '--multus-cni-conf-dir=/m',
      '--force-config-watch',
    ]);
    expect(o).toMatchObject({
      cniBinDir: '/b',
      cniConfDir: '/c',
      namespaceIsolation: true,
      multusLogToStderr: false,
      cleanupConfigOnExit: true,
      multusBinFile: '/x',
      multusBinFileSet: true,
      multusCniConfDirHost: '/m',
      forceConfigWatch: true,
    });
  });

  it('lists every option of the issue', () => {
    for (const name of [
      'additional-bin-dir',
      'cleanup-config-on-exit',
      'cni-bin-dir',
      'cni-conf-dir',
      'cni-version',
      'global-namespaces',
      'multus-autoconfig-dir',
      'multus-bin-file',
      'multus-cni-conf-dir',
      'multus-conf-file',
      'multus-kubeconfig-file-host',
      'multus-log-file',
      'multus-log-level',
      'multus-log-to-stderr',
      'multus-master-cni-file-name',
      'namespace-isolation',
      'override-network-name',
      'readiness-indicator-file',
      'rename-conf-file',
      'skip-config-watch',
      'force-config-watch', // Multus #1532 (HEAD, not v4.3.0)
      'skip-multus-binary-copy',
    ]) {
      expect(FLAGS[name], name).toBeDefined();
    }
  });

  it.each<[string[], RegExp]>([
    [['--bogus'], /unknown option --bogus/],
    [['-cni-bin-dir=/x'], /unexpected argument "-cni-bin-dir=\/x"/],
    [['extra'], /unexpected argument "extra"/],
    [['--cni-bin-dir'], /--cni-bin-dir needs a value/],
    [['--namespace-isolation=yes'], /invalid value "yes" for --namespace-isolation/],
    [['--multus-log-level=loud'], /did not understand: "loud"/],
    [['--multus-master-cni-file-name=../x.conf'], /not a path/],
    [['--cni-version=one'], /not a CNI version/],
    [['--force-cni-version'], /needs --cni-version/],
    [['--cni-conf-dir='], /--cni-conf-dir is empty/],
    [['--multus-log-file=/a\nb'], /control character/],
    [['--cleanup-when-deleted=kube-multus-ds'], /write the DaemonSet as NAMESPACE\/NAME/],
    [['--cleanup-when-deleted=Kube/x'], /write the DaemonSet as NAMESPACE\/NAME/],
  ])('refuses %j', (argv, msg) => {
    expect(() => parseInstallArgs(argv)).toThrow(InstallError);
    expect(() => parseInstallArgs(argv)).toThrow(msg);
  });
});

describe('goMarshal', () => {
  it('sorts keys at every depth and escapes as Go does', () => {
    expect(goMarshal({ b: 1, a: { d: [true, null], c: 'x<y>&z\u2028"\\\u0001' } })).toBe(
      '{"a":{"c":"x\\u003cy\\u003e\\u0026z\\u2028\\"\\\\\\u0001","d":[true,null]},"b":1}',
    );
  });

  it.each<[number, string]>([
    [1, '1'],
    [1.5, '1.5'],
    [-0, '-0'],
    [1e20, '100000000000000000000'],
    [1e21, '1e+21'],
    [1.5e-7, '1.5e-7'],
    [1e-6, '0.000001'],
    [1e-10, '1e-10'],
    [123456789.125, '123456789.125'],
  ])('writes %d as %s', (n, s) => {
    expect(goNumber(n)).toBe(s);
  });
});

const CONF_OPTS = {
  ...defaultOptions(),
  multusCniConfDirHost: '/etc/cni/multus/net.d',
};

describe('generateMultusConf', () => {
  it('writes a conf for a pre-1.0 master with the capabilities of the top level', () => {
    const g = generateMultusConf(
      '{"cniVersion":"0.3.1","name":"n","type":"bridge","capabilities":{"portMappings":true}}',
      '/d/10.conf',
      CONF_OPTS,
    );
    expect(g.fileName).toBe('00-multus.conf');
    expect(g.text).toBe(`{
        "cniVersion": "0.3.1",
        "name": "multus-cni-network",
        "type": "multus",
        "capabilities": {"portMappings":true},
        "confDir": "/etc/cni/multus/net.d",
        "kubeconfig": "/etc/cni/net.d/multus.d/multus.kubeconfig",
        "delegates": [
                {"capabilities":{"portMappings":true},"cniVersion":"0.3.1","name":"n","type":"bridge"}
        ]
}
`);
  });

  it('writes a conflist for 1.0.0 and later, with every option line in order', () => {
    const g = generateMultusConf(
      '{"cniVersion":"1.1.0","name":"cbr0","plugins":[{"type":"a","capabilities":{"x":true,"b":false}},' +
        '{"type":"p","capabilities":{"x":false}}]}',
      '/d/10.conflist',
      {
        ...CONF_OPTS,
        overrideNetworkName: true,
        namespaceIsolation: true,
        globalNamespaces: 'a,b',
        multusLogToStderr: false,
        multusLogLevel: 'DEBUG',
        multusLogFile: '/l',
        additionalBinDir: '/bin2',
        readinessIndicatorFile: '/r',
        multusKubeconfigFileHost: '/k',
      },
    );
    expect(g.fileName).toBe('00-multus.conflist');
    expect(g.text).toBe(`{
    "cniVersion": "1.1.0",
    "name": "cbr0",
    "plugins": [ {
        "type": "multus",
        "capabilities": {"b":false,"x":false},
        "namespaceIsolation": true,
        "globalNamespaces": "a,b",
        "logToStderr": false,
        "logLevel": "debug",
        "logFile": "/l",
        "binDir": "/bin2",
        "confDir": "/etc/cni/multus/net.d",
        "readinessindicatorfile": "/r",
        "kubeconfig": "/k",
        "delegates": [
            {"cniVersion":"1.1.0","name":"cbr0","plugins":[{"capabilities":{"b":false,"x":true},"type":"a"},{"capabilities":{"x":false},"type":"p"}]}
        ]
    }]
}
`);
    expect(JSON.parse(g.text).plugins[0].delegates[0].name).toBe('cbr0');
  });

  it('forces the version with --force-cni-version and escapes a name Multus would write raw', () => {
    const g = generateMultusConf('{"cniVersion":"0.3.1","name":"a\\"b"}', '/m', {
      ...CONF_OPTS,
      cniVersion: '1.0.0',
      forceCniVersion: true,
      overrideNetworkName: true,
    });
    expect(g.fileName).toBe('00-multus.conflist');
    expect(JSON.parse(g.text)).toMatchObject({ cniVersion: '1.0.0', name: 'a"b' });
  });

  it.each<[string, Partial<typeof CONF_OPTS>, RegExp]>([
    ['{', {}, /\/m: cannot read master CNI config json/],
    ['[]', {}, /not a JSON object/],
    ['{"name":"x"}', {}, /no "cniVersion"/],
    ['{"cniVersion":1}', {}, /"cniVersion" is not a string/],
    ['{"cniVersion":"0.4.0"}', { cniVersion: '1.0.0' }, /Multus cni version is "1.0.0" while master .* "0.4.0"/],
    ['{"cniVersion":"0.4.0"}', { overrideNetworkName: true }, /no "name"/],
    ['{"cniVersion":"1.0.0","plugins":null}', {}, /"plugins" is not a list/],
    ['{"cniVersion":"1.0.0","plugins":[{"capabilities":{"a":1}}]}', {}, /plugins\[0\]\.capabilities\.a is not/],
    ['{"cniVersion":"0.4.0","capabilities":[]}', {}, /capabilities is not an object/],
  ])('refuses master %s', (text, extra, msg) => {
    expect(() => generateMultusConf(text, '/m', { ...CONF_OPTS, ...extra })).toThrow(msg);
  });
});

describe('pickMaster', () => {
  const none = (): boolean => false;
  it('takes the first .conf/.conflist in byte order, never a generated file nor a directory', () => {
    expect(pickMaster(['b.conf', '00-multus.conf', '00-multus.conflist', 'a.json', 'Z.conflist'], '', none)).toBe(
      'Z.conflist',
    );
    expect(pickMaster(['00-multus.conf.new', 'a.conf', 'x'], '', (n) => n === 'a.conf')).toBeNull();
    expect(pickMaster(['10.conf', '20.conflist'], '20.conflist', none)).toBe('20.conflist');
    expect(pickMaster(['10.conf'], '20.conflist', none)).toBeNull();
  });
});

describe('renderKubeconfig', () => {
  const base: KubeconfigInputs = {
    env: { KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '6443' },
    ca: Buffer.from('CA\n'),
    token: Buffer.from('tok.en\n'),
    skipTlsVerify: false,
    caPath: '/sa/ca.crt',
    tokenPath: '/sa/token',
  };
  it("is Multus' template with the CA inline and the host bracketed", () => {
    const t = renderKubeconfig(base);
    expect(t).toContain('    server: https://[fd00::1]:6443\n    certificate-authority-data: Q0EK\n');
    expect(t).toContain('    token: "tok.en"\n');
    expect(t.startsWith('# Kubeconfig file for Multus CNI plugin.\napiVersion: v1\n')).toBe(true);
    expect(renderKubeconfig({ ...base, skipTlsVerify: true })).toContain('    insecure-skip-tls-verify: true\n');
  });
  it.each<[Partial<KubeconfigInputs>, RegExp]>([
    [{ env: {} }, /KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set/],
    [{ token: Buffer.from('') }, /\/sa\/token is empty/],
    [{ token: Buffer.from('a"b') }, /\/sa\/token has characters/],
    [{ ca: Buffer.from('') }, /\/sa\/ca.crt is empty/],
  ])('refuses %j', (extra, msg) => {
    expect(() => renderKubeconfig({ ...base, ...extra })).toThrow(msg);
  });
});

describe('--is-default-ready', () => {
  it('parses its arguments', () => {
    expect(parseReadyArgs(['--is-default-ready', '/f', '--wait', '3'])).toMatchObject({ file: '/f', waitSeconds: 3 });
    expect(parseReadyArgs(['--is-default-ready', '--wait=0', '--cni-conf-dir=/c'])).toMatchObject({
      file: '',
      waitSeconds: 0,
      cniConfDir: '/c',
    });
    expect(() => parseReadyArgs(['--is-default-ready', '--wait', 'x'])).toThrow(/--wait x/);
    expect(() => parseReadyArgs(['--is-default-ready', 'a', 'b'])).toThrow(/unexpected argument "b"/);
  });

  it('waits on the backoff, or cuts --wait into its steps', () => {
    const none = (): number => 0;
    expect(readySchedule(null, DEFAULT_BACKOFF, none)).toEqual([250, 1000, 4000, 16000]);
    expect(readySchedule(0, DEFAULT_BACKOFF, none)).toEqual([]);
    expect(readySchedule(3, DEFAULT_BACKOFF, none)).toEqual([250, 1000, 1750]);
    expect(readySchedule(30, DEFAULT_BACKOFF, none)).toEqual([250, 1000, 4000, 16000, 8750]);
  });

  function deps(appearsAt: number): ReadinessDeps & { sleeps: number[] } {
    let checks = 0;
    const sleeps: number[] = [];
    return {
      sleeps,
      async exists() {
        return ++checks >= appearsAt;
      },
      async sleep(ms) {
        sleeps.push(ms);
      },
    };
  }

  it('answers at once when the file is there, after it appears, or not at all', async () => {
    const none = (): number => 0;
    const args = { file: '/ready', waitSeconds: null, cniConfDir: '/x', hostPrefix: '' };
    const now = deps(1);
    expect(await isDefaultReady(args, now, none)).toEqual({ ready: true, line: 'ready: /ready exists' });
    expect(now.sleeps).toEqual([]);
    const later = deps(3);
    expect((await isDefaultReady(args, later, none)).ready).toBe(true);
    expect(later.sleeps).toEqual([250, 1000]);
    const never = deps(Infinity);
    expect(await isDefaultReady({ ...args, waitSeconds: 0 }, never, none)).toEqual({
      ready: false,
      line: 'not ready: the readiness indicator file /ready does not exist (after 1 checks over 0 s)',
    });
  });
});
