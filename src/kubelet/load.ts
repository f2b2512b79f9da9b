/**
 * kubelet/load.ts: loads the kubelet room (index.ts) on demand: the embedded file `kubelet-grpc.cjs` of the
 * executable (scripts/build-kubelet.mjs), else this source tree's module (base/embedded.ts says how). The only
 * file of kubelet/ that other rooms import for code; its types they import from the modules themselves.
 */
import { loadEmbedded } from '../base/embedded.ts';
import type * as Kubelet from './index.ts';

export type KubeletModule = typeof Kubelet;

/** Relative to base/embedded.ts: the embedded bundle, else src/kubelet/index.ts. */
const SPECIFIERS = ['./kubelet-grpc.cjs', '../kubelet/index.ts'];

let loading: Promise<KubeletModule> | undefined;

/** The kubelet room, loaded once per process. */
export function loadKubelet(): Promise<KubeletModule> {
  loading ??= loadEmbedded<KubeletModule>('the kubelet gRPC layer', SPECIFIERS, 'listPodResources').catch(
    (err: unknown) => {
      loading = undefined;
      throw err;
    },
  );
  return loading;
}
