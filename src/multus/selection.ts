/**
 * selection.ts: a pod's network selection annotations, parsed and checked (pure, no I/O).
 *
 * `parseNetworkSelections` reads `k8s.v1.cni.cncf.io/networks` (docs/behaviour.md#networks-annotation): absent or empty
 * means no networks; text containing `[`, `{` or `"` is a JSON array of selection objects; anything else is
 * the comma list `[<namespace>/]<name>[@<ifname>]`, split, trimmed and DNS-1123-checked exactly as Multus'
 * parsePodNetworkObjectName does. `parseDefaultNetworkAnnotation` reads `v1.multus-cni.io/default-network`
 * (docs/behaviour.md#default-network-annotation), `checkNamespaceIsolation` applies
 * docs/behaviour.md#namespace-isolation and `validateDefaultRoutes` the `default-route` rules.
 *
 * Messages keep Multus' texts as their core (`parsePodNetworkAnnotation: ...`), then name the annotation and
 * the bad element and say what to fix; the caller prefixes the pod. All errors are CniError(7).
 *
 * Deliberate differences from Multus (each fails the pod where Multus fails later, panics or misbehaves):
 * - Text form: an empty element (`net1,,net2`, a trailing comma, `ns/`, `@eth1`) is rejected here; Multus
 *   builds an element with an empty name that fails only at the NAD lookup.
 * - JSON form: a missing or empty `name`, a non-object element (`null` makes Multus panic), a key of the wrong
 *   JSON type and a `cni-args` that is not an object are rejected, naming the element and the key.
 * - Interface names (text `@if`, JSON `interface`/`interfaceRequest`) get libcni's full check here (≤ 15
 *   bytes, not `.`/`..`, no `/`, `:` or whitespace); Multus checks part of it and libcni the rest at ADD.
 * - `default-route` (docs/behaviour.md#npwg): only one element may carry the key. `"default-route": []` is
 *   accepted, as the spec allows and Multus does (routes/routes.ts plans its effect).
 * - An empty default-network annotation or one naming no network (`[]`) is a clear error (Multus: a
 *   misleading message, or a panic).
 */
import { CniCode, CniError, isCniError } from '../base/errors.ts';
import type { AttachmentRequest, FieldKind } from './fields.ts';
import { ATTACHMENT_FIELDS, isRequested } from './fields.ts';
import { validateIfName } from '../base/names.ts';
import { isObject } from '../base/json.ts';
import { isGoCidr, isGoIp, isV4, macError } from '../cni/ip.ts';
import { deviceKeyProblem } from './selection-devices.ts';

/** One element of a selection annotation, normalised; `namespace` is already defaulted. */
export interface NetworkSelection {
  name: string;
  namespace: string;
  request: AttachmentRequest;
}

export const NETWORKS_ANNOTATION = 'k8s.v1.cni.cncf.io/networks';
const DEFAULT_NETWORK_KEY = 'v1.multus-cni.io/default-network';
const TEXT_FORM = '[<namespace>/]<name>[@<ifname>]';
export const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const JSON_FORMAT_ERROR = 'failed to parse pod Network Attachment Selection Annotation JSON format';

type Obj = Record<string, unknown>;

function preview(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 60 ? `${text.slice(0, 60)}…` : text;
}

/** `parsePodNetworkAnnotation: <core> (<where>); <fix>`. */
function annotationError(core: string, where: string, fix: string): CniError {
  return new CniError(CniCode.InvalidConfig, `parsePodNetworkAnnotation: ${core} (${where}); ${fix}`);
}

// ---------------------------------------------------------------------------------------------------------
// Text form.

interface Parsed {
  name: string;
  namespace: string;
  request: AttachmentRequest;
}

/** Interface names get libcni's rules; the core of the message is Multus' own. */
function checkIfName(ifname: string, where: string): void {
  try {
    validateIfName(ifname);
  } catch (err) {
    if (!isCniError(err)) throw err;
    throw annotationError(
      `parsePodNetworkObjectName: Failed to parse interface name: must be less than 15 chars and not contain '/' or spaces. interface name '${ifname}'`,
      where,
      `${err.msg}; choose another interface name`,
    );
  }
}

function checkDns1123(value: string, where: string): void {
  if (value === '' || DNS1123_LABEL.test(value)) return;
  throw annotationError(
    `parsePodNetworkObjectName: Failed to parse: one or more items did not match comma-delimited format (must consist of lower case alphanumeric characters). Must start and end with an alphanumeric character), mismatch @ '${value}'`,
    where,
    `namespaces and names in the text form are DNS-1123 labels: lower case letters, digits and "-"`,
  );
}

/**
 * Multus parsePodNetworkObjectName: split on "/", then the rest on "@", trim, check.
 * compat: the "@" split comes after the "/" split, so `ns@x/net` puts "@" into the namespace (then rejected).
 */
function parseTextItem(raw: string, where: string): Parsed {
  const slashItems = raw.split('/');
  if (slashItems.length > 2) {
    throw annotationError(
      "parsePodNetworkObjectName: Invalid network object (failed at '/')",
      where,
      `write ${TEXT_FORM} with at most one "/"`,
    );
  }
  const namespace = slashItems.length === 2 ? slashItems[0]!.trim() : '';
  const atItems = slashItems[slashItems.length - 1]!.split('@');
  if (atItems.length > 2) {
    throw annotationError(
      "parsePodNetworkObjectName: Invalid network object (failed at '@')",
      where,
      `write ${TEXT_FORM} with at most one "@"`,
    );
  }
  const name = atItems[0]!.trim();
  const ifname = (atItems[1] ?? '').trim();
  checkDns1123(namespace, where);
  checkDns1123(name, where);
  if (name === '') {
    throw annotationError(
      'network name is empty',
      where,
      `name a NetworkAttachmentDefinition in every element (${TEXT_FORM}) and remove stray commas`,
    );
  }
  if (ifname !== '') checkIfName(ifname, where);
  return { name, namespace, request: ifname === '' ? {} : { ifname } };
}

function parseTextForm(annotation: string, key: string): Parsed[] {
  return annotation
    .split(',')
    .map((item, i) => parseTextItem(item, `element ${i} (${JSON.stringify(item.trim())}) of ${key}`));
}

// ---------------------------------------------------------------------------------------------------------
// JSON form.

type Kind = FieldKind;
/** The keys a JSON element may have: its name and namespace, then one per attachment field (multus/fields.ts). */
const FIELDS: Record<string, { kind: Kind; example: string }> = {
  name: { kind: 'string', example: '"macvlan-conf"' },
  namespace: { kind: 'string', example: '"default"' },
  ...Object.fromEntries(
    ATTACHMENT_FIELDS.flatMap((f) => f.annotation.map((key) => [key, { kind: f.kind, example: f.example }])),
  ),
};
const KIND_TEXT: Record<Kind, string> = {
  string: 'a string',
  strings: 'an array of strings',
  object: 'an object',
  objects: 'an array of objects',
};

function hasKind(value: unknown, kind: Kind): boolean {
  if (kind === 'string') return typeof value === 'string';
  if (kind === 'object') return isObject(value);
  const item = kind === 'strings' ? (v: unknown) => typeof v === 'string' : isObject;
  return Array.isArray(value) && value.every(item);
}

/**
 * The known keys of one element, type-checked; JSON null reads as absent (Go leaves the zero value).
 * compat: keys match case-insensitively (no two known keys fold alike), as Go's encoding/json does; unknown
 * keys are ignored.
 */
function readFields(element: Obj, where: string): Obj {
  const names = Object.keys(FIELDS);
  const out: Obj = {};
  for (const [key, value] of Object.entries(element)) {
    const field = names.find((n) => n.toLowerCase() === key.toLowerCase());
    if (field === undefined || value === null) continue;
    const spec = FIELDS[field]!;
    if (!hasKind(value, spec.kind)) {
      const core = `${JSON_FORMAT_ERROR}: "${key}" must be ${KIND_TEXT[spec.kind]}, got ${preview(value)}`;
      throw annotationError(core, where, `write it like "${field}": ${spec.example}`);
    }
    out[field] = value;
  }
  return out;
}

function checkIps(ips: string[], where: string): void {
  for (const ip of ips) {
    const fix = 'give an IP such as "10.1.1.11" or a CIDR such as "10.1.1.11/24"';
    if (ip.includes('/')) {
      if (!isGoCidr(ip))
        throw annotationError(`failed to parse CIDR ${JSON.stringify(ip)}: invalid CIDR address: ${ip}`, where, fix);
    } else if (!isGoIp(ip)) {
      throw annotationError(`failed to parse IP address ${JSON.stringify(ip)}`, where, fix);
    }
  }
}

function checkMac(value: string, core: string, where: string, fix: string): void {
  const err = macError(value);
  if (err !== null) throw annotationError(`${core}: ${err}`, where, fix);
}

function checkGateways(gateways: string[], where: string): void {
  const bad = gateways.find((gw) => !isGoIp(gw));
  if (bad !== undefined) {
    throw annotationError(
      `${JSON_FORMAT_ERROR}: invalid IP address: ${bad}`,
      where,
      '"default-route" lists gateway IPs such as ["10.1.1.1"]',
    );
  }
}

/** The request of one JSON element from its checked fields (the first annotation key set wins: pre-3.2 aliases). */
function requestOf(f: Obj): AttachmentRequest {
  const request: Record<string, unknown> = {};
  for (const field of ATTACHMENT_FIELDS) {
    const value = field.annotation.map((key) => f[key]).find((v) => isRequested(field, v));
    if (value !== undefined) request[field.key] = value;
  }
  return request as AttachmentRequest;
}

function parseJsonElement(element: unknown, at: string, key: string): Parsed {
  if (!isObject(element)) {
    throw annotationError(
      `${JSON_FORMAT_ERROR}: ${at} must be an object, got ${preview(element)}`,
      key,
      'write each element like {"name": "macvlan-conf"}',
    );
  }
  const named =
    typeof element.name === 'string' && element.name !== '' ? `${at} (${JSON.stringify(element.name)})` : at;
  const where = `${named} of ${key}`;
  const f = readFields(element, where);
  if (!f.name)
    throw annotationError(`${at} has no "name"`, key, 'set "name" to the NetworkAttachmentDefinition\'s name');
  const request = requestOf(f);
  if (request.ifname) checkIfName(request.ifname, where);
  checkIps(request.ips ?? [], where);
  if (request.mac)
    checkMac(request.mac, 'failed to mac', where, 'give 6, 8 or 20 hex octets such as "c2:b0:57:49:47:f1"');
  if (request.infinibandGUID) {
    checkMac(
      request.infinibandGUID,
      'failed to validate infiniband GUID',
      where,
      'give a GUID of 8 hex octets such as "c2:b0:57:49:47:f1:00:01"',
    );
  }
  checkGateways(request.defaultRoute ?? [], where);
  const device = deviceKeyProblem(request);
  if (device) throw annotationError(device.core, where, device.fix);
  return { name: f.name as string, namespace: (f.namespace as string | undefined) ?? '', request };
}

function parseJsonForm(annotation: string, key: string): Parsed[] {
  let value: unknown;
  try {
    value = JSON.parse(annotation);
  } catch (err) {
    throw annotationError(
      `${JSON_FORMAT_ERROR}: ${(err as Error).message}`,
      key,
      `write a JSON array such as [{"name": "macvlan-conf"}] or the text form ${TEXT_FORM},...`,
    );
  }
  if (!Array.isArray(value)) {
    const got = isObject(value) ? 'an object' : preview(value);
    throw annotationError(
      `${JSON_FORMAT_ERROR}: expected an array of selection objects, got ${got}`,
      key,
      'wrap the element in [ ]',
    );
  }
  return value.map((element, i) => parseJsonElement(element, `element ${i}`, key));
}

function parseAnnotation(annotation: string, defaultNamespace: string, key: string): NetworkSelection[] {
  const parsed = /[[{"]/.test(annotation) ? parseJsonForm(annotation, key) : parseTextForm(annotation, key);
  return parsed.map((p) => ({ name: p.name, namespace: p.namespace || defaultNamespace, request: p.request }));
}

// ---------------------------------------------------------------------------------------------------------
// Public API.

/** `k8s.v1.cni.cncf.io/networks` (docs/behaviour.md#networks-annotation); namespaces default to `defaultNamespace` (the pod's). */
export function parseNetworkSelections(annotation: string | undefined, defaultNamespace: string): NetworkSelection[] {
  if (annotation === undefined || annotation === '') return [];
  return parseAnnotation(annotation, defaultNamespace, NETWORKS_ANNOTATION);
}

/**
 * One element of the JSON form found elsewhere than in the annotation (a DRA claim's opaque `NetworkSelection`,
 * docs/behaviour.md#claim-networks): the same checks and messages; `at` names it, `key` where it was read.
 */
export function parseSelectionElement(
  element: unknown,
  defaultNamespace: string,
  at: string,
  key: string,
): NetworkSelection {
  const p = parseJsonElement(element, at, key);
  return { name: p.name, namespace: p.namespace || defaultNamespace, request: p.request };
}

/**
 * `v1.multus-cni.io/default-network` (docs/behaviour.md#default-network-annotation): at most one network, namespace
 * defaulting to `multusNamespace`.
 * Absent → undefined. Requests other than the interface name are the caller's to ignore.
 */
export function parseDefaultNetworkAnnotation(
  annotation: string | undefined,
  multusNamespace: string,
): NetworkSelection | undefined {
  if (annotation === undefined) return undefined;
  const fix = `name one NetworkAttachmentDefinition ([<namespace>/]<name>) or remove the annotation`;
  if (annotation === '') {
    throw new CniError(
      CniCode.InvalidConfig,
      `tryLoadK8sPodDefaultNetwork: the ${DEFAULT_NETWORK_KEY} annotation is empty; ${fix}`,
    );
  }
  let selections: NetworkSelection[];
  try {
    selections = parseAnnotation(annotation, multusNamespace, DEFAULT_NETWORK_KEY);
  } catch (err) {
    if (!isCniError(err)) throw err;
    throw new CniError(err.code, `tryLoadK8sPodDefaultNetwork: failed to parse CRD object: ${err.msg}`, { cause: err });
  }
  if (selections.length > 1) {
    throw new CniError(
      CniCode.InvalidConfig,
      `tryLoadK8sPodDefaultNetwork: more than one default network is specified: ${annotation}; ${fix}`,
    );
  }
  const [selection] = selections;
  if (selection === undefined) {
    throw new CniError(
      CniCode.InvalidConfig,
      `tryLoadK8sPodDefaultNetwork: the ${DEFAULT_NETWORK_KEY} annotation names no network; ${fix}`,
    );
  }
  return selection;
}

/** docs/behaviour.md#namespace-isolation: with namespaceIsolation, a selection may only name the pod's namespace or a global one. */
export function checkNamespaceIsolation(
  selections: Pick<NetworkSelection, 'namespace' | 'name'>[],
  podNamespace: string,
  globalNamespaces: string[],
  where: string = NETWORKS_ANNOTATION,
): void {
  for (const s of selections) {
    if (s.namespace === podNamespace || globalNamespaces.includes(s.namespace)) continue;
    throw new CniError(
      CniCode.InvalidConfig,
      `GetNetworkDelegates: namespace isolation enabled, annotation violates permission, pod is in namespace ${podNamespace} but refers to target namespace ${s.namespace}` +
        ` (network "${s.namespace}/${s.name}" in ${where}); use a NetworkAttachmentDefinition in namespace ${podNamespace}` +
        ` or in a global namespace (${globalNamespaces.join(', ') || 'none configured'})`,
    );
  }
}

const label = (s: NetworkSelection, i: number): string => `element ${i} ("${s.namespace}/${s.name}")`;

/**
 * The `default-route` requests of all selections: at most one IPv4 and one IPv6 gateway (Multus' ECMP check,
 * docs/behaviour.md#default-route), on at most one element (docs/behaviour.md#npwg). An empty list is a request
 * too: "This list may be empty" (NPWG §4.1.2.1.9).
 */
export function validateDefaultRoutes(selections: NetworkSelection[]): void {
  const carriers = selections.flatMap((s, i) =>
    s.request.defaultRoute === undefined ? [] : [{ s, i, gws: s.request.defaultRoute }],
  );
  const all = carriers.flatMap((c) => c.gws.map((gw) => `${gw} in ${label(c.s, c.i)}`));
  const v4 = carriers.flatMap((c) => c.gws.filter(isV4)).length;
  if (v4 > 1 || all.length - v4 > 1) {
    throw new CniError(
      CniCode.InvalidConfig,
      `multus does not support ECMP for default-route: ${NETWORKS_ANNOTATION} asks for ${all.join(', ')}; give at most one IPv4 and one IPv6 gateway`,
    );
  }
  const [first, second] = carriers;
  if (first && second) {
    throw new CniError(
      CniCode.InvalidConfig,
      `"default-route" is set on both ${label(first.s, first.i)} and ${label(second.s, second.i)} of ${NETWORKS_ANNOTATION}, but only one element may carry it (NPWG §4.1.2.1.9); keep it on the attachment that should own the pod's default route`,
    );
  }
}
