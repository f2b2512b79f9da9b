/**
 * daemon/delegate-http.ts: the HTTP side of `POST /delegate` (docs/hotplug.md): body limit, decoding, the
 * per-container queue (a hot-plug request waits behind that container's CNI calls and they behind it), and
 * the answer: 200 `{"Result": ...}` (null except for ADD), or the CNI error JSON with 400 (codes 1-8) or 500.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { CniCode, CniError } from '../base/errors.ts';
import type { DelegateApiDeps, DelegateRequest } from './hotplug-api.ts';
import { decodeDelegateBody, delegateError, runDelegate } from './hotplug-api.ts';
import type { ServerDeps } from './server.ts';
import { errorBody, readBody, send, statusOf } from './server.ts';

export interface DelegateHttpDeps extends ServerDeps {
  multusConf: () => Buffer;
  limit: number;
  links?: DelegateApiDeps['links'];
}

let anonymous = 0;

export async function serveDelegate(req: IncomingMessage, res: ServerResponse, deps: DelegateHttpDeps): Promise<void> {
  const started = performance.now();
  const body = await readBody(req, deps.limit);
  if (body === 'too-large') {
    send(
      res,
      413,
      errorBody(new CniError(CniCode.InvalidConfig, `the request body is larger than ${deps.limit} bytes`)),
    );
    return;
  }
  let call: DelegateRequest;
  try {
    call = decodeDelegateBody(body, deps.daemonEnv);
  } catch (e) {
    const error = delegateError(e);
    send(res, statusOf(error.code), errorBody(error));
    return;
  }
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
    const error = delegateError(e);
    deps.log.error(
      `/delegate ${call.command} ${call.containerId} ${call.ifName}: ${error.msg}` +
        (error.details ? ` (${error.details})` : ''),
    );
    send(res, statusOf(error.code), errorBody(error));
  }
}
