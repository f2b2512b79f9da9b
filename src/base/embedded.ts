/**
 * base/embedded.ts: the one loader of the executable's other bundles (docs/build.md, "The bundles"): the
 * roles' bundle `multus-daemon.cjs` (load-roles.ts), the client-node fallback `k8s-fallback.cjs`
 * (k8s/fallback-loader.ts) and the kubelet's gRPC `kubelet-grpc.cjs` (kubelet/load.ts), evaluated only in the roles and calls that need them.
 *
 * Each is a plain `import()` of a list of specifiers, the first that loads wins. Inside the Bun executable the
 * bundles are embedded files beside the main module (`/$bunfs/root/`), so `./multus-daemon.cjs` is the embedded
 * copy, compiled to bytecode with the rest, and never a file of the working directory; when build/multus.cjs
 * runs under Node it is the built bundle beside it; under vitest or `node src/...` it is the source module named
 * last (relative to this file). Keep this file free of imports: it is on every thin call's path.
 * Tested by test/fixture/bun-build.test.ts and test/daemon/bundle.test.ts (the bundles and their loading).
 */

/**
 * The module of the first specifier that loads and exports `key` as a function, either as a named export or on
 * the CommonJS `module.exports` that a runtime gives as `default`.
 */
export async function loadEmbedded<T extends object>(
  what: string,
  specifiers: readonly string[],
  key: keyof T & string,
): Promise<T> {
  const errors: string[] = [];
  for (const spec of specifiers) {
    try {
      const ns = (await import(/* @vite-ignore */ spec)) as Record<string, unknown>;
      const mod = typeof ns[key] === 'function' ? ns : (ns.default as Record<string, unknown> | undefined);
      if (mod && typeof mod[key] === 'function') return mod as T;
      errors.push(`${spec}: it has no ${key}()`);
    } catch (e) {
      errors.push(`${spec}: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
  throw new Error(`cannot load ${what} (${errors.join('; ')}): rebuild with npm run build`);
}
