/**
 * The daemon killed under the DRA networks suite (kubelet-dra-networks.ts): SIGKILLed by the runtime
 * (`crictl stop --timeout 0` of its container; the kubelet starts it again) right after it prepared a pod's claim,
 * before the pod's CNI ADD, and between a pod's ADD and its DEL. The ADD recomputes the claim networks from the
 * claim (no checkpoint needed), the shim waits for the restarted daemon, the kubelet retries prepare and unprepare:
 * the pod gets Ready, and its deletion leaves nothing.
 */
import { expect, it } from 'vitest';
import { podPath } from '../k8s/cluster.ts';
import { until } from './kubelet-boot.ts';
import { type DraCtx, claimOf, deleteAndExpectNothingLeft, expectClaimStatus, v4 } from './kubelet-dra-ctx.ts';

export function chaosCases(ctx: DraCtx): void {
  /** The running daemon container's ID (kube-system's DaemonSet pod, container `daemon`). */
  const daemonContainer = async (): Promise<string> =>
    until(
      'the daemon container running',
      120_000,
      async () => {
        const args = ['ps', '-q', '--name', '^daemon$', '--label', 'io.kubernetes.pod.namespace=kube-system'];
        return (await ctx.node().crictl(args)).stdout.trim().split('\n').filter(Boolean)[0];
      },
      ctx.logs,
    );
  const killDaemon = async (id: string) => {
    const r = await ctx.node().crictl(['stop', '--timeout', '0', id]);
    expect(r.code, r.stderr).toBe(0);
  };
  /** Waits for the kubelet to have started a daemon container other than `old`, serving its DRA socket again. */
  const daemonBack = (old: string) =>
    until(
      'a new daemon container',
      120_000,
      async () => {
        const id = await daemonContainer();
        return id !== old ? id : undefined;
      },
      ctx.logs,
    );

  it('the daemon killed between prepare and ADD: the pod gets Ready with its claim network, nothing leaks', async () => {
    const old = await daemonContainer();
    const p = await ctx.createPod('kill-prepared', { net: 'mv-claim' });
    // prepared: the daemon logged it (dra/prepare.ts) and wrote its checkpoint; the sandbox, and so the ADD,
    // comes after
    await until(
      'the claim prepared',
      60_000,
      async () => {
        const pod = await ctx.cluster().admin.get(podPath(ctx.ns, p.name));
        const name = pod.status?.resourceClaimStatuses?.[0]?.resourceClaimName;
        return name && (await ctx.daemonLog(`dra: prepared ResourceClaim ${ctx.ns}/${name} `)).length > 0
          ? true
          : undefined;
      },
      ctx.logs,
    );
    await killDaemon(old);
    await daemonBack(old);
    await ctx.untilRunning(p, 180_000);
    const links = await ctx.linksIn(await ctx.sandboxOf(p));
    expect(v4(links.get('net1'))).toEqual([expect.stringMatching(/^10\.252\.11\.\d+\/24$/)]);
    const claim = await claimOf(ctx, p);
    await expectClaimStatus(ctx, p, claim, 'net1', links);
    await deleteAndExpectNothingLeft(ctx, [p], [claim.metadata.name]);
  }, 360_000);

  it('the daemon killed between ADD and DEL: the deletion still releases the interface, the address and the claim', async () => {
    const p = await ctx.createPod('kill-added', { net: 'mv-claim' });
    await ctx.untilRunning(p);
    const claim = await claimOf(ctx, p);
    const old = await daemonContainer();
    await killDaemon(old);
    await deleteAndExpectNothingLeft(ctx, [p], [claim.metadata.name], async () => {
      await ctx.cluster().admin.del(podPath(ctx.ns, p.name));
    });
    await daemonBack(old);
  }, 360_000);
}
