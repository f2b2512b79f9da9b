/**
 * The multus-dynamic-networks-controller's protocol, replayed against our `/delegate` over the unix socket
 * (docs/hotplug.md): the bodies are the bytes v0.3.7 sends (`multusapi.CreateDelegateRequest`, marshalled by
 * Go: `env` keys sorted, `config` the NAD's config through `GetCNIConfigFromSpec` in base64, no
 * `interfaceAttributes` at all when the element has no ips/mac/cni-args, else `"cni-args": null` when absent),
 * for the NADs and elements of its own e2e specs. Each answer is read the way the controller reads it
 * (`multuscni.HTTPClient.InvokeDelegate`, then `nadutils.CreateNetworkStatus` in `AddDynamicIfaceToStatus`),
 * and the network-status entry it would write is compared with what its e2e specs expect.
 * Fake plugins and a fake Kubernetes; the controller itself is not needed (it is not on the module proxy).
 */
import type { Server } from 'node:http';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { isIP } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createQueue } from '../../../src/daemon/queue.ts';
import { createCniServer } from '../../../src/daemon/server.ts';
import { listenUnix } from '../../../src/daemon/socket.ts';
import { handle } from '../../../src/host/handle.ts';
import type { Host } from '../../../src/host/host.ts';
import type { FakeCall } from '../../helpers/fake-exec.ts';
import { FakeExec } from '../../helpers/fake-exec.ts';
import { FakeKube } from '../../helpers/fake-kube.ts';
import { closeServer, fakeHost, http } from '../../helpers/daemon.ts';
import { testNetns } from '../../helpers/netns.ts';

// The NAD configs of the controller's e2e specs (e2e/e2e_test.go), master eth0.
const NO_IPAM =
  '{"cniVersion":"0.3.0","disableCheck":true,"plugins":[{"type":"macvlan","master":"eth0","mode":"bridge"}]}';
const STATIC_IPAM =
  '{"cniVersion":"0.3.0","disableCheck":true,"name":"tenant-network-ipam","plugins":[{"type":"macvlan",' +
  '"capabilities":{"ips":true},"master":"eth0","mode":"bridge","ipam":{"type":"static"}},{"type":"tuning"}]}';

const NO_IPAM_B64 =
  'eyJjbmlWZXJzaW9uIjoiMC4zLjAiLCJkaXNhYmxlQ2hlY2siOnRydWUsIm5hbWUiOiJ0ZW5hbnQtbmV0d29yayIsInBsdWdpbnMiOlt7Im1hc3RlciI6ImV0' +
  'aDAiLCJtb2RlIjoiYnJpZGdlIiwidHlwZSI6Im1hY3ZsYW4ifV19';
const STATIC_IPAM_B64 =
  'eyJjbmlWZXJzaW9uIjoiMC4zLjAiLCJkaXNhYmxlQ2hlY2siOnRydWUsIm5hbWUiOiJ0ZW5hbnQtbmV0d29yay1pcGFtIiwicGx1Z2lucyI6W3sidHlwZSI6' +
  'Im1hY3ZsYW4iLCJjYXBhYmlsaXRpZXMiOnsiaXBzIjp0cnVlfSwibWFzdGVyIjoiZXRoMCIsIm1vZGUiOiJicmlkZ2UiLCJpcGFtIjp7InR5cGUiOiJzdGF0' +
  'aWMifX0seyJ0eXBlIjoidHVuaW5nIn1dfQ==';

/**
 * What v0.3.7 sends, byte for byte (printed by a Go program calling its vendored CreateDelegateRequest and
 * GetCNIConfigFromSpec on the e2e NADs), with the placeholders CID, NETNS, NS, POD, UID.
 */
const CONTROLLER_BODIES = {
  // {"name":"tenant-network","namespace":"ns1","interface":"ens58"}: no attributes, no "interfaceAttributes"
  addPlain: `{"env":{"CNI_ARGS":"K8S_POD_NAMESPACE=NS;K8S_POD_NAME=POD;K8S_POD_UID=UID","CNI_COMMAND":"ADD","CNI_CONTAINERID":"CID","CNI_IFNAME":"ens58","CNI_NETNS":"NETNS"},"config":"${NO_IPAM_B64}"}`,
  // the same with "mac" (the default-network-only spec)
  addMac: `{"env":{"CNI_ARGS":"K8S_POD_NAMESPACE=NS;K8S_POD_NAME=POD;K8S_POD_UID=UID","CNI_COMMAND":"ADD","CNI_CONTAINERID":"CID","CNI_IFNAME":"ens58","CNI_NETNS":"NETNS"},"config":"${NO_IPAM_B64}","interfaceAttributes":{"mac":"02:00:00:00:00:05","cni-args":null}}`,
  // {"name":"tenant-network-ipam",...,"interface":"ens202","ips":["10.10.10.111/24"],"mac":...} (the IPAM specs)
  addIpam: `{"env":{"CNI_ARGS":"K8S_POD_NAMESPACE=NS;K8S_POD_NAME=POD;K8S_POD_UID=UID","CNI_COMMAND":"ADD","CNI_CONTAINERID":"CID","CNI_IFNAME":"ens202","CNI_NETNS":"NETNS"},"config":"${STATIC_IPAM_B64}","interfaceAttributes":{"ips":["10.10.10.111/24"],"mac":"02:00:00:00:00:05","cni-args":null}}`,
  delIpam: `{"env":{"CNI_ARGS":"K8S_POD_NAMESPACE=NS;K8S_POD_NAME=POD;K8S_POD_UID=UID","CNI_COMMAND":"DEL","CNI_CONTAINERID":"CID","CNI_IFNAME":"ens202","CNI_NETNS":"NETNS"},"config":"${STATIC_IPAM_B64}","interfaceAttributes":{"ips":["10.10.10.111/24"],"mac":"02:00:00:00:00:05","cni-args":null}}`,
  // an element without "interface" whose attachment the controller cannot find in network-status (its spec
  // "elements without interface names"): CNI_IFNAME is empty
  addNoIfname: `{"env":{"CNI_ARGS":"K8S_POD_NAMESPACE=NS;K8S_POD_NAME=POD;K8S_POD_UID=UID","CNI_COMMAND":"ADD","CNI_CONTAINERID":"CID","CNI_IFNAME":"","CNI_NETNS":"NETNS"},"config":"${NO_IPAM_B64}"}`,
  // a DEL with cni-args only; IFNAME is set per test
  delArgs: `{"env":{"CNI_ARGS":"K8S_POD_NAMESPACE=NS;K8S_POD_NAME=POD;K8S_POD_UID=UID","CNI_COMMAND":"DEL","CNI_CONTAINERID":"CID","CNI_IFNAME":"IFNAME","CNI_NETNS":"NETNS"},"config":"${NO_IPAM_B64}","interfaceAttributes":{"cni-args":{"foo":"bar"}}}`,
};

interface ControllerStatus {
  name: string;
  interface?: string;
  ips?: string[];
  mac?: string;
  mtu?: number;
  gateway?: string[];
}

const isCidr = (s: unknown) => {
  if (typeof s !== 'string') return false;
  const [ip, bits, ...rest] = s.split('/');
  const family = isIP(ip ?? '');
  const n = Number(bits);
  return rest.length === 0 && family !== 0 && Number.isInteger(n) && n >= 0 && n <= (family === 4 ? 32 : 128);
};
const optional = (v: unknown, ok: (v: unknown) => boolean) => v === undefined || v === null || ok(v);
const isString = (v: unknown) => typeof v === 'string';

/**
 * The controller's reading of a `/delegate` answer: `InvokeDelegate` (non-200 is an error; the body decodes
 * into `multusapi.Response{Result *cni100.Result}`, Go matching the key "Result" case-insensitively and
 * failing on a field of the wrong type: addresses and routes' dst must be CIDRs, gateways IPs, `interface` an
 * integer), then for ADD `CreateNetworkStatus(result, "<ns>/<nad>", false, nil)`: the last interface with a
 * sandbox gives interface/mac/mtu, every IP its address, every default route its gateway. For DEL the
 * controller keeps no result; null is what it gets.
 */
function controllerReading(status: number, body: string, networkName: string): ControllerStatus | null {
  if (status !== 200) throw new Error(`unexpected CNI response status ${status}: '${body}'`);
  if (body.length === 0) return null;
  const response = JSON.parse(body) as Record<string, unknown>;
  const key = Object.keys(response).find((k) => k.toLowerCase() === 'result');
  const result = key === undefined ? null : response[key];
  if (result === null || result === undefined) return null;
  const r = result as Record<string, unknown>;
  const interfaces = (r.interfaces ?? []) as Record<string, unknown>[];
  const ips = (r.ips ?? []) as Record<string, unknown>[];
  const routes = (r.routes ?? []) as Record<string, unknown>[];
  expect(typeof r.cniVersion).toBe('string');
  for (const i of interfaces) {
    expect(isString(i.name) && optional(i.mac, isString) && optional(i.sandbox, isString), JSON.stringify(i)).toBe(
      true,
    );
    expect(optional(i.mtu, Number.isInteger), JSON.stringify(i)).toBe(true);
  }
  for (const ip of ips) {
    expect(isCidr(ip.address), JSON.stringify(ip)).toBe(true);
    expect(
      optional(ip.gateway, (g) => isIP(g as string) !== 0),
      JSON.stringify(ip),
    ).toBe(true);
    expect(optional(ip.interface, Number.isInteger), JSON.stringify(ip)).toBe(true);
  }
  for (const route of routes) expect(isCidr(route.dst), JSON.stringify(route)).toBe(true);
  const out: ControllerStatus = { name: networkName };
  for (const i of interfaces) {
    if (!i.sandbox) continue;
    out.interface = i.name as string;
    if (i.mac) out.mac = i.mac as string;
    if (i.mtu) out.mtu = i.mtu as number;
  }
  if (ips.length > 0) out.ips = ips.map((ip) => (ip.address as string).split('/')[0]!);
  const gateways = routes.filter((rt) => ['0.0.0.0/0', '::/0'].includes(rt.dst as string)).map((rt) => rt.gw as string);
  if (gateways.length > 0) out.gateway = gateways;
  return out;
}

let dir: string;
let exec: FakeExec;
let kube: FakeKube;
let host: Host;
let server: Server | undefined;
let socket: string;

const multusConf = () => ({
  cniVersion: '1.0.0',
  name: 'multus-cni-network',
  type: 'multus',
  kubeconfig: '/fake/kubeconfig',
  cniDir: join(dir, 'multus'),
  delegates: [{ cniVersion: '1.0.0', name: 'cluster', type: 'p0' }],
});

/** A 0.3.0 macvlan: its interface in the sandbox (the requested MAC when asked), the runtimeConfig's IPs. */
function macvlan(call: FakeCall): { stdout: Buffer } {
  const rc = (call.stdin.runtimeConfig ?? {}) as { ips?: string[]; mac?: string };
  const mac = rc.mac ?? /(?:^|;)MAC=([^;]+)/.exec(call.args)?.[1] ?? '0a:58:0a:00:00:07';
  const ipam = call.stdin.ipam as { type?: string } | undefined;
  const ips = ipam?.type === 'static' ? (rc.ips ?? []) : [];
  const result = {
    cniVersion: '0.3.0',
    interfaces: [{ name: call.ifName, mac, sandbox: '/var/run/netns/pod' }],
    ips: ips.map((address) => ({ version: '4', address, interface: 0 })),
    dns: {},
  };
  return { stdout: Buffer.from(JSON.stringify(result)) };
}

const body = (which: keyof typeof CONTROLLER_BODIES, ifName = 'net1') =>
  CONTROLLER_BODIES[which]
    .replace('"CID"', '"cid1"')
    .replace('"NETNS"', JSON.stringify(testNetns()))
    .replace(
      'K8S_POD_NAMESPACE=NS;K8S_POD_NAME=POD;K8S_POD_UID=UID',
      'K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=tiny-winy-pod;K8S_POD_UID=uid-1',
    )
    .replace('"IFNAME"', JSON.stringify(ifName));

const send = (which: keyof typeof CONTROLLER_BODIES, ifName?: string) =>
  http(socket, '/delegate', { body: body(which, ifName) });
const scratchIfaces = () =>
  (JSON.parse(readFileSync(join(dir, 'multus', 'cid1'), 'utf8')) as { ifnameRequest?: string }[]).map(
    (d) => d.ifnameRequest ?? '',
  );

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'mts-dnc-'));
  exec = new FakeExec('p0', 'macvlan', 'tuning');
  exec.returns['macvlan ADD'] = macvlan;
  kube = new FakeKube();
  kube.addPod('ns1', 'tiny-winy-pod', 'uid-1');
  host = fakeHost(exec, kube);
  const env = {
    CNI_COMMAND: 'ADD',
    CNI_CONTAINERID: 'cid1',
    CNI_NETNS: testNetns(),
    CNI_IFNAME: 'eth0',
    CNI_PATH: '/opt/cni/bin',
    CNI_ARGS: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=tiny-winy-pod;K8S_POD_UID=uid-1',
  };
  const added = await handle(host, { env, stdin: Buffer.from(JSON.stringify(multusConf())) });
  expect(added.exitCode, added.stdout).toBe(0);
  server = createCniServer({
    host,
    daemonEnv: {},
    log: { error() {}, warn() {}, verbose() {}, debug() {}, enabled: () => false },
    queue: createQueue(0),
    notReady: () => undefined,
    multusConf: () => Buffer.from(JSON.stringify(multusConf())),
    links: { names: async () => ['lo', 'eth0', ...scratchIfaces().filter((i) => i !== '')] },
  });
  socket = await listenUnix(server, join(dir, 'run'));
});
afterEach(async () => {
  if (server) await closeServer(server);
  server = undefined;
  rmSync(dir, { recursive: true, force: true });
});

describe("multus-dynamic-networks-controller v0.3.7's requests against /delegate", () => {
  it('the recorded bodies are the e2e NADs through GetCNIConfigFromSpec (name added when missing)', () => {
    expect(JSON.parse(Buffer.from(NO_IPAM_B64, 'base64').toString())).toEqual({
      ...JSON.parse(NO_IPAM),
      name: 'tenant-network',
    });
    expect(JSON.parse(Buffer.from(STATIC_IPAM_B64, 'base64').toString())).toEqual(JSON.parse(STATIC_IPAM));
  });

  it('ADD without interfaceAttributes: 200 with the entry the "add" specs expect, then DEL removes it', async () => {
    const add = await send('addPlain');
    expect(controllerReading(add.status, add.body, 'ns1/tenant-network')).toEqual({
      name: 'ns1/tenant-network',
      interface: 'ens58',
      mac: '0a:58:0a:00:00:07',
    });
    expect(JSON.parse(add.body)).toMatchObject({ Result: { cniVersion: '1.0.0' } }); // the key the client decodes
    expect(scratchIfaces()).toEqual(['', 'ens58']);
    expect(exec.calls()).toContain('ADD macvlan ens58');

    // the controller's DEL of a plain element: same config, no attributes
    const del = await http(socket, '/delegate', { body: body('addPlain').replace('"ADD"', '"DEL"') });
    expect(controllerReading(del.status, del.body, 'ns1/tenant-network')).toBeNull();
    expect(exec.calls()).toContain('DEL macvlan ens58');
    expect(scratchIfaces()).toEqual(['']);
  });

  it('ADD with a MAC only ("cni-args": null): the MAC reaches the plugin and the entry', async () => {
    const add = await send('addMac');
    expect(controllerReading(add.status, add.body, 'ns1/tenant-network')).toEqual({
      name: 'ns1/tenant-network',
      interface: 'ens58',
      mac: '02:00:00:00:00:05',
    });
    const call = exec.received.find((c) => c.type === 'macvlan' && c.command === 'ADD')!;
    expect(call.args).toContain('MAC=02:00:00:00:00:05');
  });

  it('IPAM plug and unplug: ips and mac as runtimeConfig, the entry has the IP; DEL answers null', async () => {
    const add = await send('addIpam');
    expect(controllerReading(add.status, add.body, 'ns1/tenant-network-ipam')).toEqual({
      name: 'ns1/tenant-network-ipam',
      interface: 'ens202',
      ips: ['10.10.10.111'],
      mac: '02:00:00:00:00:05',
    });
    const call = exec.received.find((c) => c.type === 'macvlan' && c.command === 'ADD')!;
    expect(call.stdin.runtimeConfig).toEqual({ ips: ['10.10.10.111/24'] }); // only the declared capability
    expect(call.args).toContain('IP=10.10.10.111/24');
    expect(exec.calls()).toContain('ADD tuning ens202');

    const del = await send('delIpam');
    expect(del.body).toBe('{"Result":null}');
    expect(controllerReading(del.status, del.body, 'ns1/tenant-network-ipam')).toBeNull();
    expect(exec.calls().filter((c) => c.startsWith('DEL'))).toEqual(['DEL tuning ens202', 'DEL macvlan ens202']);
    expect(scratchIfaces()).toEqual(['']);
  });

  it("the controller's rollback DEL of an interface never added runs the sent config's DEL and answers 200", async () => {
    const del = await send('delArgs', 'ens99');
    expect(del.status, del.body).toBe(200);
    expect(controllerReading(del.status, del.body, 'ns1/tenant-network')).toBeNull();
    const call = exec.received.find((c) => c.command === 'DEL' && c.type === 'macvlan')!;
    expect(call.ifName).toBe('ens99');
    expect(call.stdin.args).toEqual({ cni: { foo: 'bar' } }); // cni-args merged as at pod creation
    expect(scratchIfaces()).toEqual(['']);
  });

  it('an ADD with an empty CNI_IFNAME is refused (400, code 4) before any plugin runs', async () => {
    const before = exec.calls().length;
    const add = await send('addNoIfname');
    expect(add.status).toBe(400);
    expect(add.json()).toMatchObject({ code: 4, msg: expect.stringContaining('CNI_IFNAME') });
    expect(() => controllerReading(add.status, add.body, 'ns1/tenant-network')).toThrow(/status 400/);
    expect(exec.calls().length).toBe(before);
    expect(scratchIfaces()).toEqual(['']);
  });

  it('a refused ADD is a non-200 the controller reports as an error (the interface name is taken)', async () => {
    expect((await send('addPlain')).status).toBe(200);
    const again = await send('addPlain');
    expect(again.status).toBe(400);
    expect(() => controllerReading(again.status, again.body, 'ns1/tenant-network')).toThrow(
      /unexpected CNI response status 400/,
    );
    expect(scratchIfaces()).toEqual(['', 'ens58']);
  });
});
