/**
 * A stand-in for the kubelet's pod-resources gRPC server (test helper, I/O): `v1.PodResourcesLister/List`
 * served by @grpc/grpc-js on a unix socket, with messages encoded by protobufjs from the kubelet's api.proto
 * (src/kubelet/protos/podresources/v1/), so src/kubelet/podresources.ts is checked against an independent gRPC and protobuf
 * implementation, not against itself. Messages use the proto's own field names (`pod_resources`,
 * `resource_name`, `device_ids`, ...). What List does is set per test: answer, fail with a gRPC status, or
 * never answer. `startSilentSocket` accepts connections and never speaks, for the dial timeout.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { createServer } from 'node:net';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const PROTO_FILE = join(
  fileURLToPath(new URL('../../src/kubelet/protos/podresources/v1/', import.meta.url)),
  'api.proto',
);

/** The wire messages, keyed as in api.proto; fields the client ignores may be set to prove they are skipped. */
export interface ContainerDevicesMessage {
  resource_name?: string;
  device_ids?: string[];
  topology?: { nodes?: { ID?: number }[] };
}
export interface ContainerResourcesMessage {
  name?: string;
  devices?: ContainerDevicesMessage[];
  cpu_ids?: number[];
  memory?: { memory_type?: string; size?: number; topology?: { nodes?: { ID?: number }[] } }[];
  dynamic_resources?: {
    claim_name?: string;
    claim_namespace?: string;
    claim_resources?: { driver_name?: string; device_name?: string; cdi_devices?: { name?: string }[] }[];
  }[];
}
export interface PodResourcesMessage {
  name?: string;
  namespace?: string;
  containers?: ContainerResourcesMessage[];
}
export interface ListPodResourcesResponseMessage {
  pod_resources?: PodResourcesMessage[];
}

export type ListBehaviour =
  | { kind: 'answer'; response: ListPodResourcesResponseMessage }
  | { kind: 'fail'; code: grpc.status; details: string }
  /** These bytes as the response message, whatever they are. */
  | { kind: 'bytes'; bytes: Buffer }
  | { kind: 'hang' };

export interface ReceivedCall {
  /** The deadline the client sent (grpc-timeout), as grpc-js computed it; Infinity when none. */
  deadline: number;
  userAgent: string;
}

export interface PodResourcesServer {
  socketPath: string;
  behaviour: ListBehaviour;
  calls: ReceivedCall[];
  close(): Promise<void>;
}

type ServiceDefinition = grpc.ServiceDefinition<grpc.UntypedServiceImplementation>;

let definition: protoLoader.PackageDefinition | undefined;

function loadService(): ServiceDefinition {
  definition ??= protoLoader.loadSync(PROTO_FILE, { keepCase: true, defaults: false });
  const pkg = grpc.loadPackageDefinition(definition) as unknown as {
    v1: { PodResourcesLister: { service: ServiceDefinition } };
  };
  return pkg.v1.PodResourcesLister.service;
}

/** The protobuf bytes protobufjs makes of a List response: what the server puts in the gRPC frame. */
export function encodeListResponse(message: ListPodResourcesResponseMessage): Buffer {
  const list = loadService().List;
  if (list === undefined) throw new Error(`${PROTO_FILE} has no List method`);
  return list.responseSerialize(message);
}

function listHandler(
  server: PodResourcesServer,
): grpc.handleUnaryCall<unknown, ListPodResourcesResponseMessage | Buffer> {
  return (call, callback) => {
    const deadline = call.getDeadline();
    server.calls.push({
      deadline: deadline instanceof Date ? deadline.getTime() : Number(deadline),
      userAgent: String(call.metadata.get('user-agent')[0] ?? ''),
    });
    const b = server.behaviour;
    if (b.kind === 'answer') callback(null, b.response);
    else if (b.kind === 'bytes') callback(null, b.bytes);
    else if (b.kind === 'fail') callback({ code: b.code, details: b.details });
    // 'hang': the callback is never called; close() force-shuts the call down
  };
}

/** Starts the server on `socketPath` (a path in a per-test temp dir; unix socket paths are short). */
export async function startPodResourcesServer(
  socketPath: string,
  behaviour: ListBehaviour,
): Promise<PodResourcesServer> {
  const grpcServer = new grpc.Server();
  const server: PodResourcesServer = {
    socketPath,
    behaviour,
    calls: [],
    close: () =>
      new Promise((resolve) => {
        grpcServer.forceShutdown();
        resolve();
      }),
  };
  const service = loadService();
  const list = service.List;
  if (list === undefined) throw new Error(`${PROTO_FILE} has no List method`);
  // 'bytes' answers go out as they are; every other answer is encoded from the proto
  const serialize = (value: unknown): Buffer => (Buffer.isBuffer(value) ? value : list.responseSerialize(value));
  grpcServer.addService({ ...service, List: { ...list, responseSerialize: serialize } }, { List: listHandler(server) });
  await new Promise<void>((resolve, reject) => {
    grpcServer.bindAsync(`unix:${socketPath}`, grpc.ServerCredentials.createInsecure(), (err) =>
      err ? reject(err) : resolve(),
    );
  });
  return server;
}

/** A unix socket that accepts connections and never sends a byte (a kubelet that hangs before HTTP/2). */
export async function startSilentSocket(
  socketPath: string,
): Promise<{ connections: () => number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  let count = 0;
  const server = createServer((socket) => {
    count += 1;
    sockets.add(socket);
    socket.on('error', () => {});
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, resolve);
  });
  return {
    connections: () => count,
    close: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
