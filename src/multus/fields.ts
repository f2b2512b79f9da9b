/**
 * multus/fields.ts: the per-attachment fields, one row each (pure data).
 *
 * An attachment can carry requests beyond its network: an interface name, a MAC, IPs, an InfiniBand GUID, port
 * mappings, bandwidth, CNI args, default-route gateways, a device. Each row says where the field comes from in a
 * selection element (`annotation`, with its JSON kind and an example for error messages), which runtimeConfig key
 * it fills (`capability`, and whether a plugin must declare it), which CNI_ARGS key it adds on ADD (`cniArg`), and
 * how Multus' scratch cache records it (`cacheKey`, `cacheSlot`). Selection (multus/selection.ts), planning
 * (multus/attachments.ts) and the scratch-cache codec (multus/scratch-cache.ts) are all driven by this table, so a new
 * field is one row here plus, when its values need more than a type check, a validator in selection.ts.
 * Tested by test/unit/multus/selection.test.ts, test/unit/multus/scratch-cache.test.ts.
 */

/** What one attachment asks for; absent means "nothing asked". */
export interface AttachmentRequest {
  ifname?: string;
  mac?: string;
  ips?: string[];
  infinibandGUID?: string;
  defaultRoute?: string[];
  deviceID?: string;
  resourceName?: string;
  portMappings?: unknown[];
  bandwidth?: Record<string, unknown>;
  /** The selection's "cni-args": merged into the delegate config's `args.cni` (not CNI_ARGS). */
  configArgs?: Record<string, unknown>;
  /** The DRA device the deviceID came from (`{namespace, claim, driver, pool, device}`), set by device lookup. */
  claimDevice?: Record<string, unknown>;
  /** The selection's `resourceName`: the device pool of this attachment (Multus #1520; docs/behaviour.md#device-pool). */
  resourceNameRequest?: string;
  /** The selection's `resourceClaim`: `{claimName, requestName}`, the claim request whose device this attachment takes. */
  claimRequest?: Record<string, unknown>;
  /** The claim of our DRA driver the attachment came from (multus/claim-attach.ts `ClaimNetworkRef`). */
  claimNetwork?: Record<string, unknown>;
}

export type FieldKey = keyof AttachmentRequest;
export type FieldKind = 'string' | 'strings' | 'object' | 'objects';

export interface AttachmentField {
  key: FieldKey;
  kind: FieldKind;
  /** Keys of a JSON selection element that set it (the first is the documented one); none: not from a selection. */
  annotation: readonly string[];
  /** For "write it like" hints. */
  example: string;
  /** The runtimeConfig key the request fills for this attachment only (not for the cluster network). */
  capability?: string;
  /** NPWG: a plugin of the network must declare `capability` (docs/behaviour.md#npwg). */
  mustDeclare?: boolean;
  /** The CNI_ARGS key added on ADD (arrays joined with ","). */
  cniArg?: string;
  /** An empty array is still a request (`default-route: []` is kept: it removes every default route, as in Multus). */
  keepEmpty?: boolean;
  /** The scratch cache key, and where Go Multus' struct puts it: before or after the gateway filters, or after
   * `Bytes` as our own extension (Go Multus does not record it and ignores the key). */
  cacheKey: string;
  cacheSlot: 'head' | 'tail' | 'extension';
}

/** In the scratch cache's key order (Go Multus' DelegateNetConf field order, then our extensions). */
export const ATTACHMENT_FIELDS: readonly AttachmentField[] = [
  {
    key: 'ifname',
    kind: 'string',
    annotation: ['interface', 'interfaceRequest'],
    example: '"net1"',
    cacheKey: 'ifnameRequest',
    cacheSlot: 'head',
  },
  {
    key: 'mac',
    kind: 'string',
    annotation: ['mac'],
    example: '"c2:b0:57:49:47:f1"',
    capability: 'mac',
    mustDeclare: true,
    cniArg: 'MAC',
    cacheKey: 'macRequest',
    cacheSlot: 'head',
  },
  {
    key: 'infinibandGUID',
    kind: 'string',
    annotation: ['infiniband-guid'],
    example: '"c2:b0:57:49:47:f1:00:01"',
    capability: 'infinibandGUID',
    mustDeclare: true,
    cacheKey: 'infinibandGUIDRequest',
    cacheSlot: 'head',
  },
  {
    key: 'ips',
    kind: 'strings',
    annotation: ['ips'],
    example: '["10.1.1.11/24"]',
    capability: 'ips',
    mustDeclare: true,
    cniArg: 'IP',
    cacheKey: 'ipRequest',
    cacheSlot: 'head',
  },
  {
    key: 'defaultRoute',
    kind: 'strings',
    annotation: ['default-route'],
    example: '["10.1.1.1"]',
    keepEmpty: true,
    cacheKey: 'default-route',
    cacheSlot: 'head',
  },
  {
    key: 'deviceID',
    kind: 'string',
    annotation: ['deviceID'],
    example: '"0000:03:00.1"',
    capability: 'deviceID',
    cacheKey: 'deviceID',
    cacheSlot: 'tail',
  },
  {
    key: 'resourceName',
    kind: 'string',
    annotation: [],
    example: '"intel.com/sriov"',
    cacheKey: 'resourceName',
    cacheSlot: 'tail',
  },
  {
    key: 'portMappings',
    kind: 'objects',
    annotation: ['portMappings'],
    example: '[{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]',
    capability: 'portMappings',
    mustDeclare: true,
    cacheKey: 'portMappingsRequest',
    cacheSlot: 'extension',
  },
  {
    key: 'bandwidth',
    kind: 'object',
    annotation: ['bandwidth'],
    example: '{"ingressRate": 1000000, "ingressBurst": 1000000}',
    capability: 'bandwidth',
    mustDeclare: true,
    cacheKey: 'bandwidthRequest',
    cacheSlot: 'extension',
  },
  {
    key: 'configArgs',
    kind: 'object',
    annotation: ['cni-args'],
    example: '{"key": "value"}',
    cacheKey: 'cniArgsRequest',
    cacheSlot: 'extension',
  },
  {
    key: 'claimDevice',
    kind: 'object',
    annotation: [],
    example: '{"namespace": "ns", "claim": "c", "driver": "d", "pool": "p", "device": "d0"}',
    cacheKey: 'draClaimDevice',
    cacheSlot: 'extension',
  },
  {
    key: 'resourceNameRequest',
    kind: 'string',
    annotation: ['resourceName'],
    example: '"intel.com/sriov"',
    cacheKey: 'resourceNameRequest',
    cacheSlot: 'extension',
  },
  {
    key: 'claimRequest',
    kind: 'object',
    annotation: ['resourceClaim'],
    example: '{"claimName": "gpu-nic", "requestName": "nic"}',
    cacheKey: 'resourceClaimRequest',
    cacheSlot: 'extension',
  },
  {
    key: 'claimNetwork',
    kind: 'object',
    annotation: [],
    example:
      '{"namespace": "ns", "claim": "c", "request": "net", "driver": "multus.k8s.cni.cncf.io", "pool": "node-1", "device": "any"}',
    cacheKey: 'draClaimNetwork',
    cacheSlot: 'extension',
  },
];

/**
 * The order runtimeConfig keys are added in and undeclared capabilities are named in (kept from before the table,
 * so delegates see the same runtimeConfig bytes).
 */
export const CAPABILITY_ORDER: readonly FieldKey[] = [
  'portMappings',
  'bandwidth',
  'ips',
  'mac',
  'infinibandGUID',
  'deviceID',
];

/** Whether `value` asks for something: '' and [] do not (unless the field keeps [] ), objects always do. */
export function isRequested(field: AttachmentField, value: unknown): boolean {
  if (value === undefined || value === null || value === '') return false;
  if (Array.isArray(value) && value.length === 0) return field.keepEmpty === true;
  return true;
}

/** The CNI_ARGS value of a field's request. */
export function cniArgValue(value: unknown): string {
  return Array.isArray(value) ? value.join(',') : String(value);
}
