/**
 * A node's reboot, as far as Multus can tell (the burst of the density bench, docs/reliability.md, and the
 * two-node tier's reboot of node-b, docs/archive/kubernetes-tests.md): kubelet SIGKILLed, containerd stopped, every
 * container killed (the shims and every process in the pods' cgroups), the pods' network namespaces unmounted
 * and removed (their veths go with them), /run/multus and /run/k8s.cni.cncf.io emptied, /var/lib/cni kept as on
 * disk. Power on is `node.start()` then `node.startKubelet(cluster)`.
 */
import { readFile, readdir } from 'node:fs/promises';
import type { NodeRuntime } from './node.ts';
import { runOk } from './runtime.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Pids whose command line matches. */
export async function pidsWhere(test: (cmdline: string[]) => boolean): Promise<number[]> {
  const out: number[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const cmd = (await readFile(`/proc/${name}/cmdline`, 'utf8').catch(() => '')).split('\0');
    if (test(cmd)) out.push(Number(name));
  }
  return out;
}

/** Pids of the processes in the cgroups of the node's containers (containerd puts them under /k8s.io/<id>). */
export async function containerPids(ids: string[]): Promise<number[]> {
  const out: number[] = [];
  if (ids.length === 0) return out;
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const cg = await readFile(`/proc/${name}/cgroup`, 'utf8').catch(() => '');
    const id = /\/k8s\.io\/([0-9a-f]{64})/.exec(cg)?.[1];
    if (id && ids.includes(id)) out.push(Number(name));
  }
  return out;
}

export function killPids(pids: number[]): void {
  for (const p of pids) {
    try {
      process.kill(p, 'SIGKILL');
    } catch {
      // gone
    }
  }
}

/** Power off: kubelet, containerd, every container, the pods' network namespaces, the runtime dirs of /run. */
export async function powerOff(node: NodeRuntime): Promise<void> {
  const ids = async (args: string[]) => (await node.crictl(args)).stdout.split('\n').filter(Boolean);
  const containers = [...(await ids(['pods', '-q'])), ...(await ids(['ps', '-a', '-q']))];
  await node.killKubelet();
  await node.stopContainerd();
  const socket = node.socket;
  killPids(await pidsWhere((cmd) => cmd.includes(socket))); // the shims
  killPids(await containerPids(containers)); // what ran in the containers (a shim's death leaves them)
  await sleep(500);
  const script =
    'for f in /run/netns/cni-*; do [ -e "$f" ] || continue; umount "$f" 2>/dev/null; rm -f "$f"; done; ' +
    'rm -rf /run/multus/* /run/k8s.cni.cncf.io/*';
  await runOk('nsenter', ['-t', String(node.holderPid), '--mount', '--', 'sh', '-c', script]);
}
