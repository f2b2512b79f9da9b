/**
 * selection-devices.ts: the two device keys of a JSON selection element, checked (pure, no I/O).
 *
 * `"resourceName": "<prefix>/<name>"` picks the device pool of one attachment (Multus PR #1520;
 * docs/behaviour.md#device-pool). `"resourceClaim": {"claimName": "...", "requestName": "..."}` names the DRA
 * claim request whose allocated device the attachment takes (KubeVirt VEP-427's field names;
 * docs/behaviour.md#claim-request). Here only their shape is checked; whether the pool or the request exists is
 * for the device lookup at ADD (devices/attachment-devices.ts). The caller wraps a problem into its message.
 */
import type { AttachmentRequest } from './fields.ts';
import { isObject } from '../base/json.ts';

/** What is wrong with an element's device keys: the core of the message and what to write instead. */
export interface DeviceKeyProblem {
  core: string;
  fix: string;
}

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const QUALIFIED_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const CLAIM_KEYS = ['claimName', 'requestName'] as const;

/** An extended resource name as the kubelet and DRA's resourceName attribute use it: `<domain>/<name>`. */
function resourceNameProblem(name: string): DeviceKeyProblem | undefined {
  const slash = name.indexOf('/');
  const prefix = name.slice(0, Math.max(slash, 0));
  const rest = name.slice(slash + 1);
  const ok =
    slash > 0 &&
    prefix.length <= 253 &&
    DNS1123_SUBDOMAIN.test(prefix) &&
    rest.length <= 63 &&
    QUALIFIED_NAME.test(rest);
  if (ok) return undefined;
  return {
    core: `"resourceName" ${JSON.stringify(name)} is not a device pool name`,
    fix: 'give the resource name a device plugin or DRA driver advertises, <domain>/<name> such as "intel.com/sriov"',
  };
}

/** `{claimName, requestName}`: both DNS labels (a request may name a subrequest as `<request>/<subrequest>`). */
function claimRequestProblem(claim: Record<string, unknown>): DeviceKeyProblem | undefined {
  const fix =
    'write "resourceClaim": {"claimName": "<the pod\'s spec.resourceClaims[].name>", "requestName": "<a request of that claim>"}';
  const unknown = Object.keys(claim).filter((k) => !(CLAIM_KEYS as readonly string[]).includes(k));
  if (unknown.length > 0) return { core: `"resourceClaim" has unknown key ${JSON.stringify(unknown[0])}`, fix };
  for (const key of CLAIM_KEYS) {
    const value = claim[key];
    if (typeof value !== 'string' || value === '') {
      return {
        core: `"resourceClaim" needs "${key}" as a non-empty string, got ${JSON.stringify(value) ?? 'none'}`,
        fix,
      };
    }
    const parts = value.split('/');
    const shaped = key === 'requestName' ? parts.length <= 2 : parts.length === 1;
    if (!shaped || !parts.every((p) => p.length <= 63 && DNS1123_LABEL.test(p))) {
      return { core: `"resourceClaim" "${key}" ${JSON.stringify(value)} is not a DNS-1123 label`, fix };
    }
  }
  return undefined;
}

/** The first problem of an element's `resourceName` / `resourceClaim`, or undefined when they are fine or absent. */
export function deviceKeyProblem(request: AttachmentRequest): DeviceKeyProblem | undefined {
  const { resourceNameRequest: pool, claimRequest: claim } = request;
  if (pool !== undefined && claim !== undefined) {
    return {
      core: 'the element has both "resourceName" and "resourceClaim"',
      fix: 'keep one: "resourceName" takes the next device of a pool, "resourceClaim" the device of one claim request',
    };
  }
  if (pool !== undefined) return resourceNameProblem(pool);
  if (claim !== undefined) return isObject(claim) ? claimRequestProblem(claim) : undefined;
  return undefined;
}
