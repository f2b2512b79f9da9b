/**
 * daemon/server.ts: the resident daemon's HTTP API on a unix socket (I/O at the edge, handle() inside).
 *
 * Multus thick's wire format (docs/resident.md): `POST /cni` with `{"env": {...}, "config": <base64>}` runs one
 * CNI call through `handle()` and answers 200 `{"Result": <result or null>}`, or a non-200 status with the CNI
 * error JSON (its code kept): 400 when the request itself is at fault (codes 1-8: version, env, decoding,
 * config, netns), 500 otherwise. `GET`/`POST /healthz` answer 200 when the daemon is ready, else 503.
 * `GET`/`POST /readyz` (k8snetworkplumbingwg/multus-cni#1525, after v4.3.0; its shim polls it before ADD, CHECK, GC and
 * STATUS, and /healthz
 * before DEL) answers as /healthz while serving and 500 once the daemon is stopping; /healthz stays 200 while it
 * drains, so DELs still come in. Both Multus' shims and ours only look at "200 or not" and at the body, so the
 * split 400/500 is for people and logs.
 *
 * The request's CNI_* variables are layered over the daemon's own environment (what delegates inherit), as
 * Multus thick builds the call from the request's CNI_* values and runs delegates with its own environment.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer } from 'node:http';
import { CniCode, CniError, messageOf } from '../base/errors.ts';
import type { Logger } from '../base/log.ts';
import type { Env } from '../cni/request.ts';
import type { CniAnswer } from '../host/handle.ts';
import { handle } from '../host/handle.ts';
import type { Host } from '../host/host.ts';
import type { SandboxLinks } from '../routes/nsenter.ts';
import type { Metrics } from './metrics.ts';
import type { RequestQueue } from './queue.ts';
import { guardConnections } from './http-guard.ts';
import { MAX_BODY_BYTES, cniCallOf, decodeBodyObject, errorBody, readRequest, send, statusOf } from './wire.ts';
import type { CallerChannel } from './caller-exec.ts';
import { EXEC_HEADER, callerChannel } from './caller-exec.ts';
import type { StreamedAnswer } from './caller-http.ts';
import { serveExecReply, shimEnvOf, streamedAnswer } from './caller-http.ts';

export interface ServerDeps {
  host: Host;
  /** The daemon's own environment: what delegates inherit besides the request's CNI_* variables. */
  daemonEnv: Env;
  log: Logger;
  queue: RequestQueue;
  /** Undefined when ready to serve, else why not (healthz answers 503 with it). */
  notReady(): string | undefined;
  /** Why no 00-multus.conf is served yet, or undefined: asked by `/readyz?config` (the DaemonSet's probe). */
  notServing?(): string | undefined;
  /** True once SIGTERM came: the daemon drains (still serving) and /readyz answers 500. */
  stopping?(): boolean;
  metrics?: Metrics;
  maxBodyBytes?: number;
  /** The multus config the daemon serves; when set, `/delegate` (hot-plug, docs/hotplug.md) is served. */
  multusConf?: () => Buffer;
  /** `/delegate`'s view of a sandbox's links (default: nsenter + ip); tests give a fake. */
  links?: SandboxLinks;
  /** The daemon's stop, every call's cancel signal: aborted after the shutdown grace (daemon/main.ts). */
  signal?: AbortSignal;
  /** "caller": a shim that offers it runs its call's delegates (daemon/caller-exec.ts); default "daemon". */
  delegateExec?: 'daemon' | 'caller';
  /** Where the calls whose shim runs their delegates are kept (the shutdown waits for them: parts.ts). */
  callers?: Map<string, CallerChannel>;
}

/** A distinct queue key for calls without a container (STATUS, GC, bad requests): they run in parallel. */
let anonymous = 0;

/** The 500 answer (and the log line) of a request whose handler threw. */
const answerFailure =
  (res: ServerResponse, log: Logger, path: string) =>
  (e: unknown): void => {
    log.error(`${path}: ${messageOf(e)}`);
    send(res, 500, errorBody(new CniError(CniCode.Internal, `the multus daemon failed: ${messageOf(e)}`)));
  };

/** The call's own exec through its shim, when the daemon and the shim both want it (caller-exec.ts). */
function callerOf(
  deps: ServerDeps,
  channels: Map<string, CallerChannel>,
  req: IncomingMessage,
  res: StreamedAnswer,
  shimEnv: Env,
): CallerChannel | undefined {
  if (deps.delegateExec !== 'caller' || req.headers[EXEC_HEADER] !== '1') return undefined;
  const metrics = deps.metrics;
  const ran = metrics ? { ran: metrics.delegateCall.bind(metrics) } : {};
  const channel = callerChannel({ local: deps.host.exec, send: res.send, shimEnv, ...ran });
  channels.set(channel.token, channel);
  return channel;
}

/** `POST /cni`: one CNI call through handle(), in its container's turn; `channels` holds those whose shim runs the delegates. */
function cniServer(deps: ServerDeps, limit: number, channels: Map<string, CallerChannel>) {
  return async function serveCni(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = performance.now();
    const decoded = await readRequest(req, res, limit, (body) => {
      const value = decodeBodyObject(body);
      return { call: cniCallOf(value, deps.daemonEnv), shimEnv: shimEnvOf(value) };
    });
    if (!decoded) return;
    const { call } = decoded;
    const command = call.env.CNI_COMMAND ?? '';
    const containerId = call.env.CNI_CONTAINERID ?? '';
    const key = containerId === '' ? `\0${anonymous++}` : containerId;
    const done = deps.metrics?.requestStarted(command);
    const out = streamedAnswer(res);
    const channel = callerOf(deps, channels, req, out, decoded.shimEnv);
    if (channel) res.once('close', channel.close); // the shim is gone: the rest runs here
    let answer: CniAnswer;
    try {
      const signal = deps.signal ? { signal: deps.signal } : {};
      const exec = channel ? { exec: channel.exec } : {};
      answer = await deps.queue.run(key, () => handle(deps.host, { ...call, ...signal, ...exec }));
    } finally {
      done?.();
      if (channel) channels.delete(channel.token);
    }
    const seconds = (performance.now() - started) / 1000;
    deps.metrics?.requestFinished(command, answer.exitCode === 0 ? 'success' : 'error', seconds);
    if (!answer.error) {
      deps.log.verbose(`${command} ${containerId}: 200 in ${(seconds * 1000).toFixed(1)} ms`);
      out.finish(200, JSON.stringify({ Result: answer.result ?? null }));
      return;
    }
    const status = statusOf(answer.error.code);
    deps.log.verbose(
      `${command} ${containerId}: ${status} code ${answer.error.code} in ${(seconds * 1000).toFixed(1)} ms`,
    );
    out.finish(status, JSON.stringify(answer.error.toJSON(answer.cniVersion))); // in the request's cniVersion
  };
}

export function createCniServer(deps: ServerDeps): Server {
  const limit = deps.maxBodyBytes ?? MAX_BODY_BYTES;
  /** The calls whose shim runs their delegates, by token (`POST /cni/exec` answers them). */
  const channels = deps.callers ?? new Map<string, CallerChannel>();
  const serveCni = cniServer(deps, limit, channels);

  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    if (deps.metrics) {
      const metrics = deps.metrics;
      res.once('finish', () => metrics.serverRequest(path, res.statusCode, req.method ?? ''));
    }
    const fail = (status: number, code: number, msg: string): void => {
      req.resume();
      send(res, status, errorBody(new CniError(code, msg)));
    };
    if (path === '/healthz' || path === '/readyz') {
      if (req.method !== 'GET' && req.method !== 'POST') {
        return fail(405, CniCode.InvalidEnv, `use GET or POST on ${path}`);
      }
      req.resume();
      if (path === '/readyz' && deps.stopping?.()) {
        const msg = 'the multus daemon is stopping: it serves the calls it is sent until its socket closes';
        send(res, 500, errorBody(new CniError(CniCode.TryAgainLater, msg)));
        return;
      }
      // `?config` (multus-shim --ready): also a 00-multus.conf served; Multus' shims ask without it
      const why = deps.notReady() ?? (/[?&]config(&|=|$)/.test(req.url ?? '') ? deps.notServing?.() : undefined);
      if (why === undefined) send(res, 200, '');
      else send(res, 503, errorBody(new CniError(CniCode.TryAgainLater, `the multus daemon is not ready: ${why}`)));
      return;
    }
    if (path === '/cni/exec' && deps.delegateExec === 'caller') {
      if (req.method !== 'POST') return fail(405, CniCode.InvalidEnv, 'use POST on /cni/exec');
      serveExecReply(req, res, channels).catch(answerFailure(res, deps.log, path));
      return;
    }
    if (path === '/cni') {
      if (req.method !== 'POST') return fail(405, CniCode.InvalidEnv, 'use POST on /cni');
      serveCni(req, res).catch(answerFailure(res, deps.log, path));
      return;
    }
    if (path === '/delegate' && deps.multusConf) {
      if (req.method !== 'POST') return fail(405, CniCode.InvalidEnv, 'use POST on /delegate');
      // hot-plug's code is loaded by its first request (docs/resident.md, "Memory")
      import('./delegate-http.ts')
        .then(({ serveDelegate }) => serveDelegate(req, res, { ...deps, multusConf: deps.multusConf!, limit }))
        .catch(answerFailure(res, deps.log, path));
      return;
    }
    if (path === '/delegate') {
      return fail(404, CniCode.InvalidConfig, 'the multus-ts daemon does not serve /delegate (dynamic networks)');
    }
    fail(404, CniCode.InvalidConfig, `no such path "${path}": the daemon serves /cni, /delegate, /healthz and /readyz`);
  });
  guardConnections(server); // header deadline, 400/431 (issue 28 finding 13)
  return server;
}
