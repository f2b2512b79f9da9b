/** The DaemonSet objects of the DRA networks suite (kubelet-dra-networks.ts) and bench (scripts/bench/dra/run.ts). */
import { type Obj, docs, withApiServer } from '../helpers/manifests.ts';

/**
 * The resident manifest with the API server's address (no kube-proxy here) and DRA networks on, beside the DRA
 * piece: the daemon's config says `draNetworks` (and the opt-in for claims' inline configs); the shim waits 20 s for
 * a daemon being restarted (the kill cases) before its thin fallback.
 *
 * On CRI-O the daemon container is not privileged but has the capabilities it uses (CAPS): under CRI-O's rootless
 * mode, which this machine needs (crio.ts), runc cannot open /dev/null in a privileged container ("error reopening
 * /dev/null inside container"), and this machine lacks CAP_SYS_RESOURCE, so neither privileged nor `ALL` starts.
 */
export function draDaemonSetObjects(apiPort: string, runtime: 'containerd' | 'crio' = 'containerd'): Obj[] {
  const objs = [...docs('multus-ts-resident.yml'), ...docs('multus-ts-dra-networks.yml')];
  for (const o of objs) {
    if (o.kind === 'DaemonSet' && runtime === 'crio') unprivileged(o);
    if (o.kind !== 'ConfigMap') continue;
    const data = o.data as Record<string, string>;
    const conf = JSON.parse(data['daemon-config.json']!) as Record<string, unknown>;
    const dra = { draNetworks: true, draInlineConfigFromClaims: true, shimWaitSeconds: 20 };
    data['daemon-config.json'] = JSON.stringify({ ...conf, ...dra });
  }
  return withApiServer(objs, apiPort);
}

/** setns and mounts, netlink and raw sockets, chroot into /hostroot, other processes' namespaces. */
const CAPS = ['SYS_ADMIN', 'NET_ADMIN', 'NET_RAW', 'SYS_CHROOT', 'SYS_PTRACE', 'DAC_READ_SEARCH', 'MKNOD', 'BPF'];

/** The DaemonSet's privileged containers made unprivileged with CAPS (see above). */
function unprivileged(ds: Obj): void {
  const spec = (ds as any).spec.template.spec;
  for (const c of [...(spec.initContainers ?? []), ...spec.containers]) {
    if (c.securityContext?.privileged) c.securityContext = { privileged: false, capabilities: { add: CAPS } };
  }
}
