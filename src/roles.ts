/**
 * roles.ts: the entry of the second bundle (build/multus-daemon.cjs, a SEA asset): every role of the executable
 * other than the CNI plugin itself (Multus' program names included). cli.ts loads it through load-roles.ts only
 * when argv or the executable's name asks for one of them, so a CNI call never parses this code.
 * Tested by test/daemon/bundle.test.ts and test/install/names.test.ts.
 */
import { runDaemon } from './daemon/main.ts';
import { runEntrypoint as entrypoint } from './install/entrypoints.ts';

export { runDaemon };
export { runHotplugCli } from './operator/hotplug-cli.ts';
export { runPlanCli } from './operator/plan-cli.ts';
export { installMain, readyMain } from './install/main.ts';

/** Multus' program names (argv[0]): `multus-daemon` runs the daemon of this bundle. */
export const runEntrypoint = (name: string, program: string, argv: readonly string[]): Promise<number> =>
  entrypoint(name, program, argv, runDaemon);
