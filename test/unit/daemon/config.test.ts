/** daemon-config.json parsing: Multus thick's keys and defaults, the 00-multus.conf keys, clear errors. */
import { describe, expect, it } from 'vitest';
import { DaemonConfigError, parseDaemonConfig } from '../../../src/daemon/config.ts';

const parse = (o: unknown) => parseDaemonConfig(JSON.stringify(o));

describe('parseDaemonConfig', () => {
  it('defaults as Multus thick (socketDir /run/multus/, cniConfigDir /etc/cni/net.d, multusConfigFile auto)', () => {
    const c = parse({});
    expect(c).toMatchObject({
      socketDir: '/run/multus/',
      daemonSocketDir: '/run/multus/',
      chrootDir: '',
      cniConfigDir: '/etc/cni/net.d',
      multusAutoconfigDir: '/etc/cni/net.d',
      multusConfigFile: 'auto',
      multusMasterCNI: '',
      connectionLimit: 0,
      metricsPort: undefined,
      metricsBindAddress: '127.0.0.1', // the node itself unless the config opts into other addresses
      shutdownGraceMs: 30_000,
      shutdownDrainMs: 2_000,
      cleanupConfigOnExit: false,
      multusKeys: {},
      shimWaitSeconds: undefined,
      delegateConcurrency: undefined,
      delegateExec: 'daemon', // Multus' way unless the config says "caller"
      dropIdleFilePages: true,
    });
  });

  it('the DRA keys of 00-multus.conf reach the daemon as `dra` (docs/configuration.md)', () => {
    expect(parse({}).dra).toEqual({
      networks: false,
      driverName: 'multus.k8s.cni.cncf.io',
      kubeletDir: '/var/lib/kubelet',
      inlineConfigFromClaims: false,
    });
    const set = parse({
      draNetworks: true,
      draDriverName: 'net.example.com',
      kubeletDir: '/k',
      draInlineConfigFromClaims: true,
    });
    expect(set.dra).toEqual({
      networks: true,
      driverName: 'net.example.com',
      kubeletDir: '/k',
      inlineConfigFromClaims: true,
    });
    expect(set.multusKeys).toMatchObject({ draNetworks: true, draDriverName: 'net.example.com' });
    expect(() => parse({ draDriverName: 'Bad_Name' })).toThrow(
      /daemon config: draDriverName "Bad_Name" is not a DNS subdomain/,
    );
  });

  it('dropIdleFilePages: true unless set to false (daemon/pages.ts)', () => {
    expect(parse({ dropIdleFilePages: false }).dropIdleFilePages).toBe(false);
    expect(parse({ dropIdleFilePages: true }).dropIdleFilePages).toBe(true);
    expect(() => parse({ dropIdleFilePages: 'no' })).toThrow(/`dropIdleFilePages` must be/);
  });

  it('delegateConcurrency: delegates at once, 0 = no limit, unset = from the memory limit (daemon/memory.ts)', () => {
    expect(parse({ delegateConcurrency: 0 }).delegateConcurrency).toBe(0);
    expect(parse({ delegateConcurrency: 16 }).delegateConcurrency).toBe(16);
    expect(() => parse({ delegateConcurrency: -1 })).toThrow(/`delegateConcurrency` must be a whole number/);
  });

  it('delegateExec: "daemon" (unset) or "caller"; anything else is refused', () => {
    expect(parse({ delegateExec: 'caller' }).delegateExec).toBe('caller');
    expect(parse({ delegateExec: 'daemon' }).delegateExec).toBe('daemon');
    expect(() => parse({ delegateExec: 'shim' })).toThrow(/`delegateExec` must be "daemon" or "caller" \(got "shim"\)/);
    expect(() => parse({ delegateExec: true })).toThrow(/`delegateExec` must be a string/);
  });

  it('shimWaitSeconds: a whole number of seconds from 0 to 600 (unset: the shim keeps its default)', () => {
    expect(parse({ shimWaitSeconds: 0 }).shimWaitSeconds).toBe(0);
    expect(parse({ shimWaitSeconds: 600 }).shimWaitSeconds).toBe(600);
    for (const bad of [-1, 601, 1.5, '30'])
      expect(() => parse({ shimWaitSeconds: bad })).toThrow(/`shimWaitSeconds` must be a whole number from 0 to 600/);
  });

  it('cleanupConfigOnExit: false unless set to true; anything but a boolean is an error naming the key', () => {
    expect(parse({ cleanupConfigOnExit: true }).cleanupConfigOnExit).toBe(true);
    expect(parse({ cleanupConfigOnExit: false }).cleanupConfigOnExit).toBe(false);
    expect(() => parse({ cleanupConfigOnExit: 'yes' })).toThrow(/`cleanupConfigOnExit` must be true or false/);
  });

  it("reads Multus thick's keys, keeps the 00-multus.conf keys, ignores unknown ones", () => {
    const c = parse({
      chrootDir: '/hostroot',
      socketDir: '/host/run/multus/',
      cniVersion: '0.3.1',
      logLevel: 'VERBOSE',
      logFile: '/var/log/multus.log',
      connectionLimit: 8,
      metricsPort: 9091,
      multusAutoconfigDir: '/host/etc/cni/net.d',
      multusMasterCNI: '10-flannel.conflist',
      kubeconfig: '/etc/kubeconfig',
      binDir: '/opt/cni/bin',
      readinessindicatorfile: '/run/ready',
      perNodeCertificate: { enabled: false },
      somethingElse: 1,
    });
    expect(c).toMatchObject({
      chrootDir: '/hostroot',
      socketDir: '/host/run/multus/',
      daemonSocketDir: '/host/run/multus/',
      logLevel: 'verbose',
      connectionLimit: 8,
      metricsPort: 9091,
      multusMasterCNI: '10-flannel.conflist',
      readinessIndicatorFile: '/run/ready',
    });
    expect(c.multusKeys).toEqual({
      cniVersion: '0.3.1',
      logLevel: 'VERBOSE',
      logFile: '/var/log/multus.log',
      kubeconfig: '/etc/kubeconfig',
      binDir: '/opt/cni/bin',
      readinessindicatorfile: '/run/ready',
    });
  });

  it("warns and goes on where Multus does: an unknown logLevel (Multus' line, the default level), a metricsPort that is no port (no /metrics)", () => {
    expect(parse({}).warnings).toEqual([]);
    const info = parse({ logLevel: 'info' });
    expect([info.logLevel, info.warnings]).toEqual(['error', ['multus logging: cannot set logging level to info']]);
    for (const port of [0, -1, 70000]) {
      const c = parse({ metricsPort: port });
      expect([c.metricsPort, c.warnings]).toEqual([
        undefined,
        [`daemon config: \`metricsPort\` ${port} is not a port from 1 to 65535: /metrics is not served`],
      ]);
    }
  });

  const bad: [string, unknown, RegExp][] = [
    ['not JSON', '{', /not valid JSON/],
    ['an array', [], /JSON object/],
    ['relative socketDir', { socketDir: 'run' }, /`socketDir` must be an absolute path/],
    ['connectionLimit 0', { connectionLimit: 0 }, /`connectionLimit` must be a whole number from 1/],
    ['metricsPort text', { metricsPort: '9091' }, /`metricsPort` must be a whole number from 1 to 65535/],
    [
      'metricsBindAddress not an address',
      { metricsBindAddress: 'node-1' },
      /`metricsBindAddress` must be an IP address/,
    ],
    ['relative multusConfigFile', { multusConfigFile: 'x.conf' }, /`multusConfigFile` must be "auto" or an absolute/],
    ['multusMasterCNI with a slash', { multusMasterCNI: '../x.conf' }, /`multusMasterCNI` must be a file name/],
    ['unknown cniVersion', { cniVersion: '9.9.9' }, /`cniVersion` must be one of/],
    ['logLevel of the wrong type', { logLevel: 3 }, /`logLevel` must be a string/],
    ['metricsPort a fraction', { metricsPort: 9091.5 }, /`metricsPort` must be a whole number/],
    ['forceCNIVersion text', { forceCNIVersion: 'yes' }, /`forceCNIVersion` must be true or false/],
    ['a 00-multus.conf key of the wrong type', { binDir: 5 }, /`binDir` must be a string/],
    ['delegates of the wrong type', { delegates: {} }, /`delegates` must be an array/],
  ];
  for (const [name, input, msg] of bad) {
    it(`refuses ${name} with one line naming the key`, () => {
      let err: unknown;
      try {
        parseDaemonConfig(typeof input === 'string' ? input : JSON.stringify(input));
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(DaemonConfigError);
      expect((err as Error).message).toMatch(msg);
      expect((err as Error).message).not.toContain('\n');
    });
  }
});
