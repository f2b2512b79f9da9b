/**
 * What the Helm chart (deployments/helm/multus) grants, exposes and refuses (docs/reliability.md, "Second probe:
 * metrics and chart"; docs/install.md, "Helm"), with `helm template`:
 * - the TokenRequest right only with tokenBinding node, and then with ValidatingAdmissionPolicy multus-node-token
 *   (its effect against a real kube-apiserver: test/k8s/token-policy.test.ts);
 * - the claim status write only for Kubernetes 1.36+ with the operator's word that the per-driver authorization
 *   is on;
 * - the resident mode's init container and kubeconfig sidecar: uid 0, no capability, no privilege escalation;
 * - /metrics: not exposed unless metrics.enabled (resident mode only), which opts into the node's addresses;
 * - rke2-multus' values: /host/... daemon paths read as the node's when mounted, a render failure naming the key
 *   otherwise; thickPlugin.image honoured; every rke2-multus key the chart ignores named in NOTES.txt.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { describe, expect, it } from 'vitest';
import { parseDaemonConfig } from '../../src/daemon/config.ts';
import { CHART, HELM, type Obj, helm, one, render, renderArgs, valuesFile } from '../helpers/helm.ts';
import { fileExists, needs } from '../helpers/skip.ts';

const ready = needs(fileExists(HELM, 'helm v3.22.0 (bash test/peers/build-go-tool.sh helm)'));
const THICK = 'thickPlugin.enabled=true';

/** The render's failure message (it must fail). */
function refused(...args: string[]): string {
  const r = helm(['template', 'multus', CHART, '-n', 'kube-system', ...args]);
  expect(r.code, r.stdout).not.toBe(0);
  return r.stderr;
}

/**
 * NOTES.txt as `helm install` prints it, without a cluster: `helm template` of a copy of the chart where a template
 * carries the notes' text (helm template leaves NOTES.txt out; `helm install --dry-run` asks a cluster).
 */
function renderNotes(args: string[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'mts-helm-notes-'));
  try {
    cpSync(CHART, join(dir, 'multus'), { recursive: true });
    const notes = readFileSync(join(CHART, 'templates', 'NOTES.txt'), 'utf8');
    writeFileSync(
      join(dir, 'multus', 'templates', '_test-notes.tpl'),
      `{{- define "test.notes" -}}\n${notes}{{- end }}`,
    );
    writeFileSync(
      join(dir, 'multus', 'templates', 'test-notes.yaml'),
      'notes: {{ include "test.notes" . | toJson }}\n',
    );
    const r = helm([
      'template',
      'multus',
      join(dir, 'multus'),
      '-n',
      'kube-system',
      '--show-only',
      'templates/test-notes.yaml',
      ...args,
    ]);
    expect(r.code, r.stderr).toBe(0);
    return (yaml.load(r.stdout) as { notes: string }).notes;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const daemonConf = (objs: Obj[]) =>
  JSON.parse(one(objs, 'ConfigMap', 'multus-daemon-config').data['daemon-config.json']) as Record<string, unknown>;
const thickPod = (objs: Obj[]) => one(objs, 'DaemonSet', 'kube-multus-ds').spec.template;

/** rke2-multus' own values (packages/rke2-multus/charts/values.yaml), as an rke2 user carries them over. */
const RKE2_DAEMON_CONF = {
  chrootDir: '/hostroot',
  cniVersion: '0.3.1',
  logLevel: 'verbose',
  logToStderr: true,
  cniConfigDir: '/host/etc/cni/net.d',
  multusAutoconfigDir: '/host/etc/cni/net.d',
  multusConfigFile: 'auto',
  socketDir: '/host/run/multus/',
};

describe.runIf(ready)('the Helm chart grants, exposes and refuses', () => {
  it('tokenBinding node: the TokenRequest right on its own account, with the policy that admits only node-bound tokens asked by the pod', () => {
    const objs = render();
    const role = one(objs, 'Role', 'multus');
    expect(role.rules[0]).toEqual({
      apiGroups: [''],
      resources: ['serviceaccounts/token'],
      resourceNames: ['multus'],
      verbs: ['create'],
    });
    const policy = one(objs, 'ValidatingAdmissionPolicy', 'multus-node-token');
    expect(policy.spec.failurePolicy).toBe('Fail');
    expect(policy.spec.matchConstraints.resourceRules).toEqual([
      { apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['serviceaccounts/token'] },
    ]);
    expect(policy.spec.matchConditions).toEqual([
      { name: 'multus-account', expression: 'request.userInfo.username == "system:serviceaccount:kube-system:multus"' },
    ]);
    expect(policy.spec.validations.map((v: { message: string }) => v.message)).toEqual([
      "multus' service account asks for tokens only with its pod's own token",
      "multus' service account gets only tokens bound to its pod's node",
      "multus' service account gets tokens of at most 24 h (expirationSeconds <= 86400)",
    ]);
    expect(one(objs, 'ValidatingAdmissionPolicyBinding', 'multus-node-token').spec).toMatchObject({
      policyName: 'multus-node-token',
      validationActions: ['Deny'],
    });
  });

  it('tokenBinding pod: no TokenRequest right and no policy, in both modes; another value is refused', () => {
    for (const mode of [[], [THICK]]) {
      const objs = render('config.cni_conf.tokenBinding=pod', ...mode);
      const resources = one(objs, 'Role', 'multus').rules.flatMap((r: { resources: string[] }) => r.resources);
      expect(resources).toEqual(['daemonsets']);
      expect(objs.filter((o) => o.kind.startsWith('ValidatingAdmissionPolicy'))).toEqual([]);
    }
    expect(refused('--set', 'config.cni_conf.tokenBinding=kubelet')).toContain(
      'config.cni_conf.tokenBinding: "kubelet" is neither node nor pod',
    );
  });

  it('claimNetworkData: refused before Kubernetes 1.36 and without granularStatusAuthorization; the status write only then', () => {
    const on = ['--set', 'claimNetworkData.enabled=true', '--set', 'claimNetworkData.drivers={nic.example.com}'];
    expect(refused(...on)).toContain('claimNetworkData.granularStatusAuthorization: set it true to confirm');
    const confirmed = [...on, '--set', 'claimNetworkData.granularStatusAuthorization=true'];
    expect(refused(...confirmed, '--kube-version', '1.35.0')).toContain(
      'claimNetworkData.enabled: the cluster is Kubernetes v1.35.0',
    );
    const objs = renderArgs([...confirmed, '--kube-version', '1.36.0']);
    expect(one(objs, 'ClusterRole', 'multus-claim-network-data').rules[1]).toEqual({
      apiGroups: ['resource.k8s.io'],
      resources: ['resourceclaims/driver'],
      verbs: ['associated-node:patch'],
      resourceNames: ['nic.example.com'],
    });
  });

  it('resident mode: the init container and the kubeconfig sidecar run as uid 0 with no capability and no privilege escalation', () => {
    const [install, sidecar] = thickPod(render(THICK)).spec.initContainers;
    for (const c of [install, sidecar]) {
      expect(c.securityContext, c.name).toEqual({
        runAsUser: 0,
        runAsNonRoot: false,
        allowPrivilegeEscalation: false,
        capabilities: { drop: ['ALL'] },
      });
    }
  });

  it('metrics: off by default; metrics.enabled opts the daemon into the node addresses, with scrape annotations; refused in thin mode', () => {
    const plain = render(THICK, 'config.daemon_conf.metricsPort=9091');
    // metricsPort alone (Multus' key): the daemon's default address, 127.0.0.1
    expect(parseDaemonConfig(JSON.stringify(daemonConf(plain)))).toMatchObject({
      metricsPort: 9091,
      metricsBindAddress: '127.0.0.1',
    });
    expect(thickPod(plain).metadata.annotations['prometheus.io/scrape']).toBeUndefined();
    const objs = render(THICK, 'metrics.enabled=true');
    expect(parseDaemonConfig(JSON.stringify(daemonConf(objs)))).toMatchObject({
      metricsPort: 9091,
      metricsBindAddress: '0.0.0.0',
    });
    const pod = thickPod(objs);
    expect(pod.metadata.annotations).toMatchObject({
      'prometheus.io/scrape': 'true',
      'prometheus.io/port': '9091',
      'prometheus.io/path': '/metrics',
    });
    expect(pod.spec.containers[0].ports).toEqual([{ name: 'metrics', containerPort: 9091 }]);
    expect(refused('--set', 'metrics.enabled=true')).toContain(
      'metrics.enabled: /metrics is served by the resident daemon',
    );
  });

  it("rke2-multus' daemon_conf: its /host/... paths read as the node's paths the daemon's container mounts; one it does not mount fails naming the key", () => {
    const values = valuesFile({ thickPlugin: { enabled: true }, config: { daemon_conf: RKE2_DAEMON_CONF } });
    try {
      const objs = renderArgs(['-f', values.path]);
      const conf = parseDaemonConfig(JSON.stringify(daemonConf(objs)));
      expect(conf).toMatchObject({
        cniConfigDir: '/etc/cni/net.d',
        multusAutoconfigDir: '/etc/cni/net.d',
        socketDir: '/run/multus/',
        chrootDir: '/hostroot',
      });
      expect(thickPod(objs).spec.containers[0].readinessProbe.exec.command).toContain('--socket-dir=/run/multus/');
    } finally {
      values.remove();
    }
    expect(refused('--set', THICK, '--set', 'config.daemon_conf.logFile=/host/var/log/multus.log')).toContain(
      'config.daemon_conf.logFile: "/host/var/log/multus.log" is a path inside Multus\' container',
    );
  });

  it("thickPlugin.image (rke2-multus' key) is the resident mode's image, with the registry prefix; unset, the one image", () => {
    const images = (objs: Obj[]) => {
      const spec = thickPod(objs).spec;
      return [...spec.initContainers, ...spec.containers].map((c: { image: string; imagePullPolicy: string }) => [
        c.image,
        c.imagePullPolicy,
      ]);
    };
    const set = render(
      THICK,
      'thickPlugin.image.repository=registry.example/multus-ts-thick',
      'thickPlugin.image.tag=9.9.9',
      'thickPlugin.image.pullPolicy=Always',
      'global.systemDefaultRegistry=mirror.example',
    );
    expect(images(set)).toEqual(Array(3).fill(['mirror.example/registry.example/multus-ts-thick:9.9.9', 'Always']));
    expect(images(render(THICK))).toEqual(Array(3).fill(['ghcr.io/multus-ts/multus-ts:0.1.0', 'IfNotPresent']));
  });

  it('NOTES.txt names every rke2-multus key the chart ignores, and each one set', () => {
    const values = valuesFile({
      cniplugins: { image: { repository: 'rancher/hardened-cni-plugins', tag: 'v1' }, skipcnis: 'flannel' },
      manifests: { customResourceDefinition: true },
      'rke2-whereabouts': { enabled: true },
      thickPlugin: { enabled: true },
      config: { daemon_conf: RKE2_DAEMON_CONF },
    });
    const notes = renderNotes(['-f', values.path]);
    values.remove();
    const all = notes.match(/^rke2-multus keys this chart ignores: (.*) \(docs/m)?.[1]?.split(', ');
    expect(all).toEqual([
      'affinity',
      'cniplugins.image',
      'cniplugins.skipcnis',
      'dhcpDaemonSet.image',
      'dynamicNetworksController.image',
      'dynamicNetworksController.sockets',
      'fullnameOverride',
      'manifests.customResourceDefinition',
      'manifests.dhcpDaemonSet',
      'nameOverride',
      'pod.resources.dynamicNetworksController',
      'podSecurityContext',
      'rke2-whereabouts.enabled',
      'securityContext',
      'serviceAccount.annotations',
      'serviceAccount.create',
    ]);
    const set = [...notes.matchAll(/^(\S+) is set: ignored/gm)].map((m) => m[1]);
    expect(set).toEqual([
      'cniplugins.image',
      'cniplugins.skipcnis',
      'manifests.customResourceDefinition',
      'rke2-whereabouts.enabled',
    ]);
    expect(notes).toContain(
      "config.daemon_conf: cniConfigDir, multusAutoconfigDir, socketDir given as rke2-multus' /host/<path>",
    );
  });
});
