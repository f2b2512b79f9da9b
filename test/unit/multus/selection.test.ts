/**
 * selection.test.ts: the pod's selection annotations (docs/behaviour.md#networks-annotation,
 * docs/behaviour.md#default-network-annotation, docs/behaviour.md#namespace-isolation, docs/behaviour.md#default-route;
 * docs/behaviour.md#npwg).
 * Every table asserts exact values or the exact CniError(7) message.
 */
import { describe, expect, it } from 'vitest';
import type { AttachmentRequest } from '../../../src/multus/fields.ts';
import type { NetworkSelection } from '../../../src/multus/selection.ts';
import {
  checkNamespaceIsolation,
  parseDefaultNetworkAnnotation,
  parseNetworkSelections,
  validateDefaultRoutes,
} from '../../../src/multus/selection.ts';
import { thrown } from '../../helpers/errors.ts';

const NETS = 'k8s.v1.cni.cncf.io/networks';
const DEFNET = 'v1.multus-cni.io/default-network';
const P = 'parsePodNetworkAnnotation: ';
const JSONERR = 'failed to parse pod Network Attachment Selection Annotation JSON format: ';
const FORM = '[<namespace>/]<name>[@<ifname>]';
const DNS = (v: string): string =>
  `parsePodNetworkObjectName: Failed to parse: one or more items did not match comma-delimited format (must consist of lower case alphanumeric characters). Must start and end with an alphanumeric character), mismatch @ '${v}'`;
const DNS_FIX = 'namespaces and names in the text form are DNS-1123 labels: lower case letters, digits and "-"';
const IFN = (v: string): string =>
  `parsePodNetworkObjectName: Failed to parse interface name: must be less than 15 chars and not contain '/' or spaces. interface name '${v}'`;
const EMPTY = `network name is empty`;
const EMPTY_FIX = `name a NetworkAttachmentDefinition in every element (${FORM}) and remove stray commas`;
const IP_FIX = 'give an IP such as "10.1.1.11" or a CIDR such as "10.1.1.11/24"';
const MAC_FIX = 'give 6, 8 or 20 hex octets such as "c2:b0:57:49:47:f1"';
const GUID_FIX = 'give a GUID of 8 hex octets such as "c2:b0:57:49:47:f1:00:01"';

function expectFailure(fn: () => unknown, msg: string): void {
  const err = thrown(fn);
  expect({ code: err.code, msg: err.msg }).toEqual({ code: 7, msg });
}

const sel = (name: string, namespace = 'pod-ns', request: AttachmentRequest = {}): NetworkSelection => ({
  name,
  namespace,
  request,
});

describe('parseNetworkSelections: text form', () => {
  it.each<[string | undefined, NetworkSelection[]]>([
    [undefined, []],
    ['', []],
    ['net1', [sel('net1')]],
    ['ns1/net1@eth1', [sel('net1', 'ns1', { ifname: 'eth1' })]],
    [
      ' ns1/net1@eth1 , net2 ,net3@net9',
      [sel('net1', 'ns1', { ifname: 'eth1' }), sel('net2'), sel('net3', 'pod-ns', { ifname: 'net9' })],
    ],
    ['ns1 / net1 @ eth1', [sel('net1', 'ns1', { ifname: 'eth1' })]],
    ['macvlan-conf,macvlan-conf', [sel('macvlan-conf'), sel('macvlan-conf')]],
    ['/net1', [sel('net1')]],
    ['net1@', [sel('net1')]],
    ['net1@ ', [sel('net1')]],
    ['0net-1', [sel('0net-1')]],
    ['null', [sel('null')]],
    ['net1@Data_0.v1', [sel('net1', 'pod-ns', { ifname: 'Data_0.v1' })]],
    ['net1@fifteen-bytes-x', [sel('net1', 'pod-ns', { ifname: 'fifteen-bytes-x' })]],
  ])('%j → %j', (annotation, expected) => {
    expect(parseNetworkSelections(annotation, 'pod-ns')).toEqual(expected);
  });

  const at = (i: number, item: string): string => `element ${i} (${JSON.stringify(item)}) of ${NETS}`;
  it.each<[string, string]>([
    [
      'a/b/c',
      `${P}parsePodNetworkObjectName: Invalid network object (failed at '/') (${at(0, 'a/b/c')}); write ${FORM} with at most one "/"`,
    ],
    [
      'net0, ns/a@b@c',
      `${P}parsePodNetworkObjectName: Invalid network object (failed at '@') (${at(1, 'ns/a@b@c')}); write ${FORM} with at most one "@"`,
    ],
    ['ns@x/net1', `${P}${DNS('ns@x')} (${at(0, 'ns@x/net1')}); ${DNS_FIX}`],
    ['Net1', `${P}${DNS('Net1')} (${at(0, 'Net1')}); ${DNS_FIX}`],
    ['ns.a/net1', `${P}${DNS('ns.a')} (${at(0, 'ns.a/net1')}); ${DNS_FIX}`],
    ['net1-', `${P}${DNS('net1-')} (${at(0, 'net1-')}); ${DNS_FIX}`],
    ['net_1', `${P}${DNS('net_1')} (${at(0, 'net_1')}); ${DNS_FIX}`],
    ['net1,,net2', `${P}${EMPTY} (${at(1, '')}); ${EMPTY_FIX}`],
    ['net1,', `${P}${EMPTY} (${at(1, '')}); ${EMPTY_FIX}`],
    ['  ', `${P}${EMPTY} (${at(0, '')}); ${EMPTY_FIX}`],
    ['ns1/', `${P}${EMPTY} (${at(0, 'ns1/')}); ${EMPTY_FIX}`],
    ['@eth1', `${P}${EMPTY} (${at(0, '@eth1')}); ${EMPTY_FIX}`],
    [
      'net1@sixteen-bytes-xy',
      `${P}${IFN('sixteen-bytes-xy')} (${at(0, 'net1@sixteen-bytes-xy')}); interface name "sixteen-bytes-xy" is too long: 16 bytes, at most 15 allowed; choose another interface name`,
    ],
    [
      'net1@a:b',
      `${P}${IFN('a:b')} (${at(0, 'net1@a:b')}); interface name "a:b" contains ":": "/", ":" and whitespace are not allowed; choose another interface name`,
    ],
    [
      'net1@a b',
      `${P}${IFN('a b')} (${at(0, 'net1@a b')}); interface name "a b" contains " ": "/", ":" and whitespace are not allowed; choose another interface name`,
    ],
    [
      'net1@..',
      `${P}${IFN('..')} (${at(0, 'net1@..')}); interface name ".." is not allowed: "." and ".." are reserved; choose another interface name`,
    ],
  ])('%j fails', (annotation, msg) => {
    expectFailure(() => parseNetworkSelections(annotation, 'pod-ns'), msg);
  });
});

describe('parseNetworkSelections: JSON form', () => {
  const full = JSON.stringify([
    {
      name: 'sriov-net',
      namespace: 'ns2',
      interface: 'data0',
      ips: ['10.1.1.11/24', '2001:db8::11'],
      mac: 'c2:b0:57:49:47:f1',
      'infiniband-guid': 'c2:b0:57:49:47:f1:00:01',
      portMappings: [{ hostPort: 8080, containerPort: 80, protocol: 'tcp' }],
      bandwidth: { ingressRate: 1000 },
      'cni-args': { foo: 'bar' },
      'default-route': ['10.1.1.1'],
      deviceID: '0000:03:00.1',
      'ipam-claim-reference': 'claim',
      unknown: 1,
    },
  ]);
  it.each<[string, string, NetworkSelection[]]>([
    ['an empty list', '[]', []],
    ['an empty list with spaces', ' [ ] ', []],
    ['a name only', '[{"name":"net1"}]', [sel('net1')]],
    [
      'every field',
      full,
      [
        sel('sriov-net', 'ns2', {
          ifname: 'data0',
          ips: ['10.1.1.11/24', '2001:db8::11'],
          mac: 'c2:b0:57:49:47:f1',
          infinibandGUID: 'c2:b0:57:49:47:f1:00:01',
          portMappings: [{ hostPort: 8080, containerPort: 80, protocol: 'tcp' }],
          bandwidth: { ingressRate: 1000 },
          configArgs: { foo: 'bar' },
          defaultRoute: ['10.1.1.1'],
          deviceID: '0000:03:00.1',
        }),
      ],
    ],
    [
      'the deprecated interfaceRequest',
      '[{"name":"a","interfaceRequest":"old0"}]',
      [sel('a', 'pod-ns', { ifname: 'old0' })],
    ],
    [
      'interface over interfaceRequest',
      '[{"name":"a","interface":"new0","interfaceRequest":"old0"}]',
      [sel('a', 'pod-ns', { ifname: 'new0' })],
    ],
    [
      'interfaceRequest when interface is empty',
      '[{"name":"a","interface":"","interfaceRequest":"old0"}]',
      [sel('a', 'pod-ns', { ifname: 'old0' })],
    ],
    [
      'keys matched case-insensitively (Go)',
      '[{"Name":"a","NAMESPACE":"ns3","Interface":"x0","ips":["10.0.0.1"]}]',
      [sel('a', 'ns3', { ifname: 'x0', ips: ['10.0.0.1'] })],
    ],
    [
      'null values as absent',
      '[{"name":"a","namespace":null,"ips":null,"mac":null,"cni-args":null,"default-route":null}]',
      [sel('a')],
    ],
    [
      'empty values as absent',
      '[{"name":"a","namespace":"","interface":"","ips":[],"mac":"","portMappings":[],"deviceID":""}]',
      [sel('a')],
    ],
    [
      'an empty default-route kept (a request: every default route goes, routes.ts)',
      '[{"name":"a","default-route":[]}]',
      [sel('a', 'pod-ns', { defaultRoute: [] })],
    ],
    [
      'an empty object kept as given',
      '[{"name":"a","bandwidth":{},"cni-args":{}}]',
      [sel('a', 'pod-ns', { bandwidth: {}, configArgs: {} })],
    ],
    ['several elements in order', '[{"name":"b"},{"name":"a","namespace":"x"}]', [sel('b'), sel('a', 'x')]],
  ])('%s', (_title, annotation, expected) => {
    expect(parseNetworkSelections(annotation, 'pod-ns')).toEqual(expected);
  });

  it.each([
    '10.1.1.11',
    '10.1.1.11/24',
    '10.1.1.11/0',
    '10.1.1.11/32',
    '2001:db8::11',
    '2001:db8::11/128',
    '::ffff:10.1.1.11',
    '::ffff:10.1.1.11/120',
    '::',
  ])('accepts the IP request %j', (ip) => {
    expect(parseNetworkSelections(JSON.stringify([{ name: 'a', ips: [ip] }]), 'ns')[0]!.request.ips).toEqual([ip]);
  });

  it.each([
    'c2:b0:57:49:47:f1',
    'C2-B0-57-49-47-F1',
    'c2b0.5749.47f1',
    '00:00:5e:00:53:01:00:01',
    '0000.5e00.5301.0001',
    '00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01',
  ])('accepts the MAC %j (Go net.ParseMAC)', (mac) => {
    expect(
      parseNetworkSelections(JSON.stringify([{ name: 'a', mac, 'infiniband-guid': mac }]), 'ns')[0]!.request,
    ).toEqual({ mac, infinibandGUID: mac });
  });

  const el = (i: number, name?: string): string =>
    `element ${i}${name === undefined ? '' : ` (${JSON.stringify(name)})`} of ${NETS}`;
  const one = (fields: Record<string, unknown>): string => JSON.stringify([{ name: 'a', ...fields }]);
  const typeError = (key: string, kind: string, got: string, example: string): string =>
    `${P}${JSONERR}"${key}" must be ${kind}, got ${got} (${el(0, 'a')}); write it like "${key}": ${example}`;

  it.each<[string, string, string]>([
    [
      'a bare object',
      '{"name":"a"}',
      `${P}${JSONERR}expected an array of selection objects, got an object (${NETS}); wrap the element in [ ]`,
    ],
    [
      'a string',
      '"net1"',
      `${P}${JSONERR}expected an array of selection objects, got "net1" (${NETS}); wrap the element in [ ]`,
    ],
    [
      'a number element',
      '[{"name":"a"},1]',
      `${P}${JSONERR}element 1 must be an object, got 1 (${NETS}); write each element like {"name": "macvlan-conf"}`,
    ],
    [
      'a null element',
      '[null]',
      `${P}${JSONERR}element 0 must be an object, got null (${NETS}); write each element like {"name": "macvlan-conf"}`,
    ],
    [
      'no name',
      '[{"name":"a"},{"namespace":"x"}]',
      `${P}element 1 has no "name" (${NETS}); set "name" to the NetworkAttachmentDefinition's name`,
    ],
    [
      'an empty name',
      '[{"name":""}]',
      `${P}element 0 has no "name" (${NETS}); set "name" to the NetworkAttachmentDefinition's name`,
    ],
    [
      'a numeric name',
      '[{"name":5}]',
      `${P}${JSONERR}"name" must be a string, got 5 (${el(0)}); write it like "name": "macvlan-conf"`,
    ],
    [
      'ips as a string',
      one({ ips: '10.0.0.1' }),
      typeError('ips', 'an array of strings', '"10.0.0.1"', '["10.1.1.11/24"]'),
    ],
    ['ips with a number', one({ ips: [1] }), typeError('ips', 'an array of strings', '[1]', '["10.1.1.11/24"]')],
    ['a numeric mac', one({ mac: 5 }), typeError('mac', 'a string', '5', '"c2:b0:57:49:47:f1"')],
    ['a numeric namespace', one({ namespace: 1 }), typeError('namespace', 'a string', '1', '"default"')],
    ['a numeric interface', one({ interface: 0 }), typeError('interface', 'a string', '0', '"net1"')],
    [
      'portMappings as an object',
      one({ portMappings: { hostPort: 1 } }),
      typeError(
        'portMappings',
        'an array of objects',
        '{"hostPort":1}',
        '[{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]',
      ),
    ],
    [
      'portMappings of numbers',
      one({ portMappings: [1] }),
      typeError(
        'portMappings',
        'an array of objects',
        '[1]',
        '[{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]',
      ),
    ],
    [
      'bandwidth as a list',
      one({ bandwidth: [] }),
      typeError('bandwidth', 'an object', '[]', '{"ingressRate": 1000000, "ingressBurst": 1000000}'),
    ],
    [
      'cni-args as a string',
      one({ 'cni-args': 'x=y' }),
      typeError('cni-args', 'an object', '"x=y"', '{"key": "value"}'),
    ],
    [
      'default-route as a string',
      one({ 'default-route': '10.0.0.1' }),
      typeError('default-route', 'an array of strings', '"10.0.0.1"', '["10.1.1.1"]'),
    ],
    ['a numeric deviceID', one({ deviceID: 3 }), typeError('deviceID', 'a string', '3', '"0000:03:00.1"')],
    [
      'a mis-cased key named as written',
      one({ IPS: 'x' }),
      `${P}${JSONERR}"IPS" must be an array of strings, got "x" (${el(0, 'a')}); write it like "ips": ["10.1.1.11/24"]`,
    ],
    [
      'a long value cut',
      one({ mac: { a: 'x'.repeat(70) } }),
      typeError('mac', 'a string', `{"a":"${'x'.repeat(54)}…`, '"c2:b0:57:49:47:f1"'),
    ],
  ])('rejects %s', (_title, annotation, msg) => {
    expectFailure(() => parseNetworkSelections(annotation, 'pod-ns'), msg);
  });

  it('rejects invalid JSON with the parser message', () => {
    const text = '[{"name":"a"';
    let parserMessage = '';
    try {
      JSON.parse(text);
    } catch (err) {
      parserMessage = (err as Error).message;
    }
    expect(parserMessage).not.toBe('');
    expectFailure(
      () => parseNetworkSelections(text, 'pod-ns'),
      `${P}${JSONERR}${parserMessage} (${NETS}); write a JSON array such as [{"name": "macvlan-conf"}] or the text form ${FORM},...`,
    );
  });

  it.each<[string, string]>([
    ['10.1.1.256', `${P}failed to parse IP address "10.1.1.256"`],
    ['10.01.1.1', `${P}failed to parse IP address "10.01.1.1"`],
    ['fe80::1%eth0', `${P}failed to parse IP address "fe80::1%eth0"`],
    ['', `${P}failed to parse IP address ""`],
    ['10.1.1.1/33', `${P}failed to parse CIDR "10.1.1.1/33": invalid CIDR address: 10.1.1.1/33`],
    ['10.1.1.1/', `${P}failed to parse CIDR "10.1.1.1/": invalid CIDR address: 10.1.1.1/`],
    ['10.1.1.1/2x', `${P}failed to parse CIDR "10.1.1.1/2x": invalid CIDR address: 10.1.1.1/2x`],
    ['2001:db8::1/129', `${P}failed to parse CIDR "2001:db8::1/129": invalid CIDR address: 2001:db8::1/129`],
    ['net/24', `${P}failed to parse CIDR "net/24": invalid CIDR address: net/24`],
  ])('rejects the IP request %j', (ip, core) => {
    expectFailure(
      () => parseNetworkSelections(JSON.stringify([{ name: 'a', ips: ['10.0.0.1', ip] }]), 'pod-ns'),
      `${core} (${el(0, 'a')}); ${IP_FIX}`,
    );
  });

  it.each([
    'c2:b0:57:49:47',
    'c2:b0:57:49:47:f1:00',
    'c2:b0:57:49:47:g1',
    'c2:b0-57:49:47:f1',
    'c2:b0:57:49:47:f1:',
    'c2b0.5749.47f1.00',
    'c2b0:5749:47f1',
    'c2.b0.57.49.47.f1',
    'c2b05749.47f1',
    'c2:b0:57:49:47:f１',
    'c2b0.5749.47f',
  ])('rejects %j as a MAC and as a GUID (Go net.ParseMAC)', (mac) => {
    const core = (what: string): string => `${P}${what}: address ${mac}: invalid MAC address (${el(0, 'a')})`;
    expectFailure(() => parseNetworkSelections(one({ mac }), 'ns'), `${core('failed to mac')}; ${MAC_FIX}`);
    expectFailure(
      () => parseNetworkSelections(one({ 'infiniband-guid': mac }), 'ns'),
      `${core('failed to validate infiniband GUID')}; ${GUID_FIX}`,
    );
  });

  it.each(['gw', '10.0.0.1/24', '', '10.0.0.256'])('rejects the default-route gateway %j', (gw) => {
    expectFailure(
      () => parseNetworkSelections(one({ 'default-route': ['10.0.0.1', gw] }), 'ns'),
      `${P}${JSONERR}invalid IP address: ${gw} (${el(0, 'a')}); "default-route" lists gateway IPs such as ["10.1.1.1"]`,
    );
  });

  it.each<[string, Record<string, unknown>, string]>([
    ['interface', { interface: 'a:b' }, 'interface name "a:b" contains ":": "/", ":" and whitespace are not allowed'],
    [
      'interface',
      { interface: 'sixteen-bytes-xy' },
      'interface name "sixteen-bytes-xy" is too long: 16 bytes, at most 15 allowed',
    ],
    ['interface', { interface: '.' }, 'interface name "." is not allowed: "." and ".." are reserved'],
    [
      'interfaceRequest',
      { interfaceRequest: 'a/b' },
      'interface name "a/b" contains "/": "/", ":" and whitespace are not allowed',
    ],
  ])('checks the %s name like libcni: %j', (_key, fields, why) => {
    const ifname = (fields.interface ?? fields.interfaceRequest) as string;
    expectFailure(
      () => parseNetworkSelections(one(fields), 'ns'),
      `${P}${IFN(ifname)} (${el(0, 'a')}); ${why}; choose another interface name`,
    );
  });
});

describe('parseDefaultNetworkAnnotation', () => {
  it.each<[string | undefined, NetworkSelection | undefined]>([
    [undefined, undefined],
    ['ovn', sel('ovn', 'kube-system')],
    ['other/ovn@eth9', sel('ovn', 'other', { ifname: 'eth9' })],
    ['[{"name":"ovn","namespace":"x","mac":"c2:b0:57:49:47:f1"}]', sel('ovn', 'x', { mac: 'c2:b0:57:49:47:f1' })],
  ])('%j → %j', (annotation, expected) => {
    expect(parseDefaultNetworkAnnotation(annotation, 'kube-system')).toEqual(expected);
  });

  const fix = 'name one NetworkAttachmentDefinition ([<namespace>/]<name>) or remove the annotation';
  it.each<[string, string]>([
    ['', `tryLoadK8sPodDefaultNetwork: the ${DEFNET} annotation is empty; ${fix}`],
    ['a,b', `tryLoadK8sPodDefaultNetwork: more than one default network is specified: a,b; ${fix}`],
    [
      '[{"name":"a"},{"name":"b"}]',
      `tryLoadK8sPodDefaultNetwork: more than one default network is specified: [{"name":"a"},{"name":"b"}]; ${fix}`,
    ],
    ['[]', `tryLoadK8sPodDefaultNetwork: the ${DEFNET} annotation names no network; ${fix}`],
    [
      'a/b/c',
      `tryLoadK8sPodDefaultNetwork: failed to parse CRD object: ${P}parsePodNetworkObjectName: Invalid network object (failed at '/') (element 0 ("a/b/c") of ${DEFNET}); write ${FORM} with at most one "/"`,
    ],
  ])('%j fails', (annotation, msg) => {
    expectFailure(() => parseDefaultNetworkAnnotation(annotation, 'kube-system'), msg);
  });
});

describe('checkNamespaceIsolation', () => {
  it.each<[string, NetworkSelection[], string[]]>([
    ['the pod namespace', [sel('a', 'pod-ns'), sel('b', 'pod-ns')], ['default']],
    ['the default global namespace', [sel('a', 'default')], ['default']],
    ['a configured global namespace', [sel('a', 'shared'), sel('b', 'pod-ns')], ['shared', 'default']],
    ['no selections', [], []],
  ])('allows %s', (_title, selections, globals) => {
    expect(() => checkNamespaceIsolation(selections, 'pod-ns', globals)).not.toThrow();
  });

  const msg = (ns: string, name: string, globals: string): string =>
    `GetNetworkDelegates: namespace isolation enabled, annotation violates permission, pod is in namespace pod-ns but refers to target namespace ${ns}` +
    ` (network "${ns}/${name}" in ${NETS}); use a NetworkAttachmentDefinition in namespace pod-ns or in a global namespace (${globals})`;
  it.each<[string, NetworkSelection[], string[], string]>([
    ['another namespace', [sel('a', 'pod-ns'), sel('b', 'other')], ['default'], msg('other', 'b', 'default')],
    ['default once globalNamespaces replaces it', [sel('a', 'default')], ['shared'], msg('default', 'a', 'shared')],
    ['anything with an empty global list', [sel('a', 'default')], [], msg('default', 'a', 'none configured')],
  ])('rejects %s', (_title, selections, globals, expected) => {
    expectFailure(() => checkNamespaceIsolation(selections, 'pod-ns', globals), expected);
  });
});

describe('validateDefaultRoutes', () => {
  const gw = (name: string, defaultRoute: string[]): NetworkSelection => sel(name, 'ns', { defaultRoute });
  it.each<[string, NetworkSelection[]]>([
    ['no selections', []],
    ['no default-route', [sel('a'), sel('b')]],
    ['one IPv4 gateway', [sel('a'), gw('b', ['10.0.0.1'])]],
    ['one IPv4 and one IPv6 gateway on one element', [gw('a', ['10.0.0.1', '2001:db8::1']), sel('b')]],
    ['an empty list ("This list may be empty", NPWG §4.1.2.1.9)', [sel('x'), gw('a', [])]],
  ])('accepts %s', (_title, selections) => {
    expect(() => validateDefaultRoutes(selections)).not.toThrow();
  });

  const ecmp = (list: string): string =>
    `multus does not support ECMP for default-route: ${NETS} asks for ${list}; give at most one IPv4 and one IPv6 gateway`;
  it.each<[string, NetworkSelection[], string]>([
    [
      'two IPv4 gateways on one element',
      [gw('a', ['10.0.0.1', '10.0.0.2'])],
      ecmp('10.0.0.1 in element 0 ("ns/a"), 10.0.0.2 in element 0 ("ns/a")'),
    ],
    [
      'two IPv6 gateways',
      [sel('x'), gw('a', ['2001:db8::1', 'fe80::1'])],
      ecmp('2001:db8::1 in element 1 ("ns/a"), fe80::1 in element 1 ("ns/a")'),
    ],
    [
      'an IPv4-mapped IPv6 gateway counted as IPv4 (Go To4)',
      [gw('a', ['::ffff:10.0.0.1', '10.0.0.2'])],
      ecmp('::ffff:10.0.0.1 in element 0 ("ns/a"), 10.0.0.2 in element 0 ("ns/a")'),
    ],
    [
      'IPv4 gateways on two elements',
      [gw('a', ['10.0.0.1']), gw('b', ['10.1.0.1'])],
      ecmp('10.0.0.1 in element 0 ("ns/a"), 10.1.0.1 in element 1 ("ns/b")'),
    ],
    [
      'gateways of both families on two elements (docs/behaviour.md#npwg)',
      [gw('a', ['10.0.0.1']), sel('m'), gw('b', ['2001:db8::1'])],
      `"default-route" is set on both element 0 ("ns/a") and element 2 ("ns/b") of ${NETS}, but only one element may carry it (NPWG §4.1.2.1.9); keep it on the attachment that should own the pod's default route`,
    ],
    [
      'an empty list next to a gateway',
      [gw('a', []), gw('b', ['10.0.0.1'])],
      `"default-route" is set on both element 0 ("ns/a") and element 1 ("ns/b") of ${NETS}, but only one element may carry it (NPWG §4.1.2.1.9); keep it on the attachment that should own the pod's default route`,
    ],
  ])('rejects %s', (_title, selections, msg) => {
    expectFailure(() => validateDefaultRoutes(selections), msg);
  });
});
