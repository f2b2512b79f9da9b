/**
 * roles.ts: the entry of the second bundle (build/multus-daemon.cjs, a SEA asset): every role of the executable
 * other than the CNI plugin itself (Multus' program names included). cli.ts loads it through load-roles.ts only
 * when argv or the executable's name asks for one of them, so a CNI call never parses this code.
 */
import { multusDaemonMain } from './daemon/main.ts';
import { installMultusMain, multusFlagsMain, thinEntrypointMain } from './install/entrypoints.ts';

export { runDaemon } from './daemon/main.ts';
export { runHotplugCli } from './operator/hotplug-cli.ts';
export { runPlanCli } from './operator/plan-cli.ts';
export { installMain, readyMain } from './install/main.ts';

/**
 * The roles by the executable's name (Multus' names, docs/install.md; cli.ts passes argv[0]'s base name and the
 * full argv[0]); -1 from `multus`: serve the CNI call.
 */
export function runEntrypoint(name: string, program: string, argv: readonly string[]): Promise<number> {
  switch (name) {
    case 'thin_entrypoint':
      return thinEntrypointMain(program, argv);
    case 'install_multus':
      return installMultusMain(program, argv);
    case 'multus-daemon':
      return multusDaemonMain(program, argv);
    default:
      return Promise.resolve(multusFlagsMain(program, argv));
  }
}
