/**
 * Networks as DRA devices (docs/dra-networks.md), what the installers grant and mount: the static piece
 * deployments/multus-ts-dra-networks.yml (beside multus-ts-resident.yml) and the chart's `draNetworks` values. The
 * driver's calls are the node's ResourceSlices, the claims it prepares and their status written under 1.36+'s
 * per-driver authorization (`resourceclaims/driver`, "associated-node:patch", for our driver only); the daemon's
 * sockets go into the kubelet's plugins/ and plugins_registry/. Against a real API server: manifests.test.ts
 * (dry-run of every file, the DeviceClasses' CEL compiled there) and the kubelet tier (kubelet-dra-networks.ts).
 */
import { describe, expect, it } from 'vitest';
import { parseDaemonConfig } from '../../src/daemon/config.ts';
import { parseInstallArgs } from '../../src/install/options.ts';
import { CHART, HELM, helm, one, render, renderArgs } from '../helpers/helm.ts';
import { docs } from '../helpers/manifests.ts';
import { fileExists, needs } from '../helpers/skip.ts';

const DRIVER = 'multus.k8s.cni.cncf.io';
const FILE = 'multus-ts-dra-networks.yml';
const ready = needs(fileExists(HELM, 'helm v3.22.0 (bash test/peers/build-go-tool.sh helm)'));

type Rule = { apiGroups: string[]; resources: string[]; verbs: string[]; resourceNames?: string[] };
/** `<verb> <resource>[/<name>]`, sorted: what a ClusterRole grants. */
const grants = (rules: Rule[]): string[] =>
  rules
    .flatMap((r) =>
      r.resources.flatMap((res) =>
        r.verbs.flatMap((v) => (r.resourceNames ?? ['']).map((n) => `${v} ${res}${n ? `/${n}` : ''}`)),
      ),
    )
    .sort();

const DRIVER_GRANTS = (driver: string) =>
  [
    'create resourceslices',
    'update resourceslices',
    'delete resourceslices',
    'deletecollection resourceslices',
    'list resourceslices',
    'watch resourceslices',
    'get resourceclaims',
    'patch resourceclaims/status',
    `associated-node:patch resourceclaims/driver/${driver}`,
    'get deviceclasses',
    'list deviceclasses',
    'get nodes',
  ].sort();

/** The DeviceClasses' CEL: our driver and the `kind` attribute of the device. */
const classes = (objs: Array<{ kind: string; metadata: { name: string }; spec?: any }>) =>
  Object.fromEntries(
    objs
      .filter((o) => o.kind === 'DeviceClass')
      .map((o) => [o.metadata.name, o.spec.selectors.map((s: { cel: { expression: string } }) => s.cel.expression)]),
  );
const CLASSES = (driver: string) => ({
  'multus-network': [`device.driver == "${driver}" && device.attributes["dra.multus.k8s.cni.cncf.io"].kind == "any"`],
  'multus-nad-network': [
    `device.driver == "${driver}" && device.attributes["dra.multus.k8s.cni.cncf.io"].kind == "network"`,
  ],
});

describe(`deployments/${FILE}`, () => {
  it('grants the driver its calls, the claim status write for our driver on its own node only', () => {
    const objs = docs(FILE);
    const role = objs.find((o) => o.kind === 'ClusterRole') as any;
    expect(grants(role.rules)).toEqual(DRIVER_GRANTS(DRIVER));
    // never the whole status of any claim from any node
    expect(grants(role.rules).filter((g) => g.includes('arbitrary-node'))).toEqual([]);
    const binding = objs.find((o) => o.kind === 'ClusterRoleBinding') as any;
    expect(binding.roleRef.name).toBe(role.metadata.name);
    expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: 'multus-ts', namespace: 'kube-system' }]);
  });

  it('samples a DeviceClass for any network and one for the NADs that opted in', () => {
    expect(classes(docs(FILE) as any)).toEqual(CLASSES(DRIVER));
  });

  it("the resident DaemonSet mounts the kubelet's dir read-write: plugins/ and plugins_registry/ are under it", () => {
    const ds = docs('multus-ts-resident.yml').find((d) => d.kind === 'DaemonSet') as any;
    const pod = ds.spec.template.spec;
    const daemon = pod.containers.find((c: { name: string }) => c.name === 'daemon');
    const mount = daemon.volumeMounts.find((m: { mountPath: string }) => m.mountPath === '/var/lib/kubelet');
    expect(mount?.readOnly ?? false, 'the sockets are written there').toBe(false);
    const vol = pod.volumes.find((v: { name: string }) => v.name === mount.name);
    expect(vol.hostPath.path).toBe('/var/lib/kubelet');
  });
});

describe.runIf(ready)('the Helm chart: draNetworks', () => {
  const ON = ['thickPlugin.enabled=true', 'draNetworks.enabled=true', 'draNetworks.granularStatusAuthorization=true'];
  const daemonConf = (objs: ReturnType<typeof render>) =>
    parseDaemonConfig(one(objs, 'ConfigMap', 'multus-daemon-config').data['daemon-config.json']).multusKeys;
  const rawConf = (objs: ReturnType<typeof render>): Record<string, unknown> =>
    JSON.parse(one(objs, 'ConfigMap', 'multus-daemon-config').data['daemon-config.json']);
  const daemon = (objs: ReturnType<typeof render>) => {
    const pod = one(objs, 'DaemonSet', 'kube-multus-ds').spec.template.spec;
    const c = pod.containers.find((x: { name: string }) => x.name === 'kube-multus');
    const paths = Object.fromEntries(pod.volumes.map((v: any) => [v.name, v.hostPath?.path]));
    return c.volumeMounts.map((m: { name: string; mountPath: string }) => `${paths[m.name]} ${m.mountPath}`);
  };

  it('off by default: no key, no grant, no mount, no DeviceClass', () => {
    const objs = render('thickPlugin.enabled=true');
    expect(rawConf(objs).draNetworks).toBeUndefined();
    expect(objs.filter((o) => o.metadata.name === 'multus-dra-networks' || o.kind === 'DeviceClass')).toEqual([]);
    expect(daemon(objs).filter((m: string) => m.includes('plugins'))).toEqual([]);
  });

  it("on: the daemon's keys, the driver's grants, the kubelet's plugin dirs mounted, the DeviceClasses", () => {
    const objs = render(...ON);
    expect(rawConf(objs)).toMatchObject({
      draNetworks: true,
      draDriverName: DRIVER,
      draInlineConfigFromClaims: false,
    });
    expect(daemonConf(objs), 'the daemon reads its config').toBeDefined();
    expect(grants(one(objs, 'ClusterRole', 'multus-dra-networks').rules)).toEqual(DRIVER_GRANTS(DRIVER));
    expect(one(objs, 'ClusterRoleBinding', 'multus-dra-networks').subjects).toEqual([
      { kind: 'ServiceAccount', name: 'multus', namespace: 'kube-system' },
    ]);
    expect(daemon(objs)).toEqual(
      expect.arrayContaining([
        '/var/lib/kubelet/plugins /var/lib/kubelet/plugins',
        '/var/lib/kubelet/plugins_registry /var/lib/kubelet/plugins_registry',
      ]),
    );
    expect(classes(objs)).toEqual(CLASSES(DRIVER));
    // the uninstall (the sidecar's --cleanup-when-deleted) deletes the node's slices of the driver too
    const sidecar = one(objs, 'DaemonSet', 'kube-multus-ds').spec.template.spec.initContainers.find(
      (c: { args?: string[] }) => c.args?.some((a) => a.startsWith('--cleanup-when-deleted=')),
    );
    expect(parseInstallArgs(sidecar.args).draDriverName).toBe(DRIVER);
    // another driver name: the grant and the classes follow it; the opt-in for claims' inline configs
    const other = render(...ON, 'draNetworks.driverName=net.example.com', 'draNetworks.inlineConfigFromClaims=true');
    expect(grants(one(other, 'ClusterRole', 'multus-dra-networks').rules)).toEqual(DRIVER_GRANTS('net.example.com'));
    expect(classes(other)).toEqual(CLASSES('net.example.com'));
    expect(rawConf(other)).toMatchObject({ draDriverName: 'net.example.com', draInlineConfigFromClaims: true });
    expect(render(...ON, 'draNetworks.deviceClasses=false').filter((o) => o.kind === 'DeviceClass')).toEqual([]);
  });

  it('refused in thin mode, before Kubernetes 1.36, and without granularStatusAuthorization', () => {
    const fail = (...args: string[]) => {
      const r = helm(['template', 'multus', CHART, '-n', 'kube-system', ...args]);
      expect(r.code, r.stdout).not.toBe(0);
      return r.stderr;
    };
    const set = (vals: string[]) => vals.flatMap((v) => ['--set', v]);
    expect(fail(...set(ON.slice(1)))).toContain('draNetworks.enabled: the DRA driver of the node');
    expect(fail(...set(ON.slice(0, 2)))).toContain('draNetworks.granularStatusAuthorization: set it true');
    expect(fail(...set(ON), '--kube-version', '1.35.0')).toContain('draNetworks.enabled: the cluster is Kubernetes');
    expect(renderArgs([...set(ON), '--kube-version', '1.36.0']).some((o) => o.kind === 'DeviceClass')).toBe(true);
  });
});
