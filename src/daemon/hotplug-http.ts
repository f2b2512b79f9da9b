/**
 * daemon/hotplug-http.ts: the HTTP side of `POST /delegate` (docs/hotplug.md): body limit, decoding, the
 * per-container queue (a hot-plug request waits behind that container's CNI calls and they behind it), and
 * the answer: 200 `{"Result": ...}` (null except for ADD), or the CNI error JSON with 400 (codes 1-8) or 500.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { toCniError } from '../base/errors.ts';
import type { Logger } from '../base/log.ts';
import type { Env } from '../cni/request.ts';
import type { Host } from '../host/host.ts';
import type { DelegateApiDeps } from './hotplug-api.ts';
import { decodeDelegateBody, runDelegate } from './hotplug-api.ts';
import type { RequestQueue } from './queue.ts';
import { readRequest, send, sendError } from './wire.ts';

export interface DelegateHttpDeps {
  host: Host;
  daemonEnv: Env;
  log: Logger;
  queue: RequestQueue;
  multusConf: () => Buffer;
  limit: number;
  links?: DelegateApiDeps['links'];
}

let anonymous = 0;

export async function serveDelegate(req: IncomingMessage, res: ServerResponse, deps: DelegateHttpDeps): Promise<void> {
  const started = performance.now();
  const call = await readRequest(req, res, deps.limit, (body) => decodeDelegateBody(body, deps.daemonEnv));
  if (!call) return;
  const key = call.containerId === '' ? `\0delegate${anonymous++}` : call.containerId;
  const api: DelegateApiDeps = {
    host: deps.host,
    multusConf: deps.multusConf,
    ...(deps.links ? { links: deps.links } : {}),
  };
  try {
    const result = await deps.queue.run(key, () => runDelegate(call, api));
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
