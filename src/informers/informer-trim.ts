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
 * written as sent, so those are kept whole. A NAD keeps its name, namespace, resourceVersion, Multus' own
 * annotations (`k8s.v1.cni.cncf.io/*`: the resource name) and `spec.config`; not its apiVersion and kind, other
 * annotations (`kubectl.kubernetes.io/last-applied-configuration` is a second copy of the config), labels, uid,
 * timestamps or managed fields.
 */
import type { Obj } from './informer-types.ts';

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

/**
 * The annotations Multus reads on a NAD: its own prefix (resourceName, allowedResourceNames), and the DRA driver's
 * (`dra.multus.k8s.cni.cncf.io/device`, `/capacity`: a NAD published as a device, docs/dra-networks.md).
 */
const NAD_ANNOTATION_PREFIXES = ['k8s.v1.cni.cncf.io/', 'dra.multus.k8s.cni.cncf.io/'];

/**
 * A NetworkAttachmentDefinition as the NAD informer keeps it: of its metadata name, namespace, resourceVersion (the
 * store tells a changed NAD by it) and Multus' own annotations; `spec.config` as the string it came as (parsed per
 * ADD, never kept parsed). Every NAD of the cluster is held for the daemon's life (docs/resident.md, "Memory").
 */
export function trimNad(o: Obj): Obj {
  if (!isObject(o)) return o;
  const m = isObject(o.metadata) ? o.metadata : {};
  const metadata: Record<string, unknown> = { name: m.name, namespace: m.namespace };
  if (m.resourceVersion !== undefined) metadata.resourceVersion = m.resourceVersion;
  if (isObject(m.annotations)) {
    const own = Object.entries(m.annotations).filter(([k]) => NAD_ANNOTATION_PREFIXES.some((p) => k.startsWith(p)));
    if (own.length > 0) metadata.annotations = Object.fromEntries(own);
  }
  const spec = isObject(o.spec) && o.spec.config !== undefined ? { config: o.spec.config } : {};
  return { metadata, spec } as Obj;
}
