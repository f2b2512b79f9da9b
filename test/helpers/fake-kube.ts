/**
 * A hand-written fake of the KubeClient seam: pods and NADs in maps, every call recorded, scripted failures.
 * Errors carry `status` like KubeApiError so callers branch on it the same way.
 */
import { CniError } from '../../src/base/errors.ts';
import type { DraObject, EventInput, KubeClient, Nad, Pod } from '../../src/k8s/types.ts';

export class FakeKubeError extends CniError {
  constructor(
    readonly status: number,
    msg: string,
  ) {
    super(status >= 500 || status === 0 ? 11 : 999, msg);
  }
}

export class FakeKube implements KubeClient {
  readonly pods = new Map<string, Pod>();
  readonly nads = new Map<string, Nad>();
  readonly received: string[] = [];
  readonly events: EventInput[] = [];
  /** Failures to throw, consumed in order, per call kind ("getPod", "getNad", "updatePodStatus"). */
  readonly failures: Record<string, FakeKubeError[]> = {};
  /** Called after a successful status update read, e.g. to simulate a concurrent writer. */
  beforeUpdate?: (pod: Pod) => void;
  private version = 1;
  readonly info = {
    source: 'kubeconfig',
    server: 'https://fake',
    auth: 'token',
    fallback: false,
  } as unknown as KubeClient['info'];

  get requestCount(): number {
    return this.received.filter((r) => !r.startsWith('createEvent')).length;
  }

  addPod(namespace: string, name: string, uid: string, annotations: Record<string, string> = {}): Pod {
    const pod: Pod = { metadata: { namespace, name, uid, resourceVersion: String(this.version++), annotations } };
    this.pods.set(`${namespace}/${name}`, pod);
    return pod;
  }

  addNad(
    namespace: string,
    name: string,
    config: Record<string, unknown> | string,
    annotations?: Record<string, string>,
  ): void {
    const spec = { config: typeof config === 'string' ? config : JSON.stringify(config) };
    this.nads.set(`${namespace}/${name}`, {
      metadata: { namespace, name, ...(annotations ? { annotations } : {}) },
      spec,
    });
  }

  private fail(kind: string): void {
    const next = this.failures[kind]?.shift();
    if (next) throw next;
  }

  async getPod(namespace: string, name: string): Promise<Pod> {
    this.received.push(`getPod ${namespace}/${name}`);
    this.fail('getPod');
    const pod = this.pods.get(`${namespace}/${name}`);
    if (!pod) throw new FakeKubeError(404, `pods "${name}" not found`);
    return structuredClone(pod);
  }

  async getNad(namespace: string, name: string): Promise<Nad> {
    this.received.push(`getNad ${namespace}/${name}`);
    this.fail('getNad');
    const nad = this.nads.get(`${namespace}/${name}`);
    if (!nad) throw new FakeKubeError(404, `network-attachment-definitions.k8s.cni.cncf.io "${name}" not found`);
    return structuredClone(nad);
  }

  async updatePodStatus(pod: Pod): Promise<Pod> {
    const key = `${pod.metadata.namespace}/${pod.metadata.name}`;
    this.received.push(`updatePodStatus ${key}`);
    this.fail('updatePodStatus');
    const current = this.pods.get(key);
    if (!current) throw new FakeKubeError(404, `pods "${pod.metadata.name}" not found`);
    this.beforeUpdate?.(current);
    if (current.metadata.resourceVersion !== pod.metadata.resourceVersion) {
      throw new FakeKubeError(
        409,
        'the object has been modified; please apply your changes to the latest version and try again',
      );
    }
    const stored = {
      ...structuredClone(pod),
      metadata: { ...structuredClone(pod.metadata), resourceVersion: String(this.version++) },
    };
    this.pods.set(key, stored);
    return structuredClone(stored);
  }

  /** A concurrent writer: bumps the stored pod's resourceVersion. */
  touch(namespace: string, name: string): void {
    const pod = this.pods.get(`${namespace}/${name}`)!;
    pod.metadata.resourceVersion = String(this.version++);
  }

  /** ResourceClaims by "namespace/name" and ResourceSlices (cluster-scoped), for DRA device IDs. */
  readonly claims = new Map<string, DraObject>();
  readonly slices: DraObject[] = [];

  async getResourceClaim(namespace: string, name: string): Promise<DraObject> {
    this.received.push(`getResourceClaim ${namespace}/${name}`);
    this.fail('getResourceClaim');
    const claim = this.claims.get(`${namespace}/${name}`);
    if (!claim) throw new FakeKubeError(404, `resourceclaims.resource.k8s.io "${name}" not found`);
    return structuredClone(claim);
  }

  async listResourceSlices(nodeName: string, driver: string): Promise<DraObject[]> {
    this.received.push(`listResourceSlices ${nodeName} ${driver}`);
    this.fail('listResourceSlices');
    return structuredClone(
      this.slices.filter(
        (s) => (driver === '' || s.spec?.driver === driver) && (nodeName === '' || s.spec?.nodeName === nodeName),
      ),
    );
  }

  /** status.devices applied per claim and field manager ("ns/claim manager" -> devices). */
  readonly applied = new Map<string, unknown[]>();

  async applyClaimDevices(namespace: string, name: string, manager: string, devices: unknown[]): Promise<void> {
    this.received.push(`applyClaimDevices ${namespace}/${name} ${manager} ${devices.length}`);
    this.fail('applyClaimDevices');
    this.applied.set(`${namespace}/${name} ${manager}`, structuredClone(devices));
  }

  async createEvent(event: EventInput): Promise<void> {
    this.received.push(`createEvent ${event.reason}`);
    // as the API server: a named event that exists is refused
    if (event.name && this.events.some((e) => e.name === event.name)) {
      throw new FakeKubeError(409, `events "${event.name}" already exists`);
    }
    this.events.push(event);
  }

  close(): void {}
}
