/**
 * The JIT policy of the executable's roles (scripts/build-steps/compile.mjs, src/base/bun.ts): every process
 * starts with JavaScriptCore's tier-up thresholds scaled up for a CNI call's short life, and loading the roles'
 * bundle (daemon, install, hotplug, plan) sets the normal policy back. Run under Node with a stand-in for Bun's
 * global, which is all the code looks at.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { normalJitPolicy } from '../../src/base/bun.ts';
import { loadDaemonModule } from '../../src/load-roles.ts';

const g = globalThis as { Bun?: unknown };
afterEach(() => {
  delete g.Bun;
});

function fakeBun(): number[] {
  const calls: number[] = [];
  g.Bun = { spawn: () => undefined, unsafe: { setJITPolicy: (n: number) => calls.push(n) } };
  return calls;
}

describe('the JIT policy', () => {
  it('is set back to normal (1) when the roles are loaded, before any role runs', async () => {
    const calls = fakeBun();
    const mod = await loadDaemonModule();
    expect(typeof mod.runDaemon).toBe('function');
    expect(calls).toEqual([1]);
  }, 60_000);

  it('is left alone on a runtime without setJITPolicy (an older Bun) and under Node', () => {
    g.Bun = { spawn: () => undefined };
    expect(() => normalJitPolicy()).not.toThrow();
    delete g.Bun;
    expect(() => normalJitPolicy()).not.toThrow();
  });
});
