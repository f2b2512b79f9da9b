/**
 * grpc.ts: the one door to the gRPC library (@grpc/grpc-js, with protobufjs and @grpc/proto-loader for the
 * messages). Every module that imports it is reached from outside kubelet/ through `import()` only, so a CNI call
 * that never asks the kubelet neither parses nor runs the library (docs/performance.md, "The kubelet's gRPC from a
 * library"). A service's .proto text is parsed on first use and kept.
 */
import * as grpc from '@grpc/grpc-js';
import { fromJSON } from '@grpc/proto-loader';
import type { Options, PackageDefinition } from '@grpc/proto-loader';
import protobuf from 'protobufjs';
import { PROTOS } from './gen/protos.ts';
import type { ProtoPath } from './gen/protos.ts';
import type { ServiceRef } from './services.ts';

export { grpc };

export type ServiceDefinition = grpc.ServiceDefinition<grpc.UntypedServiceImplementation>;

/**
 * How messages look in JavaScript: camelCase field names, every field present (proto3 defaults: '' , 0, false,
 * []), 64-bit integers as decimal strings, enums by name.
 */
const LOADER_OPTIONS: Options = { defaults: true, arrays: true, longs: String, enums: String, oneofs: true };

const packages = new Map<ProtoPath, PackageDefinition>();

function packageOf(proto: ProtoPath): PackageDefinition {
  let definition = packages.get(proto);
  if (definition === undefined) {
    const root = new protobuf.Root();
    protobuf.parse(PROTOS[proto], root, { keepCase: false });
    definition = fromJSON(root.toJSON(), LOADER_OPTIONS);
    packages.set(proto, definition);
  }
  return definition;
}

/** The library's definition of a service: its methods' paths, serializers and deserializers. */
export function serviceDefinition(ref: ServiceRef): ServiceDefinition {
  const found = packageOf(ref.proto)[ref.name];
  if (found === undefined || 'format' in found || !Object.values(found).every((m) => 'path' in m))
    throw new Error(`${ref.proto} declares no service ${ref.name}`);
  return found as ServiceDefinition;
}
