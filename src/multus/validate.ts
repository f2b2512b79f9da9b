/**
 * validate.ts: the one validator of a NAD and of a pod's network annotations, shared by ADD's own code, `multus
 * plan`, `kubectl multus validate`, `kubectl multus preflight` and the admission webhook (docs/kubectl-multus.md).
 * It runs no check of its own: `validateNad` loads the NAD as ADD does (nad.ts `networkFromNad`: config JSON,
 * `type`, `cniVersion`, conflist shape, the refusals of a nested meta-plugin), and `validatePod` plans the pod's
 * ADD with ADD's planner in its collecting mode (explain.ts `explainAdd`, plan-add.ts) over an in-memory client
 * holding the NADs the caller has, so every message is the one ADD would give. Pure: no file, no API, no clock.
 *
 * A NAD the caller does not have is either missing (`nads: 'complete'`, the webhook and preflight: ADD's "cannot
 * find" error) or unknown (offline `validate -f`: a stand-in config that plans like any NAD, so the annotation's
 * syntax, default routes, interface names and namespace isolation are still checked).
 * Tested by test/unit/multus/validate.test.ts, test/cli/kubectl-multus.test.ts.
 */
import { CniCode, toCniError } from '../base/errors.ts';
import { silentLogger } from '../base/log.ts';
import type { KubeClient, Nad, Pod } from '../k8s/types.ts';
import { KubeApiError, httpStatusOf } from '../k8s/types.ts';
import type { MultusConf } from './conf.ts';
import { parseMultusConf } from './conf.ts';
import type { Explanation, PlanError } from './explain.ts';
import { explainAdd } from './explain.ts';
import { networkFromNad } from './nad.ts';
import { DNS1123_LABEL } from './selection.ts';

export type { PlanError };

export interface Verdict {
  /** ADD's errors, in the order ADD meets them (empty: ADD would go ahead). */
  errors: PlanError[];
  /** What ADD would ignore or could not check here. */
  warnings: string[];
}

/** The stand-in cluster network of `offlineConf` (a NAD in multusNamespace the in-memory client makes up). */
const STAND_IN_CLUSTER = 'multus-ts-validate-cluster-network';

/**
 * A multus config for planning without a node's: Multus' defaults, the cluster network a stand-in; `selection`
 * sets the keys that judge a pod's annotation (namespaceIsolation, globalNamespaces: the webhook's flags).
 */
export function offlineConf(selection: Record<string, unknown> = {}): MultusConf {
  return parseMultusConf({
    ...selection,
    cniVersion: '1.0.0',
    name: 'multus-cni-network',
    type: 'multus',
    clusterNetwork: STAND_IN_CLUSTER,
  });
}

const DEFAULT_CONF_DIR = '/etc/cni/net.d';

/** ADD's refusals of a NAD (nad.ts `networkFromNad`), without the pod's prefix ADD adds. */
export function validateNad(nad: Nad, confDir = DEFAULT_CONF_DIR): Verdict {
  const { name, namespace } = nad.metadata ?? {};
  if (typeof name !== 'string' || name === '') {
    return {
      errors: [{ code: CniCode.InvalidConfig, msg: 'NetworkAttachmentDefinition: metadata.name is missing' }],
      warnings: [],
    };
  }
  const warnings = DNS1123_LABEL.test(name)
    ? []
    : [
        `NetworkAttachmentDefinition ${namespace}/${name}: the name is not a DNS-1123 label, so the text form of a pod's networks annotation cannot name it (the JSON form can)`,
      ];
  const config = nad.spec?.config;
  if (config !== undefined && typeof config !== 'string') {
    const msg = `NetworkAttachmentDefinition ${namespace}/${name}: spec.config must be a string holding JSON`;
    return { errors: [{ code: CniCode.InvalidConfig, msg }], warnings };
  }
  if (config === undefined || config === '') {
    const warning = `NetworkAttachmentDefinition ${namespace}/${name}: spec.config is empty, so ADD reads the config named "${name}" from each node's ${confDir}; not checked here`;
    return { errors: [], warnings: [...warnings, warning] };
  }
  try {
    networkFromNad(nad, confDir);
    return { errors: [], warnings };
  } catch (e) {
    return { errors: [asPlanError(e)], warnings };
  }
}

function asPlanError(e: unknown): PlanError {
  const error = toCniError(e);
  return { code: error.code, msg: error.msg, ...(error.details ? { details: error.details } : {}) };
}

export interface PodOptions {
  /** The NADs ADD would find; 'complete' when a NAD not among them does not exist. */
  nads?: readonly Nad[];
  complete?: boolean;
  /** The node's multus config (default `offlineConf()`). */
  conf?: MultusConf;
  /** Reads a NAD not among `nads` (the API: `kubectl multus plan POD`); a 404 is ADD's "cannot find". */
  getNad?: (namespace: string, name: string) => Promise<Nad>;
  /**
   * A NAD that does not exist is told here and planned as a stand-in instead of ADD's "cannot find" (the webhook:
   * a pod may be created before its NAD, and ADD is retried until the NAD is there).
   */
  onMissing?: (namespace: string, name: string) => void;
}

/** ADD's verdict on a pod: its errors (ADD stops at the first; all are listed) and warnings. */
export async function validatePod(pod: Pod, opts: PodOptions = {}): Promise<Verdict> {
  const x = await explainPod(pod, opts);
  return { errors: x.errors, warnings: x.warnings };
}

/** `explainAdd` of `pod` over the in-memory client (what `kubectl multus plan -f` prints). */
export function explainPod(pod: Pod, opts: PodOptions = {}): Promise<Explanation> {
  const conf = opts.conf ?? offlineConf();
  const kube = memoryClient(pod, opts, conf);
  return explainAdd(conf, pod.metadata.namespace, pod.metadata.name, kube, silentLogger);
}

const notFound = (what: string): KubeApiError =>
  new KubeApiError(CniCode.InvalidConfig, `${what} not found`, 404, 'NotFound');

/** A stand-in NAD for one ADD would read but the caller does not have (offline). */
function standIn(namespace: string, name: string, conf: MultusConf): Nad {
  const config = JSON.stringify({ cniVersion: conf.cniVersion, name, type: 'multus-ts-unchecked' });
  return { metadata: { namespace, name }, spec: { config } };
}

/** A read-only KubeClient holding one pod and the given NADs (explain.ts drops its writes anyway). */
function memoryClient(pod: Pod, opts: PodOptions, conf: MultusConf): KubeClient {
  const key = (ns: string, name: string) => `${ns}/${name}`;
  const byName = new Map((opts.nads ?? []).map((n) => [key(n.metadata.namespace, n.metadata.name), n]));
  const getNad = (ns: string, name: string): Promise<Nad> => {
    const found = byName.get(key(ns, name));
    if (found) return Promise.resolve(found);
    const standInCluster = ns === conf.multusNamespace && name === STAND_IN_CLUSTER;
    if (standInCluster) return Promise.resolve(standIn(ns, name, conf));
    const missing = (): Promise<Nad> => {
      if (!opts.onMissing) return Promise.reject(notFound(`network-attachment-definition ${ns}/${name}`));
      opts.onMissing(ns, name);
      return Promise.resolve(standIn(ns, name, conf));
    };
    if (opts.getNad) {
      return opts.getNad(ns, name).catch((e: unknown) => (httpStatusOf(e) === 404 ? missing() : Promise.reject(e)));
    }
    return opts.complete ? missing() : Promise.resolve(standIn(ns, name, conf));
  };
  return {
    getPod: (ns, name) =>
      ns === pod.metadata.namespace && name === pod.metadata.name
        ? Promise.resolve(pod)
        : Promise.reject(notFound(`pod ${ns}/${name}`)),
    getNad,
    getResourceClaim: (ns, name) => Promise.reject(notFound(`resourceclaim ${ns}/${name}`)),
    listResourceSlices: () => Promise.resolve([]),
    updatePodStatus: (p) => Promise.resolve(p),
    applyClaimDevices: () => Promise.resolve(),
    createEvent: () => Promise.resolve(),
    requestCount: 0,
    info: { source: 'kubeconfig', path: '(in memory)', server: '(none)', auth: 'anonymous', fallback: false },
    close: () => undefined,
  };
}
