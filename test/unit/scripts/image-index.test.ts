/**
 * scripts/image-index.mjs: the platforms' manifests umoci made in one layout become one OCI image index, the layout's
 * only entry (tagged), and the archive's index.json names the image in full for containerd and podman.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

const SCRIPT = join(import.meta.dirname, '../../../scripts/image-index.mjs');
const MANIFEST = 'application/vnd.oci.image.manifest.v1+json';
let dir = '';
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** A blob in the layout; its descriptor. */
function blob(layout: string, value: unknown, mediaType = MANIFEST) {
  const bytes = Buffer.from(JSON.stringify(value));
  const hex = createHash('sha256').update(bytes).digest('hex');
  writeFileSync(join(layout, 'blobs', 'sha256', hex), bytes);
  return { mediaType, digest: `sha256:${hex}`, size: bytes.length };
}

describe('image-index.mjs', () => {
  it('one index of the platforms (from their configs), tagged in the layout, named in full in the archive', () => {
    dir = mkdtempSync(join(tmpdir(), 'mts-image-index-'));
    const layout = join(dir, 'oci');
    mkdirSync(join(layout, 'blobs', 'sha256'), { recursive: true });
    const entries = (['amd64', 'arm64'] as const).map((arch, i) => {
      const config = blob(layout, { architecture: arch, os: 'linux' }, 'application/vnd.oci.image.config.v1+json');
      const layers = [
        { mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', digest: 'sha256:0', size: 1000 * (i + 1) },
      ];
      return {
        ...blob(layout, { schemaVersion: 2, config, layers }),
        annotations: { 'org.opencontainers.image.ref.name': arch },
      };
    });
    writeFileSync(join(layout, 'index.json'), JSON.stringify({ schemaVersion: 2, manifests: entries }));
    const archive = join(dir, 'archive-index.json');
    const out = execFileSync(
      process.execPath,
      [SCRIPT, layout, '0.1.0-abc1234', 'r.example/m:0.1.0-abc1234', archive],
      {
        encoding: 'utf8',
      },
    );
    expect(out).toBe('linux/amd64 1000 bytes (0.0 MB), linux/arm64 2000 bytes (0.0 MB)');
    const top = JSON.parse(readFileSync(join(layout, 'index.json'), 'utf8'));
    expect(top.manifests).toHaveLength(1);
    const [entry] = top.manifests;
    expect(entry.annotations).toEqual({ 'org.opencontainers.image.ref.name': '0.1.0-abc1234' });
    const bytes = readFileSync(join(layout, 'blobs', ...entry.digest.split(':')));
    expect(`sha256:${createHash('sha256').update(bytes).digest('hex')}`).toBe(entry.digest);
    expect(bytes.length).toBe(entry.size);
    const index = JSON.parse(bytes.toString('utf8'));
    expect(index.mediaType).toBe('application/vnd.oci.image.index.v1+json');
    expect(index.manifests).toEqual(
      entries.map(({ mediaType, digest, size }, i) => ({
        mediaType,
        digest,
        size,
        platform: { architecture: ['amd64', 'arm64'][i], os: 'linux' },
      })),
    );
    const named = JSON.parse(readFileSync(archive, 'utf8'));
    expect(named.manifests[0]).toEqual({
      ...entry,
      annotations: {
        'org.opencontainers.image.ref.name': 'r.example/m:0.1.0-abc1234',
        'io.containerd.image.name': 'r.example/m:0.1.0-abc1234',
      },
    });
  });
});
