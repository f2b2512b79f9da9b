/** What the daemon's informers keep of pods and NADs (src/daemon/informer-trim.ts). */
import { describe, expect, it } from 'vitest';
import { trimNad, trimPod } from '../../../src/informers/informer-trim.ts';

const managedFields = [{ manager: 'kubectl', operation: 'Update', fieldsV1: { 'f:spec': {} } }];

describe('trimPod', () => {
  const pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: 'p',
      namespace: 'n',
      uid: 'u',
      resourceVersion: '7',
      labels: { app: 'a' },
      annotations: { 'k8s.v1.cni.cncf.io/networks': 'a,b', 'kubectl.kubernetes.io/last-applied-configuration': '{}' },
      ownerReferences: [{ kind: 'ReplicaSet', name: 'r' }],
      deletionTimestamp: '2026-12-01T00:00:00Z',
      managedFields,
    },
    spec: {
      nodeName: 'node-1',
      resourceClaims: [{ name: 'nic', resourceClaimTemplateName: 't' }],
      containers: [{ name: 'c', image: 'i', env: [{ name: 'X', value: 'y' }] }],
      volumes: [{ name: 'token', projected: { sources: [] } }],
      tolerations: [{ operator: 'Exists' }],
    },
    status: {
      phase: 'Running',
      conditions: [{ type: 'Ready', status: 'True' }],
      resourceClaimStatuses: [{ name: 'nic', resourceClaimName: 'p-nic' }],
      extendedResourceClaimStatus: { resourceClaimName: 'ext' },
      containerStatuses: [{ name: 'c', ready: true }],
    },
  };

  it('drops managedFields and the spec but nodeName and resourceClaims; keeps the rest of metadata and status', () => {
    const t = trimPod(pod as any) as any;
    const { managedFields: _m, ...metadata } = pod.metadata;
    expect(t).toEqual({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata,
      spec: { nodeName: 'node-1', resourceClaims: pod.spec.resourceClaims },
      status: pod.status,
    });
    expect(pod.metadata.managedFields).toBe(managedFields); // the input is not changed
  });

  it('a pod without spec or status, and what is not an object, pass', () => {
    expect(trimPod({ metadata: { name: 'p' } } as any)).toEqual({ metadata: { name: 'p' }, spec: {} });
    expect(trimPod(null as any)).toBe(null);
  });
});

describe('trimNad', () => {
  it("keeps name, namespace, resourceVersion, Multus' annotations and spec.config; drops the rest", () => {
    const nad = {
      apiVersion: 'k8s.cni.cncf.io/v1',
      kind: 'NetworkAttachmentDefinition',
      metadata: {
        name: 'a',
        namespace: 'n',
        uid: 'u',
        resourceVersion: '9',
        generation: 1,
        creationTimestamp: '2026-12-01T00:00:00Z',
        labels: { app: 'a' },
        managedFields,
        annotations: {
          'k8s.v1.cni.cncf.io/resourceName': 'example.com/nic',
          'k8s.v1.cni.cncf.io/allowedResourceNames': 'example.com/a,example.com/b',
          'argocd.argoproj.io/tracking-id': 'app:k8s.cni.cncf.io/NetworkAttachmentDefinition:n/a',
          'kubectl.kubernetes.io/last-applied-configuration': '{"spec": {"config": "..."}}',
        },
      },
      spec: { config: '{"type":"macvlan"}' },
    };
    expect(trimNad(nad as any)).toEqual({
      metadata: {
        name: 'a',
        namespace: 'n',
        resourceVersion: '9',
        annotations: {
          'k8s.v1.cni.cncf.io/resourceName': 'example.com/nic',
          'k8s.v1.cni.cncf.io/allowedResourceNames': 'example.com/a,example.com/b',
        },
      },
      spec: { config: '{"type":"macvlan"}' },
    });
    expect(trimNad({ metadata: { name: 'b', namespace: 'n' } } as any)).toEqual({
      metadata: { name: 'b', namespace: 'n' },
      spec: {},
    });
  });
});
