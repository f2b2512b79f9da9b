/**
 * k8s/fallback-loader.ts: loads @kubernetes/client-node's KubeConfig (k8s/fallback.ts) on demand: inside the
 * single executable from its SEA asset (with a V8 code cache), elsewhere from the built bundle or the source.
 */
import type * as sea from 'node:sea';
import { messageOf } from '../base/errors.ts';
import type { FallbackSession } from './fallback.ts';

// ---------------------------------------------------------------------------------------------------------------
// The fallback module, loaded on demand

export interface FallbackModule {
  parseYaml(text: string): unknown;
  openKubeconfig(path: string): FallbackSession;
}

/** SEA asset names (scripts/build-k8s-fallback.mjs writes both; the code cache is optional). */
export const FALLBACK_ASSET = 'k8s-fallback.cjs';
export const FALLBACK_CACHE_ASSET = 'k8s-fallback.cache';
/** Must equal the wrapper in scripts/build-k8s-fallback.mjs, or V8 rejects the code cache. */
export const wrapCommonJs = (source: string): string =>
  `(function (exports, require, module, __filename, __dirname) {${source}\n})`;

type SeaModule = typeof sea;

/** Inside the single executable: evaluate the embedded bundle (never a file: a SEA resolves those from the cwd). */
function fallbackFromSea(sea: SeaModule): FallbackModule {
  let source: string;
  try {
    source = sea.getAsset(FALLBACK_ASSET, 'utf8');
  } catch {
    throw new Error(`this executable was built without the ${FALLBACK_ASSET} asset (see docs/kubernetes.md)`);
  }
  let cachedData: Buffer | undefined;
  try {
    cachedData = Buffer.from(sea.getRawAsset(FALLBACK_CACHE_ASSET));
  } catch {
    cachedData = undefined;
  }
  const vm = process.getBuiltinModule('node:vm');
  const { createRequire } = process.getBuiltinModule('node:module');
  const script = new vm.Script(wrapCommonJs(source), {
    filename: FALLBACK_ASSET,
    ...(cachedData ? { cachedData } : {}),
  });
  const mod = { exports: {} as Record<string, unknown> };
  (script.runInThisContext() as (...a: unknown[]) => void)(
    mod.exports,
    createRequire(process.execPath),
    mod,
    FALLBACK_ASSET,
    '.',
  );
  return mod.exports as unknown as FallbackModule;
}

/** Outside a SEA: the built bundle beside multus.cjs, else this source tree's module (vitest, node src/...). */
const FALLBACK_SPECIFIERS = ['./k8s-fallback.cjs', './fallback.ts'];

async function importFallback(): Promise<FallbackModule> {
  const sea = process.getBuiltinModule('node:sea');
  if (sea.isSea()) return fallbackFromSea(sea);
  const errors: string[] = [];
  for (const spec of FALLBACK_SPECIFIERS) {
    try {
      const m = (await import(/* @vite-ignore */ spec)) as Partial<FallbackModule> & { default?: FallbackModule };
      return typeof m.openKubeconfig === 'function' ? (m as FallbackModule) : (m.default as FallbackModule);
    } catch (err) {
      errors.push(`${spec}: ${messageOf(err)}`);
    }
  }
  throw new Error(`cannot load the @kubernetes/client-node fallback (${errors.join('; ')})`);
}

let fallbackPromise: Promise<FallbackModule> | undefined;

/** The fallback module, loaded once per process. */
export function loadFallbackModule(): Promise<FallbackModule> {
  fallbackPromise ??= importFallback().catch((err: unknown) => {
    fallbackPromise = undefined;
    throw err;
  });
  return fallbackPromise;
}
