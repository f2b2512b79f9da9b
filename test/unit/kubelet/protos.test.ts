/**
 * src/kubelet/gen/protos.ts is scripts/gen-kubelet-protos.mjs' copy of src/kubelet/protos/: this fails while it
 * is stale (run the script), and each service of services.ts is found in its .proto by the library.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { PROTOS } from '../../../src/kubelet/gen/protos.ts';
import { serviceDefinition } from '../../../src/kubelet/grpc.ts';
import { SERVICES } from '../../../src/kubelet/services.ts';

const DIR = fileURLToPath(new URL('../../../src/kubelet/protos/', import.meta.url));

describe('the kubelet protos', () => {
  it('gen/protos.ts holds every .proto under protos/, as it is', () => {
    const files = readdirSync(DIR, { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.proto'))
      .sort();
    expect(Object.keys(PROTOS).sort()).toEqual(files);
    for (const f of files) expect(PROTOS[f as keyof typeof PROTOS], f).toBe(readFileSync(DIR + f, 'utf8'));
  });

  it.each(Object.entries(SERVICES))('%s is a service of its .proto', (_key, ref) => {
    const methods = Object.values(serviceDefinition(ref)).map((m) => m.path);
    expect(methods.length).toBeGreaterThan(0);
    for (const path of methods) expect(path.startsWith(`/${ref.name}/`)).toBe(true);
  });

  it('an unknown service is an error that names it', () => {
    expect(() => serviceDefinition({ proto: 'dra/v1/api.proto', name: 'v1.Nope' })).toThrow(
      /declares no service v1.Nope/,
    );
  });
});
