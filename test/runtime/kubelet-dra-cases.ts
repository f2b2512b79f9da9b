/**
 * The cases of the DRA networks suite (kubelet-dra-networks.ts), on the suite's one kubelet node: the driver
 * registered and its slice; a pod's net1 from a claim and net2 from its annotation, the claim's status against
 * network-status, and its deletion (no interface, lease or cache left; unprepare again answered); two pods sharing
 * one network; a NAD device of capacity 1 keeping a second pod Pending with the scheduler's reason;
 * cni-dra-driver's example claims (kubelet-dra-fixtures.ts); the daemon killed (kubelet-dra-chaos.ts); the
 * machine as it was.
 */
import { existsSync } from 'node:fs';
import { expect, it } from 'vitest';
import { ANY_NETWORK_DEVICE, DRA_CAPACITY_NAME, networkDeviceName } from '../../src/dra/device-names.ts';
import { call, draClient } from '../helpers/dra-client.ts';
import { podPath } from '../k8s/cluster.ts';
import { networkStatus } from '../e2e-k8s/world.ts';
import { until } from './kubelet-boot.ts';
import {
  DRA,
  DRIVER,
  type DraCtx,
  claimOf,
  claimTemplate,
  deleteAndExpectNothingLeft,
  expectClaimStatus,
  v4,
} from './kubelet-dra-ctx.ts';
import { chaosCases } from './kubelet-dra-chaos.ts';
import { fixtureCases } from './kubelet-dra-fixtures.ts';

export function draCases(ctx: DraCtx): void {
  const sock = () => ctx.node().path(`/var/lib/kubelet/plugins/${DRIVER}/dra.sock`);
  const slices = async () =>
    ((await ctx.cluster().admin.get(`${DRA}/resourceslices`)).items as any[]).filter(
      (s) => s.spec.driver === DRIVER && s.spec.nodeName === ctx.node().nodeName,
    );
  const devices = async () => (await slices()).flatMap((s) => s.spec.devices as any[]);

  it("the daemon registers with the kubelet as the DRA driver and publishes the node's slice", async () => {
    const node = ctx.node();
    for (const s of [`plugins_registry/${DRIVER}-reg.sock`, `plugins/${DRIVER}/dra.sock`]) {
      await until(
        `${s} in the node`,
        180_000,
        async () => existsSync(node.path(`/var/lib/kubelet/${s}`)) || undefined,
        ctx.logs,
      );
    }
    const any = await until(
      "the device `any` on the node's slice",
      60_000,
      async () => (await devices()).find((d) => d.name === ANY_NETWORK_DEVICE),
      ctx.logs,
    );
    expect(any.allowMultipleAllocations).toBe(true);
    const [slice] = await slices();
    expect(slice.spec.pool.name).toBe(node.nodeName);
    expect(slice.metadata.ownerReferences?.map((o: { kind: string; name: string }) => `${o.kind}/${o.name}`)).toEqual([
      `Node/${node.nodeName}`,
    ]);
    // a NAD that opts in is a device of its own, with its capacity per node
    await ctx.nad('mv-cap', '10.252.13.0/24', {
      'dra.multus.k8s.cni.cncf.io/device': 'true',
      'dra.multus.k8s.cni.cncf.io/capacity': '1',
    });
    const name = networkDeviceName(ctx.ns, 'mv-cap');
    const dev = await until(
      `device ${name}`,
      60_000,
      async () => (await devices()).find((d) => d.name === name),
      ctx.logs,
    );
    expect(dev.capacity?.[DRA_CAPACITY_NAME]?.value).toBe('1');
    expect(dev.attributes['dra.multus.k8s.cni.cncf.io/name']).toEqual({ string: 'mv-cap' });
  }, 300_000);

  it('a pod gets net1 from a claim and net2 from its annotation; the claim status is network-status; deletion leaves nothing', async () => {
    await ctx.nad('mv-claim', '10.252.11.0/24');
    await ctx.nad('mv-annot', '10.252.12.0/24');
    await claimTemplate(ctx, 'mv-claim', 'multus-network', {
      apiVersion: 'dra.multus.k8s.cni.cncf.io/v1alpha1',
      kind: 'NetworkSelection',
      name: 'mv-claim',
      interface: 'net1',
    });
    const p = await ctx.createPod('pod-both', { net: 'mv-claim' }, 'mv-annot@net2');
    await ctx.untilRunning(p);
    const sb = await ctx.sandboxOf(p);
    const links = await ctx.linksIn(sb);
    expect([...links.keys()].sort()).toEqual(['eth0', 'lo', 'net1', 'net2']);
    expect(v4(links.get('net1'))).toEqual([expect.stringMatching(/^10\.252\.11\.\d+\/24$/)]);
    expect(v4(links.get('net2'))).toEqual([expect.stringMatching(/^10\.252\.12\.\d+\/24$/)]);
    const st = await networkStatus(ctx.cluster(), p);
    expect(st?.map((e) => `${e.name} ${e.interface}`)).toEqual([
      `${ctx.clusterNet} eth0`,
      `${ctx.ns}/mv-annot net2`,
      `${ctx.ns}/mv-claim net1`,
    ]);
    const claim = await claimOf(ctx, p);
    expect(claim.status.allocation.devices.results.map((r: any) => `${r.driver} ${r.pool} ${r.device}`)).toEqual([
      `${DRIVER} ${ctx.node().nodeName} ${ANY_NETWORK_DEVICE}`,
    ]);
    await expectClaimStatus(ctx, p, claim, 'net1', links);
    const leases = await ctx.reservedIps();
    expect(leases.filter((l) => l.startsWith('mv-'))).toEqual(
      [
        `mv-annot/${v4(links.get('net2'))[0]!.split('/')[0]}`,
        `mv-claim/${v4(links.get('net1'))[0]!.split('/')[0]}`,
      ].sort(),
    );

    await deleteAndExpectNothingLeft(ctx, [p], [claim.metadata.name]);
    // the kubelet unprepared the claim; asked again (a retry), the driver answers success
    const uid = claim.metadata.uid as string;
    const c = draClient(sock());
    const again = await call(c, 'NodeUnprepareResources', {
      claims: [{ namespace: ctx.ns, uid, name: claim.metadata.name }],
    });
    c.close();
    expect(again).toEqual({ claims: { [uid]: { error: '' } } });
  }, 240_000);

  it('two pods share one network: each its own claim on the one `any` device, its own address', async () => {
    const [a, b] = [
      await ctx.createPod('share-a', { net: 'mv-claim' }),
      await ctx.createPod('share-b', { net: 'mv-claim' }),
    ];
    const ips: string[] = [];
    const claims: any[] = [];
    for (const p of [a, b]) {
      await ctx.untilRunning(p);
      const links = await ctx.linksIn(await ctx.sandboxOf(p));
      ips.push(...v4(links.get('net1')));
      const claim = await claimOf(ctx, p);
      claims.push(claim);
      await expectClaimStatus(ctx, p, claim, 'net1', links);
    }
    expect(new Set(ips).size, `two addresses: ${ips}`).toBe(2);
    const results = claims.map((c) => c.status.allocation.devices.results[0]);
    expect(results.map((r) => r.device)).toEqual([ANY_NETWORK_DEVICE, ANY_NETWORK_DEVICE]);
    expect(results[0].shareID, 'shared allocations are told apart').not.toBe(results[1].shareID);
    await deleteAndExpectNothingLeft(
      ctx,
      [a, b],
      claims.map((c) => c.metadata.name),
    );
  }, 240_000);

  it("a NAD device of capacity 1: a second pod stays Pending with the scheduler's reason until the first goes", async () => {
    const name = networkDeviceName(ctx.ns, 'mv-cap');
    await claimTemplate(ctx, 'mv-cap', 'multus-nad-network', undefined, [
      `device.attributes["dra.multus.k8s.cni.cncf.io"].name == "mv-cap"`,
    ]);
    const first = await ctx.createPod('cap-1', { net: 'mv-cap' });
    await ctx.untilRunning(first);
    const links = await ctx.linksIn(await ctx.sandboxOf(first));
    expect(v4(links.get('net1'))).toEqual([expect.stringMatching(/^10\.252\.13\.\d+\/24$/)]);
    const claim1 = await claimOf(ctx, first);
    expect(claim1.status.allocation.devices.results[0].device).toBe(name);
    const second = await ctx.createPod('cap-2', { net: 'mv-cap' });
    const cond = await until(
      'cap-2 unschedulable',
      60_000,
      async () => {
        const pod = await ctx.cluster().admin.get(podPath(ctx.ns, second.name));
        const c = (pod.status.conditions ?? []).find((x: { type: string }) => x.type === 'PodScheduled');
        return c?.status === 'False' && c.reason === 'Unschedulable' ? c : undefined;
      },
      ctx.logs,
    );
    expect(cond.message).toMatch(/cannot allocate all claims/);
    expect((await ctx.cluster().admin.get(podPath(ctx.ns, second.name))).spec.nodeName).toBeUndefined();
    // the first one gone, its attachment is free: the second is scheduled and runs
    await deleteAndExpectNothingLeft(ctx, [first], [claim1.metadata.name]);
    await ctx.untilRunning(second);
    await deleteAndExpectNothingLeft(ctx, [second], [(await claimOf(ctx, second)).metadata.name]);
  }, 300_000);

  fixtureCases(ctx);
  chaosCases(ctx);

  it("the machine is as it was: kubelet's sysctls, paths and iptables chains stayed in the node", async () => {
    expect(await ctx.machineState()).toEqual(ctx.before());
    // every pod gone: host-local's data dir holds no lease
    expect(await ctx.reservedIps()).toEqual([]);
  });
}
