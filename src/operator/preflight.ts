/**
 * operator/preflight.ts: `kubectl multus preflight` (`multus preflight`), step 1 of the swap from Go Multus
 * (docs/kubectl-multus.md): reads the pods (all namespaces, or `-n`; `--node` keeps one node's) and every NAD,
 * plans each pod's ADD with multus-ts' rules (multus/validate.ts, nothing runs) and lists each pod that would
 * fail (under both) or behave differently under multus-ts than under Go Multus v4.3.0, with the reason
 * (docs/compatibility.md). A NAD that does not exist fails; hostNetwork pods and pods without a networks or
 * default-network annotation are skipped (ADD is not called for the first; the second get the configured
 * networks only). `-o json`: `{"pods":[{namespace,name,verdict,reason}]}`. Exit 0 when no pod is listed, 1 when
 * one is, 2 for usage or API errors.
 * Tested by test/unit/operator/preflight.test.ts (classify), test/e2e-k8s/kubectl-multus.test.ts.
 */
import { isObject } from '../base/json.ts';
import { CniCode } from '../base/errors.ts';
import type { Nad, Pod } from '../k8s/types.ts';
import { DEFAULT_NETWORK_ANNOTATION } from '../multus/pod-delegates.ts';
import { NETWORKS_ANNOTATION } from '../multus/selection.ts';
import type { PlanError, PodOptions } from '../multus/validate.ts';
import { validatePod } from '../multus/validate.ts';
import type { KubectlDeps, KubectlFlags } from './kubectl-common.ts';
import { UsageError, connect, listItems, loadConf } from './kubectl-common.ts';

export interface PreflightPod {
  namespace: string;
  name: string;
  verdict: 'fails' | 'differs';
  reason: string;
}

/** ADD errors Go Multus v4.3.0 does not give: the pod starts under Go and fails under multus-ts. */
const GO_ACCEPTS: readonly { test: (e: PlanError) => boolean; why: string }[] = [
  {
    test: (e) => e.msg.includes('but only one element may carry it'),
    why: 'Go Multus merges "default-route" of several elements (an IPv4 and an IPv6 gateway on two elements start there)',
  },
  {
    test: (e) => e.code === CniCode.IncompatibleVersion,
    why: 'Go Multus runs ADD with a cniVersion it cannot DEL (the attachment leaks there)',
  },
  {
    test: (e) => /conflicting resourceName|allowedResourceNames/.test(e.msg),
    why: 'Go Multus v4.3.0 ignores an element\'s "resourceName" and takes the NAD\'s pool',
  },
];

/** What multus-ts does differently for a pod ADD accepts (docs/compatibility.md). */
function quietDifferences(pod: Pod): string[] {
  const annotations = pod.metadata.annotations ?? {};
  const out: string[] = [];
  const override = annotations[DEFAULT_NETWORK_ANNOTATION];
  if (override !== undefined && /@|"interface"/.test(override)) {
    out.push(
      `${DEFAULT_NETWORK_ANNOTATION} names an interface: Go Multus renames the cluster interface, multus-ts keeps the runtime's (eth0)`,
    );
  }
  const networks = annotations[NETWORKS_ANNOTATION] ?? '';
  if (/"resourceName"/.test(networks)) {
    out.push(
      `an element of ${NETWORKS_ANNOTATION} names a "resourceName": multus-ts takes a device from that pool, Go Multus v4.3.0 from the NAD's`,
    );
  }
  return out;
}

/** The verdict on one pod from ADD's errors under multus-ts (undefined: it starts and behaves as under Go). */
function classify(pod: Pod, errors: readonly PlanError[]): PreflightPod | undefined {
  const { namespace, name } = pod.metadata;
  if (errors.length > 0) {
    const goFails = errors.filter((e) => !GO_ACCEPTS.some((g) => g.test(e)));
    const first = goFails[0] ?? errors[0]!;
    const why = goFails.length === 0 ? GO_ACCEPTS.find((g) => g.test(first))!.why : '';
    const reason = `${first.msg}${first.details ? ` (${first.details})` : ''}${why ? `; ${why}` : ''}`;
    return { namespace, name, verdict: goFails.length > 0 ? 'fails' : 'differs', reason };
  }
  const differences = quietDifferences(pod);
  return differences.length > 0 ? { namespace, name, verdict: 'differs', reason: differences.join('; ') } : undefined;
}

/**
 * The pod as Go Multus v4.3.0 reads it: the JSON elements without "default-route" and "resourceName" (Go merges
 * the first and ignores the second), so the rest of the annotation is checked past ADD's first refusal.
 */
function goView(pod: Pod): Pod | undefined {
  const text = pod.metadata.annotations?.[NETWORKS_ANNOTATION];
  let elements: unknown;
  try {
    elements = JSON.parse(text ?? '');
  } catch {
    return undefined;
  }
  if (!Array.isArray(elements)) return undefined;
  const stripped = elements.map((e: unknown) => {
    if (!isObject(e)) return e;
    const { ['default-route']: _route, resourceName: _pool, ...rest } = e;
    return rest;
  });
  const annotations = { ...pod.metadata.annotations, [NETWORKS_ANNOTATION]: JSON.stringify(stripped) };
  return { ...pod, metadata: { ...pod.metadata, annotations } };
}

/** preflight's verdict on one pod (undefined: nothing to report). */
export async function preflightPod(pod: Pod, opts: PodOptions): Promise<PreflightPod | undefined> {
  const verdict = classify(pod, (await validatePod(pod, opts)).errors);
  if (verdict?.verdict !== 'differs') return verdict;
  const asGo = goView(pod);
  const underGo = asGo && classify(asGo, (await validatePod(asGo, opts)).errors);
  return underGo?.verdict === 'fails' ? { ...underGo, name: pod.metadata.name } : verdict;
}

/** Pods ADD is called for and whose annotations choose networks. */
function wanted(pod: Pod): boolean {
  const spec = isObject(pod.spec) ? pod.spec : {};
  if (spec.hostNetwork === true) return false;
  const a = pod.metadata.annotations ?? {};
  return Boolean(a[NETWORKS_ANNOTATION] || a[DEFAULT_NETWORK_ANNOTATION]);
}

function podsPath(flags: KubectlFlags): string {
  const base = flags.namespace ? `/api/v1/namespaces/${encodeURIComponent(flags.namespace)}/pods` : '/api/v1/pods';
  return flags.node ? `${base}?fieldSelector=${encodeURIComponent(`spec.nodeName=${flags.node}`)}` : base;
}

function format(listed: readonly PreflightPod[], checked: number): string {
  const lines = listed.map((p) => `${p.verdict.padEnd(8)}${p.namespace}/${p.name}: ${p.reason}`);
  lines.push(`${checked} pods with networks checked, ${listed.length} would fail or differ`);
  return `${lines.join('\n')}\n`;
}

export async function runPreflight(flags: KubectlFlags, deps: KubectlDeps): Promise<number> {
  if (flags.args.length > 0) throw new UsageError(`unexpected argument "${flags.args[0]}"`);
  const conf = loadConf(flags.conf);
  const { kube } = await connect(flags, deps.env);
  try {
    const pods = (await listItems<Pod>(kube, 'pods', podsPath(flags))).filter(wanted);
    const nadsPath = '/apis/k8s.cni.cncf.io/v1/network-attachment-definitions';
    const nads = pods.length > 0 ? await listItems<Nad>(kube, 'network-attachment-definitions', nadsPath) : [];
    const listed: PreflightPod[] = [];
    for (const pod of pods) {
      const verdict = await preflightPod(pod, { nads, complete: true, conf });
      if (verdict) listed.push(verdict);
    }
    deps.io.stdout(
      flags.output === 'json' ? `${JSON.stringify({ pods: listed }, null, 2)}\n` : format(listed, pods.length),
    );
    return listed.length > 0 ? 1 : 0;
  } finally {
    kube.close();
  }
}
