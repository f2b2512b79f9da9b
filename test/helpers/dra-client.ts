/**
 * The kubelet's side of a DRA driver for tests: @grpc/grpc-js clients that @grpc/proto-loader builds from the
 * kubelet's own .proto files (src/kubelet/protos: pluginregistration/v1, dra/v1, dra/v1beta1), with the kubelet's
 * (Go's) snake_case field names, on a unix socket (test/k8s/dra-plugin-wire.test.ts, the kubelet tier).
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { fileURLToPath } from 'node:url';

export type Answer = Record<string, any>;
type Unary = (req: object, cb: (err: grpc.ServiceError | null, v?: Answer) => void) => void;
export type ProtoClient = grpc.Client & Record<string, Unary>;
type Ctor = new (address: string, creds: grpc.ChannelCredentials) => ProtoClient;

const proto = (p: string) => fileURLToPath(new URL(`../../src/kubelet/protos/${p}/api.proto`, import.meta.url));

/** A client of `service` in the dotted package `pkg`, from the .proto at protos/`path`/api.proto. */
function protoClient(path: string, pkg: string, service: string, socket: string): ProtoClient {
  const def = protoLoader.loadSync(proto(path), { keepCase: true, defaults: true });
  let node: any = grpc.loadPackageDefinition(def);
  for (const part of pkg.split('.')) node = node[part];
  return new (node[service] as Ctor)(`unix:${socket}`, grpc.credentials.createInsecure());
}

/** `pluginregistration.Registration` (GetInfo, NotifyRegistrationStatus), as the kubelet's plugin watcher calls it. */
export const registrationClient = (socket: string): ProtoClient =>
  protoClient('pluginregistration/v1', 'pluginregistration', 'Registration', socket);

/** `k8s.io.kubelet.pkg.apis.dra.<version>.DRAPlugin` (NodePrepareResources, NodeUnprepareResources). */
export const draClient = (socket: string, version: 'v1' | 'v1beta1' = 'v1'): ProtoClient =>
  protoClient(`dra/${version}`, `k8s.io.kubelet.pkg.apis.dra.${version}`, 'DRAPlugin', socket);

/** One unary call; rejects with the gRPC error. */
export const call = (c: ProtoClient, method: string, req: object): Promise<Answer> =>
  new Promise((resolve, reject) => c[method]!(req, (err, v) => (err ? reject(err) : resolve(v ?? {}))));
