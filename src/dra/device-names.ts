/**
 * dra/device-names.ts: the names of the devices our DRA driver publishes (pure; docs/behaviour.md#claim-networks).
 *
 * `any` is the device of every network: the claim's opaque config says which. A NAD that opts in gets a device of
 * its own, named by `networkDeviceName(namespace, name)`: a DNS label (a device name must be one) that a reader
 * recognises (the NAD's name and namespace, cut to fit) ending in ten hex digits of the SHA-256 of
 * `<namespace>/<name>`, so two NADs never share a name however their parts are cut or dashed. The name cannot be
 * read back; the device's attributes (`DRA_NAMESPACE_ATTRIBUTE`, `DRA_NAME_ATTRIBUTE`) say which NAD it is.
 * Tested by test/unit/dra/device-names.test.ts.
 */
/** The device of any network (the claim's config names it). */
export const ANY_NETWORK_DEVICE = 'any';

/** The domain of our device attributes and capacity. */
export const DRA_ATTRIBUTE_DOMAIN = 'dra.multus.k8s.cni.cncf.io';
export const DRA_KIND_ATTRIBUTE = `${DRA_ATTRIBUTE_DOMAIN}/kind`;
export const DRA_NAMESPACE_ATTRIBUTE = `${DRA_ATTRIBUTE_DOMAIN}/namespace`;
export const DRA_NAME_ATTRIBUTE = `${DRA_ATTRIBUTE_DOMAIN}/name`;
export const DRA_CNI_TYPE_ATTRIBUTE = `${DRA_ATTRIBUTE_DOMAIN}/cniType`;
export const DRA_CAPACITY_NAME = `${DRA_ATTRIBUTE_DOMAIN}/attachments`;

/** The NAD annotations that publish a NAD as a device of its own, and its per-node capacity. */
export const DRA_DEVICE_ANNOTATION = `${DRA_ATTRIBUTE_DOMAIN}/device`;
export const DRA_CAPACITY_ANNOTATION = `${DRA_ATTRIBUTE_DOMAIN}/capacity`;

const MAX_LABEL = 63;
const HASH_HEX = 10;

/** The device name of the NAD `namespace/name`: a DNS label, unique per NAD (see the header). */
export function networkDeviceName(namespace: string, name: string): string {
  // node:crypto where it is used: the thin bundle carries this module (docs/build.md, its start-up discipline)
  const hash = process
    .getBuiltinModule('node:crypto')
    .createHash('sha256')
    .update(`${namespace}/${name}`)
    .digest('hex')
    .slice(0, HASH_HEX);
  const readable = `${name}-${namespace}`
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .slice(0, MAX_LABEL - HASH_HEX - 1)
    .replace(/^-+|-+$/g, '');
  return readable === '' ? `n-${hash}` : `${readable}-${hash}`;
}
