/**
 * hotplug/delegate.ts: `POST /delegate`, one delegate's ADD, DEL or CHECK in a running pod sandbox
 * (hot-plug, docs/hotplug.md). The wire format is Multus thick's (`CreateDelegateRequest`):
 *
 *   {"env": {CNI_COMMAND, CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME, CNI_ARGS (K8S_POD_NAMESPACE/NAME/UID)},
 *    "config": "<the delegate's config, base64>",
 *    "interfaceAttributes": {"ips": [...], "mac": "...", "cni-args": {...}}}
 *
 * plus one key of ours, `"network": "[<namespace>/]<nad>"`, naming a NetworkAttachmentDefinition instead of
 * sending a config: the daemon then reads the NAD itself, with namespace isolation as at pod creation (what
 * `multus hotplug` sends). The interface attributes go through the selection parser as one element of the
 * networks annotation, so ips/mac/cni-args are checked and applied exactly as at pod creation. The work is in
 * hotplug/hotplug.ts; this file runs a decoded request (daemon/delegate-http.ts decodes the body): it finds the
 * multus config, the Kubernetes client and the sandbox's links, and answers.
 */
import { CniCode, CniError, messageOf } from '../base/errors.ts';
import { statusNetwork } from '../cni/libcni.ts';
import { parseNetwork } from '../cni/network.ts';
import type { K8sArgs } from '../cni/cniargs.ts';
import type { CallEnv, Env, RequestCommand } from '../cni/request.ts';
import type { CniResult } from '../cni/result-model.ts';
import type { Host } from '../host/host.ts';
import { prepare } from '../host/prepare.ts';
import type { KubeClient } from '../k8s/types.ts';
import type { MultusConf } from '../multus/conf.ts';
import { parseMultusConf } from '../multus/conf.ts';
import type { SandboxLinks } from '../routes/nsenter.ts';
import { checkedPod, hotplugAdd, hotplugCheck, hotplugDel } from './hotplug.ts';
import { mergeConfigArgs } from '../multus/nad.ts';
import type { Delegate } from '../multus/attachments.ts';
import { nadDelegate } from '../multus/podnetworks.ts';
import type { NetworkSelection } from '../multus/selection.ts';
import { checkNamespaceIsolation, parseNetworkSelections } from '../multus/selection.ts';
import { nsenterLinks } from '../routes/nsenter.ts';

/** A decoded `/delegate` request (pure): the env table's fields of the call, and what it plugs in. */
export interface DelegateRequest extends CallEnv {
  /** ADD, DEL, CHECK or STATUS (daemon/delegate-http.ts refuses GC). */
  command: RequestCommand;
  /** What delegates inherit: the daemon's environment with the request's CNI_* variables. */
  env: Env;
  /** The delegate's config bytes (empty when `network` names a NAD). */
  config: Buffer;
  /** Our extension: a NAD reference, `[<namespace>/]<name>`. */
  network: string;
  attributes: { ips?: unknown; mac?: unknown; 'cni-args'?: unknown };
}

/**
 * The selection element the request amounts to, parsed by the annotation parser: `name` is the NAD (or a
 * placeholder when a config was sent), `interface` is CNI_IFNAME, and the interface attributes.
 */
export function selectionOf(req: DelegateRequest, podNamespace: string): NetworkSelection {
  const ref = req.network || 'delegate';
  const slash = ref.indexOf('/');
  const element: Record<string, unknown> = {
    name: slash < 0 ? ref : ref.slice(slash + 1),
    ...(slash < 0 ? {} : { namespace: ref.slice(0, slash) }),
    interface: req.ifName,
  };
  const { ips, mac } = req.attributes;
  const cniArgs = req.attributes['cni-args'];
  if (ips !== undefined && ips !== null) element.ips = ips;
  if (mac !== undefined && mac !== null && mac !== '') element.mac = mac;
  if (cniArgs !== undefined && cniArgs !== null) element['cni-args'] = cniArgs;
  const [selection] = parseNetworkSelections(JSON.stringify([element]), podNamespace);
  return selection!;
}

export interface DelegateDeps {
  host: Host;
  links?: SandboxLinks;
  /** The daemon's stop: aborted after its shutdown grace, it kills the call's running delegate (cni/exec.ts). */
  signal?: AbortSignal;
}

/**
 * One hot-plug call: the decoded request, the multus config the daemon serves, and, for dynamic networks, the pod
 * typed (no CNI_ARGS to parse) and the element of its annotation (instead of the request's attributes).
 */
export interface DelegateCall {
  req: DelegateRequest;
  conf: MultusConf;
  k8s?: K8sArgs;
  selection?: NetworkSelection;
}

/** The multus config the daemon serves, parsed; a TryAgainLater error while it has none. */
export function servedConf(bytes: () => Buffer): MultusConf {
  try {
    return parseMultusConf(bytes());
  } catch (e) {
    throw new CniError(CniCode.TryAgainLater, `the multus daemon has no usable multus config yet: ${messageOf(e)}`);
  }
}

async function delegateFor(
  req: DelegateRequest,
  conf: MultusConf,
  kube: KubeClient,
  podNamespace: string,
  given?: NetworkSelection,
): Promise<Delegate> {
  const sel = given ? { ...given, request: { ...given.request, ifname: req.ifName } } : selectionOf(req, podNamespace);
  if (req.network) {
    if (conf.namespaceIsolation) checkNamespaceIsolation([sel], podNamespace, conf.globalNamespaces);
    const source = given ? 'selection' : 'hotplug';
    return nadDelegate(kube, conf.confDir, sel, 'create it, or name another network', source);
  }
  const loaded = parseNetwork(req.config, { source: 'the /delegate config' });
  const network = sel.request.configArgs ? mergeConfigArgs(loaded, sel.request.configArgs) : loaded;
  return { network, displayName: network.name, request: sel.request, source: 'hotplug' };
}

/**
 * Runs one hot-plug call through the front door (host/prepare.ts); the ADD result (CNI 1.0.0, as Multus thick
 * answers), else null.
 */
export async function runDelegate(call: DelegateCall, deps: DelegateDeps): Promise<CniResult | null> {
  const { req, conf } = call;
  const signal = deps.signal ? { signal: deps.signal } : {};
  const ctx = await prepare(deps.host, { req, conf, env: req.env, ...signal, ...(call.k8s ? { k8s: call.k8s } : {}) });
  if (req.command === 'STATUS') {
    if (req.config.length > 0)
      await statusNetwork(parseNetwork(req.config, { source: 'the /delegate config' }), ctx.net);
    return null;
  }
  const kube = await ctx.kube();
  if (!kube) {
    throw new CniError(
      CniCode.InvalidConfig,
      'hot-plug needs the Kubernetes API: the multus config names no kubeconfig',
      {
        details: 'set "kubeconfig" in the daemon config',
      },
    );
  }
  const hdeps = { kube, links: deps.links ?? nsenterLinks };
  ctx.log.verbose(`/delegate ${req.command} ${req.containerId} ${req.ifName} (${ctx.podRef})`);
  if (req.command === 'ADD') {
    const pod = (await checkedPod(kube, ctx))!;
    const delegate = await delegateFor(req, conf, kube, ctx.k8s.podNamespace, call.selection);
    const result = await hotplugAdd(ctx, pod, delegate, hdeps);
    try {
      return result.as('1.0.0');
    } catch {
      return result.raw; // a 0.1.0/0.2.0 result without an IP has no 1.0.0 form
    }
  }
  if (req.command === 'CHECK') {
    await checkedPod(kube, ctx);
    await hotplugCheck(ctx);
    return null;
  }
  const pod = await checkedPod(kube, ctx, true);
  const fallback = req.config.length > 0 ? await delegateFor(req, conf, kube, ctx.k8s.podNamespace) : undefined;
  await hotplugDel(ctx, pod, fallback, hdeps);
  return null;
}
