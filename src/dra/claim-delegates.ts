/**
 * dra/claim-delegates.ts: the pod's claim networks for multus' resolver (multus/claim-attach.ts
 * `ClaimNetworkSource`; docs/behaviour.md#claim-networks). Loaded only by a call with `draNetworks` for a pod with
 * DRA claims.
 *
 * `serveClaimNetworks` (the resident daemon's): each of the pod's claims (the reads devices/dra.ts makes, shared
 * with its device lookup: one GET per claim, one slice LIST for our driver only when a per-NAD device is
 * allocated), in `spec.resourceClaims` order, through `claimNetworks` (claim-networks.ts); an inline config is
 * loaded here, so the refusals a NAD's config meets apply. `refuseClaimNetworks` (the thin plugin's): a claim of
 * our driver is an error (code 11) saying that claim networks need the resident daemon, so the runtime retries until
 * the daemon is back (the shim's thin fallback serves while it restarts).
 * Tested by test/unit/dra/claim-delegates.test.ts, test/k8s/dra-networks.test.ts.
 */
import { CniCode, CniError } from '../base/errors.ts';
import { isObject } from '../base/json.ts';
import type { DraObject, Pod } from '../k8s/types.ts';
import { currentClaims } from '../devices/dra.ts';
import type { ClaimNetwork, ClaimNetworkSource, ClaimSourceDeps } from '../multus/claim-attach.ts';
import type { MultusConf } from '../multus/conf.ts';
import { claimNetworks, inlineNetwork } from './claim-networks.ts';
import { ANY_NETWORK_DEVICE, DRA_NAME_ATTRIBUTE, DRA_NAMESPACE_ATTRIBUTE } from './device-names.ts';

const str = (v: unknown): string => (typeof v === 'string' ? v : '');

/** The results of `driver` in a claim's allocation (none when it is not allocated). */
function resultsOf(claim: DraObject, driver: string): Record<string, unknown>[] {
  const devices = isObject(claim.status?.allocation) ? claim.status.allocation.devices : undefined;
  const results = isObject(devices) && Array.isArray(devices.results) ? devices.results : [];
  return results.filter((r): r is Record<string, unknown> => isObject(r) && r.driver === driver);
}

/** The pod's claims that have results of our driver, in `spec.resourceClaims` order. */
async function ourClaims(pod: Pod, conf: MultusConf, deps: ClaimSourceDeps): Promise<DraObject[]> {
  const { claims } = await currentClaims(pod, deps.kube, deps.log);
  const out: DraObject[] = [];
  for (const name of claims.names) {
    const claim = await deps.lookup.claim(name);
    if (resultsOf(claim, conf.draDriverName).length > 0) out.push(claim);
  }
  return out;
}

/** The NAD a per-NAD device stands for, from its slice's attributes (dra/device-names.ts). */
async function deviceNetworks(
  claims: DraObject[],
  driver: string,
  deps: ClaimSourceDeps,
): Promise<(pool: string, device: string) => { namespace: string; name: string } | undefined> {
  const needed = claims.some((c) => resultsOf(c, driver).some((r) => r.device !== ANY_NETWORK_DEVICE));
  if (!needed) return () => undefined;
  const devices = await deps.lookup.devices(driver);
  return (pool, device) => {
    const attrs = devices.get(`${pool}\0${device}`)?.attributes ?? {};
    const value = (name: string) => (isObject(attrs[name]) ? str(attrs[name].string) : '');
    const namespace = value(DRA_NAMESPACE_ATTRIBUTE);
    const name = value(DRA_NAME_ATTRIBUTE);
    return namespace && name ? { namespace, name } : undefined;
  };
}

export const serveClaimNetworks: ClaimNetworkSource = async (pod, conf, deps) => {
  const driver = conf.draDriverName;
  const claims = await ourClaims(pod, conf, deps);
  const deviceNetwork = await deviceNetworks(claims, driver, deps);
  const networks: ClaimNetwork[] = [];
  const errors: CniError[] = [];
  for (const claim of claims) {
    const found = claimNetworks(claim, { driver, allowInlineFromClaim: conf.draInlineConfigFromClaims, deviceNetwork });
    for (const e of found.errors) {
      const code = e.reason === 'NotAllocated' ? CniCode.TryAgainLater : CniCode.InvalidConfig;
      errors.push(new CniError(code, `pod ${pod.metadata.namespace}/${pod.metadata.name}: ${e.message}`));
    }
    for (const a of found.attachments) {
      const ref = {
        namespace: a.claim.namespace,
        claim: a.claim.name,
        uid: a.claim.uid,
        request: a.request,
        driver: a.driver,
        pool: a.pool,
        device: a.device,
        ...(a.shareId ? { shareId: a.shareId } : {}),
      };
      if (a.config.kind === 'nad') networks.push({ ref, selection: a.config.selection });
      else {
        const network = inlineNetwork(a.config.config, a.claim.name, a.request);
        networks.push({ ref, network, ...(a.config.ifName ? { ifName: a.config.ifName } : {}) });
      }
    }
  }
  return { networks, errors };
};

export const refuseClaimNetworks: ClaimNetworkSource = async (pod, conf, deps) => {
  const claims = await ourClaims(pod, conf, deps);
  if (claims.length === 0) return { networks: [], errors: [] };
  const names = claims.map((c) => `${str(c.metadata?.namespace)}/${str(c.metadata?.name)}`).join(', ');
  const error = new CniError(
    CniCode.TryAgainLater,
    `pod ${pod.metadata.namespace}/${pod.metadata.name}: ResourceClaim ${names} asks for networks of DRA driver ${conf.draDriverName}, which only the resident daemon attaches (draNetworks: true); this call came to the thin plugin`,
    {
      details:
        'the runtime retries the sandbox: start the multus daemon (or wait until it is back); on a node without it, claims of this driver cannot be served',
    },
  );
  return { networks: [], errors: [error] };
};
