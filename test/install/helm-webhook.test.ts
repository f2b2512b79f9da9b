/**
 * The chart's webhook and admission policy (deployments/helm/multus/templates/webhook.yaml, admission-policy.yaml;
 * docs/kubectl-multus.md): off by default; with `webhook.enabled` the same configuration as
 * deployments/multus-ts-webhook.yml (rules, matchConditions, failurePolicy Ignore; test/k8s/webhook.test.ts runs
 * that one against kube-apiserver), a non-root Deployment running `multus webhook` with arguments its parser
 * takes, and a certificate for the Service's name signed by the CA in caBundle (or cert-manager's); the policy is
 * files/validating-admission-policy.yaml as is (test/k8s/admission-policy.test.ts).
 */
import { spawnSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { describe, expect, it } from 'vitest';
import { parseArgs, webhookConf } from '../../src/operator/webhook.ts';
import { CHART, HELM, helmEnv } from '../helpers/helm.ts';
import { docs } from '../helpers/manifests.ts';
import { fileExists, needs } from '../helpers/skip.ts';

const ready = needs(fileExists(HELM, 'helm v3.22.0 (bash test/peers/build-go-tool.sh helm)'));

interface Obj {
  kind: string;
  metadata: { name: string; annotations?: Record<string, string> };
  [k: string]: any;
}

function render(...args: string[]): Obj[] {
  const env = helmEnv();
  const r = spawnSync(HELM, ['template', 'multus', CHART, '--namespace', 'kube-system', ...args], {
    encoding: 'utf8',
    timeout: 60_000,
    env,
  });
  rmSync(env.HOME!, { recursive: true, force: true });
  expect(r.status, r.stderr).toBe(0);
  return yaml.loadAll(r.stdout).filter((d): d is Obj => d !== null && d !== undefined);
}
const kinds = (objs: Obj[]) => objs.map((o) => `${o.kind}/${o.metadata.name}`).filter((k) => k.includes('multus-ts'));
const VAP_API = ['--api-versions', 'admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy'];

describe.skipIf(!ready)('chart: webhook and admission policy', () => {
  it('renders neither by default', () => {
    expect(kinds(render(...VAP_API))).toEqual([]);
  });

  it("webhook.enabled: the manifest's configuration, a non-root Deployment, a certificate signed by caBundle", () => {
    const objs = render('--set', 'webhook.enabled=true');
    const vwc = objs.find((o) => o.kind === 'ValidatingWebhookConfiguration')!;
    const plain = docs('multus-ts-webhook.yml').find((d) => d.kind === 'ValidatingWebhookConfiguration')!;
    const strip = (w: Record<string, unknown>) => ({ ...w, clientConfig: undefined });
    expect(vwc.webhooks.map(strip)).toEqual((plain.webhooks as Record<string, unknown>[]).map(strip));
    expect(vwc.webhooks[0].failurePolicy).toBe('Ignore');
    const pod = objs.find((o) => o.kind === 'Deployment')!.spec.template.spec;
    expect(pod.securityContext.runAsNonRoot).toBe(true);
    expect(pod.containers[0].securityContext).toMatchObject({
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
    expect(pod.containers[0].command.slice(0, 2)).toEqual(['/usr/src/multus-cni/bin/multus', 'webhook']);
    const secret = objs.find((o) => o.kind === 'Secret')!;
    const cert = new X509Certificate(Buffer.from(secret.data['tls.crt'], 'base64'));
    const ca = new X509Certificate(Buffer.from(vwc.webhooks[0].clientConfig.caBundle, 'base64'));
    expect(cert.verify(ca.publicKey)).toBe(true);
    expect(cert.checkHost('multus-ts-webhook.kube-system.svc')).toBe('multus-ts-webhook.kube-system.svc');
    expect(vwc.webhooks[0].clientConfig.service).toEqual({
      name: 'multus-ts-webhook',
      namespace: 'kube-system',
      path: '/validate',
    });
  });

  it("the webhook's arguments from the values, taken by its parser", () => {
    const objs = render(
      '--set',
      'webhook.enabled=true',
      '--set',
      'webhook.namespaceIsolation=true',
      '--set',
      'webhook.globalNamespaces=shared\\,infra',
    );
    const command = objs.find((o) => o.kind === 'Deployment')!.spec.template.spec.containers[0].command as string[];
    const conf = webhookConf(parseArgs(command.slice(2)));
    expect([conf.namespaceIsolation, conf.globalNamespaces]).toEqual([true, ['shared', 'infra']]);
  });

  it('webhook.certManager.enabled: a Certificate and the CA injected by cert-manager, no Secret of its own', () => {
    const objs = render('--set', 'webhook.enabled=true', '--set', 'webhook.certManager.enabled=true');
    expect(kinds(objs)).toContain('Certificate/multus-ts-webhook');
    expect(objs.some((o) => o.kind === 'Secret')).toBe(false);
    const vwc = objs.find((o) => o.kind === 'ValidatingWebhookConfiguration')!;
    expect(vwc.metadata.annotations!['cert-manager.io/inject-ca-from']).toBe('kube-system/multus-ts-webhook');
    expect(vwc.webhooks[0].clientConfig.caBundle).toBeUndefined();
  });

  it('webhook.admissionPolicy.enabled: the policy file as is, where the API has it', () => {
    const file = yaml.loadAll(readFileSync(join(CHART, 'files/validating-admission-policy.yaml'), 'utf8'));
    const objs = render('--set', 'webhook.admissionPolicy.enabled=true', ...VAP_API);
    // (multus-node-token, the tokenBinding node policy, is test/install/helm-refusals.test.ts')
    const webhookPolicies = objs.filter(
      (o) => o.kind.startsWith('ValidatingAdmissionPolicy') && o.metadata.name !== 'multus-node-token',
    );
    expect(webhookPolicies).toEqual(file);
    expect(kinds(render('--set', 'webhook.admissionPolicy.enabled=true'))).toEqual([]);
  });
});
