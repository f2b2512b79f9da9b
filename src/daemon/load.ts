/**
 * daemon/load.ts: loads the second bundle (src/roles.ts: daemon, hotplug, plan, install, is-default-ready) for those
 * roles only, so the thin plugin's start-up never parses it (the same pattern as the Kubernetes fallback in
 * src/k8s/client.ts). Inside the single executable it evaluates the embedded SEA asset `multus-daemon.cjs`
 * (scripts/build-daemon.mjs); outside one, the built bundle beside multus.cjs, else this source tree's module. Keep
 * this file free of imports.
 */
export const DAEMON_ASSET = 'multus-daemon.cjs';

export interface DaemonModule {
  runDaemon(argv: string[]): Promise<number>;
  /** `multus hotplug ...` (docs/hotplug.md). */
  runHotplugCli(argv: string[]): Promise<number>;
  /** `multus plan ...` (docs/hotplug.md). */
  runPlanCli(argv: string[]): Promise<number>;
  /** `multus install ...` (docs/install.md). */
  installMain(argv: readonly string[]): Promise<number>;
  /** `multus --is-default-ready ...` (docs/install.md). */
  readyMain(argv: readonly string[]): Promise<number>;
}

const SPECIFIERS = ['./multus-daemon.cjs', '../roles.ts'];

export async function loadDaemonModule(): Promise<DaemonModule> {
  const sea = process.getBuiltinModule('node:sea');
  if (sea.isSea()) {
    let source: string;
    try {
      source = sea.getAsset(DAEMON_ASSET, 'utf8');
    } catch {
      throw new Error(`this executable was built without the ${DAEMON_ASSET} asset: rebuild it with npm run build`);
    }
    const vm = process.getBuiltinModule('node:vm');
    const { createRequire } = process.getBuiltinModule('node:module');
    const wrapped = `(function (exports, require, module, __filename, __dirname) {${source}\n})`;
    const mod = { exports: {} as Record<string, unknown> };
    const fn = new vm.Script(wrapped, { filename: DAEMON_ASSET }).runInThisContext() as (...a: unknown[]) => void;
    fn(mod.exports, createRequire(process.execPath), mod, DAEMON_ASSET, '.');
    return mod.exports as unknown as DaemonModule;
  }
  const errors: string[] = [];
  for (const spec of SPECIFIERS) {
    try {
      return (await import(/* @vite-ignore */ spec)) as DaemonModule;
    } catch (e) {
      errors.push(`${spec}: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
  throw new Error(`cannot load the daemon module (${errors.join('; ')})`);
}
