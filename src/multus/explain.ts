/**
 * explain.ts: what an ADD of a pod would do, without doing it (`multus plan`, docs/hotplug.md).
 *
 * `explainAdd` runs ADD's own planner (plan-add.ts `planAdd`) through a read-only `KubeClient`, in its collecting
 * mode: it keeps going past each error so it can report every one an ADD would hit (ADD stops at the first), with
 * the message ADD gives. Then it shows each attachment's interface name, plugins, runtimeConfig and CNI_ARGS, and
 * the default-route moves. `formatExplanation` prints it for people. A pod that does not exist is planned as ADD
 * plans it: the configured networks only. Devices are assigned as ADD assigns them, from the pod's DRA claims and,
 * where the kubelet's map can be read (on the node), its device plugins; so a named request or a pool with no device
 * left is an error here too. Off the node a pool's device is only named.
 * Tested by test/unit/multus/plan-add.test.ts, test/e2e-k8s/hotplug.test.ts (`multus plan`).
 */
import { toCniError } from '../base/errors.ts';
import type { Logger } from '../base/log.ts';
import type { K8sArgs } from '../cni/cniargs.ts';
import { formatCniArgs, podK8sArgs, podRef } from '../cni/cniargs.ts';
import { buildPluginConfig } from '../cni/libcni.ts';
import type { KubeClient, Pod } from '../k8s/types.ts';
import { httpStatusOf as apiStatus } from '../k8s/types.ts';
import type { ResourceMapDeps } from '../devices/devices.ts';
import type { RoutePlan } from '../routes/routes.ts';
import type { MultusConf } from './conf.ts';
import type { Attachment } from './attachments.ts';
import { capabilityArgsFor, delegateArgsFor } from './attachments.ts';
import { gatherInputs, planAdd } from './plan-add.ts';
import { PARALLEL_ATTACHMENTS, attachmentSteps } from './overlap.ts';
import type { PodLookup } from './pod-delegates.ts';
import type { ClaimNetworkSource } from './claim-attach.ts';
import { claimRefOf } from './claim-attach.ts';

export interface PlannedPlugin {
  type: string;
  /** The runtimeConfig this plugin would get (only the capabilities it declares). */
  runtimeConfig: Record<string, unknown>;
}

export interface PlannedAttachment {
  ifName: string;
  /** The CNI network name (caches, the plugins' `name`). */
  network: string;
  /** `<namespace>/<nad>` for NADs, else the network name. */
  displayName: string;
  isClusterNetwork: boolean;
  plugins: PlannedPlugin[];
  cniArgs: string;
  resourceName?: string;
  /** The device the plan gave it (the kubelet's map when it can be read here, the pod's DRA claims). */
  deviceId?: string;
  /** The element's `resourceClaim` (docs/behaviour.md#claim-request): its device is read at ADD. */
  resourceClaim?: { claimName: string; requestName: string };
  /** A network of a claim of our DRA driver (docs/behaviour.md#claim-networks): its claim, request and device. */
  claimNetwork?: { claim: string; request: string; device: string };
}

export interface PlanError {
  code: number;
  msg: string;
  details?: string;
}

export interface Explanation {
  pod: { namespace: string; name: string; uid: string; found: boolean };
  attachments: PlannedAttachment[];
  defaultRoutes: RoutePlan[] | undefined;
  warnings: string[];
  errors: PlanError[];
  /** With `parallelAttachments`: the interface names of each step, in order (docs/behaviour.md#parallel-attachments). */
  steps?: string[][];
}

const asError = (e: unknown): PlanError => {
  const error = toCniError(e);
  return { code: error.code, msg: error.msg, ...(error.details ? { details: error.details } : {}) };
};

/** A KubeClient that reads and never writes (events and status updates are dropped). */
export function readOnly(kube: KubeClient): KubeClient {
  return {
    getPod: (ns, name, o) => kube.getPod(ns, name, o),
    getNad: (ns, name, o) => kube.getNad(ns, name, o),
    getResourceClaim: (ns, name, o) => kube.getResourceClaim(ns, name, o),
    listResourceSlices: (node, driver, o) => kube.listResourceSlices(node, driver, o),
    updatePodStatus: (pod) => Promise.resolve(pod),
    applyClaimDevices: () => Promise.resolve(),
    createEvent: () => Promise.resolve(),
    get requestCount() {
      return kube.requestCount;
    },
    info: kube.info,
    close: () => kube.close(),
  };
}

export async function explainAdd(
  conf: MultusConf,
  namespace: string,
  name: string,
  kube: KubeClient,
  log: Logger,
  opts: { devices?: ResourceMapDeps; claimNetworks?: ClaimNetworkSource } = {},
): Promise<Explanation> {
  const errors: PlanError[] = [];
  const ro = readOnly(kube);
  let pod: Pod | undefined;
  try {
    pod = await ro.getPod(namespace, name);
  } catch (e) {
    if (apiStatus(e) !== 404) errors.push(asError(e));
  }
  const k8s = podK8sArgs({ namespace, name, uid: pod?.metadata.uid ?? '' }, '<container ID>');
  const lookup: PodLookup = pod ? { kind: 'found', pod } : { kind: 'unknown', reason: 'not found' };
  // a sandbox's ID as runtimes make it (64 hex characters), for the result cache file names
  const call = { conf, k8s, ifName: 'eth0', containerId: '0'.repeat(64), tag: `[${podRef(k8s)}]` };
  const plan = planAdd(await gatherInputs(call, lookup, ro, { log, seams: opts }, 'explain'));
  errors.push(...plan.errors.map(asError));
  return {
    pod: { namespace, name, uid: pod?.metadata.uid ?? '', found: pod !== undefined },
    attachments: plan.attachments.map((a) => describeAttachment(a, conf, k8s)),
    defaultRoutes: plan.defaultRoutes,
    warnings: [...conf.warnings, ...plan.warnings],
    errors,
    ...(conf.parallelAttachments
      ? { steps: attachmentSteps(plan.attachments, true).map((step) => step.map((i) => plan.attachments[i]!.ifName)) }
      : {}),
  };
}

function describeAttachment(a: Attachment, conf: MultusConf, k8s: K8sArgs): PlannedAttachment {
  const claim = claimRefOf(a);
  const capabilityArgs = capabilityArgsFor(a, conf.runtimeConfig);
  return {
    ifName: a.ifName,
    network: a.network.name,
    displayName: a.displayName,
    isClusterNetwork: a.isClusterNetwork,
    plugins: a.network.plugins.map((p) => {
      const built = JSON.parse(buildPluginConfig(a.network, p, undefined, capabilityArgs).toString()) as Record<
        string,
        unknown
      >;
      return { type: p.type, runtimeConfig: (built.runtimeConfig as Record<string, unknown> | undefined) ?? {} };
    }),
    cniArgs: formatCniArgs(delegateArgsFor(a, k8s, [], 'ADD')),
    ...(a.request.resourceName && !a.request.claimRequest ? { resourceName: a.request.resourceName } : {}),
    ...(a.request.deviceID ? { deviceId: a.request.deviceID } : {}),
    ...(a.request.claimRequest
      ? { resourceClaim: a.request.claimRequest as unknown as { claimName: string; requestName: string } }
      : {}),
    ...(claim
      ? { claimNetwork: { claim: `${claim.namespace}/${claim.claim}`, request: claim.request, device: claim.device } }
      : {}),
  };
}

/** The explanation for people. */
export function formatExplanation(x: Explanation): string {
  const lines: string[] = [];
  const { pod } = x;
  lines.push(`ADD of pod ${pod.namespace}/${pod.name}${pod.found ? ` (uid ${pod.uid})` : ' (not found)'} would:`);
  x.attachments.forEach((a, i) => {
    const what = `${a.displayName === a.network ? '' : `${a.displayName}, `}network "${a.network}"`;
    const role = a.isClusterNetwork ? ' (cluster network)' : '';
    lines.push(`  ${i + 1}. ${a.ifName}: ${what}${role}, plugins ${a.plugins.map((p) => p.type).join(' -> ')}`);
    lines.push(`       CNI_ARGS=${a.cniArgs}`);
    for (const p of a.plugins) {
      if (Object.keys(p.runtimeConfig).length > 0)
        lines.push(`       ${p.type} runtimeConfig: ${JSON.stringify(p.runtimeConfig)}`);
    }
    const pool = a.resourceName ? ` of ${a.resourceName}` : '';
    if (a.resourceClaim) {
      const { claimName, requestName } = a.resourceClaim;
      const which = a.deviceId ? `${a.deviceId}, ` : '';
      lines.push(`       device: ${which}the one of request "${requestName}" of the pod's claim "${claimName}"`);
    } else if (a.deviceId) lines.push(`       device: ${a.deviceId}${pool}`);
    else if (a.resourceName)
      lines.push(`       device: one of ${a.resourceName} (the kubelet's map is not readable here)`);
    const c = a.claimNetwork;
    if (c) lines.push(`       from request "${c.request}" of ResourceClaim ${c.claim} (device ${c.device})`);
  });
  if (x.attachments.length === 0) lines.push('  (no attachment)');
  if (x.steps && x.attachments.length > 0) {
    const steps = x.steps.map((step) => step.join(' + ')).join(', then ');
    lines.push(`  at once (parallelAttachments, at most ${PARALLEL_ATTACHMENTS} together): ${steps}`);
  }
  if (!x.defaultRoutes) lines.push('  default routes: as the plugins set them');
  else {
    lines.push('  default routes:');
    for (const r of x.defaultRoutes) {
      const del = [r.deleteV4 ? 'IPv4' : '', r.deleteV6 ? 'IPv6' : ''].filter(Boolean).join(' and ');
      const parts = [
        del ? `remove its ${del} default route` : '',
        r.addGateways.length ? `add a default via ${r.addGateways.join(', ')}` : '',
      ];
      if (parts.some(Boolean)) lines.push(`    ${r.ifName}: ${parts.filter(Boolean).join(', ')}`);
    }
  }
  for (const w of x.warnings) lines.push(`warning: ${w}`);
  if (x.errors.length === 0) lines.push('no errors: the ADD would go ahead');
  for (const e of x.errors) lines.push(`error (code ${e.code}): ${e.msg}${e.details ? ` (${e.details})` : ''}`);
  return lines.join('\n') + '\n';
}
