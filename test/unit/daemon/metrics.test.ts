/**
 * The daemon's metrics, read back from the Prometheus text format (parsed, not matched as whole strings).
 */
import { describe, expect, it } from 'vitest';
import { createMetrics } from '../../../src/daemon/metrics.ts';
import type { Pod } from '../../../src/k8s/types.ts';

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The text exposition format: `# HELP`, `# TYPE` and `name{l="v",...} value` lines. */
function parse(text: string): { samples: Sample[]; types: Map<string, string> } {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type) {
      types.set(type[1]!, type[2]!);
      continue;
    }
    if (line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: \d+)?$/.exec(line);
    if (!m) throw new Error(`not an exposition line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return { samples, types };
}

function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  const s = samples.find(
    (x) =>
      x.name === name &&
      Object.entries(labels).every(([k, v]) => x.labels[k] === v) &&
      Object.keys(x.labels).length === Object.keys(labels).length,
  );
  return s?.value;
}

describe('daemon metrics (prom-client)', () => {
  it('counts requests by command and outcome, with a latency histogram by command', async () => {
    const m = createMetrics();
    m.requestFinished('ADD', 'success', 0.004);
    m.requestFinished('ADD', 'success', 0.02);
    m.requestFinished('ADD', 'error', 0.3);
    m.requestFinished('DEL', 'success', 0.001);
    const r = await m.render();
    expect(r.contentType).toMatch(/^text\/plain; version=0\.0\.4/);
    const { samples, types } = parse(r.body);
    expect(types.get('multus_ts_requests_total')).toBe('counter');
    expect(types.get('multus_ts_request_duration_seconds')).toBe('histogram');
    expect(value(samples, 'multus_ts_requests_total', { command: 'ADD', outcome: 'success' })).toBe(2);
    expect(value(samples, 'multus_ts_requests_total', { command: 'ADD', outcome: 'error' })).toBe(1);
    expect(value(samples, 'multus_ts_requests_total', { command: 'DEL', outcome: 'success' })).toBe(1);
    expect(value(samples, 'multus_ts_request_duration_seconds_count', { command: 'ADD' })).toBe(3);
    expect(value(samples, 'multus_ts_request_duration_seconds_sum', { command: 'ADD' })).toBeCloseTo(0.324, 6);
    expect(value(samples, 'multus_ts_request_duration_seconds_bucket', { command: 'ADD', le: '0.005' })).toBe(1);
    expect(value(samples, 'multus_ts_request_duration_seconds_bucket', { command: 'ADD', le: '0.025' })).toBe(2);
    expect(value(samples, 'multus_ts_request_duration_seconds_bucket', { command: 'ADD', le: '+Inf' })).toBe(3);
  });

  it('tracks in-flight requests; done() counts once', async () => {
    const m = createMetrics();
    const a = m.requestStarted('ADD');
    const b = m.requestStarted('ADD');
    m.requestStarted('DEL');
    let { samples } = parse((await m.render()).body);
    expect(value(samples, 'multus_ts_requests_in_flight', { command: 'ADD' })).toBe(2);
    expect(value(samples, 'multus_ts_requests_in_flight', { command: 'DEL' })).toBe(1);
    a();
    a();
    b();
    ({ samples } = parse((await m.render()).body));
    expect(value(samples, 'multus_ts_requests_in_flight', { command: 'ADD' })).toBe(0);
    expect(value(samples, 'multus_ts_requests_in_flight', { command: 'DEL' })).toBe(1);
  });

  it('delegate and API latency histograms carry their labels and outcome', async () => {
    const m = createMetrics();
    m.delegateCall('bridge', 'ADD', 0.012, true);
    m.delegateCall('macvlan', 'ADD', 0.5, false);
    m.apiCall('get', 'pods', 0.002, true);
    m.apiCall('update', 'pods/status', 0.008, true);
    m.apiCall('update', 'pods/status', 0.009, false);
    const { samples, types } = parse((await m.render()).body);
    expect(types.get('multus_ts_delegate_duration_seconds')).toBe('histogram');
    expect(types.get('multus_ts_api_request_duration_seconds')).toBe('histogram');
    const d = (plugin_type: string, outcome: string) =>
      value(samples, 'multus_ts_delegate_duration_seconds_count', { plugin_type, command: 'ADD', outcome });
    expect(d('bridge', 'success')).toBe(1);
    expect(d('macvlan', 'error')).toBe(1);
    const a = (verb: string, resource: string, outcome: string) =>
      value(samples, 'multus_ts_api_request_duration_seconds_count', { verb, resource, outcome });
    expect(a('get', 'pods', 'success')).toBe(1);
    expect(a('update', 'pods/status', 'success')).toBe(1);
    expect(a('update', 'pods/status', 'error')).toBe(1);
  });

  it('informer sync state is a 0/1 gauge per informer', async () => {
    const m = createMetrics();
    m.informerSynced('pods', true);
    m.informerSynced('network-attachment-definitions', false);
    let { samples } = parse((await m.render()).body);
    expect(value(samples, 'multus_ts_informer_synced', { informer: 'pods' })).toBe(1);
    expect(value(samples, 'multus_ts_informer_synced', { informer: 'network-attachment-definitions' })).toBe(0);
    m.informerSynced('pods', false);
    ({ samples } = parse((await m.render()).body));
    expect(value(samples, 'multus_ts_informer_synced', { informer: 'pods' })).toBe(0);
  });

  it("pod_network_name_info: network-metrics-daemon's series, value 0, one per network-status entry with an interface; follows updates and deletes", async () => {
    const m = createMetrics();
    const status = (entries: unknown): Pod => ({
      metadata: {
        name: 'web-1',
        namespace: 'shop',
        uid: 'u1',
        annotations: { 'k8s.v1.cni.cncf.io/network-status': JSON.stringify(entries) },
      },
    });
    const series = async () => {
      const { samples, types } = parse((await m.render()).body);
      expect(types.get('pod_network_name_info')).toBe('gauge');
      return samples.filter((x) => x.name === 'pod_network_name_info').map((x) => [x.labels, x.value]);
    };
    m.podNetworks(
      status([
        { name: 'cbr0', interface: 'eth0', ips: ['10.0.0.5'], default: true },
        { name: 'shop/net-a', interface: 'net1' },
        { name: 'shop/no-if' }, // skipped: no interface, as network-metrics-daemon does
      ]),
      false,
    );
    expect(await series()).toEqual([
      [{ pod: 'web-1', namespace: 'shop', interface: 'eth0', network_name: 'cbr0' }, 0],
      [{ pod: 'web-1', namespace: 'shop', interface: 'net1', network_name: 'shop/net-a' }, 0],
    ]);
    m.podNetworks(status([{ name: 'cbr0', interface: 'eth0' }]), false); // net1 unplugged
    expect(await series()).toEqual([[{ pod: 'web-1', namespace: 'shop', interface: 'eth0', network_name: 'cbr0' }, 0]]);
    const broken = status([]);
    broken.metadata.annotations!['k8s.v1.cni.cncf.io/network-status'] = '{not json';
    m.podNetworks(broken, false); // kept, as network-metrics-daemon keeps them when it cannot parse
    expect(await series()).toHaveLength(1);
    m.podNetworks(status([{ name: 'cbr0', interface: 'eth0' }]), true);
    expect(await series()).toEqual([]);
  });

  it('pod_network_name_info is bounded: self-written network-status annotations of 10 pods give at most 32 series each, 2048 in all, the rest counted as dropped', async () => {
    const m = createMetrics();
    const huge = (pod: string, n: number): Pod => ({
      metadata: {
        name: pod,
        namespace: 'mine',
        uid: pod,
        annotations: {
          'k8s.v1.cni.cncf.io/network-status': JSON.stringify(
            Array.from({ length: n }, (_, i) => ({ name: `mine/n${i}`, interface: `if${i}` })).concat([
              { name: 'x'.repeat(400), interface: 'long0' }, // name longer than a NAD reference
              { name: 'mine/a', interface: 'bad/if' }, // not an interface name
              { name: 'mine/b', interface: 'if0' }, // an interface repeated
            ]),
          ),
        },
      },
    });
    const count = async () => {
      const { samples } = parse((await m.render()).body);
      const series = samples.filter((x) => x.name === 'pod_network_name_info');
      return { series: series.length, dropped: value(samples, 'multus_ts_pod_network_info_dropped') };
    };
    for (let i = 0; i < 10; i++) m.podNetworks(huge(`p${i}`, 6500), false);
    expect(await count()).toEqual({ series: 320, dropped: 10 * (6500 - 32 + 3) });
    // the node's bound: 100 more such pods fill 2048 series, no more
    for (let i = 10; i < 110; i++) m.podNetworks(huge(`p${i}`, 40), false);
    expect((await count()).series).toBe(2048);
    // a deleted pod's room goes to the next event
    m.podNetworks(huge('p0', 1), true);
    m.podNetworks(huge('p109', 40), false);
    expect((await count()).series).toBe(2048);
    for (let i = 0; i < 110; i++) m.podNetworks(huge(`p${i}`, 1), true);
    expect(await count()).toEqual({ series: 0, dropped: 0 });
  });

  it('has the default process metrics, and each instance its own registry', async () => {
    const m1 = createMetrics();
    const m2 = createMetrics();
    m1.requestFinished('ADD', 'success', 0.01);
    const { samples } = parse((await m2.render()).body);
    expect(samples.some((s) => s.name === 'process_resident_memory_bytes' && s.value > 0)).toBe(true);
    expect(samples.some((s) => s.name === 'nodejs_heap_size_used_bytes')).toBe(true);
    expect(value(samples, 'multus_ts_requests_total', { command: 'ADD', outcome: 'success' })).toBeUndefined();
  });

  it('bounds label values from requests: unknown commands, odd and too many plugin types', async () => {
    const m = createMetrics();
    m.requestFinished('BOGUS', 'success', 0.001);
    m.delegateCall('a"b\nc', 'ADD', 0.001, true);
    for (let i = 0; i < 100; i++) m.delegateCall(`type${i}`, 'ADD', 0.001, true);
    const { samples } = parse((await m.render()).body);
    expect(value(samples, 'multus_ts_requests_total', { command: 'other', outcome: 'success' })).toBe(1);
    const counts = samples.filter((s) => s.name === 'multus_ts_delegate_duration_seconds_count');
    expect(counts.find((s) => s.labels.plugin_type === 'a_b_c')?.value).toBe(1);
    const types = new Set(counts.map((s) => s.labels.plugin_type));
    expect(types.size).toBe(65); // 64 distinct values, then `other`
    expect(types.has('other')).toBe(true);
  });

  it("serves Multus' names with Multus' labels and values beside ours (server requests, plugin lookups and runs)", async () => {
    const m = createMetrics();
    m.serverRequest('/cni', 200, 'POST');
    m.serverRequest('/cni', 200, 'POST');
    m.serverRequest('/readyz', 500, 'POST');
    m.serverRequest('/nope', 404, 'GET');
    m.serverRequest('/healthz', 405, 'BREW');
    m.pluginLookup('bridge', true);
    m.pluginLookup('nosuch', false);
    m.delegateCall('bridge', 'ADD', 0.02, true);
    m.delegateCall('bridge', 'DEL', 0.3, false);
    m.delegateCall('bridge', '', 0.001, true);
    const { samples, types } = parse((await m.render()).body);
    expect(types.get('multus_server_request_total')).toBe('counter');
    expect(types.get('multus_cni_plugin_execution_duration_seconds')).toBe('histogram');
    const server = (handler: string, code: string, method: string) =>
      value(samples, 'multus_server_request_total', { handler, code, method });
    expect(server('/cni', '200', 'post')).toBe(2);
    expect(server('/readyz', '500', 'post')).toBe(1);
    expect(server('NotFound', '404', 'get')).toBe(1);
    expect(server('/healthz', '405', 'unknown')).toBe(1);
    expect(value(samples, 'multus_cni_plugin_lookup_total', { plugin: 'bridge', outcome: 'success' })).toBe(1);
    expect(value(samples, 'multus_cni_plugin_lookup_total', { plugin: 'nosuch', outcome: 'failure' })).toBe(1);
    const exec = (command: string, outcome: string) =>
      value(samples, 'multus_cni_plugin_execution_total', { plugin: 'bridge', command, outcome });
    expect([exec('ADD', 'success'), exec('DEL', 'failure'), exec('UNKNOWN', 'success')]).toEqual([1, 1, 1]);
    const seconds = 'multus_cni_plugin_execution_duration_seconds';
    expect(value(samples, `${seconds}_count`, { plugin: 'bridge', command: 'DEL' })).toBe(1);
    // Prometheus' default buckets, as Multus' HistogramOpts without Buckets
    const les = samples
      .filter((x) => x.name === `${seconds}_bucket` && x.labels.command === 'ADD')
      .map((x) => x.labels.le);
    expect(les).toEqual(['0.005', '0.01', '0.025', '0.05', '0.1', '0.25', '0.5', '1', '2.5', '5', '10', '+Inf']);
  });
});
