/**
 * The admission webhook (src/operator/webhook.ts) called by a real kube-apiserver over TLS: the table of
 * test/data/kubectl-multus/ (bad NADs and pods refused with the validator's message, the one ADD gives, as
 * test/unit/operator/kubectl-multus.test.ts proves; good ones admitted), a pod naming a NAD that does not exist yet
 * admitted with a warning, pods without the networks annotation never sent (the matchConditions of
 * deployments/multus-ts-webhook.yml, whose configuration is used), the certificate
 * files read again when they change, and the webhook down: everything admitted (failurePolicy Ignore).
 */
import { copyFileSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { connect } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/base/log.ts';
import { loadKubeClient } from '../../src/k8s/client.ts';
import type { Nad } from '../../src/k8s/types.ts';
import { offlineConf, validateNad } from '../../src/multus/validate.ts';
import type { Webhook } from '../../src/operator/webhook.ts';
import { startWebhook } from '../../src/operator/webhook.ts';
import { type Obj, docs } from '../helpers/manifests.ts';
import { fileExists, needs } from '../helpers/skip.ts';
import { ApiError, type Cluster, REPO_ROOT, k8sRequirements, nadPath, podPath, startCluster } from './cluster.ts';

const ready = needs(...k8sRequirements());
const MULTUS_BIN = process.env.MULTUS_TS_BIN || join(REPO_ROOT, 'build/multus');
const built = ready && needs(fileExists(MULTUS_BIN, 'the built executable (npm run build)'));
const NETWORKS = 'k8s.v1.cni.cncf.io/networks';
const CONFIG_PATH = '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations';
const DATA = join(REPO_ROOT, 'test/data/kubectl-multus');

/** The NADs of nads.yaml (name -> spec.config). */
function tableNads(): Map<string, string> {
  const text = readFileSync(join(DATA, 'nads.yaml'), 'utf8');
  const out = new Map<string, string>();
  for (const m of text.matchAll(/name: (\S+)\n\s+namespace: ns1\nspec:\n\s+config: (?:'(.*)'|\|\n\s+(.*))/g)) {
    out.set(m[1]!, m[2] ?? m[3]!);
  }
  return out;
}

describe.skipIf(!ready)('admission webhook: kube-apiserver calls it over TLS', () => {
  let cluster: Cluster;
  let webhook: Webhook | undefined;
  let dir: string;
  let reviews = 0;
  const ns = `wh-${process.pid}`;

  const nad = (name: string, config: string) =>
    cluster.admin.post(nadPath(ns), {
      apiVersion: 'k8s.cni.cncf.io/v1',
      kind: 'NetworkAttachmentDefinition',
      metadata: { name, namespace: ns },
      spec: { config },
    });
  const pod = (name: string, annotations: Record<string, string>) =>
    cluster.admin.request('POST', podPath(ns), {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: ns, annotations },
      spec: { containers: [{ name: 'c', image: 'example.invalid/none' }] },
    });
  const refusal = async (p: Promise<unknown>): Promise<string> => {
    try {
      await p;
    } catch (e) {
      if (e instanceof ApiError) return String(e.body?.message ?? '');
      throw e;
    }
    return '';
  };

  async function serve(): Promise<Webhook> {
    const kube = (await loadKubeClient({ kubeconfig: cluster.adminKubeconfig, env: {}, log: silentLogger }))!;
    const getNad = (n: string, name: string) => kube.getNad(n, name);
    const w = await startWebhook({
      certFile: join(dir, 'tls.crt'),
      keyFile: join(dir, 'tls.key'),
      port: 0,
      address: '127.0.0.1',
      reloadSeconds: 0.1,
      deps: { conf: offlineConf(), getNad },
      log: () => undefined,
      onReview: () => void reviews++,
    });
    return w;
  }

  beforeAll(async () => {
    cluster = await startCluster();
    dir = mkdtempSync(join(tmpdir(), 'mts-webhook-'));
    copyFileSync(join(cluster.dir, 'apiserver.crt'), join(dir, 'tls.crt'));
    copyFileSync(join(cluster.dir, 'apiserver.key'), join(dir, 'tls.key'));
    await cluster.admin.post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
    webhook = await serve();
    await cluster.admin.post(CONFIG_PATH, webhookConfig(webhook.port, readFileSync(cluster.caFile, 'utf8')));
    // the API server picks the configuration up in the background: wait until a bad NAD is refused
    for (let i = 0; i < 100; i++) {
      const msg = await refusal(nad(`probe-${i}`, '{"cniVersion":"1.0.0"}'));
      if (msg) break;
      await new Promise((r) => setTimeout(r, 100));
    }
  }, 120_000);

  afterAll(async () => {
    await webhook?.close();
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const bad = ['bad-json', 'no-type', 'empty-plugins', 'bad-version'];
  it.each(bad)("refuses NAD %s with the validator's (ADD's) message", async (name) => {
    const config = tableNads().get(name)!;
    const expected = validateNad({ metadata: { name, namespace: ns }, spec: { config } } as Nad).errors[0]!.msg;
    const msg = await refusal(nad(name, config));
    expect(msg).toContain('denied the request');
    expect(msg).toContain(expected);
  });

  it("a nested multus NAD: refused with the validator's message when ADD refuses it, else admitted", async () => {
    const text = readFileSync(join(DATA, 'nested.json'), 'utf8');
    const config = (JSON.parse(text) as { spec: { config: string } }).spec.config;
    const expected = validateNad({ metadata: { name: 'nested', namespace: ns }, spec: { config } } as Nad).errors;
    const msg = await refusal(nad('nested', config));
    if (expected.length === 0) expect(msg).toBe('');
    else expect(msg).toContain(expected[0]!.msg);
  });

  it("admits the good NADs and a pod using them; refuses the table's bad pods with ADD's message", async () => {
    for (const name of ['good-net', 'good-list', 'no-type-ok']) {
      const config = name === 'no-type-ok' ? '{"cniVersion":"1.0.0","type":"bridge"}' : tableNads().get(name)!;
      await nad(name, config);
    }
    expect((await pod('good', { [NETWORKS]: 'good-net@net1, good-list' })).status).toBe(201);
    const routes =
      '[{"name":"good-net","default-route":["10.1.0.1"]},{"name":"good-list","default-route":["fd00::1"]}]';
    const refused = await pod('two-routes', { [NETWORKS]: routes });
    expect(refused.status).toBe(400);
    expect(refused.body.message).toContain(
      `pod ${ns}/two-routes: error loading k8s delegates: "default-route" is set on both`,
    );
    const syntax = await pod('bad-annotation', { [NETWORKS]: '[{"name":"good-net"' });
    expect(syntax.body.message).toMatch(/parsePodNetworkAnnotation: failed to parse pod Network Attachment Selection/);
  });

  it('pods without a networks annotation never reach the webhook (matchConditions)', async () => {
    const before = reviews;
    expect((await pod('plain', {})).status).toBe(201);
    expect((await pod('labelled', { 'example.com/other': 'x' })).status).toBe(201);
    expect(reviews).toBe(before);
    expect((await pod('with-networks', { [NETWORKS]: 'good-net' })).status).toBe(201);
    expect(reviews).toBe(before + 1);
  });

  it('a pod naming a NAD that does not exist yet is admitted with a warning', async () => {
    const r = await pod('early', { [NETWORKS]: 'later-net' });
    expect(r.status).toBe(201);
    expect(String(r.headers.warning)).toMatch(/later-net does not exist yet/);
  });

  it('reads the certificate files again when they change', async () => {
    const served = () =>
      new Promise<string>((resolve, reject) => {
        const s = connect({ host: '127.0.0.1', port: webhook!.port, rejectUnauthorized: false }, () => {
          resolve(s.getPeerCertificate().fingerprint256);
          s.end();
        });
        s.on('error', reject);
      });
    const before = await served();
    copyFileSync(join(cluster.dir, 'admin.crt'), join(dir, 'new.crt'));
    copyFileSync(join(cluster.dir, 'admin.key'), join(dir, 'new.key'));
    renameSync(join(dir, 'new.key'), join(dir, 'tls.key'));
    renameSync(join(dir, 'new.crt'), join(dir, 'tls.crt'));
    let after = before;
    for (let i = 0; i < 50 && after === before; i++) {
      await new Promise((r) => setTimeout(r, 100));
      after = await served();
    }
    expect(after).not.toBe(before);
  });

  it('with the webhook down, objects are admitted (failurePolicy Ignore)', async () => {
    await webhook!.close();
    webhook = undefined;
    await nad('admitted-while-down', '{"cniVersion":"1.0.0"}');
    expect((await pod('admitted-while-down', { [NETWORKS]: '[{"name":' })).status).toBe(201);
  });

  it.skipIf(!built)("the built executable serves it too (Bun): refusals with ADD's message", async () => {
    const binDir = mkdtempSync(join(tmpdir(), 'mts-webhook-bin-'));
    copyFileSync(join(cluster.dir, 'apiserver.crt'), join(binDir, 'tls.crt'));
    copyFileSync(join(cluster.dir, 'apiserver.key'), join(binDir, 'tls.key'));
    const child = spawn(
      MULTUS_BIN,
      [
        'webhook',
        `--tls-cert-file=${join(binDir, 'tls.crt')}`,
        `--tls-private-key-file=${join(binDir, 'tls.key')}`,
        '--port=0',
        '--address=127.0.0.1',
        `--kubeconfig=${cluster.adminKubeconfig}`,
      ],
      { stdio: ['ignore', 'ignore', 'pipe'], env: { PATH: '/usr/bin:/bin' } },
    );
    try {
      const port = await new Promise<number>((resolve, reject) => {
        let log = '';
        child.stderr!.on('data', (d: Buffer) => {
          log += d.toString();
          const m = /serving on port (\d+)/.exec(log);
          if (m) resolve(Number(m[1]));
        });
        child.on('exit', () => reject(new Error(`multus webhook exited: ${log}`)));
      });
      const current = await cluster.admin.get(`${CONFIG_PATH}/multus-ts-webhook`);
      const next = webhookConfig(port, readFileSync(cluster.caFile, 'utf8'));
      await cluster.admin.put(`${CONFIG_PATH}/multus-ts-webhook`, {
        ...next,
        metadata: { ...next.metadata, resourceVersion: current.metadata.resourceVersion },
      });
      let msg = '';
      for (let i = 0; i < 100 && !msg; i++) {
        msg = await refusal(nad(`bun-probe-${i}`, '{"cniVersion":"1.0.0"}'));
        if (!msg) await new Promise((r) => setTimeout(r, 100));
      }
      expect(msg).toMatch(
        /denied the request: NetworkAttachmentDefinition wh-\d+\/bun-probe-\d+: delegate must have the 'type'/,
      );
      const routes =
        '[{"name":"good-net","default-route":["10.1.0.1"]},{"name":"good-list","default-route":["fd00::1"]}]';
      const refused = await pod('bun-two-routes', { [NETWORKS]: routes });
      expect(refused.body.message).toContain(`pod ${ns}/bun-two-routes: error loading k8s delegates: "default-route"`);
    } finally {
      child.kill('SIGTERM');
      rmSync(binDir, { recursive: true, force: true });
    }
  });
});

/** deployments/multus-ts-webhook.yml's configuration (rules, matchConditions, failurePolicy), pointed at a URL. */
function webhookConfig(port: number, ca: string): Obj {
  const vwc = docs('multus-ts-webhook.yml').find((d) => d.kind === 'ValidatingWebhookConfiguration')!;
  const webhooks = (vwc.webhooks as Record<string, unknown>[]).map((w) => ({
    ...w,
    clientConfig: { url: `https://127.0.0.1:${port}/validate`, caBundle: Buffer.from(ca).toString('base64') },
  }));
  return { ...vwc, metadata: { name: vwc.metadata.name }, webhooks };
}
