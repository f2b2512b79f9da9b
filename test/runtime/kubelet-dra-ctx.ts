/**
 * What the DRA networks suite's cases share (kubelet-dra-networks.ts builds it): the node, the cluster, pods with
 * claims, and the checks on a claim's status and on a deletion.
 */
import { readdir } from 'node:fs/promises';
import { expect } from 'vitest';
import { DEFAULT_DRA_DRIVER } from '../../src/dra/claim-networks.ts';
import { type Cluster, podPath } from '../k8s/cluster.ts';
import { type PodRef, networkStatus } from '../e2e-k8s/world.ts';
import type { NodeRuntime } from './node.ts';
import { until } from './kubelet-boot.ts';
import type { Link, MachineState } from './kubelet-suite.ts';
import type { SandboxInfo } from './runtime.ts';

export const DRIVER = DEFAULT_DRA_DRIVER;
export const DRA = '/apis/resource.k8s.io/v1';

export interface DraCtx {
  runtime: 'containerd' | 'crio';
  ns: string;
  clusterNet: string;
  cluster(): Cluster;
  node(): NodeRuntime;
  logs(): Promise<string>;
  daemonLog(text: string): Promise<string[]>;
  nad(name: string, subnet: string, annotations?: Record<string, string>): Promise<unknown>;
  createPod(name: string, claims: Record<string, string>, networks?: string): Promise<PodRef>;
  untilRunning(p: PodRef, timeoutMs?: number): Promise<any>;
  sandboxOf(p: PodRef): Promise<SandboxInfo>;
  linksIn(sb: SandboxInfo): Promise<Map<string, Link>>;
  reservedIps(): Promise<string[]>;
  before(): MachineState;
  machineState(): Promise<MachineState>;
}

export const v4 = (l: Link | undefined): string[] =>
  (l?.addr_info ?? []).filter((a) => a.family === 'inet').map((a) => `${a.local}/${a.prefixlen}`);

/** A ResourceClaimTemplate of one request `net` in `deviceClass`, with an opaque config of our driver if given. */
export function claimTemplate(
  ctx: DraCtx,
  name: string,
  deviceClass: string,
  parameters?: Record<string, unknown>,
  selectors: string[] = [],
) {
  const request = {
    name: 'net',
    exactly: { deviceClassName: deviceClass, selectors: selectors.map((expression) => ({ cel: { expression } })) },
  };
  const config = parameters ? [{ requests: ['net'], opaque: { driver: DRIVER, parameters } }] : [];
  return ctx.cluster().admin.post(`${DRA}/namespaces/${ctx.ns}/resourceclaimtemplates`, {
    apiVersion: 'resource.k8s.io/v1',
    kind: 'ResourceClaimTemplate',
    metadata: { name, namespace: ctx.ns },
    spec: { spec: { devices: { requests: [request], config } } },
  });
}

/** The claim of the pod's entry `entry`: the one it names, or the one the resource claim controller made. */
export async function claimOf(ctx: DraCtx, p: PodRef, entry = 'net'): Promise<any> {
  const pod = await ctx.cluster().admin.get(podPath(ctx.ns, p.name));
  const named = (pod.spec.resourceClaims ?? []).find((c: { name: string }) => c.name === entry)?.resourceClaimName;
  const made = (pod.status.resourceClaimStatuses ?? []).find((s: { name: string }) => s.name === entry)
    ?.resourceClaimName as string | undefined;
  const name = named ?? made;
  expect(name, `the claim of ${p.name}'s entry ${entry}`).toBeDefined();
  return ctx.cluster().admin.get(`${DRA}/namespaces/${ctx.ns}/resourceclaims/${name}`);
}

/**
 * The claim's status.devices[] entry of our driver: Ready, and networkData equal to the network-status entry of
 * the pod's interface from that claim (which names the claim and the request).
 */
export async function expectClaimStatus(
  ctx: DraCtx,
  p: PodRef,
  claim: any,
  ifname: string,
  links: Map<string, Link>,
  request = 'net',
) {
  const entry = (await networkStatus(ctx.cluster(), p))?.find((e) => e.interface === ifname) as any;
  expect(entry?.resourceClaim, 'the network-status entry names its claim').toEqual({
    name: claim.metadata.name,
    request,
  });
  const want = { interfaceName: ifname, ips: v4(links.get(ifname)), hardwareAddress: links.get(ifname)?.address };
  const got = await until(
    `${claim.metadata.name}'s status.devices`,
    30_000,
    async () => {
      const c = await ctx.cluster().admin.get(`${DRA}/namespaces/${ctx.ns}/resourceclaims/${claim.metadata.name}`);
      return (c.status.devices ?? []).find((d: { driver: string }) => d.driver === DRIVER);
    },
    async () => JSON.stringify(claim.status),
  );
  const result = claim.status.allocation.devices.results[0];
  expect([got.pool, got.device, got.shareID]).toEqual([result.pool, result.device, result.shareID]);
  expect(got.networkData).toEqual(want);
  expect(entry.ips).toEqual(want.ips.map((c) => c.split('/')[0]));
  expect(entry.mac).toBe(want.hardwareAddress);
  expect(got.conditions?.find((c: { type: string }) => c.type === 'Ready')?.status).toBe('True');
}

/**
 * Deletes running pods, waits for them and their claims to go, and checks that nothing of theirs is left: no
 * lease of their addresses in host-local's data dir, no cache file naming their sandboxes, no netns.
 */
export async function deleteAndExpectNothingLeft(
  ctx: DraCtx,
  pods: PodRef[],
  claims: string[],
  remove = async () => {
    for (const p of pods) await ctx.cluster().admin.del(podPath(ctx.ns, p.name));
  },
): Promise<void> {
  const { cluster, node, ns } = { cluster: ctx.cluster(), node: ctx.node(), ns: ctx.ns };
  const sandboxes: SandboxInfo[] = [];
  const ips: string[] = [];
  for (const p of pods) {
    sandboxes.push(await ctx.sandboxOf(p));
    for (const e of (await networkStatus(cluster, p)) ?? []) ips.push(...(e.ips ?? []));
  }
  await remove();
  await until(
    'the pods and their claims gone',
    90_000,
    async () => {
      for (const p of pods) if ((await cluster.admin.request('GET', podPath(ns, p.name))).status !== 404) return;
      for (const c of claims) {
        const got = await cluster.admin.request('GET', `${DRA}/namespaces/${ns}/resourceclaims/${c}`);
        if (got.status !== 404) return;
      }
      return true;
    },
    ctx.logs,
  );
  const leases = (await ctx.reservedIps()).filter((l) => ips.includes(l.split('/')[1]!));
  expect(leases, "the pods' leases in host-local's data dir").toEqual([]);
  const caches: string[] = [];
  for (const d of ['/var/lib/cni/multus', '/var/lib/cni/multus/results', '/var/lib/cni/results']) {
    const names = await readdir(node.path(d)).catch(() => [] as string[]);
    caches.push(...names.filter((n) => sandboxes.some((sb) => n.includes(sb.id))));
  }
  expect(caches, "cache files naming the pods' sandboxes").toEqual([]);
  const netns = await node.netnsFiles();
  expect(
    netns.filter((f) => sandboxes.some((sb) => sb.netns.endsWith(`/${f}`))),
    "the pods' netns",
  ).toEqual([]);
}
