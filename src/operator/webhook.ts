/**
 * operator/webhook.ts: `multus webhook`, the validating admission webhook (docs/kubectl-multus.md, "The admission
 * webhook"): an HTTPS server answering AdmissionReview v1 for NADs (CREATE, UPDATE) and pods (CREATE) with the
 * one validator ADD's messages come from (multus/validate.ts), so a NAD or a networks annotation ADD would refuse
 * is refused at `kubectl apply` with ADD's words. A pod naming a NAD that does not exist yet is admitted with a
 * warning (ADD is retried until it exists). The certificate and key files are read again when they change
 * (checked every `--reload-seconds`, 10 by default): a rotated Secret takes effect without a restart.
 * Flags: --tls-cert-file F --tls-private-key-file F [--port 8443] [--address 0.0.0.0] [--namespace-isolation
 * true|false] [--global-namespaces a,b] (the nodes' multus config keys of those names) [--kubeconfig F] (default:
 * the in-cluster config; without one, NADs a pod names are not read).
 * Tested by test/unit/operator/webhook.test.ts, test/k8s/webhook.test.ts (kube-apiserver calling it over TLS).
 */
import { readFileSync, statSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server } from 'node:https';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { callerEnv } from '../base/caller-env.ts';
import { messageOf } from '../base/errors.ts';
import { isObject } from '../base/json.ts';
import { silentLogger } from '../base/log.ts';
import { loadKubeClient } from '../k8s/client.ts';
import type { KubeClient, Nad, Pod } from '../k8s/types.ts';
import type { MultusConf } from '../multus/conf.ts';
import type { PlanError, Verdict } from '../multus/validate.ts';
import { offlineConf, validateNad, validatePod } from '../multus/validate.ts';
import { UsageError } from './kubectl-common.ts';

const MAX_BODY = 4 << 20;
const API_VERSION = 'admission.k8s.io/v1';

export interface ReviewDeps {
  conf: MultusConf;
  /** Reads a NAD a pod names (undefined: not read, planned as a stand-in). */
  getNad?: (namespace: string, name: string) => Promise<Nad>;
}

interface AdmissionResponse {
  uid: string;
  allowed: boolean;
  status?: { code: number; reason: string; message: string };
  warnings?: string[];
}

const describe = (e: PlanError): string => `${e.msg}${e.details ? ` (${e.details})` : ''}`;

async function verdictOf(request: Record<string, unknown>, deps: ReviewDeps): Promise<Verdict | undefined> {
  const kind = isObject(request.kind) ? request.kind.kind : undefined;
  const object = isObject(request.object) ? request.object : undefined;
  if (!object || (request.operation !== 'CREATE' && request.operation !== 'UPDATE')) return undefined;
  const meta = isObject(object.metadata) ? object.metadata : {};
  const namespace =
    typeof meta.namespace === 'string' && meta.namespace ? meta.namespace : String(request.namespace ?? '');
  const named = typeof meta.name === 'string' && meta.name ? meta.name : `${String(meta.generateName ?? '')}*`;
  if (kind === 'NetworkAttachmentDefinition') {
    return validateNad(
      { ...(object as unknown as Nad), metadata: { ...meta, name: named, namespace } },
      deps.conf.confDir,
    );
  }
  if (kind !== 'Pod' || request.operation !== 'CREATE') return undefined;
  const pod = { ...object, metadata: { ...meta, name: named, namespace, uid: '' } } as Pod;
  const missing: string[] = [];
  const v = await validatePod(pod, {
    conf: deps.conf,
    ...(deps.getNad ? { getNad: deps.getNad, onMissing: (ns, name) => missing.push(`${ns}/${name}`) } : {}),
  });
  const later = missing.map(
    (n) => `network-attachment-definition ${n} does not exist yet: the pod's ADD fails until it does`,
  );
  return { errors: v.errors, warnings: [...later] };
}

/** The AdmissionReview answer to one request (pure but for the NAD reads). */
export async function review(body: unknown, deps: ReviewDeps): Promise<Record<string, unknown>> {
  const request = isObject(body) && isObject(body.request) ? body.request : undefined;
  if (!request || typeof request.uid !== 'string') throw new UsageError('not an AdmissionReview v1 request');
  const response: AdmissionResponse = { uid: request.uid, allowed: true };
  const v = await verdictOf(request, deps);
  if (v && v.errors.length > 0) {
    response.allowed = false;
    response.status = { code: 400, reason: 'Invalid', message: v.errors.map(describe).join('; ') };
  }
  if (v && v.warnings.length > 0) response.warnings = v.warnings;
  return { apiVersion: API_VERSION, kind: 'AdmissionReview', response };
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) req.destroy(new Error('request body over 4 MiB'));
      else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function handler(deps: ReviewDeps, log: (s: string) => void, onReview?: () => void) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    const send = (code: number, body: string, type = 'application/json') => {
      res.writeHead(code, { 'content-type': type });
      res.end(body);
    };
    if (req.method === 'GET' && (req.url === '/healthz' || req.url === '/readyz'))
      return send(200, 'ok\n', 'text/plain');
    if (req.method !== 'POST' || !req.url?.startsWith('/validate')) return send(404, 'not found\n', 'text/plain');
    onReview?.();
    readBody(req)
      .then(async (text) => send(200, JSON.stringify(await review(JSON.parse(text), deps))))
      .catch((e: unknown) => {
        log(`multus webhook: ${messageOf(e)}\n`);
        send(400, `${messageOf(e)}\n`, 'text/plain');
      });
  };
}

export interface WebhookOptions {
  certFile: string;
  keyFile: string;
  port: number;
  address: string;
  reloadSeconds: number;
  deps: ReviewDeps;
  log: (s: string) => void;
  /** Told of each review request (tests count them). */
  onReview?: () => void;
}

export interface Webhook {
  port: number;
  close(): Promise<void>;
}

const stamp = (files: string[]): string =>
  files
    .map((f) => {
      const st = statSync(f);
      return `${st.ino}:${st.mtimeMs}:${st.size}`;
    })
    .join('|');

/**
 * The server; its TLS files are read again when their inode, mtime or size change (a Secret's update): Node swaps
 * the context in place (setSecureContext); Bun has no such call, so there a new listener takes the port over (a
 * connection in that instant is refused, and failurePolicy Ignore admits its object).
 */
export async function startWebhook(o: WebhookOptions): Promise<Webhook> {
  const files = [o.certFile, o.keyFile];
  const tls = () => ({ cert: readFileSync(o.certFile), key: readFileSync(o.keyFile), minVersion: 'TLSv1.2' as const });
  const listen = async (): Promise<Server> => {
    const next = createServer(tls(), handler(o.deps, o.log, o.onReview));
    await new Promise<void>((resolve, reject) => {
      next.once('error', reject);
      next.listen(port, o.address, () => resolve());
    });
    return next;
  };
  let port = o.port;
  let server = await listen();
  port = (server.address() as AddressInfo).port;
  const stop = (s: Server) => {
    s.closeAllConnections();
    return new Promise<void>((resolve) => s.close(() => resolve()));
  };
  const reload = async () => {
    if (typeof server.setSecureContext === 'function') server.setSecureContext(tls());
    else {
      tls(); // readable before the old listener goes
      await stop(server);
      server = await listen();
    }
  };
  let seen = stamp(files);
  let busy = false;
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    const now = (() => {
      try {
        return stamp(files);
      } catch {
        return seen;
      }
    })();
    const done = () => void (busy = false);
    if (now === seen) return done();
    reload().then(
      () => {
        seen = now;
        o.log('multus webhook: TLS certificate reloaded\n');
        done();
      },
      (e: unknown) => {
        o.log(`multus webhook: cannot reload the TLS certificate, keeping the old one: ${messageOf(e)}\n`);
        done();
      },
    );
  }, o.reloadSeconds * 1000);
  timer.unref();
  return {
    port,
    close: () => {
      clearInterval(timer);
      return stop(server);
    },
  };
}

export function parseArgs(argv: readonly string[]): Record<string, string> {
  const known = [
    '--tls-cert-file',
    '--tls-private-key-file',
    '--port',
    '--address',
    '--namespace-isolation',
    '--global-namespaces',
    '--kubeconfig',
    '--reload-seconds',
  ];
  const out: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i]!.split(/=(.*)/s, 2) as [string, string | undefined];
    if (!known.includes(flag)) throw new UsageError(`unknown flag "${flag}"`);
    const value = inline ?? argv[++i];
    if (value === undefined) throw new UsageError(`${flag} needs a value`);
    out[flag.slice(2)] = value;
  }
  if (!out['tls-cert-file'] || !out['tls-private-key-file']) {
    throw new UsageError('--tls-cert-file and --tls-private-key-file are required');
  }
  return out;
}

/** Multus' defaults with the nodes' namespace isolation (`--namespace-isolation`, `--global-namespaces`). */
export function webhookConf(a: Record<string, string>): MultusConf {
  const isolation = a['namespace-isolation'] ?? 'false';
  if (isolation !== 'true' && isolation !== 'false') throw new UsageError('--namespace-isolation is true or false');
  const global = a['global-namespaces'];
  try {
    return offlineConf({ namespaceIsolation: isolation === 'true', ...(global ? { globalNamespaces: global } : {}) });
  } catch (e) {
    throw new UsageError(messageOf(e));
  }
}

/** `multus webhook ...`: serves until the process is stopped. */
export async function runWebhook(argv: readonly string[]): Promise<number> {
  const log = (s: string) => void process.stderr.write(s);
  let kube: KubeClient | undefined;
  try {
    const a = parseArgs(argv);
    const env = callerEnv(process.env);
    kube = await loadKubeClient({ kubeconfig: a.kubeconfig ?? '', env, log: silentLogger });
    const client = kube;
    const deps: ReviewDeps = {
      conf: webhookConf(a),
      ...(client ? { getNad: (ns: string, name: string) => client.getNad(ns, name) } : {}),
    };
    const port = Number(a.port ?? 8443);
    const reloadSeconds = Number(a['reload-seconds'] ?? 10);
    if (!Number.isInteger(port) || port < 0 || port > 65535) throw new UsageError(`--port: not a port: ${a.port}`);
    if (!(reloadSeconds > 0)) throw new UsageError(`--reload-seconds: not a positive number: ${a['reload-seconds']}`);
    const w = await startWebhook({
      certFile: a['tls-cert-file']!,
      keyFile: a['tls-private-key-file']!,
      port,
      address: a.address ?? '0.0.0.0',
      reloadSeconds,
      deps,
      log,
    });
    log(
      `multus webhook: serving on port ${w.port}${client ? '' : ' (no Kubernetes client: NADs a pod names are not read)'}\n`,
    );
    return await new Promise<number>(() => undefined);
  } catch (e) {
    log(`multus webhook: ${messageOf(e)}\n`);
    kube?.close();
    return 2;
  }
}
