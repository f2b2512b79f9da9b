/**
 * multus/generate-conf.ts: the one master rule and the one generator, in both of Multus v4.3.0's modes. The rule is
 * Multus' (cmd/thin_entrypoint getMasterConfigPath for thin, pkg/server/config findMasterPlugin for the shim): the
 * named master, else the first .conf/.conflist in byte order that is not a generated file, where "generated" is
 * `00-multus.conf*` for thin and `00-multus*` for the shim. The thin and shim files' own contents are tested in
 * test/unit/install/install-conf.test.ts and test/unit/daemon/autoconf.test.ts.
 */
import { describe, expect, it } from 'vitest';
import type { ConfMode } from '../../../src/multus/generate-conf.ts';
import { GENERATED_FILES, generateMultusConf, pickMaster } from '../../../src/multus/generate-conf.ts';

const files: Record<string, string> = {
  '00-multus.conf': '{"type":"multus","cniVersion":"1.0.0"}',
  '00-multus-old.conf': '{"type":"bridge","name":"old","cniVersion":"1.0.0"}',
  '05-b.json': '{"type":"bridge","name":"json","cniVersion":"1.0.0"}',
  '10-flannel.conflist': '{"name":"cbr0","cniVersion":"1.0.0","plugins":[{"type":"flannel"}]}',
  'Z-upper.conf': '{"type":"bridge","name":"upper","cniVersion":"1.0.0"}',
  'a-dir.conf': '',
};
const names = Object.keys(files);
const isDir = (n: string) => n === 'a-dir.conf';
const pickIn = (mode: ConfMode, wanted = '', list = names) => pickMaster(list, wanted, { mode, isDir });

describe('pickMaster: one rule, each mode as Multus has it', () => {
  it('thin passes over 00-multus.conf* only, the shim over every 00-multus* name', () => {
    expect(pickIn('thin')).toBe('00-multus-old.conf');
    expect(pickIn('shim')).toBe('10-flannel.conflist');
  });

  it('takes .conf and .conflist only (no .json), in byte order (upper case first), never a directory', () => {
    const list = ['b.json', 'a-dir.conf', 'c.conf', 'Z-upper.conf'];
    for (const mode of ['thin', 'shim'] as const) expect(pickIn(mode, '', list)).toBe('Z-upper.conf');
    expect(pickIn('thin', '', ['b.json', 'a-dir.conf'])).toBeUndefined();
  });

  it('takes the named master when it is there, never a generated file', () => {
    for (const mode of ['thin', 'shim'] as const) {
      expect(pickIn(mode, '05-b.json')).toBe('05-b.json');
      expect(pickIn(mode, 'missing.conf')).toBeUndefined();
      expect(pickIn(mode, '00-multus.conf')).toBeUndefined();
    }
  });

  it('with `read` (the daemon), passes over what cannot be a master: not JSON, or a multus config', () => {
    const read = (n: string) => (n in files ? Buffer.from(files[n]!) : undefined);
    const list = ['01-broken.conf', '02-multus.conf', '10-flannel.conflist'];
    const bytes: Record<string, string> = { '01-broken.conf': '{', '02-multus.conf': '{"type":"multus-shim"}' };
    const readList = (n: string) => (n in bytes ? Buffer.from(bytes[n]!) : read(n));
    expect(pickMaster(list, '', { mode: 'shim', isDir, read: readList })).toBe('10-flannel.conflist');
    expect(pickMaster(list, '', { mode: 'shim', isDir })).toBe('01-broken.conf');
  });
});

describe('generateMultusConf: one generator, two modes', () => {
  const master = files['10-flannel.conflist']!;
  it('thin: type multus with the master as the delegate; shim: type multus-shim with the master as clusterNetwork', () => {
    const thin = generateMultusConf(master, '/etc/cni/net.d/10-flannel.conflist', {
      mode: 'thin',
      cniVersion: '',
      forceCniVersion: false,
      overrideNetworkName: false,
      namespaceIsolation: false,
      globalNamespaces: '',
      multusLogToStderr: true,
      multusLogLevel: '',
      multusLogFile: '',
      additionalBinDir: '',
      multusCniConfDirHost: '',
      readinessIndicatorFile: '',
      multusKubeconfigFileHost: '/k',
    });
    expect(thin.fileName).toBe(GENERATED_FILES[1]);
    expect(JSON.parse(thin.text).plugins[0]).toMatchObject({ type: 'multus', delegates: [{ name: 'cbr0' }] });
    const shim = generateMultusConf(master, '/etc/cni/net.d/10-flannel.conflist', {
      mode: 'shim',
      multusKeys: { kubeconfig: '/k' },
      cniVersion: '',
      overrideNetworkName: false,
      capabilities: {},
      daemonSocketDir: '/run/multus/',
    });
    expect(shim.fileName).toBe(GENERATED_FILES[0]);
    expect(JSON.parse(shim.text)).toMatchObject({
      type: 'multus-shim',
      clusterNetwork: '/etc/cni/net.d/10-flannel.conflist',
      kubeconfig: '/k',
    });
  });

  it('names the master in every refusal, in both modes', () => {
    const shim = { mode: 'shim' as const, multusKeys: {}, cniVersion: '', overrideNetworkName: false };
    expect(() =>
      generateMultusConf('[1]', '/m.conf', { ...shim, capabilities: {}, daemonSocketDir: '/run/multus/' }),
    ).toThrow('master CNI config /m.conf: not a JSON object');
  });
});
