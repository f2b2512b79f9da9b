/**
 * dra/prepare.ts: what the DRA plugin answers the kubelet (I/O through small interfaces): NodePrepareResources and
 * NodeUnprepareResources, one call at a time, every claim answered (an error per claim, never a dropped one).
 *
 * Prepare, per claim: a checkpoint of its UID answers at once (a kubelet retry, a restarted daemon). Else the
 * claim is read (its UID must be the one asked for: a claim deleted and re-created under its name is another
 * claim), its networks parsed by `claimNetworks` (dra/claim-networks.ts), each NAD it names looked up. A bad config
 * or a missing NAD refuses the claim: its answer is the error, each of its devices of our driver gets a `Ready`
 * condition `False` with the reason and message (server-side apply of status.devices, the driver's name as field
 * manager: the ADD writes `Ready` True as the same manager later), and each pod the claim is reserved for gets a
 * Warning event; nothing is attached (the ADD finds the same errors). An API error that may clear (unreachable,
 * 5xx) is the answer alone: the kubelet tries again. A good claim gets its checkpoint, then its devices are
 * answered: `{requestNames, poolName, deviceName, cdiDeviceIds: [], shareId}`, one per allocated device of ours.
 * Prepare attaches nothing: at that moment the pod has no network namespace yet; the CNI ADD attaches (the
 * checkpoint is not needed by it). Unprepare removes the checkpoint; an unknown claim is prepared no more: success.
 * docs/dra-networks.md, "Design: the driver". Tested by test/unit/dra/prepare.test.ts.
 */
import { createHash } from 'node:crypto';
import { messageOf } from '../base/errors.ts';
import type { Logger } from '../base/log.ts';
import type { DraObject, KubeClient, Pod } from '../k8s/types.ts';
import { httpStatusOf, isTransient } from '../k8s/types.ts';
import { emitEvents } from '../multus/publish.ts';
import type { CheckpointStore, PreparedDevice } from './checkpoint.ts';
import type { ClaimAttachment } from './claim-networks.ts';
import { claimNetworks } from './claim-networks.ts';

/** A claim as the kubelet names it (`Claim` of the DRA plugin API). */
export interface ClaimRef {
  namespace: string;
  uid: string;
  name: string;
}

export interface PrepareAnswer {
  devices: PreparedDevice[];
  error: string;
}

export interface PrepareDeps {
  kube: Pick<KubeClient, 'getResourceClaim' | 'getNad' | 'applyClaimDevices' | 'createEvent'>;
  checkpoints: CheckpointStore;
  driver: string;
  /** `draInlineConfigFromClaims`: an inline CNI config from the claim itself is honoured. */
  allowInlineFromClaim: boolean;
  /** The NAD a per-NAD device stands for (the published slices' reverse map). */
  deviceNetwork?: (pool: string, device: string) => { namespace: string; name: string } | undefined;
  log: Logger;
  now?: () => Date;
}

/** A claim the plugin refuses: its config is wrong (a reason for the condition, a message that says what to fix). */
interface Problem {
  request?: string;
  reason: string;
  message: string;
}

export interface Preparer {
  prepare(claims: ClaimRef[]): Promise<Record<string, PrepareAnswer>>;
  unprepare(claims: ClaimRef[]): Promise<Record<string, { error: string }>>;
}

const str = (v: unknown): string => (typeof v === 'string' ? v : '');
const rec = (v: unknown): Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

/** A condition reason as the API takes it (a letter, then letters, digits, `_`, `,`, `:`), at most 64 characters. */
const conditionReason = (r: string): string => {
  const clean = r
    .replace(/[^A-Za-z0-9_,:]/g, '')
    .replace(/^[^A-Za-z]+/, '')
    .replace(/[,:]+$/, '');
  return (clean || 'InvalidNetworkConfig').slice(0, 64);
};

/** The NADs the attachments name that do not exist, as problems (other lookup errors are thrown). */
async function missingNads(deps: PrepareDeps, attachments: ClaimAttachment[]): Promise<Problem[]> {
  const problems: Problem[] = [];
  for (const a of attachments) {
    if (a.config.kind !== 'nad') continue;
    const { namespace, name } = a.config.selection;
    try {
      await deps.kube.getNad(namespace, name);
    } catch (e) {
      if (httpStatusOf(e) !== 404) throw e;
      const message = `request ${a.request}: NetworkAttachmentDefinition ${namespace}/${name} not found: create it or name another network`;
      problems.push({ request: a.request, reason: 'NetworkNotFound', message });
    }
  }
  return problems;
}

/** `Ready=False` on each device of our driver in the claim's allocation, and a Warning event on its pods. */
async function refuse(deps: PrepareDeps, claim: DraObject, ref: ClaimRef, problems: Problem[]): Promise<string> {
  const message = `ResourceClaim ${ref.namespace}/${ref.name}: ${problems.map((p) => p.message).join('; ')}`;
  const time = (deps.now?.() ?? new Date()).toISOString().replace(/\.\d{3}Z$/, 'Z');
  const results = list(rec(rec(rec(claim.status).allocation).devices).results).map(rec);
  const devices = results
    .filter((r) => str(r.driver) === deps.driver)
    .map((r) => {
      const p = problems.find((x) => x.request === str(r.request)) ?? problems[0]!;
      const condition = {
        type: 'Ready',
        status: 'False',
        reason: conditionReason(p.reason),
        message: p.message.slice(0, 1024),
        lastTransitionTime: time,
      };
      const shareID = str(r.shareID);
      return {
        driver: deps.driver,
        pool: str(r.pool),
        device: str(r.device),
        ...(shareID ? { shareID } : {}),
        conditions: [condition],
      };
    });
  try {
    if (devices.length > 0) await deps.kube.applyClaimDevices(ref.namespace, ref.name, deps.driver, devices);
  } catch (e) {
    deps.log.error(
      `dra: cannot write the Ready=False condition of ResourceClaim ${ref.namespace}/${ref.name}: ${messageOf(e)}`,
    );
  }
  // one event per pod and message while it lives (a fixed name: the kubelet's retries do not repeat it)
  const digest = createHash('sha256').update(`${ref.uid}\n${message}`).digest('hex').slice(0, 16);
  for (const r of list(rec(claim.status).reservedFor).map(rec)) {
    if (str(r.resource) !== 'pods' || str(r.apiGroup) !== '') continue;
    const pod: Pod = { metadata: { namespace: ref.namespace, name: str(r.name), uid: str(r.uid) } };
    const event = {
      type: 'Warning' as const,
      reason: 'ClaimNetworkRefused',
      message,
      name: `${str(r.name).slice(0, 200)}.${digest}`,
    };
    await emitEvents(deps.kube as KubeClient, pod, [event], deps.log);
  }
  deps.log.error(`dra: ${message}`);
  return message;
}

async function prepareOne(deps: PrepareDeps, ref: ClaimRef): Promise<PrepareAnswer> {
  const saved = deps.checkpoints.get(ref.uid);
  if (saved) return { devices: saved.devices, error: '' };
  const what = `ResourceClaim ${ref.namespace}/${ref.name}`;
  let claim: DraObject;
  try {
    claim = await deps.kube.getResourceClaim(ref.namespace, ref.name);
  } catch (e) {
    const again = isTransient(e) ? ' (the kubelet tries again)' : '';
    return { devices: [], error: `cannot read ${what}: ${messageOf(e)}${again}` };
  }
  const uid = str(rec(claim.metadata).uid);
  if (uid !== ref.uid) {
    return { devices: [], error: `${what} has uid ${uid}, not ${ref.uid}: the claim the kubelet asks for is gone` };
  }
  const opts = { driver: deps.driver, allowInlineFromClaim: deps.allowInlineFromClaim };
  const { attachments, errors } = claimNetworks(
    claim,
    deps.deviceNetwork ? { ...opts, deviceNetwork: deps.deviceNetwork } : opts,
  );
  const problems: Problem[] = errors.length > 0 ? errors : await missingNads(deps, attachments);
  if (problems.length > 0) return { devices: [], error: await refuse(deps, claim, ref, problems) };
  const devices = attachments.map((a) => ({
    requestNames: [a.request],
    poolName: a.pool,
    deviceName: a.device,
    cdiDeviceIds: [],
    ...(a.shareId ? { shareId: a.shareId } : {}),
  }));
  deps.checkpoints.put({ uid: ref.uid, namespace: ref.namespace, name: ref.name, devices });
  deps.log.verbose(`dra: prepared ${what} (${devices.length} network device(s))`);
  return { devices, error: '' };
}

/** The plugin's two calls over `deps`, one at a time (the kubelet may call again while a call runs). */
export function preparer(deps: PrepareDeps): Preparer {
  let queue: Promise<unknown> = Promise.resolve();
  const serial = <T>(work: () => Promise<T>): Promise<T> => {
    const next = queue.then(work, work);
    queue = next.catch(() => undefined);
    return next;
  };
  const each = async <A>(claims: ClaimRef[], one: (c: ClaimRef) => Promise<A>, failed: (msg: string) => A) => {
    const answers: Record<string, A> = {};
    for (const c of claims) {
      try {
        answers[c.uid] = await one(c);
      } catch (e) {
        answers[c.uid] = failed(`ResourceClaim ${c.namespace}/${c.name}: ${messageOf(e)}`);
      }
    }
    return answers;
  };
  return {
    prepare: (claims) =>
      serial(() =>
        each(
          claims,
          (c) => prepareOne(deps, c),
          (error): PrepareAnswer => ({ devices: [], error }),
        ),
      ),
    unprepare: (claims) =>
      serial(() =>
        each(
          claims,
          async (c) => {
            if (/^[0-9a-f][0-9a-f-]{0,62}$/.test(c.uid)) deps.checkpoints.remove(c.uid);
            return { error: '' };
          },
          (error) => ({ error }),
        ),
      ),
  };
}
