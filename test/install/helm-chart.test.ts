/**
 * The Helm chart in deployments/helm/multus, with helm v3.22.0 built from the module proxy
 * (test/peers/build-go-tool.sh helm): `helm lint` in both modes, and `helm template` for thin and thick with the rendered
 * objects asserted: Multus' names (DaemonSet kube-multus-ds, labels app/name/tier, ServiceAccount and ClusterRole
 * multus, ConfigMap multus-daemon-config, container kube-multus), the containers' arguments accepted by this
 * installer's own option parser and the daemon config by the daemon's parser, rke2-multus' value keys mapped to
 * the options they mean, and the uninstall cleanup wired (`--cleanup-when-deleted` and the RBAC it needs). The
 * install and uninstall on a real kubelet node are in test/runtime/kubelet-helm.test.ts.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { describe, expect, it } from 'vitest';
import { parseDaemonConfig } from '../../src/daemon/config.ts';
import { parseInstallArgs } from '../../src/install/options.ts';
import { CHART, HELM, type Obj, helm, one, render } from '../helpers/helm.ts';
import { fileExists, needs } from '../helpers/skip.ts';

const ready = needs(fileExists(HELM, 'helm v3.22.0 (bash test/peers/build-go-tool.sh helm)'));

const MULTUS_LABELS = { app: 'multus', name: 'multus', tier: 'node' };
const BIN = '/usr/src/multus-cni/bin/multus';

describe.runIf(ready)('the Helm chart (deployments/helm/multus)', () => {
  it.each([[[]], [['--set', 'thickPlugin.enabled=true']]])('helm lint %j passes', (extra) => {
    const r = helm(['lint', CHART, ...extra]);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain('1 chart(s) linted, 0 chart(s) failed');
  });

  it("thin: Multus' names; kube-multus runs `multus install` with options this installer accepts", () => {
    const objs = render();
    expect(objs.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual([
      'ClusterRole/multus',
      'ClusterRoleBinding/multus',
      'DaemonSet/kube-multus-ds',
      'Role/multus',
      'RoleBinding/multus',
      'ServiceAccount/multus',
      'ValidatingAdmissionPolicy/multus-node-token',
      'ValidatingAdmissionPolicyBinding/multus-node-token',
    ]);
    const ds = one(objs, 'DaemonSet', 'kube-multus-ds');
    expect(ds.metadata).toMatchObject({ namespace: 'kube-system', labels: MULTUS_LABELS });
    expect(ds.spec.selector).toEqual({ matchLabels: { name: 'multus' } });
    const pod = ds.spec.template.spec;
    expect(ds.spec.template.metadata.labels).toEqual(MULTUS_LABELS);
    expect([pod.hostNetwork, pod.serviceAccountName, pod.priorityClassName]).toEqual([
      true,
      'multus',
      'system-node-critical',
    ]);
    expect(pod.nodeSelector).toEqual({ 'kubernetes.io/os': 'linux' });
    expect(pod.tolerations).toEqual([
      { operator: 'Exists', effect: 'NoSchedule' },
      { operator: 'Exists', effect: 'NoExecute' },
    ]);
    expect(pod.initContainers).toBeUndefined();
    expect(pod.containers.map((c: { name: string }) => c.name)).toEqual(['kube-multus']);
    const c = pod.containers[0];
    expect(c.command).toEqual([BIN, 'install']);
    // pod.resources not enabled: the installer's own (docs/resources.md), not rke2-multus' nothing
    expect(c.resources).toEqual({ requests: { cpu: '10m', memory: '64Mi' }, limits: { memory: '150Mi' } });
    const o = parseInstallArgs(c.args);
    expect(o).toMatchObject({
      multusConfFile: 'auto',
      cniConfDir: '/host/etc/cni/net.d',
      cniBinDir: '/host/opt/cni/bin',
      multusAutoconfigDir: '/host/etc/cni/net.d',
      multusKubeconfigFileHost: '/etc/cni/net.d/multus.d/multus.kubeconfig',
      tokenBinding: 'node',
      cleanupConfigOnExit: false,
      cleanupWhenDeleted: 'kube-system/kube-multus-ds',
    });
    const mounts = Object.fromEntries(
      c.volumeMounts.map((m: { name: string; mountPath: string }) => [m.name, m.mountPath]),
    );
    expect(mounts).toEqual({ cni: '/host/etc/cni/net.d', cnibin: '/host/opt/cni/bin' });
    const paths = Object.fromEntries(pod.volumes.map((v: any) => [v.name, v.hostPath.path]));
    expect(paths).toEqual({ cni: '/etc/cni/net.d', cnibin: '/opt/cni/bin' });
    expect(c.startupProbe.exec.command).toEqual([
      BIN,
      '--is-default-ready',
      '--wait=0',
      '--cni-conf-dir=/host/etc/cni/net.d',
    ]);
    expect(c.env[0]).toEqual({ name: 'MULTUS_NODE_NAME', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } });
  });

  it('RBAC: what multus-ts calls, a node-bound token of its own account, and GET of its own DaemonSet only', () => {
    const objs = render();
    const rules = one(objs, 'ClusterRole', 'multus').rules as { resources: string[]; verbs: string[] }[];
    expect(rules.map((r) => `${r.resources.join(',')}: ${r.verbs.join(',')}`)).toEqual([
      'pods: get,list,watch',
      'pods/status: update',
      'network-attachment-definitions: get,list,watch',
      'events: create,patch',
      'resourceclaims: get',
      'resourceslices: list',
    ]);
    const role = one(objs, 'Role', 'multus');
    expect(role.metadata.namespace).toBe('kube-system');
    expect(role.rules).toEqual([
      { apiGroups: [''], resources: ['serviceaccounts/token'], resourceNames: ['multus'], verbs: ['create'] },
      { apiGroups: ['apps'], resources: ['daemonsets'], resourceNames: ['kube-multus-ds'], verbs: ['get'] },
    ]);
    for (const kind of ['ClusterRoleBinding', 'RoleBinding']) {
      expect(one(objs, kind, 'multus').subjects).toEqual([
        { kind: 'ServiceAccount', name: 'multus', namespace: 'kube-system' },
      ]);
    }
  });

  it('claimNetworkData: off by default; on, the per-driver status write for the drivers named, refused without one', () => {
    expect(render().filter((o) => o.metadata.name === 'multus-claim-network-data')).toEqual([]);
    const on = ['claimNetworkData.enabled=true', 'claimNetworkData.granularStatusAuthorization=true'];
    const objs = render(...on, 'claimNetworkData.drivers={nic.example.com}');
    expect(one(objs, 'ClusterRole', 'multus-claim-network-data').rules).toEqual([
      { apiGroups: ['resource.k8s.io'], resources: ['resourceclaims/status'], verbs: ['patch'] },
      {
        apiGroups: ['resource.k8s.io'],
        resources: ['resourceclaims/driver'],
        verbs: ['associated-node:patch'],
        resourceNames: ['nic.example.com'],
      },
    ]);
    expect(one(objs, 'ClusterRoleBinding', 'multus-claim-network-data').subjects).toEqual([
      { kind: 'ServiceAccount', name: 'multus', namespace: 'kube-system' },
    ]);
    const daemonConf = (o: Obj[]): Record<string, unknown> =>
      JSON.parse(one(o, 'ConfigMap', 'multus-daemon-config').data['daemon-config.json']);
    expect(daemonConf(render('thickPlugin.enabled=true')).publishClaimNetworkData).toBeUndefined();
    // the daemon gets the resources docs/resources.md recommends: no CPU limit
    const daemon = (objs: ReturnType<typeof render>) =>
      one(objs, 'DaemonSet', 'kube-multus-ds').spec.template.spec.containers.find(
        (x: { name: string }) => x.name === 'kube-multus',
      );
    expect(daemon(render('thickPlugin.enabled=true')).resources).toEqual({
      requests: { cpu: '100m', memory: '50Mi' },
      limits: { memory: '100Mi' },
    });
    const thick = render('thickPlugin.enabled=true', ...on, 'claimNetworkData.drivers={a}');
    expect(daemonConf(thick).publishClaimNetworkData).toBe(true);
    const r = helm(['template', 'multus', CHART, '--set', on[0]!, '--set', on[1]!]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('claimNetworkData.drivers: name the DRA drivers');
  });

  it("thin: rke2-multus' config.cni_conf keys become the thin entrypoint's options", () => {
    const objs = render(
      'config.cni_conf.namespaceIsolation=true',
      'config.cni_conf.globalNamespaces=default\\,kube-system',
      'config.cni_conf.logLevel=verbose',
      'config.cni_conf.logFile=/var/log/multus.log',
      'config.cni_conf.logToStderr=false',
      'config.cni_conf.readinessIndicatorFile=/run/flannel/subnet.env',
      'config.cni_conf.cleanupConfigOnExit=true',
      'config.cni_conf.skipConfigWatch=true',
      'config.cni_conf.cniVersion=0.3.1',
      'config.cni_conf.masterCniFilename=10-flannel.conflist',
      'config.cni_conf.multusAutoconfigDir=/etc/cni/auto.d',
      'cleanupOnUninstall=false',
      'pod.resources.enabled=true',
      'global.systemDefaultRegistry=registry.example',
    );
    const pod = one(objs, 'DaemonSet').spec.template.spec;
    const c = pod.containers[0];
    expect(c.image).toBe('registry.example/ghcr.io/multus-ts/multus-ts:0.1.0');
    expect(c.resources).toEqual({
      requests: { memory: '128Mi', cpu: '250m' },
      limits: { memory: '1024Mi', cpu: '2000m' },
    });
    expect(parseInstallArgs(c.args)).toMatchObject({
      namespaceIsolation: true,
      globalNamespaces: 'default,kube-system',
      multusLogLevel: 'verbose',
      multusLogFile: '/var/log/multus.log',
      multusLogToStderr: false,
      readinessIndicatorFile: '/run/flannel/subnet.env',
      cleanupConfigOnExit: true,
      skipConfigWatch: true,
      cniVersion: '0.3.1',
      multusMasterCniFileName: '10-flannel.conflist',
      multusAutoconfigDir: '/host/etc/cni/auto.d',
      cleanupWhenDeleted: '',
    });
    // an autoconfig dir apart from the conf dir is mounted too
    expect(pod.volumes.map((v: any) => v.hostPath.path)).toEqual(['/etc/cni/net.d', '/opt/cni/bin', '/etc/cni/auto.d']);
  });

  it('thin: a given 00-multus.conf (config.multus_conf) is ConfigMap multus-cni-config, mounted where multusConfFile names it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'mts-helm-values-'));
    const values = join(dir, 'values.yaml');
    const conf = {
      cniVersion: '1.0.0',
      name: 'multus-cni-network',
      type: 'multus',
      kubeconfig: '/etc/k',
      delegates: [],
    };
    writeFileSync(
      values,
      yaml.dump({ config: { cni_conf: { multusConfFile: '/tmp/multus-conf/00-multus.conf' }, multus_conf: conf } }),
    );
    const r = helm(['template', 'multus', CHART, '-n', 'kube-system', '-f', values]);
    rmSync(dir, { recursive: true, force: true });
    expect(r.code, r.stderr).toBe(0);
    const objs = yaml.loadAll(r.stdout).filter(Boolean) as Obj[];
    const cm = one(objs, 'ConfigMap', 'multus-cni-config');
    expect(JSON.parse(cm.data['cni-conf.json'])).toEqual(conf);
    const c = one(objs, 'DaemonSet').spec.template.spec.containers[0];
    expect(parseInstallArgs(c.args).multusConfFile).toBe('/tmp/multus-conf/00-multus.conf');
    expect(c.volumeMounts).toContainEqual({
      name: 'multus-cfg',
      mountPath: '/tmp/multus-conf/00-multus.conf',
      subPath: 'cni-conf.json',
    });
  });

  it('thick: kube-multus is the daemon with ConfigMap multus-daemon-config; binaries by an init container; the kubeconfig and the uninstall cleanup by a sidecar', () => {
    const objs = render('thickPlugin.enabled=true', 'dynamicNetworksController.enabled=true');
    const cm = one(objs, 'ConfigMap', 'multus-daemon-config');
    expect(cm.metadata.labels).toEqual(MULTUS_LABELS);
    const daemonConfig = parseDaemonConfig(cm.data['daemon-config.json']);
    expect(daemonConfig).toMatchObject({
      chrootDir: '/hostroot',
      delegateExec: 'caller', // the shim runs the delegates outside the daemon's 100m / 50Mi
      cniConfigDir: '/etc/cni/net.d',
      socketDir: '/run/multus/',
      multusConfigFile: 'auto',
      dynamicNetworks: true, // dynamicNetworksController.enabled: the daemon's own dynamic networks
    });
    expect(objs.filter((o) => o.kind === 'DaemonSet').map((o) => o.metadata.name)).toEqual(['kube-multus-ds']);
    const pod = one(objs, 'DaemonSet').spec.template.spec;
    expect([pod.hostPID, pod.hostNetwork, pod.terminationGracePeriodSeconds]).toEqual([true, true, 40]);
    const [install, sidecar] = pod.initContainers;
    expect(install.name).toBe('install-multus-binary');
    expect(parseInstallArgs(install.args)).toMatchObject({ installBinaryOnly: true, cniBinDir: '/host/opt/cni/bin' });
    expect(sidecar).toMatchObject({ name: 'kubeconfig', restartPolicy: 'Always', command: [BIN, 'install'] });
    expect(parseInstallArgs(sidecar.args)).toMatchObject({
      skipMultusConf: true,
      cniConfDir: '/host/etc/cni/net.d',
      cleanupWhenDeleted: 'kube-system/kube-multus-ds',
    });
    const daemon = pod.containers[0];
    expect(daemon).toMatchObject({
      name: 'kube-multus',
      command: [BIN, 'daemon'],
      args: ['--config', '/etc/multus-ts/daemon-config.json'],
    });
    expect(daemon.securityContext).toEqual({ privileged: true });
    // the static shim asks the daemon on its socket: no second JavaScript process in the daemon's container
    expect(daemon.readinessProbe.exec.command).toEqual([`${BIN}-shim`, '--ready', '--socket-dir=/run/multus/']);
    const mounts = Object.fromEntries(
      daemon.volumeMounts.map((m: { name: string; mountPath: string }) => [m.name, m.mountPath]),
    );
    expect(mounts).toMatchObject({
      cni: '/etc/cni/net.d',
      cnibin: '/opt/cni/bin',
      'socket-dir': '/run/multus',
      hostroot: '/hostroot',
      'multus-daemon-config': '/etc/multus-ts',
    });
    // the node's paths at the same paths in the container: the generated config's paths hold on the node
    const paths = Object.fromEntries(
      pod.volumes.filter((v: any) => v.hostPath).map((v: any) => [v.name, v.hostPath.path]),
    );
    for (const name of ['cni', 'cnibin', 'socket-dir', 'cni-cache']) expect(paths[name]).toBe(mounts[name]);
  });
});
