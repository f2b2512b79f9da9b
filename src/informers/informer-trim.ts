/**
 * informers/informer-trim.ts: what the informers keep of each object (pure), client-go's transform idea: the cache
 * holds every pod of the node and every NAD of the cluster for the daemon's life, and most of their bytes are never
 * read (docs/resident.md, "Memory").
 *
 * A pod keeps its metadata but `managedFields`, its status whole, and of its spec `nodeName` and `resourceClaims`:
 * the daemon reads the metadata (name, namespace, uid, resourceVersion, annotations, deletionTimestamp), the claim
 * fields of spec and status (devices/dra.ts, devices/dra-objects.ts) and `spec.nodeName`. The cached pod is also
 * the body of the network-status write (PUT pods/status): the API server takes a pod's spec, owner references and
 * managed fields from the stored pod on that subresource, not from the body (Kubernetes' pod status strategy;
 * a body without managedFields keeps the stored ones), while metadata (annotations, labels) and status are
 * written as sent, so those are kept whole. A NAD keeps its name, namespace, annotations (the resource name) and
 * `spec.config`, but `kubectl.kubernetes.io/last-applied-configuration`, a second copy of the config.
 */
import type { Obj } from './informer-config.ts';

const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function metadataWithoutManagedFields(o: Obj): Record<string, unknown> | undefined {
  if (!isObject(o.metadata)) return undefined;
  const { managedFields: _m, ...rest } = o.metadata as Record<string, unknown>;
  return rest;
}

/** A pod as the pod informer keeps it. */
export function trimPod(o: Obj): Obj {
  if (!isObject(o)) return o;
  const spec: Record<string, unknown> = {};
  if (isObject(o.spec)) {
    if (o.spec.nodeName !== undefined) spec.nodeName = o.spec.nodeName;
    if (o.spec.resourceClaims !== undefined) spec.resourceClaims = o.spec.resourceClaims;
  }
  return {
    apiVersion: o.apiVersion,
    kind: o.kind,
    metadata: metadataWithoutManagedFields(o),
    spec,
    ...(o.status === undefined ? {} : { status: o.status }),
  } as Obj;
}

/** A NetworkAttachmentDefinition as the NAD informer keeps it. */
export function trimNad(o: Obj): Obj {
  if (!isObject(o)) return o;
  const metadata = metadataWithoutManagedFields(o);
  if (metadata && isObject(metadata.annotations) && LAST_APPLIED in metadata.annotations) {
    const { [LAST_APPLIED]: _l, ...annotations } = metadata.annotations;
    metadata.annotations = annotations;
  }
  const spec = isObject(o.spec) && o.spec.config !== undefined ? { config: o.spec.config } : {};
  return { apiVersion: o.apiVersion, kind: o.kind, metadata, spec } as Obj;
}
