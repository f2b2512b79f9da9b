/**
 * roles.ts: the entry of the second bundle (build/multus-daemon.cjs, a SEA asset): every role of the executable
 * other than the CNI plugin itself. cli.ts loads it through daemon/load.ts only when argv asks for one of them,
 * so a CNI call never parses this code.
 */
export { runDaemon, runHotplugCli, runPlanCli } from './daemon/main.ts';

// install and --is-default-ready: evaluated in their roles only, not in the daemon's (docs/resident.md, "Memory")
export const installMain = async (argv: readonly string[]): Promise<number> =>
  (await import('./install/main.ts')).installMain(argv);
export const readyMain = async (argv: readonly string[]): Promise<number> =>
  (await import('./install/main.ts')).readyMain(argv);
