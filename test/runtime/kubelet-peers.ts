/**
 * kubelet-suite.ts's cases with the components users pair with Multus, and Multus' own e2e scenarios, on the
 * real node (kubelet + containerd + the mode's DaemonSet):
 * - whereabouts v0.9.2 (test/peers/build-whereabouts.sh; its CRDs in the API server) as the IPAM of 2 macvlan
 *   NADs: 20 pods get distinct addresses, the pools name exactly them, whereabouts' reconciler removes nothing
 *   while they run; deleting them empties the pools (the killed-ADD and GC cases: test/e2e-k8s/whereabouts);
 * - resident: dynamic networks with 10 pods edited at once, from the annotation PATCH to the network-status
 *   entry (written after the interface is made; the interface checked afterwards): figures printed;
 * - Multus' e2e (e2e/ of multus-cni, which needs kind and docker), as assertions: a macvlan NAD with static
 *   `ips` (test-simple-macvlan1.sh, which only prints the address), a static pod with a NAD
 *   (test-static-pod.sh), and, resident, with the daemon restarted under `connectionLimit: 1` and
 *   `auxiliaryCNIChainName` (its thick DaemonSet's config and subdirectory-chain-passthru-configupdate.yml):
 *   six replicas of a Deployment (test-connection-limit.sh) and tuning's arp_filter=1 on eth0 from the chain
 *   directory, run by passthru (test-subdirectory-chaining-passthru.sh). default-route: kubelet-suite.ts.
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { chmod, copyFile, mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { load } from 'js-yaml';
import { expect, it } from 'vitest';
import { type Cluster, ApiError, podPath } from '../k8s/cluster.ts';
import { summarize, timesToReach } from '../helpers/latency.ts';
import { NETWORKS_ANNOTATION, type PodRef, createNad, networkStatus } from '../e2e-k8s/world.ts';
import { NODE_LINK_PEER, type NodeRuntime, STATIC_POD_DIR } from './node.ts';
import { REPO_ROOT, type SandboxInfo, run, runOk } from './runtime.ts';
import type { Link } from './kubelet-pods.ts';
import type { Mode } from './kubelet-suite.ts';

const CACHE = process.env.MULTUS_TS_CACHE_DIR || join(REPO_ROOT, '.cache');
const WB_DIR = join(CACHE, 'whereabouts');
const WB_API = '/apis/whereabouts.cni.cncf.io/v1alpha1';
const DS_CONFIG = '/api/v1/namespaces/kube-system/configmaps/multus-ts-daemon-config';
const AUX_CHAIN = 'vendor-cni-chain';

export interface KubeletCtx {
  mode: Mode;
  ns: string;
  cluster(): Cluster;
  node(): NodeRuntime;
  clusterNet: string;
  until<T>(what: string, ms: number, check: () => Promise<T | undefined>, why: () => Promise<string>): Promise<T>;
  logs(): Promise<string>;
  daemonLog(text: string): Promise<string[]>;
  createPod(name: string, networks?: string): Promise<PodRef>;
  untilRunning(p: PodRef): Promise<any>;
  sandboxOf(p: PodRef): Promise<SandboxInfo>;
  linksIn(sb: SandboxInfo): Promise<Map<string, Link>>;
  ipIn<T>(sb: SandboxInfo, args: string[]): Promise<T>;
  cniCaches(id: string): Promise<string[]>;
  reservedIps(): Promise<string[]>;
  dsPods(): Promise<any[]>;
  dsReady(timeoutMs: number): Promise<any>;
}

const v4 = (l: Link | undefined): string[] =>
  (l?.addr_info ?? []).filter((a) => a.family === 'inet').map((a) => `${a.local}/${a.prefixlen}`);

interface PodObject {
  metadata: { name: string; annotations?: Record<string, string> };
}
const statusOf = (o: PodObject): { interface?: string; ips?: string[] }[] =>
  JSON.parse(o.metadata.annotations?.['k8s.v1.cni.cncf.io/network-status'] ?? '[]');

export function peerCases(k: KubeletCtx): void {
  const api = () => k.cluster().admin;
  const nodePath = (p: string) => k.node().path(p);

  /** Deletes the pods and waits until the API has none of them, then until their sandboxes' caches are gone. */
  const deleteAll = async (pods: PodRef[], sandboxes: SandboxInfo[]) => {
    await Promise.all(pods.map((p) => api().del(podPath(k.ns, p.name))));
    for (const p of pods) {
      await k.until(
        `pod ${p.name} gone`,
        120_000,
        async () => ((await api().request('GET', podPath(k.ns, p.name))).status === 404 ? true : undefined),
        k.logs,
      );
    }
    for (const sb of sandboxes) expect(await k.cniCaches(sb.id), `caches of ${sb.id}`).toEqual([]);
  };
  const runningPods = async (names: string[], networks = '') => {
    const pods = await Promise.all(names.map((n) => k.createPod(n, networks)));
    for (const p of pods) await k.untilRunning(p);
    return { pods, sandboxes: await Promise.all(pods.map((p) => k.sandboxOf(p))) };
  };
  const listPods = async (prefix: string) =>
    ((await api().get(podPath(k.ns))).items as PodObject[]).filter((o) => o.metadata.name.startsWith(prefix));

  it('whereabouts as the IPAM of 2 NADs: 20 pods get distinct addresses, the reconciler agrees; deleting them empties the pools', async () => {
    const node = k.node();
    // the plugin on the node, its CRDs in the API server, its flat config and kubeconfig where it looks first
    await copyFile(join(WB_DIR, 'whereabouts'), join(node.binDir, 'whereabouts'));
    await chmod(join(node.binDir, 'whereabouts'), 0o755);
    for (const f of readdirSync(join(WB_DIR, 'crds')).filter((n) => n.endsWith('.yaml'))) {
      const crd = load(readFileSync(join(WB_DIR, 'crds', f), 'utf8'));
      await api()
        .post('/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd)
        .catch((e: unknown) => {
          if (!(e instanceof ApiError && e.status === 409)) throw e;
        });
    }
    await k.until(
      'the whereabouts CRDs served',
      30_000,
      async () => ((await api().request('GET', `${WB_API}/ippools`)).status === 200 ? true : undefined),
      k.logs,
    );
    const c = k.cluster();
    const kubeconfig = {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [
        {
          name: 'c',
          cluster: {
            server: c.server,
            'certificate-authority-data': Buffer.from(readFileSync(c.caFile)).toString('base64'),
          },
        },
      ],
      users: [{ name: 'u', user: { token: c.adminToken } }],
      contexts: [{ name: 'x', context: { cluster: 'c', user: 'u', namespace: k.ns } }],
      'current-context': 'x',
    };
    const dir = nodePath('/etc/cni/net.d/whereabouts.d');
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const kubeconfigPath = '/etc/cni/net.d/whereabouts.d/whereabouts.kubeconfig';
    await writeFile(nodePath(kubeconfigPath), JSON.stringify(kubeconfig), { mode: 0o600 });
    await writeFile(
      join(dir, 'whereabouts.conf'),
      JSON.stringify({ datastore: 'kubernetes', kubernetes: { kubeconfig: kubeconfigPath } }),
      { mode: 0o600 },
    );
    const nad = (name: string, j: number) =>
      createNad(c, k.ns, name, {
        cniVersion: '1.0.0',
        name,
        type: 'macvlan',
        master: NODE_LINK_PEER,
        mode: 'bridge',
        ipam: { type: 'whereabouts', range: `10.251.${j}.0/24`, log_level: 'error' },
      });
    await nad('wa1', 11);
    await nad('wa2', 12);

    const names = Array.from({ length: 20 }, (_, i) => `wb${i}`);
    const pods = await Promise.all(names.map((n, i) => k.createPod(n, i % 2 ? 'wa2' : 'wa1')));
    for (const p of pods) await k.untilRunning(p);
    const sandboxes = await Promise.all(pods.map((p) => k.sandboxOf(p)));
    const addrs: string[] = [];
    for (const [i, p] of pods.entries()) {
      const net1 = v4((await k.linksIn(sandboxes[i]!)).get('net1'));
      expect(net1, `${p.name} net1`).toEqual([expect.stringMatching(new RegExp(`^10\\.251\\.${i % 2 ? 12 : 11}\\.`))]);
      const ip = net1[0]!.split('/')[0]!;
      addrs.push(ip);
      expect((await networkStatus(c, p))?.find((e) => e.interface === 'net1')?.ips, `${p.name} status`).toEqual([ip]);
    }
    expect(new Set(addrs).size, 'distinct addresses').toBe(20);
    const allocations = async () =>
      ((await api().get(`${WB_API}/namespaces/${k.ns}/ippools`)).items as any[]).flatMap((pool) =>
        Object.values(pool.spec.allocations ?? {}).map((a: any) => `${pool.spec.range} ${a.podref} ${a.id}`),
      );
    expect((await allocations()).sort()).toEqual(
      pods.map((p, i) => `10.251.${i % 2 ? 12 : 11}.0/24 ${k.ns}/${p.name} ${sandboxes[i]!.id}`).sort(),
    );
    // whereabouts' reconciler (from the machine, with the same credentials) compares pools and network-status
    const reconcilerConfig = join(k.node().dir, 'whereabouts-reconcile.kubeconfig');
    await writeFile(reconcilerConfig, JSON.stringify(kubeconfig), { mode: 0o600 });
    const r = await run(join(WB_DIR, 'whereabouts-reconcile'), ['--kubeconfig', reconcilerConfig]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ cleaned: [] });

    await deleteAll(pods, sandboxes);
    expect(await allocations(), 'the pools after the pods').toEqual([]);
    expect((await api().get(`${WB_API}/namespaces/${k.ns}/overlappingrangeipreservations`)).items).toEqual([]);
  }, 600_000);

  it("Multus e2e simple-macvlan1: a macvlan NAD with static IPAM gets the annotation's ips (asserted)", async () => {
    await createNad(k.cluster(), k.ns, 'macvlan1-config', {
      cniVersion: '1.0.0',
      plugins: [
        {
          type: 'macvlan',
          capabilities: { ips: true },
          master: NODE_LINK_PEER,
          mode: 'bridge',
          ipam: { type: 'static' },
        },
        { type: 'tuning' },
      ],
    });
    const want = ['10.251.7.11', '10.251.7.12'];
    const pods = await Promise.all(
      want.map((ip, i) =>
        k.createPod(`macvlan1-worker${i + 1}`, JSON.stringify([{ name: 'macvlan1-config', ips: [`${ip}/24`] }])),
      ),
    );
    for (const p of pods) await k.untilRunning(p);
    const sandboxes = await Promise.all(pods.map((p) => k.sandboxOf(p)));
    for (const [i, p] of pods.entries()) {
      const links = await k.linksIn(sandboxes[i]!);
      expect(v4(links.get('net1')), `${p.name} net1`).toEqual([`${want[i]}/24`]);
      expect(links.get('net1')?.linkinfo?.info_kind).toBe('macvlan');
      const st = (await networkStatus(k.cluster(), p))?.find((e) => e.interface === 'net1');
      expect(st).toMatchObject({ name: `${k.ns}/macvlan1-config`, ips: [want[i]] });
    }
    await deleteAll(pods, sandboxes);
  }, 300_000);

  it('Multus e2e static pod: a static pod (manifest on the node) gets its NAD; removing the manifest tears it down', async () => {
    await createNad(k.cluster(), k.ns, 'bridge-nad', {
      cniVersion: '0.3.1',
      name: 'testnet',
      type: 'bridge',
      bridge: 'mtskltest0',
      ipam: { type: 'host-local', subnet: '10.251.8.0/24' },
    });
    const manifest = nodePath(join(STATIC_POD_DIR, 'static-web.yaml'));
    await writeFile(
      manifest,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'static-web', namespace: k.ns, annotations: { [NETWORKS_ANNOTATION]: 'bridge-nad' } },
        spec: { containers: [{ name: 'web', image: k.node().sandboxImage, imagePullPolicy: 'Never' }] },
      }),
    );
    const name = `static-web-${k.node().nodeName}`;
    const mirror = await k.until(
      'the mirror pod Running',
      180_000,
      async () => {
        const got = await api().request('GET', podPath(k.ns, name));
        return got.status === 200 && got.body.status?.phase === 'Running' ? got.body : undefined;
      },
      k.logs,
    );
    // the sandbox carries the static pod's UID (the mirror's annotation), not the mirror's own
    const uid = mirror.metadata.annotations['kubernetes.io/config.mirror'] as string;
    expect(uid).not.toBe(mirror.metadata.uid);
    const sb = await k.sandboxOf({ namespace: k.ns, name, uid });
    const links = await k.linksIn(sb);
    expect(v4(links.get('net1'))).toEqual([expect.stringMatching(/^10\.251\.8\.\d+\/24$/)]);
    const st = await networkStatus(k.cluster(), { namespace: k.ns, name, uid: mirror.metadata.uid });
    expect(st?.map((e) => `${e.name} ${e.interface}`)).toEqual([`${k.clusterNet} eth0`, `${k.ns}/bridge-nad net1`]);
    await rm(manifest);
    await k.until(
      'the static pod gone',
      120_000,
      async () => ((await api().request('GET', podPath(k.ns, name))).status === 404 ? true : undefined),
      k.logs,
    );
    await k.until(
      'its sandbox torn down',
      60_000,
      async () => ((await k.cniCaches(sb.id)).length === 0 ? true : undefined),
      async () => JSON.stringify(await k.cniCaches(sb.id)),
    );
  }, 300_000);

  if (k.mode !== 'resident') return;

  it('dynamic networks: 10 running pods edited at once are plugged, then unplugged, from the informer (latency printed)', async () => {
    await createNad(k.cluster(), k.ns, 'dyn10', {
      cniVersion: '1.0.0',
      name: 'dyn10',
      type: 'macvlan',
      master: NODE_LINK_PEER,
      mode: 'bridge',
      ipam: { type: 'host-local', ranges: [[{ subnet: '10.251.9.0/24' }]] },
    });
    const names = Array.from({ length: 10 }, (_, i) => `dyn${i}`);
    const { pods, sandboxes } = await runningPods(names);
    const edit = async (value: string) => {
      const since = new Map<string, number>();
      await Promise.all(
        pods.map((p) => {
          since.set(p.name, performance.now());
          return api().patch(podPath(k.ns, p.name), { metadata: { annotations: { [NETWORKS_ANNOTATION]: value } } });
        }),
      );
      return since;
    };
    const hasNet1 = (o: PodObject) => statusOf(o).some((e) => e.interface === 'net1');
    const load1 = readFileSync('/proc/loadavg', 'utf8').split(' ')[0];
    const plugged = await timesToReach(await edit('dyn10'), () => listPods('dyn'), hasNet1, 60_000);
    for (const sb of sandboxes) {
      expect(v4((await k.linksIn(sb)).get('net1')), `net1 of ${sb.id}`).toEqual([
        expect.stringMatching(/^10\.251\.9\.\d+\/24$/),
      ]);
    }
    const unplugged = await timesToReach(
      await edit(''),
      () => listPods('dyn'),
      (o) => !hasNet1(o),
      60_000,
    );
    for (const sb of sandboxes) expect([...(await k.linksIn(sb)).keys()].sort()).toEqual(['eth0', 'lo']);
    console.log(
      `kubelet tier, dynamic networks, 10 pods edited at once (annotation PATCH -> network-status; ms; load ${load1}): ` +
        JSON.stringify({ plug: summarize([...plugged.values()]), unplug: summarize([...unplugged.values()]) }),
    );
    expect(await k.daemonLog('NetworkChangeFailed')).toEqual([]);
    await deleteAll(pods, sandboxes);
  }, 600_000);

  /** The daemon config changed (ConfigMap) and the DaemonSet's pod replaced, until the new one is Ready. */
  const restartDaemon = async (change: (conf: Record<string, unknown>) => Record<string, unknown>) => {
    const cm = await api().get(DS_CONFIG);
    cm.data['daemon-config.json'] = JSON.stringify(change(JSON.parse(cm.data['daemon-config.json'])));
    await api().put(DS_CONFIG, cm);
    const old = (await k.dsPods())[0];
    await api().del(`/api/v1/namespaces/kube-system/pods/${old.metadata.name}`);
    await k.until(
      'the old DaemonSet pod gone',
      120_000,
      async () => ((await k.dsPods()).every((p) => p.metadata.uid !== old.metadata.uid) ? true : undefined),
      k.logs,
    );
    await k.dsReady(180_000);
  };

  it('Multus e2e, daemon restarted with connectionLimit 1 and auxiliaryCNIChainName: six replicas run; the chain sets arp_filter', async () => {
    const chainDir = nodePath(`/etc/cni/net.d/${AUX_CHAIN}`);
    await mkdir(chainDir, { recursive: true });
    await writeFile(
      join(chainDir, 'sysctltwiddle.conf'),
      JSON.stringify({
        cniVersion: '1.0.0',
        name: 'sysctltwiddle',
        type: 'tuning',
        sysctl: { 'net.ipv4.conf.eth0.arp_filter': '1' },
      }),
    );
    let saved: Record<string, unknown> = {};
    await restartDaemon((conf) => {
      saved = conf;
      return { ...conf, connectionLimit: 1, auxiliaryCNIChainName: AUX_CHAIN };
    });
    try {
      const generated = JSON.parse(readFileSync(nodePath('/etc/cni/net.d/00-multus.conf'), 'utf8'));
      expect(generated.auxiliaryCNIChainName).toBe(AUX_CHAIN);

      // test-connection-limit.sh: a Deployment of six replicas, all Ready
      const deployments = `/apis/apps/v1/namespaces/${k.ns}/deployments`;
      await api().post(deployments, {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'simple-centos1', labels: { app: 'many' } },
        spec: {
          replicas: 6,
          selector: { matchLabels: { app: 'many' } },
          template: {
            metadata: { labels: { app: 'many' } },
            spec: {
              containers: [{ name: 'pause', image: k.node().sandboxImage, imagePullPolicy: 'Never' }],
              terminationGracePeriodSeconds: 1,
            },
          },
        },
      });
      const many = async () =>
        (await api().get(`${podPath(k.ns)}?labelSelector=app%3Dmany`)).items as {
          metadata: { name: string; uid: string };
          status?: { phase?: string; conditions?: { type: string; status: string }[] };
        }[];
      const ready = await k.until(
        'six replicas Ready',
        300_000,
        async () => {
          const ps = await many();
          const ok = ps.filter((p) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
          return ok.length === 6 ? ok : undefined;
        },
        async () => `${JSON.stringify((await many()).map((p) => p.status?.phase))}\n${await k.logs()}`,
      );
      const replicaSandboxes = await Promise.all(
        ready.map((p) => k.sandboxOf({ namespace: k.ns, name: p.metadata.name, uid: p.metadata.uid })),
      );
      for (const sb of replicaSandboxes) {
        expect(await k.daemonLog(`ADD ${sb.id}: 200`), `the ADD of ${sb.id} served by the daemon`).toHaveLength(1);
        // the auxiliary chain ran on every pod's eth0
        expect(
          (
            await runOk('nsenter', ['-t', String(sb.pid), '--net', 'sysctl', '-n', 'net.ipv4.conf.eth0.arp_filter'])
          ).trim(),
        ).toBe('1');
      }
      // test-subdirectory-chaining-passthru.sh's pod: arp_filter=1 on eth0, no interface of the chain's own
      const pod = await k.createPod('sysctl-modified', '');
      await k.untilRunning(pod);
      const sb = await k.sandboxOf(pod);
      const arp = await runOk('nsenter', [
        '-t',
        String(sb.pid),
        '--net',
        'sysctl',
        '-n',
        'net.ipv4.conf.eth0.arp_filter',
      ]);
      expect(arp.trim(), 'net.ipv4.conf.eth0.arp_filter').toBe('1');
      expect([...(await k.linksIn(sb)).keys()].sort()).toEqual(['eth0', 'lo']);
      expect((await networkStatus(k.cluster(), pod))?.map((e) => e.interface)).toEqual(['eth0']);

      // scale to 0 (no garbage collector here to cascade a Deployment's deletion), then delete
      await api().patch(`${deployments}/simple-centos1`, { spec: { replicas: 0 } });
      await k.until('the replicas gone', 180_000, async () => ((await many()).length === 0 ? true : undefined), k.logs);
      await api().del(`${deployments}/simple-centos1`);
      for (const rs of (await api().get(`/apis/apps/v1/namespaces/${k.ns}/replicasets`)).items) {
        await api().del(`/apis/apps/v1/namespaces/${k.ns}/replicasets/${rs.metadata.name}`);
      }
      await deleteAll([pod], [sb, ...replicaSandboxes]);
    } finally {
      await rm(chainDir, { recursive: true, force: true });
      await restartDaemon(() => saved);
    }
    expect(existsSync(nodePath('/etc/cni/net.d/00-multus.conf'))).toBe(true);
    expect(
      JSON.parse(readFileSync(nodePath('/etc/cni/net.d/00-multus.conf'), 'utf8')).auxiliaryCNIChainName,
    ).toBeUndefined();
  }, 900_000);
}
