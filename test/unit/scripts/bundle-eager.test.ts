/**
 * scripts/build-steps/bundle.mjs' start-up discipline (docs/build.md): the build refuses a thin bundle in which a
 * module imports one of LAZY_BUILTINS at its top (esbuild hoists such an import to the bundle's start, so every
 * call would pay for it) or any module of @kubernetes/client-node or of the gRPC library. Checked on esbuild's metafile of planted
 * sources, and on the real entry.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type * as Esbuild from 'esbuild';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs build step without type declarations
import { eagerImports } from '../../../scripts/build-steps/bundle.mjs';

const ROOT = join(import.meta.dirname, '../../..');
const esbuild = createRequire(join(ROOT, 'package.json'))('esbuild') as typeof Esbuild;
const check = eagerImports as (m: unknown) => string[];

async function metafileOf(entry: string) {
  const res = await esbuild.build({
    entryPoints: [entry],
    bundle: true,
    write: false,
    platform: 'node',
    format: 'cjs',
    metafile: true,
    logLevel: 'silent',
    absWorkingDir: ROOT,
  });
  return res.metafile;
}

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mts-eager-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe("the thin bundle's eager-import check", () => {
  it('names a module that imports a lazy built-in at its top, and passes one that loads it where it is used', async () => {
    writeFileSync(
      join(dir, 'eager.ts'),
      "import { randomBytes } from 'node:crypto';\nexport const id = () => randomBytes(4);\n",
    );
    writeFileSync(
      join(dir, 'lazy.ts'),
      "export const id = () => process.getBuiltinModule('node:crypto').randomBytes(4);\n",
    );
    writeFileSync(join(dir, 'fs.ts'), "import { readFileSync } from 'node:fs';\nexport const r = readFileSync;\n");
    writeFileSync(join(dir, 'entry.ts'), "export * from './eager.ts';\nexport { r } from './fs.ts';\n");
    writeFileSync(join(dir, 'clean.ts'), "export * from './lazy.ts';\nexport { r } from './fs.ts';\n");
    const bad = check(await metafileOf(join(dir, 'entry.ts')));
    expect(bad).toHaveLength(1);
    expect(bad[0]).toMatch(/eager\.ts imports node:crypto$/);
    expect(check(await metafileOf(join(dir, 'clean.ts')))).toEqual([]);
  });

  it('names any module of @kubernetes/client-node in the bundle', () => {
    const metafile = {
      inputs: { 'node_modules/@kubernetes/client-node/dist/index.js': { imports: [] }, 'src/cli.ts': { imports: [] } },
    };
    expect(check(metafile)).toEqual(['node_modules/@kubernetes/client-node/dist/index.js (client-node)']);
  });

  it('names any module of the gRPC library (grpc-js, protobufjs) in the bundle', () => {
    const metafile = {
      inputs: {
        'node_modules/@grpc/grpc-js/build/src/index.js': { imports: [] },
        'node_modules/protobufjs/index.js': { imports: [] },
        'src/kubelet/grpc.ts': { imports: [] },
      },
    };
    expect(check(metafile)).toEqual([
      'node_modules/@grpc/grpc-js/build/src/index.js (the gRPC library)',
      'node_modules/protobufjs/index.js (the gRPC library)',
    ]);
  });

  it('passes the real thin entry, src/cli.ts', async () => {
    expect(check(await metafileOf(join(ROOT, 'src/cli.ts')))).toEqual([]);
  }, 60_000);
});
