/**
 * plan-add.ts: the one planner of an ADD: what ADD runs (commands/add.ts) and what `multus plan` shows (explain.ts), so both
 * give the same verdict with the same messages.
 *
 * The steps: the pod's delegates (podnetworks.ts: the config's cluster and default networks, the default-network
 * override, the networks annotation, namespace isolation, the NADs, device IDs), a version-less conflist given the
 * config's version, the auxiliary chain last, the interface names, the capabilities no plugin declares (a warning,
 * or an error with strictCapabilities), the result cache file names, and the default-route moves. ADD stops at the
 * first error; with `collect` (`multus plan`) every error is handed to it and planning goes on past it.
 * Not pure: through the resolver it reads the auxiliary chain's files, the pod, its NADs and, in ADD mode, the
 * kubelet's device assignments and the pod's DRA claims, and posts the Warning events of a missing NAD or a
 * refused pool (podnetworks.ts); `multus plan` skips the devices.
 */
import { CniCode, CniError, wrapError } from '../base/errors.ts';
import type { Logger } from '../base/log.ts';
import type { K8sArgs } from '../cni/cniargs.ts';
import { assertResultCacheFits } from '../cni/result-cache.ts';
import type { RoutePlan } from '../routes/routes.ts';
import { planDefaultRoutes } from '../routes/routes.ts';
import { auxiliaryChain } from './auxchain.ts';
import type { MultusConf } from './conf.ts';
import type { Attachment } from './attachments.ts';
import { inheritListVersion, planAttachments, undeclaredCapabilities } from './attachments.ts';
import type { PodLookup, ResolveDeps } from './podnetworks.ts';
import { attempt, resolvePodDelegates } from './podnetworks.ts';

export interface AddPlanInput {
  conf: MultusConf;
  k8s: K8sArgs;
  lookup: PodLookup;
  /** CNI_IFNAME: the cluster network's interface. */
  ifName: string;
  /** CNI_CONTAINERID, for the result cache file names. */
  containerId: string;
  /** `[namespace/name/uid]`, the prefix of the call's messages. */
  tag: string;
  log: Logger;
  resolve: ResolveDeps;
}

export interface AddPlan {
  attachments: Attachment[];
  /** undefined when no attachment asks for a default route. */
  defaultRoutes: RoutePlan[] | undefined;
  /** Requests that are ignored (capabilities no plugin declares, without strictCapabilities). */
  warnings: string[];
}

export async function planAdd(input: AddPlanInput, collect?: (error: CniError) => void): Promise<AddPlan> {
  const { conf, tag } = input;
  const resolved = await resolvePodDelegates(conf, input.k8s, input.lookup, input.resolve, collect);
  const delegates = inheritListVersion(resolved, conf.cniVersion);
  const aux = await attempt(collect, undefined, () => auxiliaryChain(conf, input.log));
  if (aux) delegates.push(aux);
  const attachments = await attempt(collect, [], () => planAttachments(delegates, input.ifName));
  const warnings: string[] = [];
  for (const attachment of attachments) {
    const missing = undeclaredCapabilities(attachment);
    if (missing.length === 0) continue;
    const declares = missing.length > 1 ? 'those capabilities' : 'that capability';
    const msg = `${attachment.displayName} requests ${missing.join(', ')} but no plugin of network "${attachment.network.name}" declares ${declares}`;
    if (!conf.strictCapabilities) warnings.push(`${tag}: ${msg}; the request is ignored`);
    else {
      await attempt(collect, undefined, () => {
        throw new CniError(CniCode.InvalidConfig, `${tag}: ${msg} (strictCapabilities)`);
      });
    }
  }
  for (const a of attachments) {
    await attempt(collect, undefined, () => assertResultCacheFits(a.network.name, input.containerId, a.ifName));
  }
  const defaultRoutes = await attempt(collect, undefined, () => {
    try {
      return planDefaultRoutes(attachments);
    } catch (e) {
      throw wrapError(e, `${tag}: error setting the default route`);
    }
  });
  return { attachments, defaultRoutes, warnings };
}
