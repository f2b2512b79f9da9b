/**
 * nad.ts: a NetworkAttachmentDefinition to a delegate network (pure, except the confDir lookup that an
 * empty spec.config asks for, docs/behaviour.md#nad).
 *
 * spec.config is a single-plugin config or a conflist; a missing `name` gets the NAD's name (docs/behaviour.md#npwg).
 * An empty spec.config means "the config file in confDir whose network name is the NAD's name". The
 * delegate's display name (events, network-status) is `<namespace>/<name>`; the CNI network name (caches,
 * the `name` the plugins see) stays the config's own. The resourceName annotation (or a selection element's pool,
 * checked against the NAD's annotations) is carried for device IDs.
 */
import type { Network } from '../cni/network.ts';
import { editNetwork, findNetworkInDir, parseNetwork } from '../cni/network.ts';
import { CniCode, CniError, wrapError } from '../base/errors.ts';
import type { Nad } from '../k8s/types.ts';
import type { AttachmentSource, Delegate } from './attachments.ts';
import type { AttachmentRequest } from './fields.ts';
import { isObject } from '../base/json.ts';
import { jsonSyntaxMessage } from '../base/json-syntax.ts';
import { assertNoMetaPlugin } from './nesting.ts';

export const RESOURCE_NAME_ANNOTATION = 'k8s.v1.cni.cncf.io/resourceName';
/** Multus #1520: the pools a selection element's `resourceName` may pick for this NAD (comma-separated). */
export const ALLOWED_RESOURCE_NAMES_ANNOTATION = 'k8s.v1.cni.cncf.io/allowedResourceNames';

export function networkFromNad(nad: Nad, confDir: string): Network {
  const { name, namespace } = nad.metadata;
  const config = nad.spec?.config;
  if (config === undefined || config === '') {
    let network: Network;
    try {
      network = findNetworkInDir(confDir, name);
    } catch (e) {
      throw wrapError(
        e,
        `NetworkAttachmentDefinition ${namespace}/${name} has an empty spec.config and no config file named "${name}" was found`,
      );
    }
    assertNoMetaPlugin(network, `the config file of NetworkAttachmentDefinition ${namespace}/${name}`);
    return network;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(config);
  } catch {
    throw new CniError(
      CniCode.InvalidConfig,
      `NetworkAttachmentDefinition ${namespace}/${name}: spec.config is not JSON: ${jsonSyntaxMessage(config)}`,
    );
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new CniError(
      CniCode.InvalidConfig,
      `NetworkAttachmentDefinition ${namespace}/${name}: spec.config must be a JSON object (a CNI config or conflist)`,
    );
  }
  const network = parseNetwork(parsed as Record<string, unknown>, {
    defaultName: name,
    source: `NetworkAttachmentDefinition ${namespace}/${name}`,
  });
  assertNoMetaPlugin(network, `NetworkAttachmentDefinition ${namespace}/${name}`);
  return network;
}

/**
 * The selection's `cni-args` merged into `args.cni` of the config, or of every plugin of a conflist
 * (docs/behaviour.md#delegate-config):
 * existing keys kept, the selection wins on the same key. A non-object `args` or `args.cni` is a clear error
 * (Multus panics). Returns a new network; the bytes (cached for DEL) carry the merged args.
 */
export function mergeConfigArgs(network: Network, configArgs: Record<string, unknown>): Network {
  return editNetwork(network, (conf) => {
    const targets = network.isList ? (conf.plugins as Record<string, unknown>[]) : [conf];
    for (const [index, target] of targets.entries()) {
      const where = network.isList ? `plugin ${index} of network "${network.name}"` : `network "${network.name}"`;
      const args = target.args ?? {};
      if (!isObject(args))
        throw new CniError(CniCode.InvalidConfig, `cannot merge cni-args: "args" of ${where} is not an object`);
      const cni = args.cni ?? {};
      if (!isObject(cni))
        throw new CniError(CniCode.InvalidConfig, `cannot merge cni-args: "args.cni" of ${where} is not an object`);
      target.args = { ...args, cni: { ...cni, ...configArgs } };
    }
  });
}

/** A pool the NAD refuses for a selection element; `reason` is the Warning event's (docs/behaviour.md#device-pool). */
export class PoolRefused extends CniError {
  constructor(
    readonly reason: 'ResourceNameConflict' | 'ResourceNameNotAllowed',
    msg: string,
    details: string,
  ) {
    super(CniCode.InvalidConfig, msg, { details });
  }
}

/**
 * docs/behaviour.md#device-pool: the pool of one attachment. Without an element `resourceName`, the NAD's
 * annotation (as Multus). With one: it must be on the NAD's `allowedResourceNames` list when the NAD has that
 * list; without the list it may not differ from the NAD's `resourceName` annotation (Multus #1520's check).
 */
function attachmentPool(nad: Nad, requested: string | undefined): string | undefined {
  const annotations = nad.metadata.annotations ?? {};
  const own = annotations[RESOURCE_NAME_ANNOTATION] || undefined;
  if (requested === undefined) return own;
  const network = `${nad.metadata.namespace}/${nad.metadata.name}`;
  const listed = annotations[ALLOWED_RESOURCE_NAMES_ANNOTATION];
  if (listed !== undefined) {
    const allowed = listed
      .split(',')
      .map((n) => n.trim())
      .filter((n) => n !== '');
    if (allowed.includes(requested)) return requested;
    throw new PoolRefused(
      'ResourceNameNotAllowed',
      `resourceName ${JSON.stringify(requested)} of the selection element for network ${network} is not in the NAD's ${ALLOWED_RESOURCE_NAMES_ANNOTATION} (${allowed.join(', ') || 'empty'})`,
      `ask for one of the allowed pools, or add "${requested}" to the NAD's ${ALLOWED_RESOURCE_NAMES_ANNOTATION}`,
    );
  }
  if (own !== undefined && own !== requested) {
    throw new PoolRefused(
      'ResourceNameConflict',
      `conflicting resourceName for network ${network}: NAD annotation ${JSON.stringify(own)} does not match NetworkSelectionElement request ${JSON.stringify(requested)}`,
      `drop "resourceName" from the element, or list the pools this network may use in the NAD's ${ALLOWED_RESOURCE_NAMES_ANNOTATION}`,
    );
  }
  return requested;
}

/** A delegate for one NAD, with the selection's requests (and the attachment's pool, for device IDs). */
export function delegateFromNad(
  nad: Nad,
  confDir: string,
  request: AttachmentRequest,
  source: AttachmentSource,
): Delegate {
  const resourceName = attachmentPool(nad, request.resourceNameRequest);
  const loaded = networkFromNad(nad, confDir);
  const network = request.configArgs ? mergeConfigArgs(loaded, request.configArgs) : loaded;
  return {
    network,
    displayName: `${nad.metadata.namespace}/${nad.metadata.name}`,
    request: resourceName ? { ...request, resourceName } : { ...request },
    source,
  };
}
