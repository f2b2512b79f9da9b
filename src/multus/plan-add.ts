/**
 * plan-add.ts: the one planner of an ADD, in two steps: `gatherInputs` reads (the pod's networks and devices,
 * podnetworks.ts; the auxiliary chain's files) and `planAdd` plans from what was read, pure: no I/O, no events
 * posted. ADD (commands/add.ts) and `multus plan` (explain.ts) run both, so they give the same verdict with the same
 * messages; the parity test (test/unit/multus/plan-add.test.ts) holds them to it.
 *
 * The steps of `planAdd`: the pod's delegates (pod-delegates.ts: the config's cluster and default networks, the
 * default-network override, the networks annotation, namespace isolation, the NADs, each attachment's device), a
 * version-less conflist given the config's version, the auxiliary chain last, the interface names, the capabilities
 * no plugin declares (a warning, or an error with strictCapabilities), the result cache file names, and the
 * default-route moves. Every error is returned in ADD's order and planning goes on past it; ADD fails with the
 * first, `multus plan` lists them all. The Warning events (a missing NAD, a refused pool) are returned for the
 * caller to post (`eventsBeforeFirstError` are ADD's).
 */
import { CniCode, CniError, toCniError, wrapError } from '../base/errors.ts';
import type { K8sArgs } from '../cni/cniargs.ts';
import { assertResultCacheFits } from '../cni/result-cache.ts';
import type { RoutePlan } from '../routes/routes.ts';
import { planDefaultRoutes } from '../routes/routes.ts';
import { auxiliaryChain } from './auxchain.ts';
import type { MultusConf } from './conf.ts';
import type { Attachment, Delegate } from './attachments.ts';
import { inheritListVersion, planAttachments, undeclaredCapabilities } from './attachments.ts';
import type { PodInputs, ReadCall } from './podnetworks.ts';
import type { KubeClient } from '../k8s/types.ts';
import { gatherPodInputs } from './podnetworks.ts';
import type { PlanEvent, PlanSink, PodLookup } from './pod-delegates.ts';
import { attempt, newSink, planPodDelegates } from './pod-delegates.ts';

/** The call an ADD plans for. */
export interface AddCall {
  conf: MultusConf;
  k8s: K8sArgs;
  /** CNI_IFNAME: the cluster network's interface. */
  ifName: string;
  /** CNI_CONTAINERID, for the result cache file names. */
  containerId: string;
  /** `[namespace/name/uid]`, the prefix of the call's messages. */
  tag: string;
}

/** Everything `planAdd` plans from: the call and what `gatherInputs` read for it. */
export interface AddInputs extends AddCall, PodInputs {
  /** The auxiliary chain's delegate (docs/behaviour.md#auxiliary-chain), or why its files do not load. */
  aux: Delegate | undefined | CniError;
}

export interface AddPlan {
  attachments: Attachment[];
  /** undefined when no attachment asks for a default route. */
  defaultRoutes: RoutePlan[] | undefined;
  /** Requests that are ignored (capabilities no plugin declares, without strictCapabilities). */
  warnings: string[];
  /** Every error, in the order ADD meets them; ADD fails with the first. */
  errors: CniError[];
  /** Warning events for the pod, for the caller to post. */
  events: PlanEvent[];
}

/**
 * Reads what `planAdd` needs (read-only I/O): the pod's networks and devices, and the auxiliary chain's files.
 * `explain` (`multus plan`) reads past a failure and off the node without the kubelet's map; ADD stops reading at
 * the first failure.
 */
export async function gatherInputs(
  call: AddCall,
  lookup: PodLookup,
  kube: KubeClient | undefined,
  ctx: ReadCall,
  mode: 'add' | 'explain',
): Promise<AddInputs> {
  const explain = mode === 'explain';
  const opts = { stopEarly: !explain, ...(explain ? { kubeletOptional: true } : {}) };
  const pod = await gatherPodInputs(call.conf, call.k8s, lookup, kube, ctx, opts);
  let aux: AddInputs['aux'];
  try {
    aux = auxiliaryChain(call.conf, ctx.log);
  } catch (e) {
    aux = toCniError(e);
  }
  return { ...call, ...pod, aux };
}

function capabilityWarnings(attachments: Attachment[], inputs: AddInputs, sink: PlanSink): string[] {
  const warnings: string[] = [];
  for (const attachment of attachments) {
    const missing = undeclaredCapabilities(attachment);
    if (missing.length === 0) continue;
    const declares = missing.length > 1 ? 'those capabilities' : 'that capability';
    const msg = `${attachment.displayName} requests ${missing.join(', ')} but no plugin of network "${attachment.network.name}" declares ${declares}`;
    if (!inputs.conf.strictCapabilities) warnings.push(`${inputs.tag}: ${msg}; the request is ignored`);
    else sink.errors.push(new CniError(CniCode.InvalidConfig, `${inputs.tag}: ${msg} (strictCapabilities)`));
  }
  return warnings;
}

/** The plan of an ADD from its inputs (pure). */
export function planAdd(inputs: AddInputs): AddPlan {
  const { conf, tag } = inputs;
  const sink = newSink();
  const resolved = planPodDelegates(conf, inputs.k8s.podNamespace, inputs, sink);
  const delegates = inheritListVersion(resolved, conf.cniVersion);
  if (inputs.aux instanceof CniError) sink.errors.push(inputs.aux);
  else if (inputs.aux) delegates.push(inputs.aux);
  const attachments = attempt(sink, [], () => planAttachments(delegates, inputs.ifName));
  const warnings = capabilityWarnings(attachments, inputs, sink);
  for (const a of attachments) {
    attempt(sink, undefined, () => assertResultCacheFits(a.network.name, inputs.containerId, a.ifName));
  }
  const defaultRoutes = attempt(sink, undefined, () => {
    try {
      return planDefaultRoutes(attachments);
    } catch (e) {
      throw wrapError(e, `${tag}: error setting the default route`);
    }
  });
  return { attachments, defaultRoutes, warnings, errors: sink.errors, events: sink.events };
}

/** The events an ADD that stops at its first error would have raised (Multus posts them as it goes). */
export const eventsBeforeFirstError = (plan: AddPlan): PlanEvent[] => plan.events.filter((e) => e.after === 0);
