/**
 * claim-status.ts: network data in the DRA claim (KEP-4817, ResourceClaim `status.devices[]`), opt-in with
 * `publishClaimNetworkData` (docs/behaviour.md#claim-network-data). No Multus does this.
 *
 * For each attachment whose device ID came from a ResourceClaim (devices/dra.ts records which), ADD writes that
 * device's entry: driver, pool, device, a `Ready` condition and `networkData` (the pod's interface name, the
 * result's addresses of that interface in CIDR form, its MAC). The write is a server-side apply of the claim's
 * status with a field manager of this sandbox's own (`multus-ts/<container ID>`), so no other entry (the
 * driver's, another pod's of a shared claim) is touched; DEL applies an empty list as the same manager, which
 * removes exactly what ADD wrote. Both are best effort: a failure is logged (and on ADD a Warning event on the
 * pod) and never fails the pod's ADD or DEL. RBAC: `patch` on `resourceclaims/status`, and from Kubernetes 1.36
 * `associated-node:patch` on `resourceclaims/driver` for each driver, through a token bound to the node
 * (docs/install.md#claim-network-data); a refusal of the latter is spelled out.
 * Tested by test/k8s/dra.test.ts and test/k8s/dra-select.test.ts (against a real kube-apiserver).
 */
import { messageOf } from '../base/errors.ts';
import type { Logger } from '../base/log.ts';
import type { PluginResult } from '../cni/result.ts';
import type { KubeClient, Pod } from '../k8s/types.ts';
import { httpStatusOf } from '../k8s/types.ts';
import type { Attachment } from './attachments.ts';
import { emitEvents } from './publish.ts';

interface ClaimRef {
  namespace: string;
  claim: string;
}

/** The field manager of one sandbox's entries (at most 128 characters, as the API requires). */
function claimFieldManager(containerId: string): string {
  // node:crypto is loaded here, not at start-up: it costs every call millions of instructions (docs/archive/performance.md).
  const hash = () => process.getBuiltinModule('node:crypto').createHash('sha256').update(containerId).digest('hex');
  const id = containerId.length <= 100 ? containerId : hash();
  return `multus-ts/${id}`;
}

const str = (v: unknown): string => (typeof v === 'string' ? v : '');

function refOf(attachment: Attachment): (ClaimRef & { driver: string; pool: string; device: string }) | undefined {
  const d = attachment.request.claimDevice;
  if (!d) return undefined;
  const ref = {
    namespace: str(d.namespace),
    claim: str(d.claim),
    driver: str(d.driver),
    pool: str(d.pool),
    device: str(d.device),
  };
  return Object.values(ref).every((v) => v !== '') ? ref : undefined;
}

/** The attachment's interface in the pod: its addresses (CIDR) and MAC from the result (KEP-4817 networkData). */
export function networkData(attachment: Attachment, result: PluginResult): Record<string, unknown> {
  const ifaces = result.interfaces();
  const index = ifaces.findIndex((i) => i.name === attachment.ifName && i.sandbox);
  const ips = result
    .ips()
    .filter((ip) => index < 0 || ip.interface === undefined || ip.interface === index)
    .map((ip) => ip.address);
  const mac = index < 0 ? undefined : ifaces[index]!.mac;
  return {
    interfaceName: attachment.ifName,
    ...(ips.length > 0 ? { ips } : {}),
    ...(mac ? { hardwareAddress: mac } : {}),
  };
}

/** status.devices[] entries per claim ("namespace/claim") for the attachments made from claim devices. */
function claimDeviceEntries(
  attachments: Attachment[],
  results: PluginResult[],
  now: Date,
): Map<string, { ref: ClaimRef; devices: Record<string, unknown>[] }> {
  const byClaim = new Map<string, { ref: ClaimRef; devices: Record<string, unknown>[] }>();
  const time = now.toISOString().replace(/\.\d{3}Z$/, 'Z');
  attachments.forEach((attachment, i) => {
    const ref = refOf(attachment);
    const result = results[i];
    if (!ref || !result) return;
    const key = `${ref.namespace}/${ref.claim}`;
    const group = byClaim.get(key) ?? { ref: { namespace: ref.namespace, claim: ref.claim }, devices: [] };
    group.devices.push({
      driver: ref.driver,
      pool: ref.pool,
      device: ref.device,
      conditions: [
        {
          type: 'Ready',
          status: 'True',
          reason: 'NetworkConfigured',
          message: `${attachment.displayName} attached as ${attachment.ifName} by multus-ts`,
          lastTransitionTime: time,
        },
      ],
      networkData: networkData(attachment, result),
    });
    byClaim.set(key, group);
  });
  return byClaim;
}

/** The manifest piece that grants the per-driver rule (docs/install.md#claim-network-data). */
const RBAC_PIECE = 'deployments/multus-ts-claim-network-data.yml';

/**
 * What a failed write means. Since Kubernetes 1.36 (DRAResourceClaimGranularStatusAuthorization) status.devices
 * is authorized per driver on the synthetic `resourceclaims/driver` subresource: `associated-node:<verb>` when the
 * caller's token is bound to the claim's node, else `arbitrary-node:<verb>`; the API names the verbs it tried.
 */
export function claimWriteFailure(key: string, drivers: string[], e: unknown): string {
  const said = messageOf(e);
  const base = `cannot write the network data of ResourceClaim ${key} (status.devices)`;
  if (!said.includes('resourceclaims/driver')) return `${base}: ${said}`;
  const scope = said.includes('associated-node:')
    ? `multus' service account lacks "associated-node:patch" on resourceclaims/driver for driver ${drivers.join(', ')}: apply ${RBAC_PIECE} with that driver in its resourceNames`
    : `multus' token is not bound to the claim's node (the API tried only "arbitrary-node:patch"): give multus a pod- or node-bound service account token (install --token-binding=node), and the claim must be allocated on this node`;
  return `${base}: the API server's granular claim status authorization refused it: ${scope} (API: ${said})`;
}

/** ADD: one apply per claim, as this sandbox's field manager; a failure is logged and a Warning event on the pod. */
export async function publishClaimNetworkData(
  kube: KubeClient,
  pod: Pod,
  containerId: string,
  attachments: Attachment[],
  results: PluginResult[],
  log: Logger,
): Promise<void> {
  const manager = claimFieldManager(containerId);
  for (const [key, { ref, devices }] of claimDeviceEntries(attachments, results, new Date())) {
    try {
      await kube.applyClaimDevices(ref.namespace, ref.claim, manager, devices);
    } catch (e) {
      const message = claimWriteFailure(key, [...new Set(devices.map((d) => str(d.driver)))], e);
      log.error(message);
      await emitEvents(kube, pod, [{ type: 'Warning', reason: 'ClaimNetworkDataFailed', message }], log);
    }
  }
}

/** DEL: this sandbox's entries removed from each claim its attachments came from; a deleted claim is fine. */
export async function clearClaimNetworkData(
  kube: KubeClient,
  containerId: string,
  attachments: Attachment[],
  log: Logger,
): Promise<void> {
  const manager = claimFieldManager(containerId);
  const claims = new Map<string, ClaimRef & { drivers: Set<string> }>();
  for (const a of attachments) {
    const ref = refOf(a);
    if (!ref) continue;
    const key = `${ref.namespace}/${ref.claim}`;
    const entry = claims.get(key) ?? { namespace: ref.namespace, claim: ref.claim, drivers: new Set<string>() };
    claims.set(key, entry);
    entry.drivers.add(ref.driver);
  }
  for (const [key, ref] of claims) {
    try {
      await kube.applyClaimDevices(ref.namespace, ref.claim, manager, []);
    } catch (e) {
      if (httpStatusOf(e) === 404) continue;
      log.error(claimWriteFailure(key, [...ref.drivers], e).replace('cannot write', 'cannot remove'));
    }
  }
}
