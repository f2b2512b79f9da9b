/**
 * grpc.ts: the one door to the gRPC library (@grpc/grpc-js, with protobufjs for the messages). Every module that
 * imports it is reached from outside kubelet/ through load.ts only, so a CNI call that never asks the kubelet
 * neither parses nor runs the library (docs/performance.md, "The kubelet's gRPC from a library"). A .proto's text
 * is parsed by protobufjs on first use and kept; a service's methods become grpc-js method definitions here, which
 * is all @grpc/proto-loader would do for us, at half the start-up cost of loading it (the same section).
 */
import * as grpc from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import { PROTOS } from './gen/protos.ts';
import type { ProtoPath } from './gen/protos.ts';
import type { ServiceRef } from './services.ts';

export { grpc };

export type ServiceDefinition = grpc.ServiceDefinition<grpc.UntypedServiceImplementation>;

/**
 * How messages look in JavaScript: camelCase field names, every field present (proto3 defaults: '', 0, false,
 * []), 64-bit integers as decimal strings, enums by name (proto-loader's usual options).
 */
const TO_OBJECT: protobuf.IConversionOptions = {
  defaults: true,
  arrays: true,
  longs: String,
  enums: String,
  oneofs: true,
};

const roots = new Map<ProtoPath, protobuf.Root>();

function rootOf(proto: ProtoPath): protobuf.Root {
  const known = roots.get(proto);
  if (known !== undefined) return known;
  const root = protobuf.parse(PROTOS[proto], new protobuf.Root(), { keepCase: false }).root;
  root.resolveAll();
  roots.set(proto, root);
  return root;
}

/** A grpc-js method definition that also names its response message (for errors that say which was malformed). */
export type MethodDefinition = grpc.MethodDefinition<object, object> & { responseName: string };

function methodDefinition(service: protobuf.Service, method: protobuf.Method): MethodDefinition {
  const request = method.resolvedRequestType;
  const response = method.resolvedResponseType;
  if (request === null || response === null) throw new Error(`${method.fullName} has unresolved types`);
  const encode = (type: protobuf.Type) => (value: object) => Buffer.from(type.encode(type.fromObject(value)).finish());
  const decode = (type: protobuf.Type) => (bytes: Buffer) => type.toObject(type.decode(bytes), TO_OBJECT);
  return {
    path: `/${service.fullName.replace(/^\./, '')}/${method.name}`,
    requestStream: method.requestStream === true,
    responseStream: method.responseStream === true,
    requestSerialize: encode(request),
    requestDeserialize: decode(request),
    responseSerialize: encode(response),
    responseDeserialize: decode(response),
    originalName: method.name,
    responseName: response.name,
  };
}

/** The library's definition of a service: its methods' paths, serializers and deserializers. */
export function serviceDefinition(ref: ServiceRef): ServiceDefinition {
  const found = rootOf(ref.proto).lookup(ref.name);
  if (!(found instanceof protobuf.Service)) throw new Error(`${ref.proto} declares no service ${ref.name}`);
  const methods = found.methodsArray.map((m) => [m.name, methodDefinition(found, m)] as const);
  return Object.fromEntries(methods) as ServiceDefinition;
}
