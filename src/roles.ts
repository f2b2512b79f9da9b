/**
 * roles.ts: the entry of the second bundle (build/multus-daemon.cjs, a SEA asset): every role of the executable
 * other than the CNI plugin itself. cli.ts loads it through load-roles.ts only when argv asks for one of them,
 * so a CNI call never parses this code.
 */
export { runDaemon } from './daemon/main.ts';

// The operator commands, install and --is-default-ready: evaluated in their roles only, not in the daemon's
// (docs/resident.md, "Memory").
export const runHotplugCli = async (argv: string[]): Promise<number> =>
  (await import('./operator/hotplug-cli.ts')).runHotplugCli(argv);
export const runPlanCli = async (argv: string[]): Promise<number> =>
  (await import('./operator/plan-cli.ts')).runPlanCli(argv);
export const installMain = async (argv: readonly string[]): Promise<number> =>
  (await import('./install/main.ts')).installMain(argv);
export const readyMain = async (argv: readonly string[]): Promise<number> =>
  (await import('./install/main.ts')).readyMain(argv);
