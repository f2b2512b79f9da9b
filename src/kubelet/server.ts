/**
 * server.ts: a small gRPC server on a unix socket (I/O), for the sockets the kubelet dials: the plugin
 * registration socket (registration.ts) and a plugin's service socket. The directory must be root's alone
 * (base/private-dir.ts) and is made 0700 when missing; a directory that exists (the kubelet's plugins_registry/)
 * keeps its mode. A stale socket of ours is replaced (a restarted plugin re-registers by re-creating its
 * socket); anything else at the path is refused. The socket is 0600. The server stops when `signal` aborts:
 * calls in flight get `graceMs` to finish, then the socket file is removed, which tells the kubelet's plugin
 * watcher the plugin is gone.
 */
import { chmodSync, lstatSync, mkdirSync, unlinkSync } from 'node:fs';
import { dirname } from 'node:path';
import { isMissingError } from '../base/files.ts';
import { securePrivateDir } from '../base/private-dir.ts';
import { grpc } from './grpc.ts';
import type { ServiceDefinition } from './grpc.ts';

/** A service and the functions that answer its methods, keyed by method name as the .proto spells it. */
export interface ServedService {
  service: ServiceDefinition;
  handlers: grpc.UntypedServiceImplementation;
}

export interface ServeOptions {
  socketPath: string;
  services: ServedService[];
  /** Stops the server. */
  signal: AbortSignal;
  /** How long calls in flight may run after `signal` aborts (default 5 s). */
  graceMs?: number;
}

export interface Serving {
  socketPath: string;
  /** Settles when the server has stopped and its socket is gone. */
  stopped: Promise<void>;
}

/** Removes a stale socket of ours at `path`; refuses any other file. */
function clearPath(path: string): void {
  try {
    const st = lstatSync(path);
    if (!st.isSocket()) throw new Error(`${path} exists and is not a socket: remove it or choose another path`);
    if (st.uid !== (process.geteuid?.() ?? 0)) throw new Error(`${path} belongs to uid ${st.uid}: it is not ours`);
    unlinkSync(path);
  } catch (err) {
    if (!isMissingError(err)) throw err;
  }
}

function bind(server: grpc.Server, socketPath: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.bindAsync(`unix:${socketPath}`, grpc.ServerCredentials.createInsecure(), (err) =>
      err ? reject(new Error(`cannot listen on ${socketPath}: ${err.message}`, { cause: err })) : resolve(),
    );
  });
}

function stop(server: grpc.Server, socketPath: string, graceMs: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const force = setTimeout(() => server.forceShutdown(), graceMs);
    server.tryShutdown(() => {
      clearTimeout(force);
      resolve();
    });
  }).finally(() => clearPath(socketPath));
}

/** Serves `services` on `socketPath` until `signal` aborts. */
export async function serveUnix(opts: ServeOptions): Promise<Serving> {
  const { socketPath, signal } = opts;
  const dir = dirname(socketPath);
  securePrivateDir(dir, 'the socket directory');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  clearPath(socketPath);
  const server = new grpc.Server();
  for (const { service, handlers } of opts.services) server.addService(service, handlers);
  await bind(server, socketPath);
  chmodSync(socketPath, 0o600);
  const stopped = new Promise<void>((resolve, reject) => {
    const onAbort = (): void => void stop(server, socketPath, opts.graceMs ?? 5000).then(resolve, reject);
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  return { socketPath, stopped };
}
