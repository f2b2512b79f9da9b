/**
 * `kubectl multus validate` and `plan -f` on files (test/data/kubectl-multus/), in-process: each bad object is
 * reported with the message a real ADD gives for it (cmdAdd over a FakeKube holding the same objects), good ones
 * pass, exit codes 0/1/2. Also the status table and the kubectl flags.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cmdAdd } from '../../../src/multus/commands/add.ts';
import { parseMultusConf } from '../../../src/multus/conf.ts';
import { parseRequest } from '../../../src/cni/request.ts';
import { toCniError } from '../../../src/base/errors.ts';
import { runKubectlMultus } from '../../../src/operator/kubectl-multus.ts';
import { formatStatusTable } from '../../../src/operator/status-cli.ts';
import { kubectlMultus } from './kubectl-run.ts';
import { kubeDeps, withContext } from '../../helpers/commands.ts';
import { FakeExec } from '../../helpers/fake-exec.ts';
import { FakeKube } from '../../helpers/fake-kube.ts';
import { REPO_ROOT } from '../../k8s/cluster.ts';

const DATA = join(REPO_ROOT, 'test/data/kubectl-multus');
const file = (name: string) => join(DATA, name);

let cniDir: string;
beforeEach(() => (cniDir = mkdtempSync(join(tmpdir(), 'mts-kubectl-'))));
afterEach(() => rmSync(cniDir, { recursive: true, force: true }));

/** The NADs of nads.yaml in a FakeKube, the way the API server would hold them. */
function kubeWithNads(): FakeKube {
  const kube = new FakeKube();
  const text = readFileSync(file('nads.yaml'), 'utf8');
  for (const m of text.matchAll(/name: (\S+)\n\s+namespace: ns1\nspec:\n\s+config: (?:'(.*)'|\|\n\s+(.*))/g)) {
    kube.addNad('ns1', m[1]!, m[2] ?? m[3]!);
  }
  return kube;
}

/** What a real ADD of a pod with `annotations` says (its error message, '' when it succeeds). */
async function addMessage(kube: FakeKube, annotations: Record<string, string>): Promise<string> {
  kube.addPod('ns1', 'p', 'uid-1', annotations);
  kube.addNad('kube-system', 'cluster', { cniVersion: '1.0.0', type: 'p0' });
  const exec = new FakeExec('p0', 'macvlan', 'bridge', 'tuning', 'host-local', 'multus');
  const conf = { cniVersion: '1.0.0', name: 'multus-cni-network', type: 'multus', clusterNetwork: 'cluster', cniDir };
  const stdin = Buffer.from(JSON.stringify(conf));
  const env = {
    CNI_COMMAND: 'ADD',
    CNI_CONTAINERID: 'cid1',
    CNI_NETNS: '/var/run/netns/x',
    CNI_IFNAME: 'eth0',
    CNI_PATH: '/usr/lib/cni',
    CNI_ARGS: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=p;K8S_POD_UID=uid-1',
  };
  try {
    await cmdAdd(...withContext(parseRequest('ADD', env, stdin), parseMultusConf(stdin), kubeDeps(exec, kube)));
    return '';
  } catch (e) {
    return toCniError(e).msg;
  }
}

describe('kubectl multus validate -f', () => {
  it('passes good NADs and a workload whose pod template names them: exit 0', async () => {
    const r = await kubectlMultus(['validate', '-f', file('good.yaml')]);
    expect(r.stdout).toBe(
      'ok     NetworkAttachmentDefinition ns1/good-net\nok     Deployment ns1/web\n2 objects, 0 bad\n',
    );
    expect(r.code).toBe(0);
  });

  const badNads: [string, RegExp][] = [
    ['bad-json', /spec\.config is not JSON/],
    ['no-type', /type/],
    ['empty-plugins', /plugins/],
    ['bad-version', /cniVersion/],
  ];
  it.each(badNads)('refuses NAD %s with the message ADD gives for a pod naming it', async (nad, core) => {
    const r = await kubectlMultus(['validate', '-f', file('nads.yaml'), '-o', 'json']);
    expect(r.code).toBe(1);
    const objects = (JSON.parse(r.stdout) as { objects: { object: string; errors: { msg: string }[] }[] }).objects;
    const mine = objects.find((o) => o.object === `NetworkAttachmentDefinition ns1/${nad}`)!;
    expect(mine.errors).toHaveLength(1);
    const add = await addMessage(kubeWithNads(), { 'k8s.v1.cni.cncf.io/networks': nad });
    expect(mine.errors[0]!.msg).toMatch(core);
    // ADD names the pod, then the NAD's own message: the same text
    expect(add).toBe(`pod ns1/p: error loading k8s delegates: ${mine.errors[0]!.msg}`);
    // the good ones of the same file pass
    expect(objects.find((o) => o.object === 'NetworkAttachmentDefinition ns1/good-net')!.errors).toEqual([]);
  });

  const pods: [string, string][] = [
    ['good-pod', 'good-net@net1, good-list'],
    [
      'two-default-routes',
      '[{"name":"good-net","default-route":["10.1.0.1"]},{"name":"good-list","default-route":["fd00::1"]}]',
    ],
    ['bad-annotation', '[{"name":"good-net"'],
    ['uses-bad-nad', 'no-type'],
  ];
  it.each(pods)('pod %s: the verdict and message of a real ADD', async (name, annotation) => {
    const r = await kubectlMultus(['validate', '-f', file('nads.yaml'), '-f', file('pods.yaml')]);
    expect(r.code).toBe(1);
    const add = (await addMessage(kubeWithNads(), { 'k8s.v1.cni.cncf.io/networks': annotation })).replace(
      'pod ns1/p:',
      `pod ns1/${name}:`,
    );
    const lines = r.stdout.split('\n').filter((l) => l.includes(`ns1/${name}`));
    if (add === '') expect(lines).toEqual([`ok     Pod ns1/${name}`]);
    else expect(lines[0]).toBe(`error  ${add}`);
  });

  it('a nested multus (JSON on stdin): the verdict and message of a real ADD of a pod naming it', async () => {
    // nad.ts refuses a multus or multus-shim delegate (the hardening issue); whichever ADD says, validate says it
    const text = readFileSync(file('nested.json'), 'utf8');
    const config = (JSON.parse(text) as { spec: { config: string } }).spec.config;
    const r = await kubectlMultus(['validate', '-f', '-', '-o', 'json'], text);
    const errors = (JSON.parse(r.stdout) as { objects: { errors: { msg: string }[] }[] }).objects[0]!.errors;
    const kube = new FakeKube();
    kube.addNad('ns1', 'nested', config);
    const add = await addMessage(kube, { 'k8s.v1.cni.cncf.io/networks': 'nested' });
    if (add === '') expect([r.code, errors]).toEqual([0, []]);
    else {
      expect(r.code).toBe(1);
      expect(add).toBe(`pod ns1/p: error loading k8s delegates: ${errors[0]!.msg}`);
    }
  });

  it('exit 2: no -f, an unreadable file, not YAML, an unknown flag or command', async () => {
    expect((await kubectlMultus(['validate'])).code).toBe(2);
    expect((await kubectlMultus(['validate', '-f', '/nonexistent'])).stderr).toMatch(/cannot read \/nonexistent/);
    expect((await kubectlMultus(['validate', '-f', '-'], 'a: [b\n---\nc')).code).toBe(2);
    expect((await kubectlMultus(['validate', '--bogus', 'x'])).stderr).toMatch(/unknown flag "--bogus"/);
    expect((await kubectlMultus(['frobnicate'])).code).toBe(2);
  });
});

describe('kubectl multus plan -f', () => {
  it("prints the plan of the file's pod with its NADs: exit 0 when ADD would go ahead, 1 when not", async () => {
    const good = await kubectlMultus(['plan', '-f', file('good.yaml')]);
    expect(good.stdout).toMatch(/net1: ns1\/good-net, network "good-net", plugins macvlan/);
    expect(good.code).toBe(0);
    const text =
      readFileSync(file('nads.yaml'), 'utf8') + '\n---\n' + readFileSync(file('pods.yaml'), 'utf8').split('---')[3];
    const bad = await kubectlMultus(['plan', '-f', '-'], text);
    expect(bad.stdout).toMatch(/error \(code 7\): pod ns1\/uses-bad-nad: error loading k8s delegates/);
    expect(bad.code).toBe(1);
  });
});

describe('kubectl multus status', () => {
  it('formats network-status as a table', () => {
    const table = formatStatusTable([
      { name: 'cbr0', interface: 'eth0', ips: ['10.244.0.5'], mac: '0a:58:0a:f4:00:05', default: true, dns: {} },
      {
        name: 'ns1/sriov',
        interface: 'net1',
        ips: ['10.1.0.7', 'fd00::7'],
        mac: '52:54:00:00:00:01',
        dns: {},
        'device-info': { type: 'pci', version: '1.1.0', pci: { 'pci-address': '0000:03:00.2' } },
      },
    ]);
    expect(table).toBe(
      [
        'INTERFACE  NETWORK    IPS               MAC                DEFAULT  DEVICE',
        'eth0       cbr0       10.244.0.5        0a:58:0a:f4:00:05  true',
        'net1       ns1/sriov  10.1.0.7,fd00::7  52:54:00:00:00:01  false    0000:03:00.2',
        '',
      ].join('\n'),
    );
  });

  it('needs a pod name and a cluster', async () => {
    expect((await runKubectlMultus(['status'], deps())).valueOf()).toBe(2);
  });
});

function deps() {
  return { io: { stdout: () => undefined, stderr: () => undefined }, env: {}, stdin: () => '' };
}
