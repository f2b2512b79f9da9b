/**
 * kubelet/index.ts: what the kubelet room offers the rest of the program, the entry of its own bundle
 * `kubelet-grpc.cjs` (scripts/build-kubelet.mjs), which carries the gRPC library. Nothing outside kubelet/
 * imports this file or the modules below it: they load it through load.ts, so the library is evaluated only in
 * a call that asks the kubelet (docs/performance.md, "The kubelet's gRPC from a library").
 */
export { listPodResources, decodeListPodResourcesResponse } from './podresources.ts';
export { serveRegistration } from './registration.ts';
export { serveUnix } from './server.ts';
export { unaryCall } from './client.ts';
export { serviceDefinition } from './grpc.ts';
export { SERVICES } from './services.ts';
