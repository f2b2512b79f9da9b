/**
 * The pure parts of the density bench (scripts/bench/density): what counts as a pod with all its networks, and
 * the DaemonSets the four modes are installed by (Go Multus v4.3.0's layouts, the API server's address in every
 * container). The bench itself needs a kubelet node and minutes; these run anywhere.
 */
import { describe, expect, it } from 'vitest';
import { MODES, daemonLimitMib, hasDaemon, isOurDaemon, modeObjects } from '../../scripts/bench/density/modes.ts';
import { hasAllNetworks, isReady } from '../../scripts/bench/density/pods.ts';
import { countServedAdds } from '../../scripts/bench/density/node-ops.ts';

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
    expect(MODES.filter(hasDaemon)).toEqual(['resident_ts', 'resident_ts_multus_limits', 'go_thick', 'go_thick_300mi']);
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
    expect(daemon(ours).resources.limits).toEqual({ memory: '300Mi' });
    // nothing else differs: the same images, containers, volumes, sidecar
    const without = (spec: any) => ({ ...spec, containers: spec.containers.map((c: any) => ({ ...c, resources: 0 })) });
    expect(without(limited)).toEqual(without(ours));
    expect(daemonLimitMib('resident_ts_multus_limits')).toBe(50);
    expect(isOurDaemon('resident_ts_multus_limits')).toBe(true);
    expect(MODES.filter(isOurDaemon)).toEqual(['resident_ts', 'resident_ts_multus_limits']);
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
