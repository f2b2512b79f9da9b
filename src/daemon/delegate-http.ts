/**
 * daemon/delegate-http.ts: the HTTP side of `POST /delegate` (docs/hotplug.md): body limit, decoding, the
 * per-container queue (a hot-plug request waits behind that container's CNI calls and they behind it), and
 * the answer: 200 `{"Result": ...}` (null except for ADD), or the CNI error JSON with 400 (codes 1-8) or 500.
 * The wire format is Multus thick's (`CreateDelegateRequest`):
 *
 *   {"env": {CNI_COMMAND, CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME, CNI_ARGS (K8S_POD_NAMESPACE/NAME/UID)},
 *    "config": "<the delegate's config, base64>",
 *    "interfaceAttributes": {"ips": [...], "mac": "...", "cni-args": {...}}}
 *
 * plus one key of ours, `"network": "[<namespace>/]<nad>"`, naming a NetworkAttachmentDefinition instead of
 * sending a config: the daemon then reads the NAD itself, with namespace isolation as at pod creation (what
 * `multus hotplug` sends). This is the door's edge: the wire is decoded here into a typed hot-plug call
 * (`delegateCallOf`); the interface attributes go through the annotation's element parser, so ips/mac/cni-args
 * are checked and applied exactly as at pod creation; hotplug/delegate.ts runs the call.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { CniCode, CniError, toCniError } from '../base/errors.ts';
import type { Logger } from '../base/log.ts';
import type { Host } from '../host/host.ts';
import type { DoorInput } from '../multus/call-context.ts';
import type { MultusConf } from '../multus/conf.ts';
import type { NetworkSelection } from '../multus/selection.ts';
import { NETWORKS_ANNOTATION, parseSelectionElement } from '../multus/selection.ts';
import { isObject } from '../base/json.ts';
import type { CallEnv, Env, RequestCommand } from '../cni/request.ts';
import { parseCniArgs, parseK8sArgs } from '../cni/cniargs.ts';
import { readCallEnv } from '../cni/request.ts';
import type { DelegateCall, DelegateDeps } from '../hotplug/delegate.ts';
import { runDelegate, servedConf } from '../hotplug/delegate.ts';
import type { RequestQueue } from './queue.ts';
import { cniCallOf, decodeBodyObject, readRequest, send, sendError } from './wire.ts';

export interface DelegateHttpDeps {
  host: Host;
  daemonEnv: Env;
  log: Logger;
  queue: RequestQueue;
  multusConf: () => Buffer;
  limit: number;
  links?: DelegateDeps['links'];
  signal?: AbortSignal;
}

/** A decoded `/delegate` request, the wire: the env table's fields, and what it plugs in. */
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
 * The selection element the request amounts to, read by the annotation's element parser: `name` is the NAD (or a
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
  return parseSelectionElement(element, podNamespace, 'element 0', NETWORKS_ANNOTATION);
}

/** The `/delegate` door's edge: the wire request as a hot-plug call, CNI_ARGS and the attributes parsed here. */
export function delegateCallOf(req: DelegateRequest, conf: MultusConf): DelegateCall {
  const runtimePairs = parseCniArgs(req.args);
  const pod = parseK8sArgs(runtimePairs);
  const input: DoorInput = {
    op: req.command,
    sandbox: { containerId: req.containerId, netns: req.netns, ifName: req.ifName, pod },
    conf,
    env: req.env,
    runtimePairs,
    netnsOverride: req.netnsOverride,
  };
  const selection =
    req.command === 'STATUS' ? { name: '', namespace: '', request: {} } : selectionOf(req, pod.podNamespace);
  return { input, network: req.network, config: req.config, selection, source: 'hotplug' };
}

/** The commands `/delegate` runs (Multus thick's HandleDelegateRequest: no GC). */
const COMMANDS: readonly RequestCommand[] = ['ADD', 'DEL', 'CHECK', 'STATUS'];
/** What `/delegate` requires besides the command (Multus thick's): the pod sandbox and the pod, no CNI_PATH. */
const REQUIRED_ENV = ['CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME', 'CNI_ARGS'];

/** Decodes and checks a `/delegate` body; a CniError says what is wrong. */
export function decodeDelegateBody(body: Buffer, daemonEnv: Env): DelegateRequest {
  const value = decodeBodyObject(body);
  const { env, stdin } = cniCallOf(value, daemonEnv);
  // any case is accepted here (Multus thick's switch is case-sensitive): a lenient reading kept from the start
  const command = (env.CNI_COMMAND ?? '').toUpperCase() as RequestCommand;
  if (!COMMANDS.includes(command)) {
    throw new CniError(
      CniCode.InvalidEnv,
      `/delegate: CNI_COMMAND must be one of ${COMMANDS.join(', ')}, got "${env.CNI_COMMAND ?? ''}"`,
    );
  }
  const attributes = value.interfaceAttributes ?? {};
  if (!isObject(attributes)) {
    throw new CniError(
      CniCode.DecodingFailure,
      '/delegate: "interfaceAttributes" must be an object {"ips", "mac", "cni-args"}',
    );
  }
  const network = value.network ?? '';
  if (typeof network !== 'string')
    throw new CniError(CniCode.DecodingFailure, '/delegate: "network" must be a string "[<namespace>/]<nad>"');
  const callEnv = readCallEnv(command, env, command === 'STATUS' ? [] : REQUIRED_ENV);
  if (stdin.length === 0 && network === '' && command === 'ADD') {
    throw new CniError(
      CniCode.InvalidConfig,
      '/delegate: send the delegate\'s config ("config", base64) or a NAD ("network")',
    );
  }
  return { command, env, ...callEnv, config: stdin, network, attributes };
}

let anonymous = 0;

export async function serveDelegate(req: IncomingMessage, res: ServerResponse, deps: DelegateHttpDeps): Promise<void> {
  const started = performance.now();
  const call = await readRequest(req, res, deps.limit, (body) => decodeDelegateBody(body, deps.daemonEnv));
  if (!call) return;
  const key = call.containerId === '' ? `\0delegate${anonymous++}` : call.containerId;
  const api: DelegateDeps = {
    host: deps.host,
    ...(deps.links ? { links: deps.links } : {}),
    ...(deps.signal ? { signal: deps.signal } : {}),
  };
  try {
    const result = await deps.queue.run(key, () => runDelegate(delegateCallOf(call, servedConf(deps.multusConf)), api));
    const ms = (performance.now() - started).toFixed(1);
    deps.log.verbose(`/delegate ${call.command} ${call.containerId} ${call.ifName}: 200 in ${ms} ms`);
    send(res, 200, JSON.stringify({ Result: result }));
  } catch (e) {
    const error = toCniError(e);
    deps.log.error(
      `/delegate ${call.command} ${call.containerId} ${call.ifName}: ${error.msg}` +
        (error.details ? ` (${error.details})` : ''),
    );
    sendError(res, error);
  }
}
