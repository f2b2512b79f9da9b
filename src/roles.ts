/**
 * roles.ts: the entry of the second bundle (build/multus-daemon.cjs, a SEA asset): every role of the executable
 * other than the CNI plugin itself (Multus' program names included). cli.ts loads it through load-roles.ts only
 * when argv or the executable's name asks for one of them, so a CNI call never parses this code.
 * Tested by test/daemon/bundle.test.ts and test/install/names.test.ts.
 */
import { runDaemon } from './daemon/main.ts';

export { runDaemon };

// The operator commands, install, --is-default-ready and Multus' program names: evaluated in their roles only,
// not in the daemon's (docs/resident.md, "Memory").
export const runHotplugCli = async (argv: string[]): Promise<number> =>
  (await import('./operator/hotplug-cli.ts')).runHotplugCli(argv);
export const runPlanCli = async (argv: string[]): Promise<number> =>
  (await import('./operator/plan-cli.ts')).runPlanCli(argv);
export const runKubectlMultus = async (argv: readonly string[]): Promise<number> =>
  (await import('./operator/kubectl-multus.ts')).runKubectlMultus(argv);
export const runWebhook = async (argv: readonly string[]): Promise<number> =>
  (await import('./operator/webhook.ts')).runWebhook(argv);
export const installMain = async (argv: readonly string[]): Promise<number> =>
  (await import('./install/main.ts')).installMain(argv);
export const readyMain = async (argv: readonly string[]): Promise<number> =>
  (await import('./install/main.ts')).readyMain(argv);

/** Multus' program names (argv[0]): `multus-daemon` runs the daemon of this bundle. */
export const runEntrypoint = async (name: string, program: string, argv: readonly string[]): Promise<number> =>
  (await import('./install/entrypoints.ts')).runEntrypoint(name, program, argv, runDaemon);
