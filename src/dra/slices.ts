/**
 * dra/slices.ts: what the node offers as DRA devices, from the NADs (pure): docs/dra-networks.md, "Design: the
 * driver". One pool per node (its name is the node's), owned by the Node:
 *
 *   - device `any`: any network; the claim's opaque config says which (a NAD reference or an inline CNI config);
 *   - one device per NAD that opts in (annotation `dra.multus.k8s.cni.cncf.io/device: "true"`), named by
 *     dra/device-names.ts, with the attributes a DeviceClass or a CEL selector picks a network by (its namespace,
 *     name, CNI type; the multi-network proposal's podNetwork, podNetworkNamespace and network kind) and, when the
 *     NAD says `dra.multus.k8s.cni.cncf.io/capacity: "<N>"`, N attachments per node as consumable capacity.
 *
 * Every device allows many allocations (many pods share one network). Bounded: at most `maxDevices` NADs are
 * published, `perSlice` devices to a slice (the API's limit is 128); the others are reported as skipped, with why.
 * `planSync` compares the desired slices with those the API holds and says what to write: nothing when equal; else
 * every slice again under the next pool generation (the scheduler ignores slices of an older one), and the extra
 * ones deleted. A slice carries a hash of its content in an annotation, so the comparison never depends on
 * fields the API server adds. Tested by test/unit/dra/slices.test.ts.
 */
import { createHash } from 'node:crypto';
import type { DraObject, Nad } from '../k8s/types.ts';
import {
  ANY_NETWORK_DEVICE as ANY_DEVICE,
  DRA_ATTRIBUTE_DOMAIN as DRA_DOMAIN,
  DRA_CAPACITY_ANNOTATION as CAPACITY_ANNOTATION,
  DRA_CAPACITY_NAME as ATTACHMENTS_CAPACITY,
  DRA_DEVICE_ANNOTATION as DEVICE_ANNOTATION,
  networkDeviceName,
} from './device-names.ts';

/** The annotation that holds the hash of a slice's content (planSync compares it). */
export const HASH_ANNOTATION = `${DRA_DOMAIN}/content-hash`;
/** The multi-network proposal's attribute domain (names still moving: docs/dra-networks.md). */
const MULTINETWORK = 'multinetwork.networking.k8s.io';
/** What the `networkKind` attributes say of a NAD device: the kind of object the network is. */
const NETWORK_KIND = 'networkattachmentdefinition';

export const DEFAULT_MAX_DEVICES = 512;
export const DEFAULT_DEVICES_PER_SLICE = 128;
/** The API's limits: a string attribute's value, a slice's devices. */
const MAX_ATTRIBUTE_STRING = 64;
const MAX_CAPACITY = 1_000_000;

type Attribute = { string: string } | { bool: boolean } | { int: number };

export interface DeviceSpec {
  name: string;
  attributes: Record<string, Attribute>;
  capacity?: Record<string, { value: string; requestPolicy: { default: string; validValues: string[] } }>;
  allowMultipleAllocations: true;
}

export interface SliceOptions {
  nodeName: string;
  driver: string;
  maxDevices?: number;
  perSlice?: number;
}

export interface DesiredSlices {
  /** The devices of each slice, in order (`any` first, then NADs by namespace and name). */
  slices: DeviceSpec[][];
  /** The NADs published. */
  published: number;
  /** Opted-in NADs not published, and why. */
  skipped: { nad: string; why: string }[];
}

/** The CNI type of a NAD's config (a conflist's first plugin), when it has an inline config that says. */
function cniTypeOf(nad: Nad): string | undefined {
  const text = nad.spec?.config;
  if (typeof text !== 'string' || text === '') return undefined;
  try {
    const conf = JSON.parse(text) as { type?: unknown; plugins?: { type?: unknown }[] };
    const type = typeof conf.type === 'string' ? conf.type : conf.plugins?.[0]?.type;
    return typeof type === 'string' && type !== '' && type.length <= MAX_ATTRIBUTE_STRING ? type : undefined;
  } catch {
    return undefined;
  }
}

/** The NAD's device, or why it is not published. */
function nadDevice(nad: Nad): DeviceSpec | string {
  const { namespace, name } = nad.metadata;
  if (name.length > MAX_ATTRIBUTE_STRING) return `its name is longer than ${MAX_ATTRIBUTE_STRING} characters`;
  const attributes: Record<string, Attribute> = {
    [`${DRA_DOMAIN}/kind`]: { string: 'network' },
    [`${DRA_DOMAIN}/namespace`]: { string: namespace },
    [`${DRA_DOMAIN}/name`]: { string: name },
    [`${MULTINETWORK}/podNetwork`]: { string: name },
    [`${MULTINETWORK}/podNetworkNamespace`]: { string: namespace },
    [`${MULTINETWORK}/networkKind`]: { string: NETWORK_KIND },
    [`${MULTINETWORK}/podNetworkKind`]: { string: NETWORK_KIND },
  };
  const type = cniTypeOf(nad);
  if (type !== undefined) attributes[`${DRA_DOMAIN}/cniType`] = { string: type };
  const device: DeviceSpec = { name: networkDeviceName(namespace, name), attributes, allowMultipleAllocations: true };
  const capacity = nad.metadata.annotations?.[CAPACITY_ANNOTATION];
  if (capacity !== undefined) {
    const n = /^[1-9][0-9]{0,6}$/.test(capacity) ? Number(capacity) : NaN;
    if (!(n <= MAX_CAPACITY))
      return `${CAPACITY_ANNOTATION} "${capacity}" is not a whole number from 1 to ${MAX_CAPACITY}`;
    const requestPolicy = { default: '1', validValues: ['1'] };
    device.capacity = { [ATTACHMENTS_CAPACITY]: { value: String(n), requestPolicy } };
  }
  return device;
}

const anyDevice = (): DeviceSpec => ({
  name: ANY_DEVICE,
  attributes: { [`${DRA_DOMAIN}/kind`]: { string: 'any' } },
  allowMultipleAllocations: true,
});

/** True for a NAD that asks to be published as a device. */
export const optsIn = (nad: Nad): boolean => nad.metadata.annotations?.[DEVICE_ANNOTATION] === 'true';

/** The node's devices, cut into slices: `any`, then each opted-in NAD (namespace, name order) up to the bound. */
export function desiredSlices(nads: Iterable<Nad>, o: SliceOptions): DesiredSlices {
  const max = o.maxDevices ?? DEFAULT_MAX_DEVICES;
  const perSlice = o.perSlice ?? DEFAULT_DEVICES_PER_SLICE;
  const keyOf = (n: Nad) => `${n.metadata.namespace}/${n.metadata.name}`;
  const chosen = [...nads].filter(optsIn).sort((a, b) => (keyOf(a) < keyOf(b) ? -1 : keyOf(a) > keyOf(b) ? 1 : 0));
  const devices = [anyDevice()];
  const skipped: DesiredSlices['skipped'] = [];
  const names = new Set<string>([ANY_DEVICE]);
  for (const nad of chosen) {
    const device = nadDevice(nad);
    if (typeof device === 'string') skipped.push({ nad: keyOf(nad), why: device });
    else if (devices.length - 1 >= max) skipped.push({ nad: keyOf(nad), why: `more than ${max} NADs opt in` });
    else if (names.has(device.name)) skipped.push({ nad: keyOf(nad), why: `device name ${device.name} is taken` });
    else {
      devices.push(device);
      names.add(device.name);
    }
  }
  const slices: DeviceSpec[][] = [];
  for (let i = 0; i < devices.length; i += perSlice) slices.push(devices.slice(i, i + perSlice));
  return { slices, published: devices.length - 1, skipped };
}

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

/** The slices' names: `<node>-<driver>-<i>` (a DNS subdomain), or a hash of both when that is too long. */
export function sliceName(nodeName: string, driver: string, index: number): string {
  const plain = `${nodeName}-${driver}`;
  const base = plain.length + 6 <= 253 ? plain : `multus-dra-${sha256(plain).slice(0, 32)}`;
  return `${base}-${index}`;
}

/** The ResourceSlice object of slice `index` of `count`. */
export function sliceObject(
  devices: DeviceSpec[],
  at: { index: number; count: number; generation: number },
  o: SliceOptions & { nodeUid: string },
): DraObject {
  const spec = {
    driver: o.driver,
    nodeName: o.nodeName,
    pool: { name: o.nodeName, generation: at.generation, resourceSliceCount: at.count },
    devices,
  };
  const hash = sha256(JSON.stringify({ ...spec, pool: { ...spec.pool, generation: 0 } }));
  return {
    apiVersion: 'resource.k8s.io/v1',
    kind: 'ResourceSlice',
    metadata: {
      name: sliceName(o.nodeName, o.driver, at.index),
      annotations: { [HASH_ANNOTATION]: hash },
      ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: o.nodeName, uid: o.nodeUid, controller: true }],
    },
    spec,
  };
}

export interface SyncPlan {
  create: DraObject[];
  /** Each with the existing slice's resourceVersion. */
  update: DraObject[];
  delete: string[];
}

const meta = (o: DraObject): Record<string, unknown> => o.metadata ?? {};
const hashOf = (o: DraObject): unknown =>
  (meta(o).annotations as Record<string, unknown> | undefined)?.[HASH_ANNOTATION];
const generationOf = (o: DraObject): number => {
  const g = (o.spec?.pool as { generation?: unknown } | undefined)?.generation;
  return typeof g === 'number' ? g : 0;
};

/**
 * What to write so that the API holds `desired` (this node's slices of this driver are `existing`): nothing when
 * every slice is there with its content and one generation; else all of them under a generation above every
 * existing one (updates keep the resourceVersion they replace), and the slices not desired deleted.
 */
export function planSync(
  desired: DeviceSpec[][],
  existing: DraObject[],
  o: SliceOptions & { nodeUid: string },
): SyncPlan {
  const byName = new Map(existing.map((s) => [String(meta(s).name), s]));
  const count = desired.length;
  const generations = new Set(existing.map(generationOf));
  const current = desired.map((devices, index) =>
    sliceObject(devices, { index, count, generation: generationOf(existing[0] ?? {}) }, o),
  );
  const names = new Set(current.map((s) => String(meta(s).name)));
  const same =
    existing.length === count &&
    generations.size === 1 &&
    current.every((s) => {
      const had = byName.get(String(meta(s).name));
      const owner = (meta(had ?? {}).ownerReferences as { uid?: unknown }[] | undefined)?.[0]?.uid;
      return had !== undefined && hashOf(had) === hashOf(s) && owner === o.nodeUid;
    });
  if (same) return { create: [], update: [], delete: [] };
  const generation = Math.max(0, ...generations) + 1;
  const plan: SyncPlan = { create: [], update: [], delete: [] };
  desired.forEach((devices, index) => {
    const slice = sliceObject(devices, { index, count, generation }, o);
    const had = byName.get(String(meta(slice).name));
    if (had === undefined) plan.create.push(slice);
    else {
      Object.assign(meta(slice), { resourceVersion: meta(had).resourceVersion });
      plan.update.push(slice);
    }
  });
  for (const name of byName.keys()) if (!names.has(name)) plan.delete.push(name);
  return plan;
}
