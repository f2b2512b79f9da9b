#!/usr/bin/env node
/**
 * scripts/image.sh's last step: the platforms' images umoci made in one layout (tagged with their architectures)
 * become one OCI image index, the layout's only entry:
 *
 *   node scripts/image-index.mjs LAYOUT TAG REF ARCHIVE_INDEX
 *
 * LAYOUT/index.json then names the index TAG (as umoci and skopeo address it: oci:LAYOUT:TAG); ARCHIVE_INDEX gets the
 * same index.json with the image's full name REF (NAME:TAG) in `org.opencontainers.image.ref.name` and
 * `io.containerd.image.name`, which podman and containerd read from an archive. Each manifest's descriptor in the
 * index carries its platform (os, architecture) from its config. Prints each platform's compressed layer bytes.
 */
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const INDEX = 'application/vnd.oci.image.index.v1+json';

/**
 * The index of `manifests` (descriptors, each with its platform): its bytes and its descriptor.
 * @param {Array<Record<string, unknown>>} manifests
 */
function imageIndex(manifests) {
  const bytes = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: INDEX, manifests }));
  const digest = `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
  return { bytes, descriptor: { mediaType: INDEX, digest, size: bytes.length } };
}

function main() {
  const [layout, tag, ref, archiveIndex] = process.argv.slice(2);
  if (!archiveIndex) throw new Error('usage: image-index.mjs LAYOUT TAG REF ARCHIVE_INDEX');
  const blob = (/** @type {string} */ digest) => join(layout, 'blobs', ...digest.split(':'));
  const read = (/** @type {string} */ digest) => JSON.parse(readFileSync(blob(digest), 'utf8'));
  const top = JSON.parse(readFileSync(join(layout, 'index.json'), 'utf8'));
  const sizes = [];
  const manifests = top.manifests.map((/** @type {any} */ m) => {
    const manifest = read(m.digest);
    const config = read(manifest.config.digest);
    const platform = { architecture: config.architecture, os: config.os };
    const bytes = manifest.layers.reduce((/** @type {number} */ n, /** @type {any} */ l) => n + l.size, 0);
    sizes.push(`${platform.os}/${platform.architecture} ${bytes} bytes (${(bytes / 1e6).toFixed(1)} MB)`);
    return { mediaType: m.mediaType, digest: m.digest, size: m.size, platform };
  });
  const { bytes, descriptor } = imageIndex(manifests);
  writeFileSync(blob(descriptor.digest), bytes, { mode: 0o644 });
  const index = (/** @type {Record<string, string>} */ annotations) =>
    JSON.stringify({ schemaVersion: 2, mediaType: INDEX, manifests: [{ ...descriptor, annotations }] });
  writeFileSync(join(layout, 'index.json'), index({ 'org.opencontainers.image.ref.name': tag }), { mode: 0o644 });
  const named = { 'org.opencontainers.image.ref.name': ref, 'io.containerd.image.name': ref };
  writeFileSync(archiveIndex, index(named), { mode: 0o644 });
  process.stdout.write(sizes.join(', '));
}

if (process.argv[1] && import.meta.filename === process.argv[1]) main();
