/**
 * Multus' own manifests run multus-ts, and the upgrade lane from Go Multus and back (issue 26 items 2 and 3;
 * docs/install.md, "From Go Multus to multus-ts"), in both modes (kubelet-multus-thin.test.ts,
 * kubelet-multus-thick.test.ts), on the kubelet node of the runtime tier (node.ts):
 * 1. Go Multus v4.3.0 is installed by its own manifest (deployments/multus-daemonset.yml, or
 *    multus-daemonset-thick.yml, read from Go's module cache, never copied into the repo) with its image
 *    (scripts/bench/density/go-image.sh: Multus' binaries in Multus' layout); a pod gets its NAD;
 * 2. `kubectl set image` (the same strategic merge patch of the DaemonSet's two containers) to multus-ts' image
 *    (`npm run image`): the DaemonSet is then Multus' manifest byte for byte but the image; the pod made by Go
 *    Multus is deleted (our DEL from Go's caches) and nothing is left; a new pod gets its NAD, network-status and
 *    events;
 * 3. back to Go Multus' image: the pod made by multus-ts is deleted by Go Multus and nothing is left.
 * During each roll an ADD probe (add-probe.ts) measures the gap: the time during which a pod's ADD on the node
 * would fail or come out without its NAD. The figures are printed (`lane ...` lines) and kept in
 * docs/install.md. At the end nothing is left on the node: no IP lease, no cache file, no link, no netns.
 *
 * The manifests run as written but for the image, with their limits (thin and thick: `kube-multus` 100m / 50Mi;
 * issue 54 item 2): no container of the DaemonSet may restart (an OOM kill would). The API server is reached where
 * kubelet tells the pods (KUBERNETES_SERVICE_HOST/PORT, the `kubernetes` Service's address, relayed by the
 * ApiTunnel), so no env is added.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdir, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GO_IMAGE } from '../../scripts/bench/density/modes.ts';
import { collection, docs, multusModuleDir, type Obj } from '../helpers/manifests.ts';
import { fileExists, needs } from '../helpers/skip.ts';
import { type Cluster, k8sRequirements, podPath, startCluster } from '../k8s/cluster.ts';
import { ApiTunnel, NETWORKS_ANNOTATION, type PodRef, ensureNamespace, podEvents } from '../e2e-k8s/world.ts';
import { DRIVER_BIN, run as runProcess } from '../e2e/helpers.ts';
import { AddProbe, gapOf } from './add-probe.ts';
import { type Link, type NadPod, podKit, until } from './kubelet-pods.ts';
import { NODE_LINK, NODE_LINK_PEER, NodeRuntime, nodeRequirements } from './node.ts';
import { CTR_BIN, LAUNCHER_BIN, REPO_ROOT, childEnv, imageEnv, runOk, runtimeRequirements } from './runtime.ts';

export type LaneMode = 'thin' | 'thick';
const MANIFEST: Record<LaneMode, string> = {
  thin: 'deployments/multus-daemonset.yml',
  thick: 'deployments/multus-daemonset-thick.yml',
};
const CACHE = process.env.MULTUS_TS_CACHE_DIR || join(REPO_ROOT, '.cache');
const GO_DIR = join(CACHE, 'gomultus');
const SHIM_BIN = join(REPO_ROOT, 'build/multus-shim');
const DS_PATH = '/apis/apps/v1/namespaces/kube-system/daemonsets/kube-multus-ds';
const CLUSTER_NET = 'kl-cluster';
const sha256 = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

/** Multus' manifest with `image` in every container, nothing else changed (its limits kept: see the header). */
function multusObjects(mode: LaneMode, image: string): Obj[] {
  const objs = docs(join(multusModuleDir(), MANIFEST[mode]));
  for (const o of objs) {
    if (o.kind !== 'DaemonSet') continue;
    const spec = (o as any).spec.template.spec;
    for (const c of [...(spec.initContainers ?? []), ...spec.containers]) c.image = image;
  }
  return objs;
}

export function multusLaneSuite(mode: LaneMode): void {
  const ready = needs(
    ...runtimeRequirements(),
    ...k8sRequirements(),
    ...nodeRequirements(false),
    fileExists(
      join(multusModuleDir(), MANIFEST[mode]),
      `Multus' ${MANIFEST[mode]} (bash test/peers/build-gomultus.sh)`,
    ),
    ...['multus', 'multus-shim', 'multus-daemon', 'thin_entrypoint', 'install_multus', 'passthru'].map((b) =>
      fileExists(join(GO_DIR, b), `Go Multus' ${b} (bash test/peers/build-gomultus.sh)`),
    ),
    fileExists(SHIM_BIN, 'the native shim build/multus-shim (npm run build with Go)'),
    fileExists(DRIVER_BIN, 'the libcni driver (bash test/e2e/build-driver.sh)'),
  );
  describe.skipIf(!ready)(
    `Multus' ${mode} manifest: Go Multus v4.3.0, then multus-ts by kubectl set image, then back (kubelet, containerd)`,
    () => laneBody(mode),
  );
}

function laneBody(mode: LaneMode): void {
  let cluster: Cluster;
  let node: NodeRuntime;
  let tsImage = '';
  let probePod: PodRef;
  const tunnel = new ApiTunnel();
  const ns = `mts-lane-${Math.random().toString(16).slice(2, 8)}`;
  const logs = async () =>
    [await node.tail('kubelet'), await node.tail('kube-controller-manager', 15), await containerLog(40)].join('\n');
  const isProbe = (containerId: string) => containerId.startsWith('probe');
  const kit = podKit({
    cluster: () => cluster,
    node: () => node,
    ns,
    clusterNet: CLUSTER_NET,
    logs,
    ignoreLease: isProbe,
  });
  const pods: Record<string, NadPod> = {};

  /** The last lines of the DaemonSet's containers' logs (the files containerd writes under /var/log/pods). */
  async function containerLog(lines: number): Promise<string> {
    const base = node.path('/var/log/pods');
    const out: string[] = [];
    for (const pod of (await readdir(base).catch(() => [] as string[])).filter((d) => d.includes('kube-multus-ds'))) {
      for (const c of await readdir(join(base, pod)).catch(() => [] as string[])) {
        for (const f of await readdir(join(base, pod, c)).catch(() => [] as string[])) {
          const text = readFileSync(join(base, pod, c, f), 'utf8')
            .trimEnd()
            .split('\n')
            .slice(-lines);
          out.push(`--- ${pod}/${c}/${f}`, ...text);
        }
      }
    }
    return out.join('\n');
  }

  /**
   * The running kube-multus container's cgroup (v1, the machine's: kubelet's cgroupfs driver): its limits as the
   * kernel enforces them, the memory peak and limit hits since it started, and how often its CPU quota throttled it.
   */
  const daemonCgroup = async () => {
    const id = (await node.crictl(['ps', '-q', '--name', '^kube-multus$'])).stdout.trim().split('\n')[0] ?? '';
    const info = JSON.parse((await node.crictl(['inspect', id])).stdout).info;
    const path = String(info?.runtimeSpec?.linux?.cgroupsPath ?? '');
    const read = (ctl: string, file: string) => readFileSync(join('/sys/fs/cgroup', ctl, path, file), 'utf8').trim();
    const mib = (bytes: string) => Math.round((Number(bytes) / 2 ** 20) * 10) / 10;
    const cpuStat = Object.fromEntries(
      read('cpu', 'cpu.stat')
        .split('\n')
        .map((l) => l.split(' ')),
    );
    return {
      memoryLimitMiB: mib(read('memory', 'memory.limit_in_bytes')),
      cpuQuotaMillis: Number(read('cpu', 'cpu.cfs_quota_us')) / 100,
      peakMiB: mib(read('memory', 'memory.max_usage_in_bytes')),
      limitHits: Number(read('memory', 'memory.failcnt')),
      throttledPeriods: `${cpuStat.nr_throttled} of ${cpuStat.nr_periods}`,
      throttledS: Math.round(Number(cpuStat.throttled_time) / 1e8) / 10,
    };
  };

  const dsPods = async () =>
    (await cluster.admin.get('/api/v1/namespaces/kube-system/pods?labelSelector=name%3Dmultus')).items as any[];

  /** The DaemonSet rolled out to `image`: its one pod Ready with that image in both containers. */
  const rolledOut = (image: string) =>
    until(
      `the DaemonSet's pod Ready with ${image}`,
      240_000,
      async () => {
        const ds = await cluster.admin.get(DS_PATH);
        const st = ds.status ?? {};
        if ((st.observedGeneration ?? 0) < ds.metadata.generation || st.updatedNumberScheduled !== 1) return undefined;
        const list = await dsPods();
        const p = list[0];
        const images = [...(p?.spec?.initContainers ?? []), ...(p?.spec?.containers ?? [])].map((c: any) => c.image);
        const readyCond = (p?.status?.conditions ?? []).find((c: { type: string }) => c.type === 'Ready');
        const ok = list.length === 1 && images.every((i: string) => i === image) && readyCond?.status === 'True';
        return ok ? p : undefined;
      },
      async () => `${JSON.stringify((await dsPods()).map((p) => p.status))}\n${await logs()}`,
    );

  /** `kubectl set image ds/kube-multus-ds kube-multus=IMAGE install-multus-binary=IMAGE`, as it patches. */
  const setImage = (image: string) =>
    cluster.admin.patch(
      DS_PATH,
      {
        spec: {
          template: {
            spec: {
              containers: [{ name: 'kube-multus', image }],
              initContainers: [{ name: 'install-multus-binary', image }],
            },
          },
        },
      },
      'application/strategic-merge-patch+json',
    );

  /** Rolls the DaemonSet to `image` with the probe running; the gap, printed and returned. */
  const roll = async (what: string, image: string) => {
    const probe = new AddProbe(node, probePod);
    probe.start();
    try {
      await until('the probe ok before the roll', 60_000, async () => probe.settled(2) || undefined, logs);
      probe.phase = 'during';
      await setImage(image);
      await rolledOut(image);
      probe.phase = 'after';
      await until('the probe ok after the roll', 180_000, async () => probe.settled(3) || undefined, logs);
    } finally {
      const results = await probe.stop();
      const gap = gapOf(results);
      console.log(`lane ${mode} ${what}: ${JSON.stringify(gap)}`);
      expect(gap.failedDels, `probes whose DEL never succeeded (${gap.timeline})`).toBe(0);
      // the probes multus-ts served from ADD to DEL leave nothing (Go Multus' own leaks are printed above)
      const ours = results.filter((r) => r.phase === (what === 'go->ts' ? 'after' : 'before'));
      expect(ours.length).toBeGreaterThan(1);
      expect(
        ours.flatMap((r) => r.leaked),
        'what the probes multus-ts served left',
      ).toEqual([]);
    }
  };

  /**
   * What is on the node: IP leases, cache files, links, network namespaces (the pods' and the probe's; the
   * node's /var and /run are overlays of the machine's, so `before` is what they held at the start).
   */
  const leftovers = async (before?: { caches: string[] }) => {
    const caches: string[] = [];
    for (const d of ['/var/lib/cni/multus', '/var/lib/cni/multus/results', '/var/lib/cni/results']) {
      const names = await readdir(node.path(d)).catch(() => [] as string[]);
      caches.push(...names.filter((n) => n !== 'results').map((n) => join(d, n)));
    }
    const hostLinks = JSON.parse(await runOk('ip', ['-n', node.hostNs, '-j', '-d', 'link', 'show'])) as Link[];
    const links = hostLinks
      .filter((l) => !['lo', NODE_LINK, NODE_LINK_PEER].includes(l.ifname) && l.linkinfo?.info_kind !== 'bridge')
      .map((l) => l.ifname);
    const netns = (await readdir(node.path('/run/netns')).catch(() => [] as string[])).filter(
      (n) => n.startsWith('cni-') || n.startsWith('mtsprobe'),
    );
    // the probe's own leftovers are counted per probe (roll())
    const fresh = caches.filter((c) => !before?.caches.includes(c) && !c.includes('/probe') && !c.includes('-probe'));
    return { ips: await kit.reservedIps(), caches: fresh, links, netns };
  };
  let atStart: { caches: string[] } | undefined;

  beforeAll(async () => {
    cluster = await startCluster({ serviceAccountAdmission: true, apiserverArgs: ['--allow-privileged=true'] });
    node = await new NodeRuntime().prepare();
    await node.forDaemonSet(CLUSTER_NET, 'mtslnbr0', '10.251.0.0/24');
    // both images, made now: ours from the current build, Go Multus' from the peer's binaries
    const imageDir = join(node.dir, 'image');
    const env = imageEnv(imageDir);
    const img = await runProcess('bash', [join(REPO_ROOT, 'scripts/image.sh')], { env, timeoutMs: 180_000 });
    expect(img.code, `npm run image: ${img.stderr}`).toBe(0);
    const goImg = await runProcess('bash', [join(REPO_ROOT, 'scripts/bench/density/go-image.sh'), imageDir, GO_DIR], {
      env: childEnv(),
      timeoutMs: 180_000,
    });
    expect(goImg.code, `go-image.sh: ${goImg.stderr}`).toBe(0);
    await node.start();
    // the host paths of the thick manifest that a node running Multus has
    for (const d of ['/var/lib/cni/multus', '/run/k8s.cni.cncf.io', '/etc/cni/multus/net.d']) {
      await mkdir(node.path(d), { recursive: true });
    }
    for (const tar of (await readdir(imageDir)).filter((f) => f.endsWith('.tar'))) {
      const out = await runOk(CTR_BIN, [
        '-a',
        node.socket,
        '-n',
        'k8s.io',
        'images',
        'import',
        '--all-platforms',
        join(imageDir, tar),
      ]);
      const ref = /unpacking (\S+) \(/.exec(out)?.[1] ?? '';
      if (ref !== GO_IMAGE) tsImage = ref;
    }
    expect(tsImage, 'the image npm run image makes').toMatch(/^ghcr\.io\/multus-ts\/multus-ts:/);
    await tunnel.open(cluster, node.hostNs, node.dir, { service: true });
    await node.startControlPlane(cluster);
    await node.startKubelet(cluster);
    await ensureNamespace(cluster, ns);
    await until(
      'the default service account',
      30_000,
      async () =>
        (await cluster.admin.request('GET', `/api/v1/namespaces/${ns}/serviceaccounts/default`)).status === 200 ||
        undefined,
      logs,
    );
    await kit.macvlanNad('mv', 1);
    // the probe's pod: in the API with the NAD in its annotation, bound to a node no kubelet serves
    const created = await cluster.admin.post(podPath(ns), {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'probe', namespace: ns, annotations: { [NETWORKS_ANNOTATION]: 'mv' } },
      spec: { nodeName: 'mts-nowhere', containers: [{ name: 'pause', image: node.sandboxImage }] },
    });
    probePod = { namespace: ns, name: 'probe', uid: created.metadata.uid };
    atStart = await leftovers();
    expect({ ...atStart, caches: [] }, 'the node before Multus').toEqual({ ips: [], caches: [], links: [], netns: [] });
  }, 600_000);

  afterAll(async () => {
    await node?.stop();
    await tunnel.close();
    await cluster?.stop();
  });

  it('Go Multus v4.3.0, installed by its own manifest, gives a pod its NAD', async () => {
    // `kubectl apply --server-side` of every object (the cluster's setup made the NAD CRD and a ClusterRole
    // named multus already: apply makes them the manifest's)
    for (const o of multusObjects(mode, GO_IMAGE)) {
      const path = `${collection(o)}/${o.metadata.name}?fieldManager=kubectl&force=true`;
      await cluster.admin.patch(path, o, 'application/apply-patch+yaml');
    }
    await rolledOut(GO_IMAGE);
    // the DaemonSet is rolled out when its container runs, before the daemon has written 00-multus.conf (thick:
    // Go's daemon writes it once started; the manifest has no readiness probe): a pod made before then gets the
    // primary network alone, as it would on a real node at that moment
    await until(
      "Go Multus' 00-multus.conf on the node",
      120_000,
      async () => (await readdir(node.path('/etc/cni/net.d'))).some((f) => f.startsWith('00-multus.conf')) || undefined,
      logs,
    );
    expect(sha256(node.path(mode === 'thin' ? '/opt/cni/bin/multus' : '/opt/cni/bin/multus-shim'))).toBe(
      sha256(join(GO_DIR, mode === 'thin' ? 'multus' : 'multus-shim')),
    );
    pods.go = await kit.runNadPod('pod-go');
  }, 420_000);

  it('kubectl set image to multus-ts: the gap measured; the Go pod deleted from its caches, a new pod gets its NAD', async () => {
    await roll('go->ts', tsImage);
    // the DaemonSet is Multus' manifest, but the image: its limits too (kube-multus 100m / 50Mi)
    const ds = await cluster.admin.get(DS_PATH);
    const want = multusObjects(mode, tsImage).find((o) => o.kind === 'DaemonSet') as any;
    const shape = (spec: any) =>
      [...(spec.initContainers ?? []), ...spec.containers].map((c: any) => [
        c.name,
        c.image,
        c.command,
        c.args,
        c.resources,
      ]);
    expect(shape(ds.spec.template.spec)).toEqual(shape(want.spec.template.spec));
    const daemon = ds.spec.template.spec.containers.find((c: any) => c.name === 'kube-multus');
    expect(daemon.resources.limits, "Multus' limits on kube-multus").toEqual({ cpu: '100m', memory: '50Mi' });
    // what multus-ts installed on the node
    if (mode === 'thin') {
      expect(sha256(node.path('/opt/cni/bin/multus')), 'thin_entrypoint copied our multus').toBe(sha256(LAUNCHER_BIN));
    } else {
      expect(sha256(node.path('/opt/cni/bin/multus-shim')), 'install_multus copied our shim').toBe(sha256(SHIM_BIN));
      const conf = JSON.parse(readFileSync(node.path('/etc/cni/net.d/00-multus.conf'), 'utf8'));
      expect([conf.type, conf.daemonSocketDir], 'our daemon wrote the shim config').toEqual(['multus-shim', undefined]);
    }
    expect(sha256(node.path('/opt/cni/bin/passthru')), 'install_multus copied our passthru').toBe(sha256(LAUNCHER_BIN));

    await kit.deleteAndExpectNothingLeft(pods.go!);
    pods.ts = await kit.runNadPod('pod-ts');
    expect(await podEvents(cluster, pods.ts.p, 'FailedCreatePodSandBox'), 'no failed attempt').toEqual([]);
    // within the manifest's resources (its 100m / 50Mi limits): no container restarted (OOM-killed)
    const restarts = (await dsPods()).flatMap((p) =>
      [...(p.status.initContainerStatuses ?? []), ...p.status.containerStatuses].map((c: any) =>
        `${c.name} ${c.restartCount} ${c.lastState?.terminated?.reason ?? ''}`.trim(),
      ),
    );
    expect(restarts).toEqual(['install-multus-binary 0', 'kube-multus 0']);
    // the limits are the kernel's, not only the API's; what the container used under them is printed
    const cg = await daemonCgroup();
    console.log(`lane ${mode} kube-multus cgroup: ${JSON.stringify(cg)}`);
    expect([cg.memoryLimitMiB, cg.cpuQuotaMillis]).toEqual([50, 100]);
  }, 600_000);

  it('back to Go Multus: the gap measured; the multus-ts pod deleted by Go Multus; nothing is left on the node', async () => {
    await roll('ts->go', GO_IMAGE);
    await kit.deleteAndExpectNothingLeft(pods.ts!);
    // /var/lib/cni/results is the machine's, shared with the runtime tests that run beside this file (CRI-O's and
    // containerd's sandboxes of test/runtime/cri-suite.ts): a file of theirs lasts as long as their sandbox (under
    // 20 s a case); one that is still there a minute on is the lane's own leak
    let left = await leftovers(atStart);
    for (let i = 0; i < 30 && left.caches.length > 0; i++) {
      await new Promise((r) => setTimeout(r, 2000));
      left = { ...left, caches: (await leftovers(atStart)).caches.filter((c) => left.caches.includes(c)) };
    }
    expect(left).toEqual({ ips: [], caches: [], links: [], netns: [] });
  }, 600_000);
}
