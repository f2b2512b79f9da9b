/**
 * k8s/fallback-loader.ts: loads @kubernetes/client-node's KubeConfig (k8s/fallback.ts) on demand: the embedded
 * file `k8s-fallback.cjs` of the executable (scripts/build-k8s-fallback.mjs), else this source tree's module
 * (base/embedded.ts says how).
 * Tested by test/unit/k8s/k8s.test.ts.
 */
import { loadEmbedded } from '../base/embedded.ts';
import type { FallbackSession } from './fallback.ts';

export interface FallbackModule {
  parseYaml(text: string): unknown;
  parseYamlDocuments(text: string): unknown[];
  openKubeconfig(path: string, context?: string): FallbackSession;
}

/** Relative to base/embedded.ts: the embedded bundle, else src/k8s/fallback.ts. */
const SPECIFIERS = ['./k8s-fallback.cjs', '../k8s/fallback.ts'];

let fallbackPromise: Promise<FallbackModule> | undefined;

/** The fallback module, loaded once per process. */
export function loadFallbackModule(): Promise<FallbackModule> {
  fallbackPromise ??= loadEmbedded<FallbackModule>(
    'the @kubernetes/client-node fallback',
    SPECIFIERS,
    'openKubeconfig',
  ).catch((err: unknown) => {
    fallbackPromise = undefined;
    throw err;
  });
  return fallbackPromise;
}
