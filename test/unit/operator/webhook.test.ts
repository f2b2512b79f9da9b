/**
 * operator/webhook.ts without a cluster: the AdmissionReview answers (NADs on CREATE and UPDATE, pods on CREATE,
 * anything else allowed), a missing NAD a warning, namespace isolation from the flags, and the flags the chart and
 * deployments/multus-ts-webhook.yml pass (test/k8s/webhook.test.ts has kube-apiserver call it).
 */
import { describe, expect, it } from 'vitest';
import { KubeApiError } from '../../../src/k8s/types.ts';
import type { Nad } from '../../../src/k8s/types.ts';
import { offlineConf } from '../../../src/multus/validate.ts';
import { parseArgs, review, webhookConf } from '../../../src/operator/webhook.ts';
import { docs } from '../../helpers/manifests.ts';

const request = (kind: string, operation: string, object: unknown) => ({
  apiVersion: 'admission.k8s.io/v1',
  kind: 'AdmissionReview',
  request: { uid: 'u-1', kind: { kind }, operation, namespace: 'ns1', object },
});
const nadObject = (config: string) => ({ metadata: { name: 'n' }, spec: { config } });
const podObject = (networks: string) => ({
  metadata: { generateName: 'web-', annotations: { 'k8s.v1.cni.cncf.io/networks': networks } },
});
const nads = new Map<string, Nad>([
  ['ns1/a', { metadata: { namespace: 'ns1', name: 'a' }, spec: { config: '{"cniVersion":"1.0.0","type":"bridge"}' } }],
  ['ns2/b', { metadata: { namespace: 'ns2', name: 'b' }, spec: { config: '{"cniVersion":"1.0.0","type":"bridge"}' } }],
]);
const getNad = (ns: string, name: string): Promise<Nad> =>
  nads.has(`${ns}/${name}`)
    ? Promise.resolve(nads.get(`${ns}/${name}`)!)
    : Promise.reject(new KubeApiError(7, 'not found', 404, 'NotFound'));
type Answer = { response: { uid: string; allowed: boolean; status?: { message: string }; warnings?: string[] } };
const answer = async (body: unknown, conf = offlineConf()) =>
  (await review(body, { conf, getNad })) as unknown as Answer;

describe('webhook review', () => {
  it('refuses a NAD ADD would refuse, on CREATE and UPDATE, with the message; allows a good one', async () => {
    for (const op of ['CREATE', 'UPDATE']) {
      const a = await answer(request('NetworkAttachmentDefinition', op, nadObject('{"cniVersion":"1.0.0"}')));
      expect(a.response).toMatchObject({ uid: 'u-1', allowed: false });
      expect(a.response.status!.message).toMatch(/^NetworkAttachmentDefinition ns1\/n: delegate must have the 'type'/);
    }
    const good = await answer(request('NetworkAttachmentDefinition', 'CREATE', nadObject('{"type":"bridge"}')));
    expect(good.response).toEqual({ uid: 'u-1', allowed: true });
  });

  it('refuses a pod whose annotation ADD would refuse; a missing NAD is a warning; DELETE and other kinds pass', async () => {
    const bad = await answer(request('Pod', 'CREATE', podObject('a@net1,a@net1')));
    expect(bad.response.allowed).toBe(false);
    expect(bad.response.status!.message).toMatch(/^interface name "net1" is requested by/);
    const later = await answer(request('Pod', 'CREATE', podObject('a,later')));
    expect(later.response.allowed).toBe(true);
    expect(later.response.warnings).toEqual([
      "network-attachment-definition ns1/later does not exist yet: the pod's ADD fails until it does",
    ]);
    expect((await answer(request('Pod', 'UPDATE', podObject('[')))).response.allowed).toBe(true);
    expect((await answer(request('Service', 'CREATE', {}))).response.allowed).toBe(true);
    await expect(review({ request: {} }, { conf: offlineConf() })).rejects.toThrow(/not an AdmissionReview/);
  });

  it('applies namespace isolation as the flags say', async () => {
    const cross = request('Pod', 'CREATE', podObject('ns2/b'));
    expect((await answer(cross)).response.allowed).toBe(true);
    const isolated = webhookConf(
      parseArgs(['--tls-cert-file=c', '--tls-private-key-file=k', '--namespace-isolation=true']),
    );
    expect((await answer(cross, isolated)).response.allowed).toBe(false);
    const global = webhookConf(
      parseArgs([
        '--tls-cert-file=c',
        '--tls-private-key-file=k',
        '--namespace-isolation=true',
        '--global-namespaces=ns2',
      ]),
    );
    expect((await answer(cross, global)).response.allowed).toBe(true);
  });

  it("takes the manifest's arguments and refuses bad ones", () => {
    const deploy = docs('multus-ts-webhook.yml').find((d) => d.kind === 'Deployment')!;
    const command = (deploy.spec as { template: { spec: { containers: { command: string[] }[] } } }).template.spec
      .containers[0]!.command;
    expect(() => webhookConf(parseArgs(command.slice(2)))).not.toThrow();
    expect(() => parseArgs(['--bogus=1'])).toThrow(/unknown flag "--bogus"/);
    expect(() => parseArgs(['--port=1'])).toThrow(/are required/);
    expect(() => webhookConf({ 'namespace-isolation': 'yes' })).toThrow(/true or false/);
  });
});
