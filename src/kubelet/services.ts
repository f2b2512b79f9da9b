/**
 * services.ts: the kubelet's gRPC services this program speaks, each named by its .proto (src/kubelet/protos/,
 * carried as text in gen/protos.ts) and its full name there (pure data). A new service, such as the DRA plugin's,
 * is one more line here; grpc.ts turns a line into the library's service definition when a call first needs it.
 */
import type { ProtoPath } from './gen/protos.ts';

export interface ServiceRef {
  proto: ProtoPath;
  /** `package.Service` as the .proto declares it; the gRPC method paths are `/package.Service/Method`. */
  name: string;
}

export const SERVICES = {
  /** The kubelet's pod-resources API, served on /var/lib/kubelet/pod-resources/kubelet.sock. */
  podResourcesLister: { proto: 'podresources/v1/api.proto', name: 'v1.PodResourcesLister' },
  /** What a plugin serves on plugins_registry/<name>-reg.sock for the kubelet's plugin watcher. */
  registration: { proto: 'pluginregistration/v1/api.proto', name: 'pluginregistration.Registration' },
  /** The kubelet DRA plugin API, v1 and v1beta1 (served by a DRA driver; not served here yet). */
  draV1: { proto: 'dra/v1/api.proto', name: 'k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin' },
  draV1beta1: { proto: 'dra/v1beta1/api.proto', name: 'k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin' },
} as const satisfies Record<string, ServiceRef>;
