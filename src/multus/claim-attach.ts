/**
 * multus/claim-attach.ts: networks from claims of our DRA driver as ordinary attachments
 * (docs/behaviour.md#claim-networks).
 *
 * multus/ does not read a claim's config itself: the host hands the reads of a call (podnetworks.ts) a
 * `ClaimNetworkSource` (the daemon's dra/claim-delegates.ts serves claim networks; the thin plugin's refuses them),
 * which returns, per allocation result of our driver, a NAD selection (resolved by pod-delegates.ts as an annotation
 * element is: namespace isolation, the NAD, its events) or an inline network. Each attachment carries its `ClaimNetworkRef` in its request (`claimNetwork`), so
 * the scratch cache records it and DEL, CHECK and GC see it as any other attachment; network-status entries get
 * `resourceClaim: {name, request}`; after the ADD, each claim's `status.devices[]` entries of our driver get
 * `Ready=True` and `networkData` equal to the entry, applied with the driver name as field manager; DEL removes
 * them unless another pod the claim is reserved for still uses it. Both writes are best effort (logged).
 * Tested by test/unit/multus/claim-attach.test.ts, test/k8s/dra-networks.test.ts.
 */
import type { CniError } from '../base/errors.ts';
import type { Logger } from '../base/log.ts';
import type { Network } from '../cni/network.ts';
import type { PluginResult } from '../cni/result.ts';
import type { DraLookup } from '../devices/dra.ts';
import type { KubeClient, Pod } from '../k8s/types.ts';
import { httpStatusOf } from '../k8s/types.ts';
import type { Attachment } from './attachments.ts';
import { claimWriteFailure, networkData } from './claim-status.ts';
import type { MultusConf } from './conf.ts';
import type { AttachmentRequest } from './fields.ts';
import type { NetworkStatus } from './network-status.ts';
import type { NetworkSelection } from './selection.ts';
import { isObject } from '../base/json.ts';

/** Which claim, request and device an attachment came from (kept in the scratch cache). */
export interface ClaimNetworkRef {
  namespace: string;
  claim: string;
  uid: string;
  request: string;
  driver: string;
  pool: string;
  device: string;
  shareId?: string;
}

/** One claim network: a NAD selection, or an inline network already loaded (and checked) by dra/. */
export type ClaimNetwork =
  { ref: ClaimNetworkRef; selection: NetworkSelection } | { ref: ClaimNetworkRef; network: Network; ifName?: string };

export interface ClaimSourceDeps {
  kube: KubeClient;
  log: Logger;
  /** The pod's DRA reads of this call, shared with the device lookup (devices/dra.ts). */
  lookup: DraLookup;
}

/** The pod's claim networks in `spec.resourceClaims` then request order, and every refusal (code and message). */
export type ClaimNetworkSource = (
  pod: Pod,
  conf: MultusConf,
  deps: ClaimSourceDeps,
) => Promise<{ networks: ClaimNetwork[]; errors: CniError[] }>;

/** What an inline claim network is called where users see it: `<claim>/<request>`. */
export const inlineDisplayName = (ref: ClaimNetworkRef): string => `${ref.claim}/${ref.request}`;

const str = (v: unknown): string => (typeof v === 'string' ? v : '');

/** The claim reference an attachment carries, if it came from a claim of our driver. */
export function claimRefOf(a: { request: AttachmentRequest }): ClaimNetworkRef | undefined {
  const r = a.request.claimNetwork;
  if (!isObject(r)) return undefined;
  const ref: ClaimNetworkRef = {
    namespace: str(r.namespace),
    claim: str(r.claim),
    uid: str(r.uid),
    request: str(r.request),
    driver: str(r.driver),
    pool: str(r.pool),
    device: str(r.device),
    ...(str(r.shareId) ? { shareId: str(r.shareId) } : {}),
  };
  return ref.namespace && ref.claim && ref.driver && ref.pool && ref.device ? ref : undefined;
}

/** The network-status entries of an attachment, marked with its claim and request when it came from one. */
export function withResourceClaim(a: { request: AttachmentRequest }, entries: NetworkStatus[]): NetworkStatus[] {
  const ref = claimRefOf(a);
  return ref ? entries.map((e) => ({ ...e, resourceClaim: { name: ref.claim, request: ref.request } })) : entries;
}

/** Groups attachments by claim (`namespace/claim`), with the driver that wrote them. */
function byClaim<T extends { request: AttachmentRequest }>(
  attachments: T[],
): Map<string, { ref: ClaimNetworkRef; items: [T, number][] }> {
  const groups = new Map<string, { ref: ClaimNetworkRef; items: [T, number][] }>();
  attachments.forEach((a, i) => {
    const ref = claimRefOf(a);
    if (!ref) return;
    const key = `${ref.namespace}/${ref.claim}`;
    const group = groups.get(key) ?? { ref, items: [] };
    group.items.push([a, i]);
    groups.set(key, group);
  });
  return groups;
}

/**
 * ADD: each claim's entries of our driver (driver, pool, device, shareID) with `Ready=True` and the attachment's
 * `networkData`, applied with the driver name as field manager. A failure is logged and does not fail the ADD.
 */
export async function publishClaimNetworks(
  kube: KubeClient,
  attachments: Attachment[],
  results: PluginResult[],
  log: Logger,
): Promise<void> {
  const time = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
  for (const [key, { ref, items }] of byClaim(attachments)) {
    const devices = items.flatMap(([a, i]) => {
      const r = claimRefOf(a)!;
      const result = results[i];
      if (!result) return [];
      return [
        {
          driver: r.driver,
          pool: r.pool,
          device: r.device,
          ...(r.shareId ? { shareID: r.shareId } : {}),
          conditions: [
            {
              type: 'Ready',
              status: 'True',
              reason: 'NetworkAttached',
              message: `${a.displayName} attached as ${a.ifName}`,
              lastTransitionTime: time,
            },
          ],
          networkData: networkData(a, result),
        },
      ];
    });
    try {
      await kube.applyClaimDevices(ref.namespace, ref.claim, ref.driver, devices);
    } catch (e) {
      log.error(claimWriteFailure(key, [ref.driver], e));
    }
  }
}

/** A reservedFor entry for `pod` (by UID, or by name when CNI_ARGS gave no UID). */
const isPod = (r: Record<string, unknown>, pod: { name: string; uid: string }): boolean =>
  pod.uid ? str(r.uid) === pod.uid : str(r.name) === pod.name;

/**
 * DEL: our driver's entries of each claim go, unless the claim is still reserved for another pod (a shared claim:
 * that pod's interfaces are described there too, and its DEL clears them). A deleted claim is fine.
 */
export async function clearClaimNetworks(
  kube: KubeClient,
  pod: { name: string; uid: string },
  attachments: { request: AttachmentRequest }[],
  log: Logger,
): Promise<void> {
  for (const [key, { ref }] of byClaim(attachments)) {
    try {
      const claim = await kube.getResourceClaim(ref.namespace, ref.claim);
      const reserved = claim.status?.reservedFor;
      const others = Array.isArray(reserved)
        ? reserved.filter((r) => isObject(r) && r.resource === 'pods' && !isPod(r, pod))
        : [];
      if (others.length > 0) {
        log.verbose(`ResourceClaim ${key} is still reserved for ${others.length} other pod(s): its status is kept`);
        continue;
      }
      await kube.applyClaimDevices(ref.namespace, ref.claim, ref.driver, []);
    } catch (e) {
      if (httpStatusOf(e) === 404) continue;
      log.error(claimWriteFailure(key, [ref.driver], e).replace('cannot write', 'cannot remove'));
    }
  }
}
