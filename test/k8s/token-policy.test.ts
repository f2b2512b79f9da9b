/**
 * The chart's `tokenBinding: node` RBAC against a real kube-apiserver (docs/reliability.md, "Second probe"): the
 * Role lets multus' account ask the TokenRequest API for a token of itself, and ValidatingAdmissionPolicy
 * multus-node-token admits only what `multus install --token-binding=node` asks: with the DaemonSet pod's own
 * token, a token bound to that pod's node for at most 24 h. The node-bound token stored on the node cannot mint
 * tokens, and no token of the account is unbound, bound to another node or longer-lived.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HELM } from '../helpers/helm.ts';
import { render } from '../helpers/helm.ts';
import { fileExists, needs } from '../helpers/skip.ts';
import {
  type Cluster,
  type KubeClient,
  MULTUS_NAMESPACE,
  MULTUS_SA,
  k8sRequirements,
  startCluster,
} from './cluster.ts';

const ready = needs(...k8sRequirements(), fileExists(HELM, 'helm v3.22.0 (bash test/peers/build-go-tool.sh helm)'));
const NODE = 'node-token-a';
const OTHER = 'node-token-b';
const TOKENS = `/api/v1/namespaces/${MULTUS_NAMESPACE}/serviceaccounts/${MULTUS_SA}/token`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A TokenRequest body: bound to `ref` (or unbound), for `seconds`. */
const tokenRequest = (seconds: number, ref?: Record<string, string>) => ({
  apiVersion: 'authentication.k8s.io/v1',
  kind: 'TokenRequest',
  spec: { expirationSeconds: seconds, ...(ref ? { boundObjectRef: { apiVersion: 'v1', ...ref } } : {}) },
});

describe.skipIf(!ready)("the chart's node-token policy, against a real kube-apiserver", () => {
  let cluster: Cluster;
  let podClient: KubeClient;

  /** The status and message of a TokenRequest made by `client`. */
  const ask = async (client: KubeClient, body: unknown) => {
    const res = await client.request('POST', TOKENS, body);
    return { status: res.status, token: res.body?.status?.token as string | undefined, message: res.body?.message };
  };

  beforeAll(async () => {
    cluster = await startCluster();
    const objs = render(); // the defaults: tokenBinding node
    const paths: Record<string, string> = {
      Role: `/apis/rbac.authorization.k8s.io/v1/namespaces/${MULTUS_NAMESPACE}/roles`,
      RoleBinding: `/apis/rbac.authorization.k8s.io/v1/namespaces/${MULTUS_NAMESPACE}/rolebindings`,
      ValidatingAdmissionPolicy: '/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies',
      ValidatingAdmissionPolicyBinding: '/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings',
    };
    for (const o of objs.filter((x) => x.kind in paths)) await cluster.admin.post(paths[o.kind]!, o);
    for (const name of [NODE, OTHER]) {
      await cluster.admin.post('/api/v1/nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name } });
    }
    // the DaemonSet's pod on NODE (Pending: no kubelet), and the token kubelet would mount in it
    const pod = await cluster.admin.post(`/api/v1/namespaces/${MULTUS_NAMESPACE}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'kube-multus-ds-a' },
      spec: { nodeName: NODE, serviceAccountName: MULTUS_SA, containers: [{ name: 'c', image: 'x' }] },
    });
    const podToken = await cluster.admin.post(
      TOKENS,
      tokenRequest(3600, { kind: 'Pod', name: pod.metadata.name, uid: pod.metadata.uid }),
    );
    podClient = cluster.client(podToken.status.token);
    // the policy is compiled and served a moment after it is created: wait until it answers an unbound request
    for (let i = 0; i < 100 && (await ask(podClient, tokenRequest(3600))).status === 201; i++) await sleep(100);
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  it("the pod's own token gets a token bound to its node, for 24 h: what `multus install --token-binding=node` asks", async () => {
    const got = await ask(podClient, tokenRequest(24 * 3600, { kind: 'Node', name: NODE }));
    expect(got.status, got.message).toBe(201);
  });

  it.each<[string, ReturnType<typeof tokenRequest>, RegExp]>([
    ['unbound', tokenRequest(3600), /only tokens bound to its pod's node/],
    ['bound to another node', tokenRequest(3600, { kind: 'Node', name: OTHER }), /only tokens bound to its pod's node/],
    ['for more than 24 h', tokenRequest(48 * 3600, { kind: 'Node', name: NODE }), /at most 24 h/],
  ])("the pod's own token asking a token %s: refused", async (_what, body, why) => {
    const got = await ask(podClient, body);
    expect([got.status, got.message]).toEqual([422, expect.stringMatching(why)]);
  });

  it('the node-bound token stored on the node cannot mint tokens, not even its own kind', async () => {
    const stored = await ask(podClient, tokenRequest(3600, { kind: 'Node', name: NODE }));
    expect(stored.status).toBe(201);
    const nodeClient = cluster.client(stored.token!);
    for (const body of [tokenRequest(3600), tokenRequest(3600, { kind: 'Node', name: NODE })]) {
      const got = await ask(nodeClient, body);
      expect(got.status).toBe(422);
      expect(got.message).toMatch(/only with its pod's own token/);
    }
  });
});
