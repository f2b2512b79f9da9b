/**
 * devices.ts: device IDs for NADs with the `k8s.v1.cni.cncf.io/resourceName` annotation, SR-IOV style (pure
 * parts, and thin I/O wrappers marked as such).
 *
 * The kubelet knows which devices a device plugin allocated to a pod; Multus reads that as a resource map (resource
 * name -> device IDs, sorted per container) from the pod-resources gRPC socket when it exists, else from the
 * device-plugin checkpoint file (docs/behaviour.md#device-ids), and hands each attachment the next unused ID of its
 * resource. The ID goes into the delegate's config as `deviceID` and `pciBusID` (docs/behaviour.md#delegate-config),
 * and the device plugin's device-info file is copied to the CNIDeviceInfoFile path the delegate is told about
 * (docs/behaviour.md#device-info), whose content later becomes network-status `device-info`
 * (docs/behaviour.md#network-status). Pure: parseCheckpoint, resourceMapFrom*, DeviceAllocator, injectDeviceId, the
 * path builders. I/O: readResourceMap (the kubelet room and its gRPC library are loaded only on its gRPC path), copyDevicePluginInfo,
 * readDeviceInfo, removeDeviceInfo.
 */
import { readFileSync, statSync } from 'node:fs';
import type { Network } from '../cni/network.ts';
import { editNetwork } from '../cni/network.ts';
import { CniCode, CniError, messageOf, wrapError } from '../base/errors.ts';
import type { Logger } from '../base/log.ts';
import { loadKubelet } from '../kubelet/load.ts';
import type { ListPodResourcesResponse } from '../kubelet/podresources.ts';
import { isObject } from '../base/json.ts';

export const POD_RESOURCES_SOCKET = '/var/lib/kubelet/pod-resources/kubelet.sock';
export const DEVICE_CHECKPOINT_FILE = '/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint';
export const CNI_DEVINFO_DIR = '/var/run/k8s.cni.cncf.io/devinfo/cni';
export const DP_DEVINFO_DIR = '/var/run/k8s.cni.cncf.io/devinfo/dp';
/** Go Multus kubeletclient: 10 s to connect, 10 s for the call, 16 MiB response limit. */
export const POD_RESOURCES_TIMEOUT_MS = 10_000;
export const POD_RESOURCES_MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

/** Resource name -> device IDs. */
export type ResourceMap = Map<string, string[]>;

export type Json = Record<string, unknown>;

/** Adds `ids` to the resource's list (a resource with no IDs is still present, as in Go Multus). */
function appendIds(resources: ResourceMap, resourceName: string, ids: readonly string[]): void {
  const list = resources.get(resourceName) ?? [];
  for (const id of ids) list.push(id);
  resources.set(resourceName, list);
}

// ---------------------------------------------------------------------------------------------------------------
// The device-plugin checkpoint (kubelet pkg/kubelet/cm/devicemanager/checkpoint)

function badCheckpoint(source: string, problem: string): CniError {
  return new CniError(CniCode.DecodingFailure, `${source} is not a valid kubelet device-plugin checkpoint: ${problem}`);
}

/** `DeviceIDs`: `{"<numa node>": [ids]}` since Kubernetes 1.20, a plain array before; null is none. */
function checkpointDeviceIds(value: unknown, where: string, source: string): string[] {
  if (value === undefined || value === null) return [];
  const isStrings = (v: unknown): v is string[] => Array.isArray(v) && v.every((id) => typeof id === 'string');
  if (Array.isArray(value)) {
    if (!isStrings(value)) throw badCheckpoint(source, `${where}.DeviceIDs must hold strings`);
    return value;
  }
  if (!isObject(value))
    throw badCheckpoint(source, `${where}.DeviceIDs must be an object of NUMA node -> IDs, or an array`);
  const nodes = Object.keys(value).map((key) => {
    if (!/^-?\d+$/.test(key))
      throw badCheckpoint(source, `${where}.DeviceIDs key ${JSON.stringify(key)} is not a NUMA node number`);
    const ids = value[key];
    if (ids !== null && !isStrings(ids))
      throw badCheckpoint(source, `${where}.DeviceIDs[${JSON.stringify(key)}] must be an array of strings`);
    return { node: Number(key), ids: ids ?? [] };
  });
  return nodes.sort((a, b) => a.node - b.node).flatMap((n) => n.ids);
}

function checkpointEntries(bytes: Buffer | string, source: string): unknown[] {
  let doc: unknown;
  try {
    doc = JSON.parse(typeof bytes === 'string' ? bytes : bytes.toString('utf8'));
  } catch (err) {
    throw badCheckpoint(source, `not JSON (${messageOf(err)}); it may be truncated`);
  }
  if (!isObject(doc)) throw badCheckpoint(source, 'expected a JSON object');
  if (!isObject(doc.Data)) throw badCheckpoint(source, '"Data" must be a JSON object');
  const entries = doc.Data.PodDeviceEntries;
  if (entries === undefined || entries === null) return [];
  if (!Array.isArray(entries)) throw badCheckpoint(source, '"Data.PodDeviceEntries" must be an array');
  return entries;
}

/** One container's devices of one resource, as the kubelet lists them (a pod-resources entry, a checkpoint entry). */
export interface DeviceEntry {
  container: string;
  resourceName: string;
  ids: readonly string[];
}

/**
 * The checkpoint's device allocations: pod UID -> its entries in file order (one per container and resource,
 * NUMA nodes in numeric order). The checksum is not verified: it is a hash of Go's in-memory layout, and Go
 * Multus does not check it either. Throws CniError(DecodingFailure) naming `source` and what is wrong.
 */
export function parseCheckpoint(bytes: Buffer | string, source = DEVICE_CHECKPOINT_FILE): Map<string, DeviceEntry[]> {
  const pods = new Map<string, DeviceEntry[]>();
  checkpointEntries(bytes, source).forEach((entry, i) => {
    const where = `Data.PodDeviceEntries[${i}]`;
    if (!isObject(entry)) throw badCheckpoint(source, `${where} must be a JSON object`);
    const { PodUID: uid, ResourceName: resource, ContainerName: container } = entry;
    if (typeof uid !== 'string') throw badCheckpoint(source, `${where}.PodUID must be a string`);
    if (typeof resource !== 'string') throw badCheckpoint(source, `${where}.ResourceName must be a string`);
    if (container !== undefined && typeof container !== 'string')
      throw badCheckpoint(source, `${where}.ContainerName must be a string`);
    const ids = checkpointDeviceIds(entry.DeviceIDs, where, source);
    const entries = pods.get(uid) ?? [];
    entries.push({ container: container ?? '', resourceName: resource, ids });
    pods.set(uid, entries);
  });
  return pods;
}

/**
 * The device-plugin resources registered on the node (the checkpoint's `Data.RegisteredDevices` names with at least
 * one device), for saying whether a pool exists on the node at all; undefined when the file cannot tell.
 */
export function registeredPools(file = DEVICE_CHECKPOINT_FILE): Set<string> | undefined {
  try {
    const doc: unknown = JSON.parse(readFileSync(file, 'utf8'));
    const registered = isObject(doc) && isObject(doc.Data) ? doc.Data.RegisteredDevices : undefined;
    if (registered === null) return new Set();
    if (!isObject(registered)) return undefined;
    return new Set(Object.keys(registered).filter((k) => Array.isArray(registered[k]) && registered[k].length > 0));
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Resource maps (pure)

const compareBytes = (a: string, b: string): number => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));

/**
 * Go sort.Strings order: by UTF-8 bytes. Without surrogates (astral characters) UTF-16 order is the same and
 * much faster, which matters for the largest pod-resources answers (a million IDs).
 */
function sortIds(ids: readonly string[]): string[] {
  const astral = ids.some((id) => /[\uD800-\uDFFF]/.test(id));
  return astral ? [...ids].sort(compareBytes) : [...ids].sort(); // sort(): UTF-16 code unit order
}

/**
 * k8snetworkplumbingwg/multus-cni#1539 (after #1540 reverted v4.3.0's pod-wide sort, #1481): per resource name, each
 * container's IDs
 * (all its entries of that resource, NUMA nodes included) sorted, the containers appended in their order, so
 * the n-th attachment of a resource gets a device of the container it belongs with
 * (docs/behaviour.md#device-ids). The entries are not changed.
 */
function orderByContainer(entries: readonly DeviceEntry[]): ResourceMap {
  const containers = new Map<string, ResourceMap>();
  for (const entry of entries) {
    const own = containers.get(entry.container) ?? new Map<string, string[]>();
    appendIds(own, entry.resourceName, entry.ids);
    containers.set(entry.container, own);
  }
  const resources: ResourceMap = new Map();
  for (const own of containers.values()) for (const [name, ids] of own) appendIds(resources, name, sortIds(ids));
  return resources;
}

/** One pod's resource map from a parsed checkpoint, matched by pod UID (docs/behaviour.md#device-ids). */
export function resourceMapFromCheckpoint(entries: Map<string, DeviceEntry[]>, podUid: string): ResourceMap {
  if (podUid === '')
    throw new CniError(CniCode.InvalidConfig, 'cannot match the device-plugin checkpoint: the pod UID is empty');
  return orderByContainer(entries.get(podUid) ?? []);
}

function assertPodNamed(podNamespace: string, podName: string): void {
  if (podNamespace === '' || podName === '') {
    throw new CniError(CniCode.InvalidConfig, 'cannot match pod resources: the pod name or namespace is empty');
  }
}

/**
 * One pod's resource map from a pod-resources List response, matched by namespace and name: per resource name,
 * each container's IDs sorted, containers in the kubelet's order (docs/behaviour.md#device-ids).
 */
export function resourceMapFromPodResources(
  listResponse: ListPodResourcesResponse,
  podNamespace: string,
  podName: string,
): ResourceMap {
  assertPodNamed(podNamespace, podName);
  const entries: DeviceEntry[] = [];
  listResponse.podResources.forEach((pod, p) => {
    if (pod.namespace !== podNamespace || pod.name !== podName) return;
    pod.containers.forEach((c, i) => {
      // keyed by position: two entries for one pod (never expected) must not merge their containers
      const container = `${p}/${i}`;
      for (const d of c.devices) entries.push({ container, resourceName: d.resourceName, ids: d.deviceIds });
    });
  });
  return orderByContainer(entries);
}

/**
 * Hands out device IDs in list order, with one cursor per resource name (docs/behaviour.md#device-ids step 5). An
 * exhausted or absent resource gives `undefined`: the attachment then simply has no device ID. No I/O; one per ADD.
 */
export class DeviceAllocator {
  readonly #resources: ResourceMap;
  readonly #cursors = new Map<string, number>();

  constructor(resources: ResourceMap) {
    this.#resources = new Map([...resources].map(([name, ids]) => [name, [...ids]]));
  }

  next(resourceName: string): string | undefined {
    const ids = this.#resources.get(resourceName);
    const cursor = this.#cursors.get(resourceName) ?? 0;
    const id = ids?.[cursor];
    if (id !== undefined) this.#cursors.set(resourceName, cursor + 1);
    return id;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Reading the resource map (I/O)

export interface PodIdentity {
  namespace: string;
  name: string;
  uid: string;
}

export interface ResourceMapDeps {
  /** Default POD_RESOURCES_SOCKET; when it exists it is used, else the checkpoint. */
  podResourcesSocket?: string;
  /** Default DEVICE_CHECKPOINT_FILE. */
  checkpointFile?: string;
  dialTimeoutMs?: number;
  callTimeoutMs?: number;
  maxMessageBytes?: number;
  log?: Logger;
}

/** Go Multus hasKubeletAPIEndpoint: anything at the path (os.Stat succeeds) selects the socket. */
function pathExists(path: string): boolean {
  try {
    statSync(path);
    return true;
  } catch {
    return false;
  }
}

async function readFromPodResources(pod: PodIdentity, socketPath: string, deps: ResourceMapDeps): Promise<ResourceMap> {
  assertPodNamed(pod.namespace, pod.name);
  const { listPodResources } = await loadKubelet();
  const response = await listPodResources({
    socketPath,
    dialTimeoutMs: deps.dialTimeoutMs ?? POD_RESOURCES_TIMEOUT_MS,
    callTimeoutMs: deps.callTimeoutMs ?? POD_RESOURCES_TIMEOUT_MS,
    maxMessageBytes: deps.maxMessageBytes ?? POD_RESOURCES_MAX_MESSAGE_BYTES,
  });
  return resourceMapFromPodResources(response, pod.namespace, pod.name);
}

function readFromCheckpoint(pod: PodIdentity, file: string): ResourceMap {
  let bytes: Buffer;
  try {
    bytes = readFileSync(file);
  } catch (err) {
    throw new CniError(CniCode.IoFailure, `cannot read ${file}: ${messageOf(err)}`, { cause: err });
  }
  return resourceMapFromCheckpoint(parseCheckpoint(bytes, file), pod.uid);
}

/**
 * The pod's resource map from the kubelet: the pod-resources socket when it exists (matched by namespace and
 * name), else the device-plugin checkpoint (matched by UID). Either failure is a CniError whose message
 * starts "failed to get resourceMap" and keeps the underlying code (TryAgainLater for an unreachable or slow
 * kubelet). Multus builds this once per ADD, on the first NAD with a resource name.
 */
export async function readResourceMap(pod: PodIdentity, deps: ResourceMapDeps = {}): Promise<ResourceMap> {
  const socketPath = deps.podResourcesSocket ?? POD_RESOURCES_SOCKET;
  if (pathExists(socketPath)) {
    deps.log?.debug(`readResourceMap: using the kubelet pod-resources API at ${socketPath}`);
    try {
      return await readFromPodResources(pod, socketPath, deps);
    } catch (err) {
      throw wrapError(err, `failed to get resourceMap from the kubelet pod-resources API at ${socketPath}`);
    }
  }
  const file = deps.checkpointFile ?? DEVICE_CHECKPOINT_FILE;
  deps.log?.debug(`readResourceMap: ${socketPath} does not exist, using the device-plugin checkpoint ${file}`);
  try {
    return readFromCheckpoint(pod, file);
  } catch (err) {
    throw wrapError(err, 'failed to get resourceMap from the device-plugin checkpoint');
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Device IDs in delegate configs (pure)

/**
 * A copy of `config` with `deviceID` and `pciBusID` set to `deviceId` (docs/behaviour.md#delegate-config): at the top
 * level of a single config (non-empty `type`, the rule parseNetwork uses), else in every plugin of a conflist. Never
 * mutates.
 */
export function injectDeviceId(config: Json, deviceId: string): Json {
  const out = structuredClone(config);
  const isSingle = typeof out.type === 'string' && out.type !== '';
  if (isSingle) return { ...out, deviceID: deviceId, pciBusID: deviceId };
  if (!Array.isArray(out.plugins)) {
    throw new CniError(
      CniCode.InvalidConfig,
      "cannot set the device ID: the config has neither a 'type' nor a 'plugins' array",
    );
  }
  out.plugins = out.plugins.map((plugin: unknown, i: number) => {
    if (!isObject(plugin))
      throw new CniError(CniCode.InvalidConfig, `cannot set the device ID: plugins[${i}] is not a JSON object`);
    return { ...plugin, deviceID: deviceId, pciBusID: deviceId };
  });
  return out;
}

/** `injectDeviceId` on a delegate network; the new bytes (cached for DEL) carry the device ID. */
export function injectDeviceIdIntoNetwork(network: Network, deviceId: string): Network {
  return editNetwork(network, (config) => injectDeviceId(config, deviceId));
}
