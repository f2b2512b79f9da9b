/**
 * The fake API of the DRA driver's tests: test/helpers/fake-kube.ts (claims, NADs, status applies, events, slice
 * lists) plus the slice writes and the Node's UID (k8s/types.ts `SliceWriter`), with resourceVersions checked on
 * update as the API server does, and every write recorded.
 */
import type { DraObject, Nad, SliceWriter } from '../../../src/k8s/types.ts';
import type { NadSource } from '../../../src/dra/slice-sync.ts';
import { FakeKube, FakeKubeError } from '../../helpers/fake-kube.ts';

export class FakeDriverApi extends FakeKube implements SliceWriter {
  nodeUid = 'node-uid-1';
  private rv = 100;
  readonly writes: string[] = [];

  async getNodeUid(name: string): Promise<string> {
    this.received.push(`getNodeUid ${name}`);
    return this.nodeUid;
  }

  private index(name: string): number {
    return this.slices.findIndex((s) => s.metadata?.name === name);
  }

  async createResourceSlice(slice: DraObject): Promise<DraObject> {
    const name = String(slice.metadata?.name);
    this.writes.push(`create ${name}`);
    if (this.index(name) >= 0) throw new FakeKubeError(409, `resourceslices "${name}" already exists`);
    const stored = structuredClone(slice);
    stored.metadata = { ...stored.metadata, resourceVersion: String(this.rv++) };
    this.slices.push(stored);
    return structuredClone(stored);
  }

  async updateResourceSlice(slice: DraObject): Promise<DraObject> {
    const name = String(slice.metadata?.name);
    this.writes.push(`update ${name}`);
    const i = this.index(name);
    if (i < 0) throw new FakeKubeError(404, `resourceslices "${name}" not found`);
    if (this.slices[i]!.metadata?.resourceVersion !== slice.metadata?.resourceVersion) {
      throw new FakeKubeError(409, 'the object has been modified');
    }
    const stored = structuredClone(slice);
    stored.metadata = { ...stored.metadata, resourceVersion: String(this.rv++) };
    this.slices[i] = stored;
    return structuredClone(stored);
  }

  async deleteResourceSlice(name: string): Promise<void> {
    this.writes.push(`delete ${name}`);
    const i = this.index(name);
    if (i < 0) throw new FakeKubeError(404, `resourceslices "${name}" not found`);
    this.slices.splice(i, 1);
  }
}

/** A NAD in the trimmed shape the informer keeps, opted in as a device unless `device` is false. */
export function nad(
  namespace: string,
  name: string,
  o: { type?: string; capacity?: string; device?: boolean } = {},
): Nad {
  const annotations: Record<string, string> = {};
  if (o.device !== false) annotations['dra.multus.k8s.cni.cncf.io/device'] = 'true';
  if (o.capacity !== undefined) annotations['dra.multus.k8s.cni.cncf.io/capacity'] = o.capacity;
  const config = JSON.stringify({ cniVersion: '1.0.0', name, type: o.type ?? 'macvlan' });
  return { metadata: { namespace, name, annotations }, spec: { config } };
}

/** A NAD source over a list the test changes (`set` tells the listeners). */
export function nadSource(initial: Nad[] = []): NadSource & { set(nads: Nad[]): void } {
  let nads = initial;
  const listeners = new Set<() => void>();
  return {
    list: () => nads,
    onChange(l) {
      listeners.add(l);
      return () => listeners.delete(l);
    },
    set(next) {
      nads = next;
      for (const l of listeners) l();
    },
  };
}

export const DRIVER = 'multus.k8s.cni.cncf.io';

/** An allocated claim: results [request, driver, device, shareID?], opaque configs per request. */
export function claim(
  name: string,
  uid: string,
  results: [string, string, string, string?][],
  configs: { requests: string[]; parameters: object; source?: string }[] = [],
  reservedFor: string[] = ['pod-a'],
): DraObject {
  const config = configs.map((c) => ({
    source: c.source ?? 'FromClaim',
    requests: c.requests,
    opaque: { driver: DRIVER, parameters: c.parameters },
  }));
  return {
    metadata: { namespace: 'ns1', name, uid },
    spec: { devices: { requests: results.map(([r]) => ({ name: r })) } },
    status: {
      allocation: {
        devices: {
          results: results.map(([request, driver, device, shareID]) => ({
            request,
            driver,
            pool: 'node-1',
            device,
            ...(shareID ? { shareID } : {}),
          })),
          config,
        },
      },
      reservedFor: reservedFor.map((p) => ({ resource: 'pods', name: p, uid: `uid-${p}` })),
    },
  };
}

export const selection = (name: string, extra: object = {}) => ({
  apiVersion: 'dra.multus.k8s.cni.cncf.io/v1alpha1',
  kind: 'NetworkSelection',
  name,
  ...extra,
});
