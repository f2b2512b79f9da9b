/**
 * roles.ts: the entry of the second bundle (build/multus-daemon.cjs, a SEA asset): every role of the executable
 * other than the CNI plugin itself (Multus' program names included). cli.ts loads it through daemon/load.ts only
 * when argv or the executable's name asks for one of them, so a CNI call never parses this code.
 */
export { runDaemon, runHotplugCli, runPlanCli } from './daemon/main.ts';
export { installMain, readyMain } from './install/main.ts';
export { runEntrypoint } from './install/entrypoints.ts';
