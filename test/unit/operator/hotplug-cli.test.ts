/** operator/hotplug-cli.ts: `multus hotplug`'s arguments and the /delegate body it sends. */
import { describe, expect, it } from 'vitest';
import { UsageError, hotplugBody, parseHotplugArgs } from '../../../src/operator/hotplug-cli.ts';

describe('multus hotplug arguments', () => {
  it('parses a full command line and builds the /delegate body', () => {
    const a = parseHotplugArgs([
      'add',
      '--pod',
      'ns/p',
      '--network',
      'mv@net3',
      '--ip',
      '10.1.1.1/24',
      '--mac',
      '02:00:00:00:00:01',
      '--cni-arg',
      'k=v',
      '--socket-dir',
      '/s',
      '--cni-dir',
      '/c',
    ]);
    expect(a).toMatchObject({
      command: 'ADD',
      namespace: 'ns',
      name: 'p',
      network: 'mv',
      ifName: 'net3',
      socketDir: '/s',
      cniDir: '/c',
    });
    const body = JSON.parse(hotplugBody(a, { containerId: 'c1', netns: '/n', uid: 'u' }, 'net3'));
    expect(body).toEqual({
      env: {
        CNI_COMMAND: 'ADD',
        CNI_CONTAINERID: 'c1',
        CNI_NETNS: '/n',
        CNI_IFNAME: 'net3',
        CNI_ARGS: 'K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_UID=u',
      },
      network: 'mv',
      interfaceAttributes: { 'cni-args': { k: 'v' }, ips: ['10.1.1.1/24'], mac: '02:00:00:00:00:01' },
    });
  });
  it('refuses a bad command line', () => {
    expect(() => parseHotplugArgs(['plug', '--pod', 'ns/p', '--network', 'mv'])).toThrow(UsageError);
    expect(() => parseHotplugArgs(['add', '--pod', 'p', '--network', 'mv', '--cni-dir', '/c'])).toThrow(
      /NAMESPACE\/NAME/,
    );
    expect(() => parseHotplugArgs(['add', '--pod', 'ns/p', '--cni-dir', '/c'])).toThrow(/--network is required/);
    expect(() => parseHotplugArgs(['add', '--pod', 'ns/p', '--network', 'mv@', '--cni-dir', '/c'])).toThrow(
      /NAD\[@IFNAME\]/,
    );
  });
});
