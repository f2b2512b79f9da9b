import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { auxiliaryChain, passthru } from '../../../src/multus/auxchain.ts';
import { parseMultusConf } from '../../../src/multus/conf.ts';
import { silentLogger } from '../../../src/base/log.ts';

const dir = mkdtempSync(join(tmpdir(), 'mts-aux-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
writeFileSync(join(dir, '10-cluster.conf'), JSON.stringify({ cniVersion: '1.0.0', name: 'cluster', type: 'bridge' }));
mkdirSync(join(dir, 'aux'));
writeFileSync(
  join(dir, 'aux', '20-b.conf'),
  JSON.stringify({ type: 'tuning', sysctl: { 'net.ipv4.conf.all.arp_filter': '1' } }),
);
writeFileSync(join(dir, 'aux', '10-a.conf'), JSON.stringify({ type: 'sbr' }));
writeFileSync(join(dir, 'aux', 'ignored.json'), '{}');

function conf(extra: Record<string, unknown>) {
  return parseMultusConf(
    JSON.stringify({
      cniVersion: '1.0.0',
      name: 'multus',
      type: 'multus',
      clusterNetwork: join(dir, '10-cluster.conf'),
      ...extra,
    }),
  );
}

describe('auxiliaryChain', () => {
  it('is passthru followed by the *.conf plugins of <dir of clusterNetwork>/<name>/ in lexical order', () => {
    const chain = auxiliaryChain(conf({ auxiliaryCNIChainName: 'aux' }), silentLogger);
    expect(chain!.network.name).toBe('aux');
    expect(chain!.network.cniVersion).toBe('1.0.0');
    expect(chain!.network.plugins.map((p) => p.type)).toEqual(['passthru', 'sbr', 'tuning']);
    expect(chain!.request).toEqual({});
  });

  it('is not added when the directory adds no plugin, or none is configured', () => {
    expect(auxiliaryChain(conf({ auxiliaryCNIChainName: 'missing' }), silentLogger)).toBeUndefined();
    expect(auxiliaryChain(conf({}), silentLogger)).toBeUndefined();
  });

  it("needs clusterNetwork to be a path (Multus' message)", () => {
    const c = parseMultusConf(
      JSON.stringify({
        cniVersion: '1.0.0',
        name: 'm',
        type: 'multus',
        clusterNetwork: 'cluster',
        confDir: dir,
        auxiliaryCNIChainName: 'aux',
      }),
    );
    expect(() => auxiliaryChain(c, silentLogger)).toThrowError(
      expect.objectContaining({
        code: 7,
        msg: 'auxiliary chain used but clusterNetwork must be a path, and it is not a path: cluster',
      }),
    );
  });

  it('skips a chain whose files do not parse, and logs it', () => {
    mkdirSync(join(dir, 'broken'));
    writeFileSync(join(dir, 'broken', '1.conf'), '{"type":');
    const lines: string[] = [];
    const log = { ...silentLogger, error: (m: string) => void lines.push(m) };
    expect(auxiliaryChain(conf({ auxiliaryCNIChainName: 'broken' }), log)).toBeUndefined();
    expect(lines[0]).toMatch(/^auxiliary chain "broken" skipped: /);
  });
});

describe('passthru', () => {
  it.each([
    ['ADD', '{"cniVersion":"0.4.0"}', '{"cniVersion":"0.4.0","interfaces":[],"ips":[],"routes":[],"dns":{}}'],
    [
      'ADD',
      '{"cniVersion":"1.0.0","prevResult":{"cniVersion":"1.0.0","ips":[{"address":"10.0.0.2/24"}]}}',
      '{"cniVersion":"1.0.0","ips":[{"address":"10.0.0.2/24"}]}',
    ],
    ['DEL', '{"cniVersion":"1.0.0"}', ''],
    ['CHECK', '{"cniVersion":"1.0.0"}', ''],
  ])('%s %s', (command, stdin, out) => {
    expect(passthru(command, Buffer.from(stdin))).toBe(out);
  });

  it('rejects undecodable stdin with code 6', () => {
    expect(() => passthru('ADD', Buffer.from('{'))).toThrowError(expect.objectContaining({ code: 6 }));
  });
});
