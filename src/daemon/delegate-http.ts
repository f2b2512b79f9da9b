/**
 * daemon/delegate-http.ts: the HTTP side of `POST /delegate` (docs/hotplug.md): body limit, decoding, the
 * per-container queue (a hot-plug request waits behind that container's CNI calls and they behind it), and
 * the answer: 200 `{"Result": ...}` (null except for ADD), or the CNI error JSON with 400 (codes 1-8) or 500.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { CniCode, CniError, toCniError } from '../base/errors.ts';
import type { Logger } from '../base/log.ts';
import type { Host } from '../host/host.ts';
import { isObject } from '../base/json.ts';
import type { Env, RequestCommand } from '../cni/request.ts';
import { readCallEnv } from '../cni/request.ts';
import type { DelegateDeps, DelegateRequest } from '../hotplug/delegate.ts';
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
    const result = await deps.queue.run(key, () => runDelegate({ req: call, conf: servedConf(deps.multusConf) }, api));
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
