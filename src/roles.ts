/**
 * roles.ts: the entry of the second bundle (build/multus-daemon.cjs, a SEA asset): every role of the executable
 * other than the CNI plugin itself (Multus' program names included). cli.ts loads it through load-roles.ts only
 * when argv or the executable's name asks for one of them, so a CNI call never parses this code.
 */
export { runDaemon } from './daemon/main.ts';
export { runHotplugCli } from './operator/hotplug-cli.ts';
export { runPlanCli } from './operator/plan-cli.ts';
export { installMain, readyMain } from './install/main.ts';
export { runEntrypoint } from './install/entrypoints.ts';
