/**
 * dra/claim-networks.ts: what a ResourceClaim allocated to our driver asks to attach (pure;
 * docs/behaviour.md#claim-networks).
 *
 * Each result of our driver in `status.allocation.devices.results[]` is one attachment. Its config is the last
 * opaque config of our driver in `status.allocation.devices.config[]` that applies to its request (all requests,
 * or the request or its parent named in `requests`), the DeviceClass's (`FromClass`) first and the claim's
 * (`FromClaim`) after them, so the claim's wins for the same request. Two kinds of config:
 * - ours, `dra.multus.k8s.cni.cncf.io/v1alpha1` `NetworkSelection`: the other keys are one element of the networks
 *   annotation, read by the annotation's own parser (multus/selection.ts), `namespace` defaulting to the claim's;
 * - cni-dra-driver's, `cni.networking.x-k8s.io/v1alpha1` `CNI` (`ifName`, `config`: a CNI config or conflist, as
 *   an object or a JSON or YAML string). An inline config picks a plugin, so a claim's own is honoured only with
 *   `draInlineConfigFromClaims`; a DeviceClass's always (the administrator wrote it). The meta-plugin is refused
 *   either way (multus/nesting.ts).
 * A result on a per-NAD device (device-names.ts) without a config attaches that NAD; a `NetworkSelection` there
 * may add requests, and a name or namespace it sets must be the device's. The device `any` needs a config.
 * Errors come back as data, one per claim request, each saying what to fix; a claim with errors attaches nothing.
 * Tested by test/unit/dra/claim-networks.test.ts.
 */
import { isCniError, messageOf } from '../base/errors.ts';
import { isObject } from '../base/json.ts';
import { validateIfName } from '../base/names.ts';
import type { Network } from '../cni/network.ts';
import { parseNetwork } from '../cni/network.ts';
import type { DraObject } from '../k8s/types.ts';
import { parseYamlSubset } from '../k8s/yaml.ts';
import { DEFAULT_DRA_DRIVER_NAME } from '../multus/conf.ts';
import { assertNoMetaPlugin } from '../multus/nesting.ts';
import type { NetworkSelection } from '../multus/selection.ts';
import { parseSelectionElement } from '../multus/selection.ts';
import { ANY_NETWORK_DEVICE } from './device-names.ts';

export const DEFAULT_DRA_DRIVER = DEFAULT_DRA_DRIVER_NAME;
export const NETWORK_SELECTION_API = 'dra.multus.k8s.cni.cncf.io/v1alpha1';
export const NETWORK_SELECTION_KIND = 'NetworkSelection';
export const CNI_DRA_DRIVER_API = 'cni.networking.x-k8s.io/v1alpha1';
export const CNI_DRA_DRIVER_KIND = 'CNI';

export type ClaimNetworkConfig =
  | { kind: 'nad'; selection: NetworkSelection }
  | { kind: 'inline'; ifName?: string; config: Record<string, unknown>; fromClass: boolean };

export interface ClaimAttachment {
  claim: { namespace: string; name: string; uid: string };
  /** The allocation result's request name. */
  request: string;
  driver: string;
  pool: string;
  device: string;
  shareId?: string;
  config: ClaimNetworkConfig;
}

export interface ClaimNetworkError {
  /** `<namespace>/<name>` */
  claim: string;
  request?: string;
  /** A CamelCase reason, for a condition or an event. */
  reason: string;
  message: string;
}

export interface ClaimNetworkOptions {
  driver: string;
  allowInlineFromClaim: boolean;
  /** The NAD a per-NAD device stands for (from its slice's attributes); undefined when unknown. */
  deviceNetwork?: (pool: string, device: string) => { namespace: string; name: string } | undefined;
}

interface OpaqueConfig {
  fromClass: boolean;
  requests: string[];
  parameters: unknown;
}

interface Result {
  request: string;
  pool: string;
  device: string;
  shareId?: string;
}

const str = (v: unknown): string => (typeof v === 'string' ? v : '');

class Refusal extends Error {
  constructor(
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

/** Every result of `driver` in the claim's allocation, with its config; errors say claim, request and what to fix. */
export function claimNetworks(
  claim: DraObject,
  opts: ClaimNetworkOptions,
): { attachments: ClaimAttachment[]; errors: ClaimNetworkError[] } {
  const namespace = str(claim.metadata?.namespace);
  const name = str(claim.metadata?.name);
  const ref = `${namespace}/${name}`;
  const allocation = isObject(claim.status?.allocation) ? claim.status.allocation.devices : undefined;
  if (!isObject(allocation) || !Array.isArray(allocation.results)) {
    const message = `ResourceClaim ${ref} is not allocated (no status.allocation.devices.results): the scheduler allocates it before the pod starts`;
    return { attachments: [], errors: [{ claim: ref, reason: 'NotAllocated', message }] };
  }
  const results = ourResults(allocation.results, opts.driver);
  const configs = ourConfigs(allocation.config, opts.driver);
  const attachments: ClaimAttachment[] = [];
  const errors: ClaimNetworkError[] = [];
  for (const r of results) {
    try {
      const config = resultConfig(r, configs, { namespace, name }, opts);
      attachments.push({
        claim: { namespace, name, uid: str(claim.metadata?.uid) },
        request: r.request,
        driver: opts.driver,
        pool: r.pool,
        device: r.device,
        ...(r.shareId ? { shareId: r.shareId } : {}),
        config,
      });
    } catch (e) {
      const reason = e instanceof Refusal ? e.reason : 'InvalidConfig';
      const message = `ResourceClaim ${ref} request ${r.request} (device ${r.device}): ${isCniError(e) ? e.msg : messageOf(e)}`;
      errors.push({ claim: ref, request: r.request, reason, message });
    }
  }
  return errors.length > 0 ? { attachments: [], errors } : { attachments, errors };
}

function ourResults(raw: unknown[], driver: string): Result[] {
  const out: Result[] = [];
  for (const r of raw) {
    if (!isObject(r) || r.driver !== driver) continue;
    const shareId = str(r.shareID);
    out.push({ request: str(r.request), pool: str(r.pool), device: str(r.device), ...(shareId ? { shareId } : {}) });
  }
  return out;
}

/** Our driver's opaque configs, the DeviceClass's first, then the claim's (each in its own order). */
function ourConfigs(raw: unknown, driver: string): OpaqueConfig[] {
  if (!Array.isArray(raw)) return [];
  const out: OpaqueConfig[] = [];
  for (const c of raw) {
    if (!isObject(c) || !isObject(c.opaque) || c.opaque.driver !== driver) continue;
    const requests = Array.isArray(c.requests) ? c.requests.filter((x): x is string => typeof x === 'string') : [];
    out.push({ fromClass: c.source === 'FromClass', requests, parameters: c.opaque.parameters });
  }
  return [...out.filter((c) => c.fromClass), ...out.filter((c) => !c.fromClass)];
}

/** Whether a config applies to `request` (a subrequest `main/sub` is also named by `main`). */
function applies(config: OpaqueConfig, request: string): boolean {
  if (config.requests.length === 0) return true;
  return config.requests.includes(request) || config.requests.includes(request.split('/')[0] ?? request);
}

function resultConfig(
  r: Result,
  configs: OpaqueConfig[],
  claim: { namespace: string; name: string },
  opts: ClaimNetworkOptions,
): ClaimNetworkConfig {
  const config = configs.filter((c) => applies(c, r.request)).at(-1);
  const device = r.device === ANY_NETWORK_DEVICE ? undefined : opts.deviceNetwork?.(r.pool, r.device);
  if (r.device !== ANY_NETWORK_DEVICE && !device) {
    throw new Refusal(
      'UnknownDevice',
      `device ${r.device} of pool ${r.pool} is no network of driver ${opts.driver} on this node (no ResourceSlice says which NetworkAttachmentDefinition it is); allocate the device "${ANY_NETWORK_DEVICE}" or a published network device`,
    );
  }
  if (!config) {
    if (device) return { kind: 'nad', selection: { ...device, request: {} } };
    throw new Refusal(
      'NoConfig',
      `no opaque config of driver ${opts.driver} applies to this request, so it names no network; add a ${NETWORK_SELECTION_API} ${NETWORK_SELECTION_KIND} (or a ${CNI_DRA_DRIVER_API} ${CNI_DRA_DRIVER_KIND}) for it to the claim's spec.devices.config or to its DeviceClass`,
    );
  }
  const params = config.parameters;
  if (!isObject(params)) {
    throw new Refusal('InvalidConfig', `the opaque parameters must be an object with an apiVersion and a kind`);
  }
  const api = `${str(params.apiVersion)} ${str(params.kind)}`;
  if (api === `${NETWORK_SELECTION_API} ${NETWORK_SELECTION_KIND}`)
    return selectionConfig(params, claim.namespace, device);
  if (api === `${CNI_DRA_DRIVER_API} ${CNI_DRA_DRIVER_KIND}`) {
    if (device) {
      throw new Refusal(
        'InvalidConfig',
        `device ${r.device} is the network ${device.namespace}/${device.name}; an inline ${CNI_DRA_DRIVER_KIND} config cannot replace it: allocate the device "${ANY_NETWORK_DEVICE}" for an inline config`,
      );
    }
    const inline = inlineConfig(params, config.fromClass, opts.allowInlineFromClaim);
    inlineNetwork(inline.config, claim.name, r.request); // the checks ADD's load makes, made now
    return inline;
  }
  throw new Refusal(
    'InvalidConfig',
    `unknown opaque parameters "${api.trim() || 'no apiVersion and kind'}": write apiVersion ${NETWORK_SELECTION_API} with kind ${NETWORK_SELECTION_KIND}, or apiVersion ${CNI_DRA_DRIVER_API} with kind ${CNI_DRA_DRIVER_KIND}`,
  );
}

function selectionConfig(
  params: Record<string, unknown>,
  namespace: string,
  device: { namespace: string; name: string } | undefined,
): ClaimNetworkConfig {
  const element: Record<string, unknown> = { ...params };
  delete element.apiVersion;
  delete element.kind;
  if (device) {
    for (const key of ['name', 'namespace'] as const) {
      const given = element[key];
      if (given !== undefined && given !== device[key]) {
        throw new Refusal(
          'InvalidConfig',
          `the ${NETWORK_SELECTION_KIND}'s ${key} ${JSON.stringify(given)} is not the device's network ${device.namespace}/${device.name}: drop it or allocate the device "${ANY_NETWORK_DEVICE}"`,
        );
      }
      element[key] = device[key];
    }
  }
  const where = `the opaque ${NETWORK_SELECTION_KIND} config`;
  return { kind: 'nad', selection: parseSelectionElement(element, namespace, 'the element', where) };
}

function inlineConfig(
  params: Record<string, unknown>,
  fromClass: boolean,
  allowFromClaim: boolean,
): Extract<ClaimNetworkConfig, { kind: 'inline' }> {
  if (!fromClass && !allowFromClaim) {
    throw new Refusal(
      'InlineConfigNotAllowed',
      `an inline CNI config in the claim itself picks a plugin on the node, which only the administrator may: put the ${CNI_DRA_DRIVER_KIND} config in the DeviceClass, reference a NetworkAttachmentDefinition with a ${NETWORK_SELECTION_KIND}, or have the administrator set draInlineConfigFromClaims`,
    );
  }
  const ifName = params.ifName;
  if (ifName !== undefined && ifName !== '') {
    if (typeof ifName !== 'string') throw new Refusal('InvalidConfig', `"ifName" must be a string`);
    validateIfName(ifName);
  }
  const config = decodeConfig(params.config);
  return { kind: 'inline', ...(typeof ifName === 'string' && ifName ? { ifName } : {}), config, fromClass };
}

/**
 * The network of an inline config, loaded as a NAD's config is (multus/nad.ts): a missing name is
 * `<claim>-<request>`, and the meta-plugin is refused (multus/nesting.ts).
 */
export function inlineNetwork(config: Record<string, unknown>, claimName: string, request: string): Network {
  const where = `the inline ${CNI_DRA_DRIVER_KIND} config`;
  const network = parseNetwork(config, { defaultName: `${claimName}-${request.replace(/\//g, '-')}`, source: where });
  assertNoMetaPlugin(network, where);
  return network;
}

/** `config`: an object, or a string of JSON or (block) YAML holding one. */
function decodeConfig(raw: unknown): Record<string, unknown> {
  if (isObject(raw)) return raw;
  if (typeof raw !== 'string' || raw.trim() === '') {
    throw new Refusal(
      'InvalidConfig',
      `"config" must be a CNI config or conflist (an object, or a JSON or YAML string)`,
    );
  }
  let value: unknown;
  try {
    value = raw.trim().startsWith('{') ? JSON.parse(raw) : parseYamlSubset(raw);
  } catch (e) {
    throw new Refusal('InvalidConfig', `"config" is not JSON or plain block YAML (${messageOf(e)}): write it as JSON`);
  }
  if (!isObject(value)) throw new Refusal('InvalidConfig', `"config" must hold an object (a CNI config or conflist)`);
  return value;
}
