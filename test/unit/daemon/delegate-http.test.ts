/** daemon/delegate-http.ts: decoding and checking a `/delegate` body, and the selection element it amounts to. */
import { describe, expect, it } from 'vitest';
import type { CniError } from '../../../src/base/errors.ts';
import { decodeDelegateBody } from '../../../src/daemon/delegate-http.ts';
import { selectionOf } from '../../../src/daemon/delegate-http.ts';

describe('decodeDelegateBody', () => {
  const env = {
    CNI_COMMAND: 'add',
    CNI_CONTAINERID: 'c1',
    CNI_NETNS: '/var/run/netns/x',
    CNI_IFNAME: 'net1',
    CNI_ARGS: 'K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_UID=u',
  };
  const body = (o: Record<string, unknown>) => Buffer.from(JSON.stringify(o));
  const config = Buffer.from('{"cniVersion":"1.0.0","name":"mv","type":"macvlan"}').toString('base64');

  it("takes CreateDelegateRequest's body (command case-insensitive, cni-args null)", () => {
    const req = decodeDelegateBody(
      body({ env, config, interfaceAttributes: { 'cni-args': null, ips: ['10.1.1.1/24'] } }),
      {},
    );
    expect(req).toMatchObject({ command: 'ADD', containerId: 'c1', ifName: 'net1', network: '' });
    expect(req.config.toString()).toContain('"macvlan"');
    expect(selectionOf(req, 'ns').request).toEqual({ ifname: 'net1', ips: ['10.1.1.1/24'] });
  });

  it('refuses what it cannot run, with the CNI code', () => {
    const code = (o: Record<string, unknown>) => {
      try {
        decodeDelegateBody(body(o), {});
        return 0;
      } catch (e) {
        return (e as CniError).code;
      }
    };
    expect(code({ env: { ...env, CNI_COMMAND: 'GC' }, config })).toBe(4);
    expect(code({ env: { ...env, CNI_IFNAME: '' }, config })).toBe(4);
    expect(code({ env: { ...env, CNI_CONTAINERID: '../x' }, config })).not.toBe(0);
    expect(code({ env })).toBe(7); // ADD with neither config nor network
    expect(code({ env, config, interfaceAttributes: [] })).toBe(6);
  });

  it('checks the interface attributes as a selection element', () => {
    const req = decodeDelegateBody(body({ env, network: 'other/mv', interfaceAttributes: { mac: 'zz' } }), {});
    expect(() => selectionOf(req, 'ns')).toThrow(/invalid MAC address/);
    const ok = decodeDelegateBody(
      body({ env, network: 'other/mv', interfaceAttributes: { 'cni-args': { a: 1 } } }),
      {},
    );
    expect(selectionOf(ok, 'ns')).toEqual({
      name: 'mv',
      namespace: 'other',
      request: { ifname: 'net1', configArgs: { a: 1 } },
    });
  });
});
