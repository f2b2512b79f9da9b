/**
 * whereabouts v0.9.2 (test/peers/build-whereabouts.sh) as the IPAM of NADs, thin and resident (libcni ->
 * build/multus, or -> build/multus-shim -> `build/multus daemon`), with a real kube-apiserver holding its CRDs
 * (IPPool, OverlappingRangeIPReservation, installed from the module's doc/crds):
 * - 20 pods across 2 macvlan NADs (whereabouts over two /24s), ADDed at once: distinct addresses, each
 *   pool's allocations are exactly its pods (podref, container ID, interface), network-status lists the
 *   addresses the interfaces have, and whereabouts' own reconciler (its ip-control-loop's job, run once:
 *   whereabouts-reconcile) finds nothing to clean; DEL of all: the pools and reservations are empty;
 * - an ADD killed after whereabouts reserved (a gated plugin after macvlan holds it; thin: multus is killed,
 *   resident: the shim is, as a runtime's timeout would), the pod deleted: the runtime's DEL, or else CNI GC
 *   naming no valid attachment, leaves no reservation, and the reconciler then finds nothing left to clean.
 */
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { load } from 'js-yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Cluster, ApiError, k8sRequirements, podPath, startCluster } from '../k8s/cluster.ts';
import { fileExists, needs } from '../helpers/skip.ts';
import {
  MULTUS_BIN,
  REPO_ROOT,
  describeRun,
  e2eRequirements,
  netnsPath,
  run,
  runDriver,
  withSbin,
} from '../e2e/helpers.ts';
import { type K8sWorld, type Sandbox, NETWORKS_ANNOTATION, createNad, networkStatus, v4, withWorld } from './world.ts';

const CACHE = process.env.MULTUS_TS_CACHE_DIR || join(REPO_ROOT, '.cache');
const WB_DIR = join(CACHE, 'whereabouts');
const WHEREABOUTS = join(WB_DIR, 'whereabouts');
const RECONCILE = join(WB_DIR, 'whereabouts-reconcile');
const SHIM = join(REPO_ROOT, 'build/multus-shim');
const WB_API = '/apis/whereabouts.cni.cncf.io/v1alpha1';
const ready = needs(
  ...e2eRequirements(),
  ...k8sRequirements(),
  fileExists(WHEREABOUTS, 'whereabouts (bash test/peers/build-whereabouts.sh)'),
  fileExists(RECONCILE, 'whereabouts-reconcile (bash test/peers/build-whereabouts.sh)'),
  fileExists(SHIM, 'the native shim build/multus-shim (npm run build with Go)'),
);

type Mode = 'thin' | 'resident';

interface Allocation {
  id: string;
  podref: string;
  ifname?: string;
}
interface Pool {
  metadata: { name: string };
  spec: { range: string; allocations?: Record<string, Allocation> };
}
interface Reservation {
  metadata: { name: string };
  spec: { containerid: string; podref: string; ifname?: string };
}

/** whereabouts' CRDs into the cluster, until they are served. */
async function installCrds(cluster: Cluster): Promise<void> {
  for (const f of readdirSync(join(WB_DIR, 'crds')).filter((n) => n.endsWith('.yaml'))) {
    const crd = load(readFileSync(join(WB_DIR, 'crds', f), 'utf8')) as { metadata: { name: string } };
    await cluster.admin.post('/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd).catch((e: unknown) => {
      if (!(e instanceof ApiError && e.status === 409)) throw e;
    });
  }
  const deadline = Date.now() + 30_000;
  while ((await cluster.admin.request('GET', `${WB_API}/ippools`)).status !== 200) {
    if (Date.now() > deadline) throw new Error('the whereabouts CRDs are not served after 30 s');
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A kubeconfig for whereabouts (admin credentials; its context's namespace is where the pools live). */
function whereaboutsKubeconfig(kw: K8sWorld, cluster: Cluster): string {
  const file = join(kw.dir, 'whereabouts.kubeconfig');
  const kubeconfig = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'c', cluster: { server: cluster.server, 'certificate-authority': cluster.caFile } }],
    users: [{ name: 'u', user: { token: cluster.adminToken } }],
    contexts: [{ name: 'x', context: { cluster: 'c', user: 'u', namespace: kw.ns } }],
    'current-context': 'x',
  };
  writeFileSync(file, JSON.stringify(kubeconfig), { mode: 0o600 });
  return file;
}

/** whereabouts' flat config file (it refuses to run without one), naming the kubeconfig. */
function whereaboutsFlatFile(kw: K8sWorld, kubeconfig: string): string {
  const file = join(kw.dir, 'whereabouts.conf');
  writeFileSync(file, JSON.stringify({ datastore: 'kubernetes', kubernetes: { kubeconfig } }), { mode: 0o600 });
  return file;
}

/** A macvlan NAD with whereabouts over subnet k of the world (optionally a gated plugin chained after it). */
function whereaboutsNad(kw: K8sWorld, kubeconfig: string, name: string, k: number, gated = false) {
  const macvlan = {
    type: 'macvlan',
    master: kw.w.master,
    mode: 'bridge',
    ipam: {
      type: 'whereabouts',
      range: kw.subnet(k),
      kubernetes: { kubeconfig },
      configuration_path: whereaboutsFlatFile(kw, kubeconfig),
      log_level: 'error',
    },
  };
  return { cniVersion: '1.0.0', name, plugins: gated ? [macvlan, { type: 'gated-tuning' }] : [macvlan] };
}

interface Daemon {
  child: ChildProcess;
  log(): string;
  stop(): Promise<void>;
}

async function startDaemon(kw: K8sWorld, conf: string): Promise<Daemon> {
  const file = join(kw.dir, 'daemon-config.json');
  const socketDir = join(kw.dir, 'run');
  writeFileSync(
    file,
    JSON.stringify({ socketDir, cniConfigDir: join(kw.dir, 'net.d'), multusConfigFile: conf, logToStderr: true }),
  );
  const child = spawn('ip', ['netns', 'exec', kw.w.hostNs, MULTUS_BIN, 'daemon', '--config', file], {
    env: { PATH: withSbin(process.env.PATH) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  child.stderr!.on('data', (d: Buffer) => (log += d.toString()));
  const exited = new Promise<void>((r) => child.on('exit', () => r()));
  const sock = join(socketDir, 'multus.sock');
  for (let i = 0; i < 1000 && !existsSync(sock) && child.exitCode === null; i++)
    await new Promise((r) => setTimeout(r, 10));
  if (!existsSync(sock)) throw new Error(`the daemon did not start: ${log}`);
  return {
    child,
    log: () => log,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/**
 * PIDs of the processes (started by this test's drivers) whose environment has CNI_CONTAINERID=`id` (build/multus
 * holds it as MULTUS_TS_HELD_CNI_CONTAINERID: the launcher, docs/build.md).
 */
function pidsOfContainer(id: string): { pid: number; ppid: number; exe: string }[] {
  const found: { pid: number; ppid: number; exe: string }[] = [];
  for (const d of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      const env = readFileSync(`/proc/${d}/environ`, 'latin1').split('\0');
      if (!env.includes(`CNI_CONTAINERID=${id}`) && !env.includes(`MULTUS_TS_HELD_CNI_CONTAINERID=${id}`)) continue;
      const stat = readFileSync(`/proc/${d}/stat`, 'latin1');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      const exe = readFileSync(`/proc/${d}/cmdline`, 'latin1').split('\0')[0] ?? '';
      found.push({ pid: Number(d), ppid, exe });
    } catch {
      // gone, or not ours to read
    }
  }
  return found;
}

describe.skipIf(!ready).each<Mode>(['thin', 'resident'])('whereabouts as the IPAM of NADs (%s)', (mode) => {
  let cluster: Cluster;
  let index = mode === 'thin' ? 120 : 140;

  beforeAll(async () => {
    cluster = await startCluster();
    await installCrds(cluster);
  }, 120_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  const pools = async (kw: K8sWorld): Promise<Pool[]> =>
    (await cluster.admin.get(`${WB_API}/namespaces/${kw.ns}/ippools`)).items;
  const reservations = async (kw: K8sWorld): Promise<Reservation[]> =>
    (await cluster.admin.get(`${WB_API}/namespaces/${kw.ns}/overlappingrangeipreservations`)).items;
  const allocations = async (kw: K8sWorld) =>
    (await pools(kw)).flatMap((p) =>
      Object.values(p.spec.allocations ?? {}).map((a) => ({ pool: p.spec.range, ...a })),
    );
  const reconcile = async (kubeconfig: string): Promise<string[]> => {
    const r = await run(RECONCILE, ['--kubeconfig', kubeconfig], {});
    expect(r.code, `whereabouts-reconcile: ${describeRun(r)}`).toBe(0);
    return (JSON.parse(r.stdout) as { cleaned: string[] }).cleaned;
  };

  /** The world with whereabouts and the gate installed, the mode's multus config (and daemon). */
  async function setup(kw: K8sWorld) {
    copyFileSync(WHEREABOUTS, join(kw.w.binDir, 'whereabouts'));
    chmodSync(join(kw.w.binDir, 'whereabouts'), 0o755);
    await kw.installGate('gated-tuning', 'tuning');
    const kubeconfig = whereaboutsKubeconfig(kw, cluster);
    let conf: string;
    let daemon: Daemon | undefined;
    // multus at CNI 1.1.0 (libcni sends GC only to 1.1.0 configs) over the world's 1.0.0 delegates
    const v11 = (c: Record<string, unknown>) => ({ ...c, cniVersion: '1.1.0' });
    if (mode === 'thin') conf = await kw.writeConf(v11(kw.multusConfig(cluster.multusKubeconfig)));
    else {
      copyFileSync(SHIM, join(kw.w.binDir, 'multus-shim'));
      chmodSync(join(kw.w.binDir, 'multus-shim'), 0o755);
      const socketDir = join(kw.dir, 'run');
      conf = await kw.writeConf(
        v11(kw.multusConfig(cluster.multusKubeconfig, { type: 'multus-shim', daemonSocketDir: socketDir })),
      );
      daemon = await startDaemon(kw, conf);
    }
    return { kubeconfig, conf, stop: async () => daemon?.stop() };
  }

  it('20 pods across 2 NADs get distinct addresses; the reconciler agrees; DEL empties the pools', async () => {
    await withWorld(cluster, { index: ++index }, async (kw) => {
      const { kubeconfig, conf, stop } = await setup(kw);
      try {
        await createNad(cluster, kw.ns, 'wa1', whereaboutsNad(kw, kubeconfig, 'wa1', 1));
        await createNad(cluster, kw.ns, 'wa2', whereaboutsNad(kw, kubeconfig, 'wa2', 2));
        const pods: Sandbox[] = [];
        for (let i = 0; i < 20; i++) pods.push(await kw.pod(`w${i}`, { [NETWORKS_ANNOTATION]: i % 2 ? 'wa2' : 'wa1' }));
        await Promise.all(pods.map((sb) => kw.add(conf, sb)));

        const addrs = new Map<string, string>();
        for (const [i, sb] of pods.entries()) {
          const net1 = v4((await kw.podLinks(sb)).get('net1'));
          expect(net1, `${sb.pod.name} net1`).toHaveLength(1);
          expect(net1[0]!.startsWith(kw.subnet(i % 2 ? 2 : 1).replace(/0\/24$/, ''))).toBe(true);
          const ipAddr = net1[0]!.split('/')[0]!;
          addrs.set(sb.pod.name, ipAddr);
          const st = (await networkStatus(cluster, sb.pod))!.find((e) => e.interface === 'net1');
          expect(st?.ips, `${sb.pod.name} network-status`).toEqual([ipAddr]);
        }
        expect(new Set(addrs.values()).size, 'distinct addresses').toBe(20);

        // whereabouts' view: one allocation per pod, in its NAD's pool, naming the pod and its sandbox
        const byPod = (await allocations(kw)).map((a) => `${a.pool} ${a.podref} ${a.id} ${a.ifname}`).sort();
        expect(byPod).toEqual(
          pods.map((sb, i) => `${kw.subnet(i % 2 ? 2 : 1)} ${kw.ns}/${sb.pod.name} ${sb.containerId} net1`).sort(),
        );
        const orips = (await reservations(kw)).map((r) => `${r.metadata.name} ${r.spec.podref}`).sort();
        expect(orips).toEqual(pods.map((sb) => `${addrs.get(sb.pod.name)} ${kw.ns}/${sb.pod.name}`).sort());
        // the reconciler compares the pools with the pods' network-status: nothing is orphaned
        expect(await reconcile(kubeconfig)).toEqual([]);
        expect((await allocations(kw)).length).toBe(20);

        await Promise.all(pods.map((sb) => kw.del(conf, sb)));
        expect(await allocations(kw)).toEqual([]);
        expect(await reservations(kw)).toEqual([]);
        for (const sb of pods) await kw.expectTornDown(sb, { last: sb === pods.at(-1) });
      } finally {
        await stop();
      }
    });
  }, 300_000);

  it('an ADD killed after the reservation, the pod deleted: DEL, or else GC, leaves no reservation', async () => {
    await withWorld(cluster, { index: ++index }, async (kw) => {
      const { kubeconfig, conf, stop } = await setup(kw);
      try {
        await createNad(cluster, kw.ns, 'wag', whereaboutsNad(kw, kubeconfig, 'wag', 1, true));
        const driver = (cmd: 'add' | 'del' | 'gc', sb: Sandbox, valid?: { containerID: string; ifname: string }[]) =>
          runDriver(cmd, {
            conf,
            netns: netnsPath(sb.netns),
            id: sb.containerId,
            ifname: 'eth0',
            args: kw.cniArgs(sb),
            cacheDir: kw.w.cacheDir,
            path: kw.w.path,
            hostNetns: kw.w.hostNs,
            ...(valid ? { validAttachments: valid } : {}),
          });
        /** Starts the pod's ADD, holds it after whereabouts reserved, kills the plugin the runtime ran. */
        const killedAdd = async (sb: Sandbox) => {
          await kw.hold(sb);
          const add = driver('add', sb);
          await kw.waitEntered(sb);
          const procs = pidsOfContainer(sb.containerId);
          const gate = procs.find((p) => !p.exe.includes('multus'));
          const victim =
            mode === 'thin'
              ? procs.find((p) => p.pid === gate?.ppid)
              : procs.find((p) => p.exe.endsWith('multus-shim'));
          expect(victim, `the process to kill among ${JSON.stringify(procs)}`).toBeDefined();
          process.kill(victim!.pid, 'SIGKILL');
          const r = await add;
          expect(r.code, `the killed ADD: ${describeRun(r)}`).not.toBe(0);
          expect(
            (await allocations(kw)).map((a) => a.podref),
            'whereabouts reserved before the kill',
          ).toContain(`${kw.ns}/${sb.pod.name}`);
          await kw.release(sb);
          await cluster.admin.del(`${podPath(kw.ns, sb.pod.name)}?gracePeriodSeconds=0`);
        };
        const left = async (sb: Sandbox) => ({
          allocations: (await allocations(kw)).filter((a) => a.id === sb.containerId),
          reservations: (await reservations(kw)).filter((r) => r.spec.containerid === sb.containerId),
        });
        const until = async (what: string, probe: () => Promise<boolean>) => {
          const deadline = Date.now() + 30_000;
          while (!(await probe())) {
            if (Date.now() > deadline) throw new Error(`not within 30 s: ${what}`);
            await new Promise((r) => setTimeout(r, 100));
          }
        };

        // the runtime's DEL after the failed ADD
        const a = await kw.pod('killed-del', { [NETWORKS_ANNOTATION]: 'wag' });
        await killedAdd(a);
        // resident: the daemon finishes the ADD it was given; the DEL is queued behind it
        const del = await driver('del', a);
        expect(del.code, describeRun(del)).toBe(0);
        expect(await left(a)).toEqual({ allocations: [], reservations: [] });

        // no DEL at all (the runtime lost the sandbox): GC naming no valid attachment
        const b = await kw.pod('killed-gc', { [NETWORKS_ANNOTATION]: 'wag' });
        await killedAdd(b);
        if (mode === 'resident') {
          // the daemon completes the ADD it was given once the gate opens
          const cached = join(kw.w.cniDir, 'results', `wag-${b.containerId}-net1`);
          await until('the daemon to finish the ADD', async () => existsSync(cached));
        }
        const gc = await driver('gc', b, []);
        expect(gc.code, describeRun(gc)).toBe(0);
        expect(await left(b)).toEqual({ allocations: [], reservations: [] });
        expect(existsSync(join(kw.w.cniDir, b.containerId)), 'the scratch cache of the stale container').toBe(false);
        // and the reconciler, whose job this would otherwise be, finds nothing left
        expect(await reconcile(kubeconfig)).toEqual([]);
        for (const sb of [a, b]) await kw.expectTornDown(sb);
      } finally {
        await stop();
      }
    });
  }, 300_000);
});
