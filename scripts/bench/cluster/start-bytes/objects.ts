/**
 * start-bytes' objects (scripts/bench/cluster/start-bytes.ts): K NADs across namespaces and M pods on one node, each
 * pod with the status and managed fields a kubelet node gives a running pod, and Multus' network-status.
 */
import { type Cluster, nadPath, podPath } from '../../../../test/k8s/cluster.ts';

/** The node the pods run on, and the daemons' node. */
export const NODE = 'bytes-node';
const NETWORKS = 'k8s.v1.cni.cncf.io/networks';
const NETWORK_STATUS = 'k8s.v1.cni.cncf.io/network-status';

const nadConfig = (name: string, j: number) =>
  JSON.stringify({
    cniVersion: '1.0.0',
    name,
    type: 'macvlan',
    master: 'eth1',
    mode: 'bridge',
    ipam: { type: 'host-local', ranges: [[{ subnet: `10.${(241 + j) % 256}.0.0/16` }]] },
  });

export async function pool<T>(items: T[], width: number, run: (t: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) await run(items[next++]!);
    }),
  );
}

export async function createNads(c: Cluster, namespaces: string[], perNs: number): Promise<void> {
  const jobs = namespaces.flatMap((ns) => Array.from({ length: perNs }, (_, j) => [ns, j] as const));
  await pool(jobs, 16, async ([ns, j]) => {
    const name = `net-${j}`;
    await c.admin.post(nadPath(ns), {
      apiVersion: 'k8s.cni.cncf.io/v1',
      kind: 'NetworkAttachmentDefinition',
      metadata: { name, namespace: ns, labels: { bench: j < 2 ? 'pods' : 'extra' } },
      spec: { config: nadConfig(name, j) },
    });
  });
}

/** What kubelet writes of a running pause pod (conditions, one container, addresses), at `i`. */
function runningStatus(i: number, started: string) {
  const cond = (type: string) => ({ type, status: 'True', lastProbeTime: null, lastTransitionTime: started });
  const ip = `10.244.0.${10 + i}`;
  return {
    phase: 'Running',
    conditions: ['PodReadyToStartContainers', 'Initialized', 'Ready', 'ContainersReady', 'PodScheduled'].map(cond),
    hostIP: '192.168.122.10',
    hostIPs: [{ ip: '192.168.122.10' }],
    podIP: ip,
    podIPs: [{ ip }],
    startTime: started,
    containerStatuses: [
      {
        name: 'c',
        state: { running: { startedAt: started } },
        lastState: {},
        ready: true,
        restartCount: 0,
        image: 'registry.k8s.io/pause:3.10',
        imageID: 'registry.k8s.io/pause@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a',
        containerID: `containerd://${(i + 1).toString(16).padStart(64, 'a')}`,
        started: true,
        volumeMounts: [],
      },
    ],
    qosClass: 'BestEffort',
  };
}

/** `count` pods of NODE: created by one manager, their status by `kubelet`, network-status by `multus-daemon`. */
export async function createPods(c: Cluster, namespaces: string[], count: number): Promise<void> {
  const started = new Date(Math.floor(Date.now() / 1000) * 1000).toISOString().replace('.000', '');
  await pool(
    Array.from({ length: count }, (_, i) => i),
    8,
    async (i) => {
      const ns = namespaces[i % namespaces.length]!;
      const name = `${NODE}-p${i}`;
      const networks = 'net-0,net-1';
      await c.admin.post(`${podPath(ns)}?fieldManager=kube-burner`, {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name, namespace: ns, labels: { app: 'cluster-bench' }, annotations: { [NETWORKS]: networks } },
        spec: {
          nodeName: NODE,
          automountServiceAccountToken: false,
          terminationGracePeriodSeconds: 1,
          containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10', imagePullPolicy: 'Never' }],
        },
      });
      let pod = await c.admin.get(podPath(ns, name));
      pod.status = runningStatus(i, started);
      pod = await c.admin.put(`${podPath(ns, name)}/status?fieldManager=kubelet`, pod);
      const statuses = ['net-0', 'net-1'].map((n, k) => ({
        name: `${ns}/${n}`,
        interface: `net${k + 1}`,
        ips: [`10.${241 + k}.0.${10 + i}`],
        mac: `0a:58:0a:f1:00:${(10 + i).toString(16).padStart(2, '0')}`,
        dns: {},
      }));
      const all = [
        { name: 'cbr0', interface: 'eth0', ips: [`10.244.0.${10 + i}`], default: true, dns: {} },
        ...statuses,
      ];
      pod.metadata.annotations[NETWORK_STATUS] = JSON.stringify(all, null, '    ');
      await c.admin.put(`${podPath(ns, name)}/status?fieldManager=multus-daemon`, pod);
    },
  );
}
