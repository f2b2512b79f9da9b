/**
 * devices/claim-request.ts: the devices of one named DRA claim request (docs/behaviour.md#claim-request).
 *
 * A selection element's `"resourceClaim": {"claimName", "requestName"}` names an entry of the pod's
 * `spec.resourceClaims[]` and a request of that claim. The entry leads to the ResourceClaim (its
 * `resourceClaimName`, or the claim generated from its template as `status.resourceClaimStatuses[]` names it;
 * a pod copy that does not name it yet is read again once, past any cache), the claim's
 * `status.allocation.devices.results[]` of that request (or of its subrequests, `<request>/<sub>`) give the
 * devices, and the driver's ResourceSlices on the pod's node give each device's `k8s.cni.cncf.io/deviceID`
 * (and `k8s.cni.cncf.io/resourceName`, when it has one). Unlike the pooled lookup (dra.ts), which skips what it
 * cannot use, everything here is strict: an entry, request or allocation that is not there, a device in no
 * slice, or one without a deviceID, is code 7 naming the claim and the request. Reads go through the call's
 * DraLookup (one GET per claim, one LIST per driver, one deadline).
 */
import { CniCode, CniError } from '../base/errors.ts';
import { isObject } from '../base/json.ts';
import type { DraObject, Pod } from '../k8s/types.ts';
import type { DraApi, DraDeviceRef, DraLookup } from './dra.ts';
import { deviceKey } from './dra.ts';
import { DRA_DEVICE_ID_ATTRIBUTE, listOf, podRef, str } from './dra-objects.ts';

/** An element's `resourceClaim`: the pod's claim entry and one of its requests. */
export interface ClaimRequestRef {
  claimName: string;
  requestName: string;
}

/** One device of a named request. */
export interface ClaimRequestDevice {
  deviceId: string;
  /** The device's `k8s.cni.cncf.io/resourceName` attribute, '' when it has none. */
  resourceName: string;
  ref: DraDeviceRef;
  /** `deviceKey` of the device, to keep it out of the pooled lookup. */
  key: string;
}

const refText = (r: ClaimRequestRef): string =>
  `resourceClaim {claimName: ${JSON.stringify(r.claimName)}, requestName: ${JSON.stringify(r.requestName)}}`;

function refused(r: ClaimRequestRef, problem: string, fix: string): CniError {
  return new CniError(CniCode.InvalidConfig, `${refText(r)}: ${problem}`, { details: fix });
}

type ClaimEntry = { kind: 'named'; claim: string } | { kind: 'none' } | { kind: 'pending' };

/** The ResourceClaim behind the pod's `spec.resourceClaims[]` entry `name`, if the pod has that entry. */
function entryClaim(pod: Pod, name: string): ClaimEntry | undefined {
  const entry = listOf(pod, pod.spec?.resourceClaims, 'spec.resourceClaims').find(
    (e) => isObject(e) && str(e.name) === name,
  );
  if (!isObject(entry)) return undefined;
  if (str(entry.resourceClaimName) !== '') return { kind: 'named', claim: str(entry.resourceClaimName) };
  const status = listOf(pod, pod.status?.resourceClaimStatuses, 'status.resourceClaimStatuses').find(
    (s) => isObject(s) && str(s.name) === name,
  );
  if (!isObject(status)) return { kind: 'pending' };
  const claim = str(status.resourceClaimName);
  return claim === '' ? { kind: 'none' } : { kind: 'named', claim };
}

async function claimOf(pod: Pod, r: ClaimRequestRef, api: DraApi): Promise<string> {
  let entry = entryClaim(pod, r.claimName);
  if (entry?.kind === 'pending') {
    const fresh = await api.getPod(pod.metadata.namespace, pod.metadata.name, { uid: pod.metadata.uid, fresh: true });
    entry = entryClaim(fresh, r.claimName);
  }
  if (entry === undefined) {
    const names = listOf(pod, pod.spec?.resourceClaims, 'spec.resourceClaims').map((e) =>
      isObject(e) ? str(e.name) : '',
    );
    throw refused(
      r,
      `pod ${podRef(pod)} has no spec.resourceClaims entry named ${JSON.stringify(r.claimName)} (it has: ${names.filter(Boolean).join(', ') || 'none'})`,
      "claimName is the name of an entry of the pod's spec.resourceClaims, not of the ResourceClaim object",
    );
  }
  if (entry.kind !== 'named') {
    const why = entry.kind === 'none' ? 'names no ResourceClaim for it' : 'does not name its generated claim yet';
    throw refused(
      r,
      `pod ${podRef(pod)}'s status.resourceClaimStatuses ${why}`,
      'the claim must exist and be allocated before the pod starts',
    );
  }
  return entry.claim;
}

interface Result {
  request: string;
  driver: string;
  pool: string;
  device: string;
}

/** The allocation results of the request (and its subrequests); every problem refused naming both. */
function requestResults(claim: DraObject, ref: string, r: ClaimRequestRef): Result[] {
  const spec = isObject(claim.spec?.devices) ? claim.spec.devices.requests : undefined;
  const requests = Array.isArray(spec) ? spec.map((q: unknown) => (isObject(q) ? str(q.name) : '')) : [];
  const top = r.requestName.split('/')[0]!;
  if (!requests.includes(top)) {
    throw refused(
      r,
      `ResourceClaim ${ref} has no request ${JSON.stringify(top)} (its requests: ${requests.filter(Boolean).join(', ') || 'none'})`,
      "requestName is the name of one of the claim's spec.devices.requests",
    );
  }
  const devices = isObject(claim.status?.allocation) ? claim.status.allocation.devices : undefined;
  const results = isObject(devices) ? devices.results : undefined;
  if (!Array.isArray(results)) {
    throw refused(
      r,
      `ResourceClaim ${ref} is not allocated (no status.allocation.devices.results)`,
      'the claim must be allocated before the pod starts',
    );
  }
  const mine = results
    .map((x: unknown) =>
      isObject(x)
        ? { request: str(x.request), driver: str(x.driver), pool: str(x.pool), device: str(x.device) }
        : undefined,
    )
    .filter(
      (x): x is Result => x !== undefined && (x.request === r.requestName || x.request.startsWith(`${r.requestName}/`)),
    );
  if (mine.length === 0) {
    throw refused(
      r,
      `ResourceClaim ${ref} has no device allocated for request ${JSON.stringify(r.requestName)}`,
      'name a request that allocates a device',
    );
  }
  return mine;
}

/**
 * The devices of a named request, in allocation order, on the pod's node. Refusals are code 7 naming the claim
 * and the request; API failures keep their code (11 when the API is unreachable).
 */
export async function claimRequestDevices(
  pod: Pod,
  r: ClaimRequestRef,
  api: DraApi,
  lookup: DraLookup,
): Promise<ClaimRequestDevice[]> {
  const claim = await claimOf(pod, r, api);
  const ref = `${pod.metadata.namespace}/${claim}`;
  const devices: ClaimRequestDevice[] = [];
  for (const result of requestResults(await lookup.claim(claim), ref, r)) {
    const info = (await lookup.devices(result.driver)).get(`${result.pool}\0${result.device}`);
    const what = `device ${result.device} (driver ${result.driver}, pool ${result.pool}) of ResourceClaim ${ref}`;
    if (!info) {
      throw refused(
        r,
        `${what} is in no ResourceSlice of the pod's node`,
        'the driver must publish the device in a ResourceSlice of this node',
      );
    }
    if (info.deviceId === '') {
      throw refused(
        r,
        `${what} has no ${DRA_DEVICE_ID_ATTRIBUTE} attribute`,
        'name the request of a network device: its driver must publish the device ID in that attribute',
      );
    }
    const place = {
      namespace: pod.metadata.namespace,
      claim,
      driver: result.driver,
      pool: result.pool,
      device: result.device,
    };
    devices.push({
      deviceId: info.deviceId,
      resourceName: info.resourceName,
      ref: place,
      key: deviceKey(claim, result),
    });
  }
  return devices;
}
