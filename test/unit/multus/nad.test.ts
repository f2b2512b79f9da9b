import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseNetwork } from '../../../src/cni/network.ts';
import type { Nad } from '../../../src/k8s/types.ts';
import { delegateFromNad, mergeConfigArgs, networkFromNad } from '../../../src/multus/nad.ts';

const confDir = mkdtempSync(join(tmpdir(), 'mts-nad-'));
afterAll(() => rmSync(confDir, { recursive: true, force: true }));
writeFileSync(
  join(confDir, '10-file.conf'),
  JSON.stringify({ cniVersion: '0.4.0', name: 'from-file', type: 'macvlan' }),
);
writeFileSync(join(confDir, '20-nested.conf'), JSON.stringify({ cniVersion: '1.0.0', name: 'nested', type: 'multus' }));

function nad(name: string, config: unknown, annotations?: Record<string, string>): Nad {
  return {
    metadata: { namespace: 'ns1', name, ...(annotations ? { annotations } : {}) },
    spec: config === undefined ? {} : { config: typeof config === 'string' ? config : JSON.stringify(config) },
  };
}

describe('networkFromNad', () => {
  it('injects the NAD name when the config has none (docs/behaviour.md#npwg), into the bytes too', () => {
    const network = networkFromNad(nad('net-a', { cniVersion: '1.0.0', type: 'bridge' }), confDir);
    expect(network.name).toBe('net-a');
    expect(JSON.parse(network.bytes.toString()).name).toBe('net-a');
  });

  it("keeps the config's own name", () => {
    expect(networkFromNad(nad('net-a', { cniVersion: '1.0.0', name: 'own', type: 'bridge' }), confDir).name).toBe(
      'own',
    );
  });

  it('refuses the confDir file of an empty spec.config when it is the meta-plugin', () => {
    expect(() => networkFromNad(nad('nested', undefined), confDir)).toThrowError(
      expect.objectContaining({
        code: 7,
        msg: 'the config file of NetworkAttachmentDefinition ns1/nested: type "multus" is the multus meta-plugin itself, which may not be a delegate',
      }),
    );
  });

  it('uses the confDir file of the same name when spec.config is empty', () => {
    expect(networkFromNad(nad('from-file', undefined), confDir).plugins[0]!.type).toBe('macvlan');
    expect(networkFromNad(nad('from-file', ''), confDir).cniVersion).toBe('0.4.0');
  });

  it.each([
    ['not JSON', '{"type":', 'spec.config is not JSON'],
    ['an array', '[]', 'spec.config must be a JSON object'],
    ['no file for an empty config', undefined, 'has an empty spec.config and no config file named "nothere"'],
    // issue 51, finding 1: a NAD may not nest the meta-plugin (src/multus/nesting.ts)
    [
      'the meta-plugin',
      { cniVersion: '1.0.0', type: 'multus', binDir: '/tmp', delegates: [] },
      'NetworkAttachmentDefinition ns1/nothere: type "multus" is the multus meta-plugin itself',
    ],
    ['the shim', { cniVersion: '1.0.0', type: 'multus-shim' }, 'type "multus-shim" is the multus meta-plugin itself'],
    [
      'the meta-plugin in a conflist',
      { cniVersion: '1.0.0', plugins: [{ type: 'bridge' }, { type: 'multus' }] },
      'type "multus" is the multus meta-plugin itself',
    ],
    // finding 7: the error says where the text stops being JSON, never what it holds
    [
      'a file-like text',
      'root:x:0:0:root:/root:/bin/bash',
      'spec.config is not JSON: line 1, column 1: expected a JSON value',
    ],
  ])('rejects %s with code 7', (_t, config, text) => {
    expect(() => networkFromNad(nad('nothere', config), confDir)).toThrowError(
      expect.objectContaining({ code: 7, msg: expect.stringContaining(text) }),
    );
  });
});

describe('mergeConfigArgs', () => {
  it('merges into args.cni of a single config, the selection winning, other keys kept', () => {
    const network = parseNetwork({
      cniVersion: '1.0.0',
      name: 'n',
      type: 'bridge',
      args: { cni: { a: 1, b: 1 }, other: true },
    });
    const merged = mergeConfigArgs(network, { b: 2, c: 3 });
    expect(JSON.parse(merged.bytes.toString()).args).toEqual({ cni: { a: 1, b: 2, c: 3 }, other: true });
    expect(JSON.parse(network.bytes.toString()).args.cni).toEqual({ a: 1, b: 1 });
  });

  it('merges into every plugin of a conflist, creating args where missing', () => {
    const network = parseNetwork({
      cniVersion: '1.0.0',
      name: 'n',
      plugins: [{ type: 'bridge' }, { type: 'tuning', args: {} }],
    });
    const merged = mergeConfigArgs(network, { x: 'y' });
    expect(merged.plugins.map((p) => p.args)).toEqual([{ cni: { x: 'y' } }, { cni: { x: 'y' } }]);
  });

  it.each([
    [{ args: 'text' }, '"args" of network "n" is not an object'],
    [{ args: { cni: [1] } }, '"args.cni" of network "n" is not an object'],
  ])('rejects a non-object args (Multus panics): %j', (extra, text) => {
    const network = parseNetwork({ cniVersion: '1.0.0', name: 'n', type: 'bridge', ...extra });
    expect(() => mergeConfigArgs(network, { a: 1 })).toThrowError(
      expect.objectContaining({ code: 7, msg: expect.stringContaining(text) }),
    );
  });

  it('is applied by delegateFromNad, with the display name and resource name', () => {
    const d = delegateFromNad(
      nad('net-a', { cniVersion: '1.0.0', type: 'sriov' }, { 'k8s.v1.cni.cncf.io/resourceName': 'intel.com/sriov' }),
      confDir,
      { configArgs: { vlan: 5 } },
      'selection',
    );
    expect(d.displayName).toBe('ns1/net-a');
    expect(d.request.resourceName).toBe('intel.com/sriov');
    expect(d.network.plugins[0]!.args).toEqual({ cni: { vlan: 5 } });
  });
});
