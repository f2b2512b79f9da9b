/**
 * daemon/metrics.ts: the resident daemon's Prometheus metrics (prom-client; docs/resident.md, "Warm state and
 * metrics").
 *
 * One registry per `createMetrics()` (never prom-client's global one), so a test or a second daemon in one
 * process gets its own figures. Every name of ours starts with `multus_ts_`; the default process and Node.js
 * metrics of prom-client keep their standard names (`process_*`, `nodejs_*`), which dashboards expect. Beside
 * ours, Multus' own names with Multus' labels and label values (docs/resident.md, "Metrics"), so dashboards
 * built for Multus thick work: `multus_server_request_total` (HEAD) and the per-plugin
 * `multus_cni_plugin_*` of k8snetworkplumbingwg/multus-cni#1533; and network-metrics-daemon's `pod_network_name_info`,
 * kept from the pod informer, so kubelet's `container_network_*` can be joined to NAD names without that second
 * DaemonSet.
 *
 * Label values come from requests (command, plugin type): they are bounded here, so a caller that sends
 * arbitrary values cannot grow the registry without limit (unknown commands become `other`, plugin types past
 * the first 64 distinct ones become `other`, and odd characters are replaced).
 *
 * This module is bundled only into the daemon's code; the thin plugin never loads it.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Pod } from '../k8s/types.ts';
import { PodNetworkSeries } from './pod-network-info.ts';

export interface Metrics {
  /** A request began; the returned function ends it (the in-flight gauge goes down once, however often called). */
  requestStarted(command: string): () => void;
  requestFinished(command: string, outcome: 'success' | 'error', seconds: number): void;
  delegateCall(pluginType: string, command: string, seconds: number, ok: boolean): void;
  /** A plugin looked up in binDir/CNI_PATH (Multus' `multus_cni_plugin_lookup_total`). */
  pluginLookup(pluginType: string, ok: boolean): void;
  /** One HTTP request on the socket, as promhttp's InstrumentHandlerCounter counts it for Multus. */
  serverRequest(path: string, status: number, method: string): void;
  apiCall(verb: string, resource: string, seconds: number, ok: boolean): void;
  informerSynced(name: string, synced: boolean): void;
  /** A pod of the node added, changed or deleted: its `pod_network_name_info` series follow its network-status. */
  podNetworks(pod: Pod, deleted: boolean): void;
  render(): Promise<{ contentType: string; body: string }>;
}

export const METRIC_PREFIX = 'multus_ts_';

/** Latency buckets in seconds: 0.5 ms (a cached answer) up to 60 s (the delegate timeout). */
const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

const COMMANDS: ReadonlySet<string> = new Set(['ADD', 'DEL', 'CHECK', 'STATUS', 'GC', 'VERSION']);
const API_VERBS: ReadonlySet<string> = new Set(['get', 'list', 'watch', 'create', 'update', 'patch', 'delete']);
const MAX_FREE_VALUES = 64;

const command = (c: string): string => (COMMANDS.has(c) ? c : 'other');

/** Multus' `handler` label: the route's path, `NotFound` for any other. */
const HANDLERS: ReadonlySet<string> = new Set(['/cni', '/delegate', '/healthz', '/readyz']);
/** promhttp's sanitizeMethod: the standard methods lower-cased, anything else `unknown`. */
const METHODS: ReadonlySet<string> = new Set([
  'get',
  'put',
  'head',
  'post',
  'delete',
  'connect',
  'options',
  'notify',
  'trace',
  'patch',
]);
const httpMethod = (m: string): string => {
  const lower = m.toLowerCase();
  return METHODS.has(lower) && (m === lower || m === m.toUpperCase()) ? lower : 'unknown';
};

/** A label value from free text: at most 64 distinct values per label, then `other`. */
class BoundedValues {
  private readonly seen = new Set<string>();

  of(raw: string): string {
    const v = raw.replace(/[^A-Za-z0-9_.\-/]/g, '_').slice(0, 63) || 'unknown';
    if (this.seen.has(v)) return v;
    if (this.seen.size >= MAX_FREE_VALUES) return 'other';
    this.seen.add(v);
    return v;
  }
}

/** The registry's instruments: ours (`multus_ts_*`) and Multus' own names (multusMetrics). */
function instruments(register: Registry) {
  /** One metric of this registry: `multus_ts_<name>`, its help text and label names. */
  const spec = <L extends string>(name: string, help: string, labelNames: L[]) => ({
    name: `${METRIC_PREFIX}${name}`,
    help,
    labelNames,
    registers: [register],
  });
  const requests = new Counter(
    spec('requests_total', 'CNI requests served, by command and outcome', ['command', 'outcome']),
  );
  const latency = <L extends string>(name: string, help: string, labelNames: L[]) =>
    new Histogram({ ...spec(name, help, labelNames), buckets: LATENCY_BUCKETS });
  const requestSeconds = latency('request_duration_seconds', 'Time to serve a CNI request, by command', ['command']);
  const inFlight = new Gauge(spec('requests_in_flight', 'CNI requests being served now, by command', ['command']));
  const BY_OUTCOME = ['command', 'outcome'] as const;
  const delegateSeconds = latency(
    'delegate_duration_seconds',
    'Time of one delegate plugin call, by plugin type, command and outcome',
    ['plugin_type', ...BY_OUTCOME],
  );
  const apiSeconds = latency(
    'api_request_duration_seconds',
    'Time of one Kubernetes API request, by verb, resource and outcome',
    ['verb', 'resource', 'outcome'],
  );
  const synced = new Gauge(
    spec('informer_synced', '1 when the informer has listed and is watching, 0 otherwise', ['informer']),
  );
  return { requests, requestSeconds, inFlight, delegateSeconds, apiSeconds, synced, multus: multusMetrics(register) };
}

export function createMetrics(): Metrics {
  const register = new Registry();
  collectDefaultMetrics({ register });
  const { requests, requestSeconds, inFlight, delegateSeconds, apiSeconds, synced, multus } = instruments(register);
  const podNetworks = podNetworkInfo(register);
  const pluginTypes = new BoundedValues();
  const resources = new BoundedValues();
  const informers = new BoundedValues();
  const outcome = (ok: boolean): string => (ok ? 'success' : 'error');

  return {
    requestStarted(cmd) {
      const labels = { command: command(cmd) };
      inFlight.inc(labels);
      let done = false;
      return () => {
        if (done) return;
        done = true;
        inFlight.dec(labels);
      };
    },
    requestFinished(cmd, result, seconds) {
      const c = command(cmd);
      requests.inc({ command: c, outcome: result === 'success' ? 'success' : 'error' });
      requestSeconds.observe({ command: c }, Math.max(0, seconds));
    },
    delegateCall(pluginType, cmd, seconds, ok) {
      const plugin = pluginTypes.of(pluginType);
      const c = cmd === '' ? 'UNKNOWN' : command(cmd);
      delegateSeconds.observe(
        { plugin_type: plugin, command: command(cmd), outcome: outcome(ok) },
        Math.max(0, seconds),
      );
      multus.execTotal.inc({ plugin, command: c, outcome: ok ? 'success' : 'failure' });
      multus.execSeconds.observe({ plugin, command: c }, Math.max(0, seconds));
    },
    pluginLookup(pluginType, ok) {
      multus.lookupTotal.inc({ plugin: pluginTypes.of(pluginType), outcome: ok ? 'success' : 'failure' });
    },
    serverRequest(path, status, method) {
      const handler = HANDLERS.has(path) ? path : 'NotFound';
      multus.serverTotal.inc({ handler, code: String(status), method: httpMethod(method) });
    },
    apiCall(verb, resource, seconds, ok) {
      const v = API_VERBS.has(verb) ? verb : 'other';
      apiSeconds.observe({ verb: v, resource: resources.of(resource), outcome: outcome(ok) }, Math.max(0, seconds));
    },
    informerSynced(name, isSynced) {
      synced.set({ informer: informers.of(name) }, isSynced ? 1 : 0);
    },
    podNetworks,
    async render() {
      return { contentType: register.contentType, body: await register.metrics() };
    },
  };
}

/**
 * Multus' metric names, labels and help texts as its daemon registers them (pkg/server/server.go at HEAD, and
 * pkg/server/metrics_exec.go of k8snetworkplumbingwg/multus-cni#1533): `outcome` is `success`/`failure` there (ours say
 * `error`), the
 * duration histogram has Prometheus' default buckets, and a call without CNI_COMMAND is `UNKNOWN`.
 */
function multusMetrics(register: Registry) {
  const registers = [register];
  const counter = <L extends string>(name: string, help: string, labelNames: L[]) =>
    new Counter<L>({ name, help, labelNames, registers });
  return {
    serverTotal: counter('multus_server_request_total', 'Counter of HTTP requests', ['handler', 'code', 'method']),
    lookupTotal: counter('multus_cni_plugin_lookup_total', 'Counter of CNI plugin lookups', ['plugin', 'outcome']),
    execTotal: counter('multus_cni_plugin_execution_total', 'Counter of CNI plugin process executions', [
      'plugin',
      'command',
      'outcome',
    ]),
    execSeconds: new Histogram({
      name: 'multus_cni_plugin_execution_duration_seconds',
      help: 'Duration of CNI plugin process executions',
      labelNames: ['plugin', 'command'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
  };
}

/**
 * network-metrics-daemon's `pod_network_name_info` (pkg/podmetrics: same name, help text and labels, value 0):
 * on every event of a pod its series are dropped and made again from its network-status (daemon/pod-network-info.ts);
 * a deleted pod's go. Pod owners can write that annotation, so the series are bounded per pod and per node
 * (pod-network-info.ts), and `multus_ts_pod_network_info_dropped` counts the entries left out.
 */
function podNetworkInfo(register: Registry): (pod: Pod, deleted: boolean) => void {
  const gauge = new Gauge({
    name: 'pod_network_name_info',
    help: 'Metric to identify network names of networks added to pods.',
    labelNames: ['pod', 'namespace', 'interface', 'network_name'],
    registers: [register],
  });
  const dropped = new Gauge({
    name: `${METRIC_PREFIX}pod_network_info_dropped`,
    help: "network-status entries of the node's pods not published as pod_network_name_info (invalid or past a bound)",
    registers: [register],
  });
  const series = new PodNetworkSeries();
  return (pod, deleted) => {
    const change = series.update(pod, deleted);
    if (change === undefined) return;
    for (const labels of change.remove) gauge.remove(labels);
    for (const labels of change.add) gauge.set(labels, 0);
    dropped.set(series.dropped);
  };
}
