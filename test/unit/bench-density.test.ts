/**
 * The pure parts of the density bench (scripts/bench/density): what counts as a pod with all its networks, and
 * the DaemonSets the four modes are installed by (Go Multus v4.3.0's layouts, the API server's address in every
 * container). The bench itself needs a kubelet node and minutes; these run anywhere.
 */
import { describe, expect, it } from 'vitest';
import {
  MODES,
  daemonLimitMib,
  hasDaemon,
  isOurDaemon,
  modeObjects,
  pinnedDelegates,
} from '../../scripts/bench/density/modes.ts';
import { oomReports } from '../../scripts/bench/density/memory-watch.ts';
import { hasAllNetworks, isReady } from '../../scripts/bench/density/pods.ts';
import { countServedAdds } from '../../scripts/bench/density/node-ops.ts';
import { cpuTimes, idleShare } from '../../scripts/bench/density/quiet.ts';

const pod = (status: unknown, ready = 'True', at = '2026-12-01T10:00:05Z') => ({
  metadata: {
    namespace: 'd1',
    annotations: { 'k8s.v1.cni.cncf.io/network-status': typeof status === 'string' ? status : JSON.stringify(status) },
  },
  status: { conditions: [{ type: 'Ready', status: ready, lastTransitionTime: at }] },
});
const entry = (name: string, ips = ['10.0.0.2']) => ({ name, interface: 'x', ips });

describe('density: a pod with all its networks', () => {
  const nads = ['density-a', 'density-b'];
  it('needs the cluster network and each NAD of its namespace, each with an address', () => {
    expect(hasAllNetworks(pod([entry('c'), entry('d1/density-a'), entry('d1/density-b')]), nads)).toBe(true);
    expect(hasAllNetworks(pod([entry('c'), entry('d1/density-a')]), nads)).toBe(false);
    expect(hasAllNetworks(pod([entry('c'), entry('d1/density-a'), entry('d1/density-b', [])]), nads)).toBe(false);
    expect(hasAllNetworks(pod([entry('c'), entry('d2/density-a'), entry('d1/density-b')]), nads)).toBe(false);
    expect(hasAllNetworks(pod('not json'), nads)).toBe(false);
    expect(hasAllNetworks({ metadata: {} }, nads)).toBe(false);
  });

  it('is Ready, and with `since`, became Ready at or after that second', () => {
    const p = pod([]);
    expect(isReady(p)).toBe(true);
    expect(isReady(p, Date.parse('2026-12-01T10:00:05.900Z'))).toBe(true);
    expect(isReady(p, Date.parse('2026-12-01T10:00:06Z'))).toBe(false);
    expect(isReady(pod([], 'False'))).toBe(false);
  });

  it('with `since`, also counts a pod whose containers all started since, its Ready condition never flipped', () => {
    const p: any = pod([], 'True', '2026-12-01T09:00:00Z');
    const since = Date.parse('2026-12-01T10:00:00Z');
    expect(isReady(p, since)).toBe(false);
    p.status.containerStatuses = [{ state: { running: { startedAt: '2026-12-01T10:00:03Z' } } }];
    expect(isReady(p, since)).toBe(true);
    p.status.containerStatuses.push({ state: { running: { startedAt: '2026-12-01T09:00:00Z' } } });
    expect(isReady(p, since)).toBe(false);
    p.status.containerStatuses = [{ state: { waiting: { reason: 'ContainerCreating' } } }];
    expect(isReady(p, since)).toBe(false);
  });
});

describe('density: the DaemonSet of each mode', () => {
  const ds = (mode: (typeof MODES)[number]) =>
    modeObjects(mode, '6443').find((o) => o.obj.kind === 'DaemonSet')!.obj as any;

  it.each(MODES)('%s: every container is told the API server address', (mode) => {
    const spec = ds(mode).spec.template.spec;
    for (const c of [...(spec.initContainers ?? []), ...spec.containers]) {
      expect(c.env).toEqual(
        expect.arrayContaining([
          { name: 'KUBERNETES_SERVICE_HOST', value: '127.0.0.1' },
          { name: 'KUBERNETES_SERVICE_PORT', value: '6443' },
        ]),
      );
    }
  });

  it("go_thick: Multus' thick layout (hostPID, privileged, 50Mi, its daemon-config, the shim copied)", () => {
    const objs = modeObjects('go_thick', '6443');
    const spec = ds('go_thick').spec.template.spec;
    expect(spec).toMatchObject({ hostNetwork: true, hostPID: true, serviceAccountName: 'multus' });
    expect(spec.containers[0]).toMatchObject({
      command: ['/usr/src/multus-cni/bin/multus-daemon'],
      securityContext: { privileged: true },
      resources: { limits: { memory: '50Mi' } },
    });
    expect(spec.initContainers[0].command.at(-1)).toMatch(/&& mv -f \S+ \/host\/opt\/cni\/bin\/multus-shim$/);
    const cm = objs.find((o) => o.obj.kind === 'ConfigMap')!.obj as any;
    expect(JSON.parse(cm.data['daemon-config.json'])).toMatchObject({
      chrootDir: '/hostroot',
      socketDir: '/host/run/multus/',
    });
    expect(daemonLimitMib('go_thick')).toBe(50);
  });

  it("go_thick_300mi: the same layout with our daemon's resources (no CPU limit, 300Mi)", () => {
    const thick = ds('go_thick').spec.template.spec;
    const roomy = ds('go_thick_300mi').spec.template.spec;
    expect(roomy.containers[0].resources).toEqual({
      requests: { cpu: '100m', memory: '100Mi' },
      limits: { memory: '300Mi' },
    });
    expect({ ...roomy.containers[0], resources: undefined }).toEqual({ ...thick.containers[0], resources: undefined });
    expect(thick.containers[0].resources.limits.cpu).toBe('100m');
    expect(daemonLimitMib('go_thick_300mi')).toBe(300);
    expect(MODES.filter(hasDaemon)).toEqual([
      'resident_ts',
      'resident_ts_multus_limits',
      'resident_ts_multus_limits_d2',
      'resident_ts_multus_limits_d4',
      'resident_ts_multus_limits_daemon_exec',
      'resident_ts_no_bound',
      'go_thick',
      'go_thick_300mi',
    ]);
  });

  it("resident_ts_multus_limits: our resident DaemonSet with Multus' 100m / 50Mi (requests = limits) on the daemon", () => {
    const ours = ds('resident_ts').spec.template.spec;
    const limited = ds('resident_ts_multus_limits').spec.template.spec;
    const daemon = (spec: any) => spec.containers.find((c: any) => c.name === 'daemon');
    const thick = ds('go_thick').spec.template.spec.containers[0].resources;
    expect(daemon(limited).resources).toEqual(thick);
    expect(daemon(limited).resources).toEqual({
      requests: { cpu: '100m', memory: '50Mi' },
      limits: { cpu: '100m', memory: '50Mi' },
    });
    expect(daemon(ours).resources).toEqual({ requests: { cpu: '100m', memory: '50Mi' }, limits: { memory: '100Mi' } });
    // nothing else differs: the same images, containers, volumes, sidecar
    const without = (spec: any) => ({ ...spec, containers: spec.containers.map((c: any) => ({ ...c, resources: 0 })) });
    expect(without(limited)).toEqual(without(ours));
    expect(daemonLimitMib('resident_ts_multus_limits')).toBe(50);
    expect(isOurDaemon('resident_ts_multus_limits')).toBe(true);
    expect(MODES.filter(isOurDaemon)).toEqual([
      'resident_ts',
      'resident_ts_multus_limits',
      'resident_ts_multus_limits_d2',
      'resident_ts_multus_limits_d4',
      'resident_ts_multus_limits_daemon_exec',
      'resident_ts_no_bound',
    ]);
  });

  it('resident_ts_multus_limits_d2 / _d4: the same with delegateConcurrency pinned in daemon-config.json', () => {
    const config = (mode: (typeof MODES)[number]) => {
      const cm = modeObjects(mode, '6443').find((o) => o.obj.metadata.name === 'multus-ts-daemon-config')!.obj as any;
      return JSON.parse(cm.data['daemon-config.json']);
    };
    expect(config('resident_ts_multus_limits').delegateConcurrency).toBeUndefined();
    expect(config('resident_ts_multus_limits_d2')).toEqual({
      ...config('resident_ts_multus_limits'),
      delegateConcurrency: 2,
    });
    expect(config('resident_ts_multus_limits_d4').delegateConcurrency).toBe(4);
    expect(pinnedDelegates('resident_ts_multus_limits')).toBeUndefined();
    const daemon = (mode: (typeof MODES)[number]) =>
      ds(mode).spec.template.spec.containers.find((c: any) => c.name === 'daemon');
    expect(daemon('resident_ts_multus_limits_d2')).toEqual(daemon('resident_ts_multus_limits'));
    expect(daemonLimitMib('resident_ts_multus_limits_d4')).toBe(50);
    // the shim runs the delegates (the manifest's delegateExec), but in _daemon_exec
    expect(config('resident_ts_multus_limits').delegateExec).toBe('caller');
    expect(config('resident_ts_multus_limits_daemon_exec')).toEqual({
      ...config('resident_ts_multus_limits'),
      delegateExec: 'daemon',
    });
    expect(daemon('resident_ts_multus_limits_daemon_exec')).toEqual(daemon('resident_ts_multus_limits'));
  });

  it('resident_ts_no_bound: resident_ts with connectionLimit 1000 (every request at once), nothing else changed', () => {
    const objects = (mode: (typeof MODES)[number]) => modeObjects(mode, '6443').map((o) => o.obj as any);
    const config = (objs: any[]) =>
      JSON.parse(objs.find((o) => o.metadata.name === 'multus-ts-daemon-config').data['daemon-config.json']);
    const bound = objects('resident_ts');
    const free = objects('resident_ts_no_bound');
    expect(config(bound).connectionLimit).toBeUndefined();
    expect(config(free)).toEqual({ ...config(bound), connectionLimit: 1000 });
    const withoutConfig = (objs: any[]) => objs.filter((o) => o.metadata.name !== 'multus-ts-daemon-config');
    expect(withoutConfig(free)).toEqual(withoutConfig(bound));
    expect(daemonLimitMib('resident_ts_no_bound')).toBe(daemonLimitMib('resident_ts'));
  });

  it('go_thin: thin_entrypoint, no hostPID; ours come from deployments/', () => {
    const spec = ds('go_thin').spec.template.spec;
    expect(spec.hostPID).toBeUndefined();
    expect(spec.containers[0].command).toEqual(['/thin_entrypoint']);
    expect(ds('thin_ts').metadata.name).toBe('multus-ts');
    expect(daemonLimitMib('resident_ts')).toBeGreaterThan(0);
    expect(daemonLimitMib('thin_ts')).toBeUndefined();
  });
});

describe('density: the ADDs a burst sent through our daemon', () => {
  it('counts `ADD <id>: 200` lines of the CRI log at or after the burst start', () => {
    const id = 'a'.repeat(64);
    const line = (t: string, what: string) => `${t} stderr F 2026-12-02T01:29:59Z [verbose] ${what}`;
    const text = [
      line('2026-12-02T01:29:59.999999999Z', `ADD ${id}: 200 in 3.0 ms`),
      line('2026-12-02T01:30:00.000000001Z', `ADD ${id}: 200 in 3.0 ms`),
      line('2026-12-02T01:30:01.5Z', `DEL ${id}: 200 in 3.0 ms`),
      line('2026-12-02T01:30:02.5Z', `ADD ${id}: 500 code 11 in 3.0 ms`),
      line('2026-12-02T01:30:03.5Z', `ADD ${id}: 200 in 9.0 ms`),
      'not a log line',
    ].join('\n');
    expect(countServedAdds(text, Date.parse('2026-12-02T01:30:00Z'))).toBe(2);
  });
});

describe("density: the kernel's OOM reports of the node's containers", () => {
  // the shape of Linux 6.x's memory cgroup OOM report (mm/oom_kill.c, mm/memcontrol.c), shortened
  const id = 'b'.repeat(64);
  const report = (memcg: string, t = 100) => [
    `[${t}.000001] bridge invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=-997`,
    `[${t}.000002] CPU: 1 UID: 0 PID: 4242 Comm: bridge Not tainted 6.18.0 #1`,
    `[${t}.000003]  dump_stack_lvl+0x5d/0x80`,
    `[${t}.000004] memory: usage 51200kB, limit 51200kB, failcnt 77`,
    `[${t}.000005] Memory cgroup stats for ${memcg}:`,
    'anon 20971520',
    'file 27262976',
    `[${t}.000006] Tasks state (memory values in pages):`,
    `[${t}.000007] [  pid  ]   uid  tgid total_vm      rss rss_anon rss_file rss_shmem pgtables_bytes swapents oom_score_adj name`,
    `[${t}.000008] [   4000]     0  4000   300000     9000     5000     4000         0   400000        0          -997 multus`,
    `[${t}.000009] [   4242]     0  4242   200000     1200      800      400         0    90000        0          -997 bridge`,
    `[${t}.000010] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=x,mems_allowed=0,oom_memcg=${memcg},task_memcg=${memcg},task=multus,pid=4000,uid=0`,
    `[${t}.000011] Memory cgroup out of memory: Killed process 4000 (multus) total-vm:1200000kB, anon-rss:20000kB, file-rss:16000kB, shmem-rss:0kB, UID:0 pgtables:400kB oom_score_adj:-997`,
  ];

  it('gives the limit, the usage, the stats and each task of a container cgroup, and skips other cgroups', () => {
    const lines = ['[99.0] veth1: entered promiscuous mode', ...report('/other'), ...report(`/k8s.io/${id}`, 101)];
    const [r, more] = oomReports(lines);
    expect(more).toBeUndefined();
    expect(r).toEqual({
      memcg: `/k8s.io/${id}`,
      killed:
        '4000 (multus) total-vm:1200000kB, anon-rss:20000kB, file-rss:16000kB, shmem-rss:0kB, UID:0 pgtables:400kB oom_score_adj:-997',
      usage_kib: 51200,
      limit_kib: 51200,
      stats: { anon: 20971520, file: 27262976 },
      tasks: [
        { pid: 4000, name: 'multus', rss_kib: 36000, anon_kib: 20000, file_kib: 16000 },
        { pid: 4242, name: 'bridge', rss_kib: 4800, anon_kib: 3200, file_kib: 1600 },
      ],
    });
  });

  it('keeps at most five reports, and none of a report cut off before its kill', () => {
    const many = Array.from({ length: 7 }, (_, k) => report(`/k8s.io/${id}`, 200 + k)).flat();
    expect(oomReports(many)).toHaveLength(5);
    expect(oomReports(report(`/k8s.io/${id}`).slice(0, -1))).toEqual([]);
  });
});

describe('density: a quiet machine before a run', () => {
  const stat = (user: number, idle: number, iowait: number, guest = 0) =>
    `cpu  ${user} 0 100 ${idle} ${iowait} 0 5 0 ${guest} 0\ncpu0 1 2 3 4 5 6 7 8 9 10\nintr 1\n`;

  it("reads the machine's total and idle jiffies from the cpu line (guest time is inside user already)", () => {
    expect(cpuTimes(stat(1000, 5000, 200, 700))).toEqual({ total: 6305, idle: 5200 });
    expect(cpuTimes('intr 1\n')).toBeUndefined();
    expect(cpuTimes('cpu  1 2 x 4 5\n')).toBeUndefined();
  });

  it('gives the idle share between two samples, iowait counted idle', () => {
    const a = cpuTimes(stat(1000, 5000, 200))!;
    expect(idleShare(a, cpuTimes(stat(1100, 5800, 300))!)).toBeCloseTo(0.9, 5);
    expect(idleShare(a, cpuTimes(stat(1900, 5100, 200))!)).toBeCloseTo(0.1, 5);
    expect(idleShare(a, a)).toBeUndefined();
  });
});
