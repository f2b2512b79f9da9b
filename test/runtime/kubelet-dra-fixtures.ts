/**
 * cni-dra-driver's own example claims (test/data/cni-dra-driver: its design document's claim, its demo's pod-A and
 * Deployment), converted only as the README there lists, run by the DRA networks suite (kubelet-dra-networks.ts):
 * their inline CNI configs (`cni.networking.x-k8s.io/v1alpha1` `kind: CNI`) give each pod net1 on a macvlan of the
 * master they name, an address of 10.10.1.0/24, a network-status entry `<claim>/<request>` and the claim's status.
 * The pods' image is the node's pause image (their alpine is not on this offline node).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { expect, it } from 'vitest';
import { DRA, type DraCtx, claimOf, deleteAndExpectNothingLeft, expectClaimStatus, v4 } from './kubelet-dra-ctx.ts';
import { until } from './kubelet-boot.ts';
import { type Obj, collection } from '../helpers/manifests.ts';
import { podPath } from '../k8s/cluster.ts';
import { REPO_ROOT } from './runtime.ts';
import { type PodRef, networkStatus } from '../e2e-k8s/world.ts';

const FIXTURES = join(REPO_ROOT, 'test/data/cni-dra-driver');

/** The objects of a fixture file of test/data/cni-dra-driver. */
const fixture = (file: string): Obj[] =>
  (yaml.loadAll(readFileSync(join(FIXTURES, file), 'utf8')) as Obj[]).filter((d) => d);

export function fixtureCases(ctx: DraCtx): void {
  /** The fixture's objects in the suite's namespace, their pods' containers the node's pause image. */
  const objects = (file: string) =>
    fixture(file).map((o) => {
      o.metadata.namespace = ctx.ns;
      const podSpec = o.kind === 'Pod' ? (o as any).spec : o.kind === 'Deployment' ? (o as any).spec.template.spec : 0;
      if (podSpec) {
        podSpec.containers = podSpec.containers.map((c: { name: string }) => ({
          name: c.name,
          image: ctx.node().sandboxImage,
          imagePullPolicy: 'Never',
        }));
        podSpec.terminationGracePeriodSeconds = 1;
      }
      return o;
    });
  const apply = async (file: string) => {
    for (const o of objects(file)) await ctx.cluster().admin.post(collection(o), o);
  };

  /** net1 on a macvlan with an address of 10.10.1.0/24, its status entry `<claim>/<request>`, the claim's status. */
  async function expectNet1(p: PodRef, entry: string, request: string) {
    await ctx.untilRunning(p);
    const links = await ctx.linksIn(await ctx.sandboxOf(p));
    expect(links.get('net1')?.linkinfo?.info_kind, `${p.name}'s net1`).toBe('macvlan');
    expect(v4(links.get('net1'))).toEqual([expect.stringMatching(/^10\.10\.1\.\d+\/24$/)]);
    const claim = await claimOf(ctx, p, entry);
    const st = await networkStatus(ctx.cluster(), p);
    expect(st?.find((e) => e.interface === 'net1')?.name).toBe(`${claim.metadata.name}/${request}`);
    await expectClaimStatus(ctx, p, claim, 'net1', links, request);
    return { claim, ip: v4(links.get('net1'))[0]! };
  }
  const podRef = async (name: string): Promise<PodRef> => ({
    namespace: ctx.ns,
    name,
    uid: (await ctx.cluster().admin.get(podPath(ctx.ns, name))).metadata.uid,
  });

  it("cni-dra-driver's examples: the design document's claim, pod-A, and the demo Deployment's three replicas", async () => {
    // pod-A: a claim of its own (macvlan on enp0s10) and the pod naming it
    await apply('pod-A.yaml');
    const a = await expectNet1(await podRef('demo-a'), 'macvlan-enp0s10-attachment-a', 'macvlan-enp0s10');
    // the design document's claim, in a pod of ours (the document has none)
    await apply('device-configuration-api.yaml');
    const doc = await ctx.cluster().admin.post(podPath(ctx.ns), {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'demo-doc', namespace: ctx.ns },
      spec: {
        resourceClaims: [{ name: 'attachment', resourceClaimName: 'macvlan-eth0-attachment' }],
        containers: [{ name: 'pause', image: ctx.node().sandboxImage, imagePullPolicy: 'Never' }],
        terminationGracePeriodSeconds: 1,
      },
    });
    const d = await expectNet1(await podRef(doc.metadata.name), 'attachment', 'macvlan-eth0');
    // the demo Deployment: a claim per replica from the template, the same network (macvlan on eth0)
    await apply('deployment.yaml');
    const list = async () =>
      ((await ctx.cluster().admin.get(`${podPath(ctx.ns)}?labelSelector=app%3Ddemo-deployment`)).items as any[]).filter(
        (p) => p.status?.phase === 'Running',
      );
    const replicas = await until(
      '3 demo-deployment pods Running',
      180_000,
      async () => {
        const l = await list();
        return l.length === 3 ? l : undefined;
      },
      ctx.logs,
    );
    const ips = [d.ip];
    const claims = [a.claim.metadata.name, d.claim.metadata.name];
    const refs: PodRef[] = [];
    for (const r of replicas) {
      const ref = { namespace: ctx.ns, name: r.metadata.name as string, uid: r.metadata.uid as string };
      refs.push(ref);
      const got = await expectNet1(ref, 'macvlan-eth0', 'macvlan-eth0');
      ips.push(got.ip);
      claims.push(got.claim.metadata.name);
    }
    expect(new Set(ips).size, `one network, four addresses: ${ips}`).toBe(4);

    // the Deployment scaled to 0 (no garbage collector runs here), then the pods of the claims
    const deployment = `/apis/apps/v1/namespaces/${ctx.ns}/deployments/demo-deployment`;
    await deleteAndExpectNothingLeft(ctx, refs, claims.slice(2), () =>
      ctx.cluster().admin.patch(deployment, { spec: { replicas: 0 } }, 'application/merge-patch+json'),
    );
    await deleteAndExpectNothingLeft(ctx, [await podRef('demo-a'), await podRef('demo-doc')], []);
    for (const c of ['macvlan-enp0s10-attachment-a', 'macvlan-eth0-attachment']) {
      await ctx.cluster().admin.del(`${DRA}/namespaces/${ctx.ns}/resourceclaims/${c}`);
    }
  }, 420_000);
}
