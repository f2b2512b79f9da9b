/**
 * hotplug/delegate.ts: one hot-plug call, one delegate's ADD, DEL, CHECK or STATUS in a running pod sandbox
 * (docs/hotplug.md), given as typed data (`DelegateCall`: the door's input, the NAD or config to plug, its selection
 * element) by its two doors: `POST /delegate` (daemon/delegate-http.ts decodes Multus thick's
 * `CreateDelegateRequest` at its edge, CNI_ARGS and the interface attributes included) and dynamic networks
 * (hotplug/dynamic.ts, from the pod it watches). It runs through the front door (host/prepare.ts: the container's
 * lock among its rules), checks namespace isolation with ADD's rule and message (multus/pod-delegates.ts), reads the
 * NAD, and hands the work to hotplug/hotplug.ts.
 */
import { CniCode, CniError, messageOf } from '../base/errors.ts';
import { statusNetwork } from '../cni/libcni.ts';
import { parseNetwork } from '../cni/network.ts';
import type { CniResult } from '../cni/result-model.ts';
import type { Host } from '../host/host.ts';
import { prepare } from '../host/prepare.ts';
import type { CallContext, DoorInput } from '../multus/call-context.ts';
import type { KubeClient, Pod } from '../k8s/types.ts';
import type { MultusConf } from '../multus/conf.ts';
import { parseMultusConf } from '../multus/conf.ts';
import type { SandboxLinks } from '../routes/nsenter.ts';
import { checkedPod, hotplugAdd, hotplugCheck, hotplugDel, readSandboxCache } from './hotplug.ts';
import { mergeConfigArgs } from '../multus/nad.ts';
import type { AttachmentSource, Delegate } from '../multus/attachments.ts';
import { nadDelegate } from '../multus/podnetworks.ts';
import type { NetworkSelection } from '../multus/selection.ts';
import { assertIsolation, deviceWants, newSink, withDevices } from '../multus/pod-delegates.ts';
import { fromCachedDelegates } from '../multus/attachments.ts';
import { gatherDevices } from '../devices/attachment-devices.ts';
import { nsenterLinks } from '../routes/nsenter.ts';

export interface DelegateDeps {
  host: Host;
  links?: SandboxLinks;
  /** The daemon's stop: aborted after its shutdown grace, it kills the call's running delegate (cni/exec.ts). */
  signal?: AbortSignal;
}

/**
 * One hot-plug call as typed data: the door's input (the operation, the sandbox with its pod, the multus config
 * the daemon serves) and what it plugs in: a NAD by name, or a delegate's config, with its selection element.
 */
export interface DelegateCall {
  input: DoorInput;
  /** A NAD reference, `[<namespace>/]<name>`, or '' when `config` is the delegate. */
  network: string;
  /** The delegate's config bytes (empty when `network` names a NAD). */
  config: Buffer;
  /** The element: the request's interface attributes, or the pod's annotation element (dynamic networks). */
  selection: NetworkSelection;
  /** `hotplug` for `/delegate`, `selection` for dynamic networks (the pod's annotation). */
  source: AttachmentSource;
}

/** The multus config the daemon serves, parsed; a TryAgainLater error while it has none. */
export function servedConf(bytes: () => Buffer): MultusConf {
  try {
    return parseMultusConf(bytes());
  } catch (e) {
    throw new CniError(CniCode.TryAgainLater, `the multus daemon has no usable multus config yet: ${messageOf(e)}`);
  }
}

async function delegateFor(call: DelegateCall, ctx: CallContext, kube: KubeClient): Promise<Delegate> {
  const { conf, sandbox } = ctx;
  const sel = { ...call.selection, request: { ...call.selection.request, ifname: sandbox.ifName } };
  if (call.network) {
    // the rule every door keeps, with its one message (multus/pod-delegates.ts)
    assertIsolation(conf, { metadata: { namespace: sandbox.pod.podNamespace, name: sandbox.pod.podName } }, sel);
    return nadDelegate(kube, conf.confDir, sel, 'create it, or name another network', call.source);
  }
  const loaded = parseNetwork(call.config, { source: 'the /delegate config' });
  const network = sel.request.configArgs ? mergeConfigArgs(loaded, sel.request.configArgs) : loaded;
  return { network, displayName: network.name, request: sel.request, source: 'hotplug' };
}

/**
 * docs/hotplug.md: a hot-plugged attachment gets its device as a pod's ADD gives them (the same gathering and
 * assignment, devices/attachment-devices.ts), never one the pod's attachments already hold (its scratch cache).
 */
async function withDevice(ctx: CallContext, kube: KubeClient, pod: Pod, delegate: Delegate): Promise<Delegate> {
  const wants = deviceWants([delegate]);
  if (!wants[0]!.resourceName && !wants[0]!.claim) return delegate;
  const facts = await gatherDevices(wants, pod, kube, ctx);
  const held = fromCachedDelegates(readSandboxCache(ctx)).flatMap((d) =>
    d.request.deviceID ? [d.request.deviceID] : [],
  );
  const sink = newSink();
  const [assigned] = withDevices([delegate], facts, pod, sink, new Set(held));
  if (sink.errors[0]) throw sink.errors[0];
  return assigned!;
}

/**
 * Runs one hot-plug call through the front door (host/prepare.ts); the ADD result (CNI 1.0.0, as Multus thick
 * answers), else null.
 */
export async function runDelegate(call: DelegateCall, deps: DelegateDeps): Promise<CniResult | null> {
  const input = deps.signal ? { ...call.input, signal: deps.signal } : call.input;
  return prepare(deps.host, input, (ctx) => runPrepared(call, ctx, deps));
}

async function runPrepared(call: DelegateCall, ctx: CallContext, deps: DelegateDeps): Promise<CniResult | null> {
  const { op, sandbox } = ctx;
  if (op === 'STATUS') {
    if (call.config.length > 0) await statusNetwork(parseNetwork(call.config, { source: 'the /delegate config' }), ctx);
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
  ctx.log.verbose(`/delegate ${op} ${sandbox.containerId} ${sandbox.ifName} (${ctx.podRef})`);
  if (op === 'ADD') {
    const pod = (await checkedPod(kube, ctx))!;
    const delegate = await withDevice(ctx, kube, pod, await delegateFor(call, ctx, kube));
    const result = await hotplugAdd(ctx, pod, delegate, hdeps);
    try {
      return result.as('1.0.0');
    } catch {
      return result.raw; // a 0.1.0/0.2.0 result without an IP has no 1.0.0 form
    }
  }
  if (op === 'CHECK') {
    await checkedPod(kube, ctx);
    await hotplugCheck(ctx);
    return null;
  }
  const pod = await checkedPod(kube, ctx, true);
  const fallback = call.config.length > 0 ? await delegateFor(call, ctx, kube) : undefined;
  await hotplugDel(ctx, pod, fallback, hdeps);
  return null;
}
