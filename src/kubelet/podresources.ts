/**
 * podresources.ts: the kubelet's pod-resources API, `v1.PodResourcesLister/List` on its unix socket (I/O), on
 * the gRPC library through client.ts. devices/ loads this module with `import()` only when the kubelet socket
 * exists (docs/behaviour.md#device-ids). Like Go Multus: a dial timeout and a call timeout of 10 s each and a
 * 16 MiB limit on the response (the caller's options). Only the fields Multus reads are kept; the rest of the
 * message (cpu_ids, memory, topology, dynamic_resources, ...) is decoded by the library and dropped.
 * test/unit/devices/podresources.test.ts checks it against a grpc-js server built from the same .proto.
 */
import { CniCode, CniError, messageOf } from '../base/errors.ts';
import { unaryCall } from './client.ts';
import type { UnaryOptions } from './client.ts';
import { serviceDefinition } from './grpc.ts';
import { SERVICES } from './services.ts';

export interface ContainerDevices {
  resourceName: string;
  deviceIds: string[];
}

export interface ContainerResources {
  name: string;
  devices: ContainerDevices[];
}

export interface PodResources {
  name: string;
  namespace: string;
  containers: ContainerResources[];
}

/** `v1.ListPodResourcesResponse`, only the fields Multus reads. */
export interface ListPodResourcesResponse {
  podResources: PodResources[];
}

export type ListOptions = UnaryOptions;

/** The message as the library decodes it (every field present, grpc.ts' loader options). */
interface Wire {
  podResources: {
    name: string;
    namespace: string;
    containers: { name: string; devices: { resourceName: string; deviceIds: string[] }[] }[];
  }[];
}

/** The fields Multus reads, out of the library's message (pure). */
function narrow(message: unknown): ListPodResourcesResponse {
  const wire = message as Wire;
  return {
    podResources: wire.podResources.map((p) => ({
      name: p.name,
      namespace: p.namespace,
      containers: p.containers.map((c) => ({
        name: c.name,
        devices: c.devices.map((d) => ({ resourceName: d.resourceName, deviceIds: [...d.deviceIds] })),
      })),
    })),
  };
}

/** Decodes a serialized `v1.ListPodResourcesResponse`. Throws CniError(DecodingFailure) on garbage. */
export function decodeListPodResourcesResponse(bytes: Uint8Array): ListPodResourcesResponse {
  const list = serviceDefinition(SERVICES.podResourcesLister).List;
  try {
    return narrow(list?.responseDeserialize(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)));
  } catch (err) {
    const msg = `malformed ListPodResourcesResponse from the kubelet: ${messageOf(err)}`;
    throw new CniError(CniCode.DecodingFailure, msg, { cause: err });
  }
}

/**
 * `v1.PodResourcesLister/List` on the kubelet socket. Errors are CniError: TryAgainLater for what a retry may
 * clear (cannot connect, timeouts, UNAVAILABLE), DecodingFailure for a malformed response, IoFailure otherwise.
 */
export function listPodResources(opts: ListOptions): Promise<ListPodResourcesResponse> {
  return unaryCall(serviceDefinition(SERVICES.podResourcesLister), 'List', {}, opts, narrow);
}
