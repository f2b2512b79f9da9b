/**
 * The four ways the density bench installs Multus on the node, each by its own DaemonSet layout:
 *   thin_ts, resident_ts  deployments/multus-ts-thin.yml and multus-ts-resident.yml as they are
 *   resident_ts_multus_limits  multus-ts-resident.yml with Multus' own thick resources on the daemon container
 *                         (requests = limits = 100m CPU, 50Mi): what an operator who swaps the image keeps
 *   resident_ts_multus_limits_d2, _d4  the same with `delegateConcurrency` 2 or 4 in its daemon-config.json (the
 *                         delegates the daemon runs at once; docs/resident.md "Memory"): the lever side by side
 *   resident_ts_multus_limits_daemon_exec  the same with `delegateExec: "daemon"`: the daemon runs the delegates
 *                         in its own container, Multus' way, instead of the shim (docs/resident.md, "Delegates")
 *   resident_ts_no_bound  resident_ts with `connectionLimit: 1000` in its daemon-config.json: every request at once,
 *                         Go thick's way, instead of the default bound of 8 (docs/resident.md "Memory"): what the
 *                         bound costs a pod's readiness side by side
 *   go_thin               Go Multus v4.3.0's deployments/multus-daemonset.yml layout: thin_entrypoint writes the
 *                         config and the kubeconfig and copies the plugin (the init container's install_multus
 *                         copy is thin_entrypoint's own copy here)
 *   go_thick              its deployments/multus-daemonset-thick.yml layout: an init container copies the shim,
 *                         multus-daemon runs with the daemon-config of that manifest (chrootDir /hostroot)
 *   go_thick_300mi        the same with requests 100m / 100Mi, a 300Mi
 *                         memory limit, no CPU limit (our manifest's until 2026-12-07) instead of Multus': Go thick's own peak and latency when its limits do not
 *                         cap them (Multus' 50Mi limit OOM-kills it at N = 100, and 100m of CPU throttles it)
 * with Multus' own resource requests and limits. The one change to every manifest, the one an operator without
 * kube-proxy makes: the containers' KUBERNETES_SERVICE_HOST/PORT name the API server's address.
 */
import { collection, docs, type Obj, withApiServer } from '../../../test/helpers/manifests.ts';

export const MODES = [
  'thin_ts',
  'resident_ts',
  'resident_ts_multus_limits',
  'resident_ts_multus_limits_d2',
  'resident_ts_multus_limits_d4',
  'resident_ts_multus_limits_daemon_exec',
  'resident_ts_no_bound',
  'go_thin',
  'go_thick',
  'go_thick_300mi',
] as const;
export type Mode = (typeof MODES)[number];
export const GO_IMAGE = 'ghcr.io/k8snetworkplumbingwg/multus-cni:v4.3.0';

/** The label of each mode's DaemonSet pods, and the DaemonSet's name. */
export const DS: Record<Mode, { name: string; label: string }> = {
  thin_ts: { name: 'multus-ts', label: 'app=multus-ts' },
  resident_ts: { name: 'multus-ts', label: 'app=multus-ts' },
  resident_ts_multus_limits: { name: 'multus-ts', label: 'app=multus-ts' },
  resident_ts_multus_limits_d2: { name: 'multus-ts', label: 'app=multus-ts' },
  resident_ts_multus_limits_d4: { name: 'multus-ts', label: 'app=multus-ts' },
  resident_ts_multus_limits_daemon_exec: { name: 'multus-ts', label: 'app=multus-ts' },
  resident_ts_no_bound: { name: 'multus-ts', label: 'app=multus-ts' },
  go_thin: { name: 'kube-multus-ds', label: 'app=multus' },
  go_thick: { name: 'kube-multus-ds', label: 'app=multus' },
  go_thick_300mi: { name: 'kube-multus-ds', label: 'app=multus' },
};

/** The modes with a resident daemon (a process the bench measures, and the daemon-kill fault kills). */
export const hasDaemon = (mode: Mode): boolean => isOurDaemon(mode) || mode.startsWith('go_thick');
/** Our resident modes (the daemon container is `daemon`, the process `multus daemon`). */
export const isOurDaemon = (mode: Mode): boolean => mode.startsWith('resident_ts');
/** Multus' own thick resources: requests = limits = 100m CPU, 50Mi (deployments/multus-daemonset-thick.yml). */
const MULTUS_THICK_RESOURCES = { requests: { cpu: '100m', memory: '50Mi' }, limits: { cpu: '100m', memory: '50Mi' } };
/** The resources of Go thick's daemon container: Multus' own, or, for go_thick_300mi, those of ours. */
const goThickResources = (mode: Mode) =>
  mode === 'go_thick_300mi'
    ? { requests: { cpu: '100m', memory: '100Mi' }, limits: { memory: '300Mi' } }
    : MULTUS_THICK_RESOURCES;

const res = (cpu: string, memory: string) => ({ requests: { cpu, memory }, limits: { cpu, memory } });
const hostPath = (name: string, path: string) => ({ name, hostPath: { path } });

function goDaemonSet(containers: unknown[], initContainers: unknown[], volumes: unknown[], hostPID = false): Obj {
  const labels = { tier: 'node', app: 'multus', name: 'multus' };
  const o: any = {
    apiVersion: 'apps/v1',
    kind: 'DaemonSet',
    metadata: { name: 'kube-multus-ds', namespace: 'kube-system', labels },
    spec: {
      selector: { matchLabels: { name: 'multus' } },
      updateStrategy: { type: 'RollingUpdate' },
      template: {
        metadata: { labels },
        spec: {
          hostNetwork: true,
          ...(hostPID ? { hostPID: true } : {}),
          tolerations: [
            { operator: 'Exists', effect: 'NoSchedule' },
            { operator: 'Exists', effect: 'NoExecute' },
          ],
          serviceAccountName: 'multus',
          containers,
          initContainers,
          terminationGracePeriodSeconds: 10,
          volumes,
        },
      },
    },
  };
  return o as Obj;
}

function goThin(): Obj[] {
  const container = {
    name: 'kube-multus',
    image: GO_IMAGE,
    imagePullPolicy: 'Never',
    command: ['/thin_entrypoint'],
    args: [
      '--multus-conf-file=auto',
      '--multus-autoconfig-dir=/host/etc/cni/net.d',
      '--cni-conf-dir=/host/etc/cni/net.d',
    ],
    resources: res('100m', '50Mi'),
    securityContext: { privileged: true },
    volumeMounts: [
      { name: 'cni', mountPath: '/host/etc/cni/net.d' },
      { name: 'cnibin', mountPath: '/host/opt/cni/bin' },
    ],
  };
  return [goDaemonSet([container], [], [hostPath('cni', '/etc/cni/net.d'), hostPath('cnibin', '/opt/cni/bin')])];
}

function goThick(mode: Mode): Obj[] {
  const daemonConfig = {
    chrootDir: '/hostroot',
    cniVersion: '0.3.1',
    logLevel: 'verbose',
    logToStderr: true,
    cniConfigDir: '/host/etc/cni/net.d',
    multusAutoconfigDir: '/host/etc/cni/net.d',
    multusConfigFile: 'auto',
    socketDir: '/host/run/multus/',
  };
  const configMap: any = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'multus-daemon-config', namespace: 'kube-system', labels: { tier: 'node', app: 'multus' } },
    data: { 'daemon-config.json': JSON.stringify(daemonConfig, null, 2) },
  };
  const mounts: [string, string][] = [
    ['cni', '/host/etc/cni/net.d'],
    ['cnibin', '/opt/cni/bin'],
    ['host-run', '/host/run'],
    ['host-var-lib-cni-multus', '/var/lib/cni/multus'],
    ['host-var-lib-kubelet', '/var/lib/kubelet'],
    ['host-run-k8s-cni-cncf-io', '/run/k8s.cni.cncf.io'],
    ['host-run-netns', '/run/netns'],
    ['multus-daemon-config', '/etc/cni/net.d/multus.d'],
    ['hostroot', '/hostroot'],
    ['multus-conf-dir', '/etc/cni/multus/net.d'],
  ];
  const hostToContainer = new Set(['host-var-lib-kubelet', 'host-run-netns', 'hostroot']);
  const daemon = {
    name: 'kube-multus',
    image: GO_IMAGE,
    imagePullPolicy: 'Never',
    command: ['/usr/src/multus-cni/bin/multus-daemon'],
    resources: goThickResources(mode),
    securityContext: { privileged: true },
    volumeMounts: mounts.map(([name, mountPath]) => ({
      name,
      mountPath,
      ...(hostToContainer.has(name) ? { mountPropagation: 'HostToContainer' } : {}),
      ...(name === 'multus-daemon-config' ? { readOnly: true } : {}),
    })),
    env: [{ name: 'MULTUS_NODE_NAME', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } }],
  };
  const install = {
    name: 'install-multus-binary',
    image: GO_IMAGE,
    imagePullPolicy: 'Never',
    // what install_multus does: a copy beside it, then a rename (a plain copy over a shim that runs fails with
    // ETXTBSY, and after a reboot the runtime runs shims while this container starts)
    command: [
      '/bin/sh',
      '-c',
      'cp /usr/src/multus-cni/bin/multus-shim /host/opt/cni/bin/.multus-shim.new && ' +
        'mv -f /host/opt/cni/bin/.multus-shim.new /host/opt/cni/bin/multus-shim',
    ],
    resources: res('10m', '15Mi'),
    securityContext: { privileged: true },
    volumeMounts: [{ name: 'cnibin', mountPath: '/host/opt/cni/bin', mountPropagation: 'Bidirectional' }],
  };
  const volumes = [
    hostPath('cni', '/etc/cni/net.d'),
    hostPath('cnibin', '/opt/cni/bin'),
    hostPath('hostroot', '/'),
    {
      name: 'multus-daemon-config',
      configMap: { name: 'multus-daemon-config', items: [{ key: 'daemon-config.json', path: 'daemon-config.json' }] },
    },
    hostPath('host-run', '/run'),
    hostPath('host-var-lib-cni-multus', '/var/lib/cni/multus'),
    hostPath('host-var-lib-kubelet', '/var/lib/kubelet'),
    hostPath('host-run-k8s-cni-cncf-io', '/run/k8s.cni.cncf.io'),
    hostPath('host-run-netns', '/run/netns/'),
    hostPath('multus-conf-dir', '/etc/cni/multus/net.d'),
  ];
  return [configMap, goDaemonSet([daemon], [install], volumes, true)];
}

/** `delegateConcurrency` a mode pins in its daemon-config.json (resident_ts_multus_limits_d2: 2), if any. */
export const pinnedDelegates = (mode: Mode): number | undefined =>
  Number(/^resident_ts_multus_limits_d(\d+)$/.exec(mode)?.[1]) || undefined;

/** What a mode pins in its daemon-config.json, beside the manifest's own keys. */
const pinnedConfig = (mode: Mode): Record<string, number | string> => {
  const delegates = pinnedDelegates(mode);
  if (delegates !== undefined) return { delegateConcurrency: delegates };
  if (mode === 'resident_ts_multus_limits_daemon_exec') return { delegateExec: 'daemon' };
  return mode === 'resident_ts_no_bound' ? { connectionLimit: 1000 } : {};
};

/** Our manifests as deployments/ has them; resident_ts_multus_limits* with Multus' resources on the daemon. */
function ours(mode: Mode): Obj[] {
  const objs = docs(mode === 'thin_ts' ? 'multus-ts-thin.yml' : 'multus-ts-resident.yml');
  if (mode.startsWith('resident_ts_multus_limits')) ourDaemon(objs).resources = structuredClone(MULTUS_THICK_RESOURCES);
  const pinned = pinnedConfig(mode);
  if (Object.keys(pinned).length > 0) {
    const cm = objs.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'multus-ts-daemon-config') as any;
    const config = JSON.parse(cm.data['daemon-config.json']);
    cm.data['daemon-config.json'] = JSON.stringify({ ...config, ...pinned }, null, 4) + '\n';
  }
  return objs;
}

/** The daemon container of our resident DaemonSet. */
function ourDaemon(objs: Obj[]): any {
  const ds = objs.find((o) => o.kind === 'DaemonSet') as any;
  return ds.spec.template.spec.containers.find((c: any) => c.name === 'daemon');
}

/** The objects of a mode, with the API server's address in every container's environment. */
export function modeObjects(mode: Mode, apiPort: string): { url: string; obj: Obj }[] {
  const objs = mode === 'go_thin' ? goThin() : mode.startsWith('go_thick') ? goThick(mode) : ours(mode);
  withApiServer(objs, apiPort);
  return objs.map((obj) => ({ url: collection(obj), obj }));
}

/** The memory limit of the mode's daemon container (resident modes), in MiB. */
export function daemonLimitMib(mode: Mode): number | undefined {
  if (mode.startsWith('go_thick')) return Number(/^(\d+)Mi$/.exec(goThickResources(mode).limits.memory)?.[1]);
  if (!isOurDaemon(mode)) return undefined;
  const daemon = ourDaemon(ours(mode));
  return Number(/^(\d+)Mi$/.exec(daemon?.resources?.limits?.memory ?? '')?.[1]) || undefined;
}
