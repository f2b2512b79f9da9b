/**
 * load-roles.ts: loads the second bundle (roles.ts: daemon, hotplug, plan, install, is-default-ready) for
 * those roles only, so the thin plugin's start-up never parses it: the embedded file `multus-daemon.cjs` of the
 * executable (scripts/build-daemon.mjs), else this source tree's module (base/embedded.ts says how).
 * Tested by test/daemon/bundle.test.ts, test/install/cli.test.ts (roles loaded from the embedded bundle).
 */
import { normalJitPolicy } from './base/bun.ts';
import { loadEmbedded } from './base/embedded.ts';

export interface DaemonModule {
  runDaemon(argv: string[]): Promise<number>;
  /** `multus hotplug ...` (docs/hotplug.md). */
  runHotplugCli(argv: string[]): Promise<number>;
  /** `multus plan ...` (docs/hotplug.md). */
  runPlanCli(argv: string[]): Promise<number>;
  /** `kubectl-multus ...` and `multus preflight` (docs/kubectl-multus.md). */
  runKubectlMultus(argv: readonly string[]): Promise<number>;
  /** `multus webhook ...`, the admission webhook (docs/kubectl-multus.md). */
  runWebhook(argv: readonly string[]): Promise<number>;
  /** `multus install ...` (docs/install.md). */
  installMain(argv: readonly string[]): Promise<number>;
  /** `multus --is-default-ready ...` (docs/install.md). */
  readyMain(argv: readonly string[]): Promise<number>;
  /** Multus' program names (thin_entrypoint, install_multus, multus-daemon, multus with flags; docs/install.md). */
  runEntrypoint(name: string, program: string, argv: readonly string[]): Promise<number>;
}

/** Relative to base/embedded.ts: the embedded bundle, else src/roles.ts. */
const SPECIFIERS = ['./multus-daemon.cjs', '../roles.ts'];

/** The roles' bundle; these roles (not CNI calls) run with the normal JIT policy (base/bun.ts). */
export function loadDaemonModule(): Promise<DaemonModule> {
  normalJitPolicy();
  return loadEmbedded<DaemonModule>('the daemon module', SPECIFIERS, 'runDaemon');
}
