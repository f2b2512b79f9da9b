/**
 * nad.ts: a NetworkAttachmentDefinition to a delegate network (pure, except the confDir lookup that an
 * empty spec.config asks for, docs/behaviour.md#nad).
 *
 * spec.config is a single-plugin config or a conflist; a missing `name` gets the NAD's name (docs/behaviour.md#npwg).
 * An empty spec.config means "the config file in confDir whose network name is the NAD's name". The
 * delegate's display name (events, network-status) is `<namespace>/<name>`; the CNI network name (caches,
 * the `name` the plugins see) stays the config's own. The resourceName annotation is carried for device IDs.
 */
import type { Network } from '../cni/network.ts';
import { editNetwork, findNetworkInDir, parseNetwork } from '../cni/network.ts';
import { CniCode, CniError, wrapError } from '../base/errors.ts';
import type { Nad } from '../k8s/types.ts';
import type { AttachmentSource, Delegate } from './attachments.ts';
import type { AttachmentRequest } from './fields.ts';
import { isObject } from '../base/json.ts';

export const RESOURCE_NAME_ANNOTATION = 'k8s.v1.cni.cncf.io/resourceName';

export function networkFromNad(nad: Nad, confDir: string): Network {
  const { name, namespace } = nad.metadata;
  const config = nad.spec?.config;
  if (config === undefined || config === '') {
    try {
      return findNetworkInDir(confDir, name);
    } catch (e) {
      throw wrapError(
        e,
        `NetworkAttachmentDefinition ${namespace}/${name} has an empty spec.config and no config file named "${name}" was found`,
      );
    }
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(config);
  } catch (e) {
    throw new CniError(
      CniCode.InvalidConfig,
      `NetworkAttachmentDefinition ${namespace}/${name}: spec.config is not JSON: ${(e as Error).message}`,
    );
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new CniError(
      CniCode.InvalidConfig,
      `NetworkAttachmentDefinition ${namespace}/${name}: spec.config must be a JSON object (a CNI config or conflist)`,
    );
  }
  return parseNetwork(parsed as Record<string, unknown>, {
    defaultName: name,
    source: `NetworkAttachmentDefinition ${namespace}/${name}`,
  });
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

/** A delegate for one NAD, with the selection's requests (and the NAD's resource name, for device IDs). */
export function delegateFromNad(
  nad: Nad,
  confDir: string,
  request: AttachmentRequest,
  source: AttachmentSource,
): Delegate {
  const loaded = networkFromNad(nad, confDir);
  const network = request.configArgs ? mergeConfigArgs(loaded, request.configArgs) : loaded;
  const resourceName = nad.metadata.annotations?.[RESOURCE_NAME_ANNOTATION];
  return {
    network,
    displayName: `${nad.metadata.namespace}/${nad.metadata.name}`,
    request: resourceName ? { ...request, resourceName } : { ...request },
    source,
  };
}
