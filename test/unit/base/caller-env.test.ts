/**
 * src/base/caller-env.ts: the caller's environment behind the launcher (docs/build.md, "The launcher").
 */
import { describe, expect, it } from 'vitest';
import { callerEntry, callerEnv, launcherPath } from '../../../src/base/caller-env.ts';

describe('callerEnv', () => {
  it("started by the launcher: exactly the held variables, restored; none of the launcher's own", () => {
    const env = {
      MULTUS_TS_LAUNCHER: '/opt/cni/bin/multus',
      MULTUS_TS_HELD_CNI_COMMAND: 'ADD',
      MULTUS_TS_HELD_BUN_OPTIONS: '--preload x.js',
      MULTUS_TS_HELD_MULTUS_TS_HELD_X: 'a caller variable with the prefix',
      MULTUS_TS_HELD_: 'no name',
      BUN_JSC_useJIT: 'false', // a role setting of the launcher: never the caller's
    };
    expect(callerEnv(env)).toEqual({
      CNI_COMMAND: 'ADD',
      BUN_OPTIONS: '--preload x.js',
      MULTUS_TS_HELD_X: 'a caller variable with the prefix',
    });
    expect(launcherPath(env)).toBe('/opt/cni/bin/multus');
  });

  it('a variable the launcher held in two parts (too long for one string once held) is joined again', () => {
    const env = {
      MULTUS_TS_LAUNCHER: '/opt/cni/bin/multus',
      MULTUS_TS_MORE_BIG: 'tail',
      MULTUS_TS_HELD_BIG: 'x'.repeat(10),
      MULTUS_TS_HELD_MULTUS_TS_MORE_Y: "the caller's own variable of that prefix",
      MULTUS_TS_MORE_NOT_HELD: 'dropped: no start',
    };
    expect(callerEnv(env)).toEqual({
      BIG: `${'x'.repeat(10)}tail`,
      MULTUS_TS_MORE_Y: "the caller's own variable of that prefix",
    });
    expect(callerEntry(Buffer.from('MULTUS_TS_MORE_CNI_ARGS=\xff', 'latin1')).toString('latin1')).toBe('CNI_ARGS=\xff');
  });

  it('without the launcher (node, vitest): the environment as it is', () => {
    const env = { CNI_COMMAND: 'DEL', MULTUS_TS_HELD_Y: '1', UNSET: undefined };
    expect(callerEnv(env)).toEqual({ CNI_COMMAND: 'DEL', MULTUS_TS_HELD_Y: '1' });
    expect(launcherPath(env)).toBeUndefined();
  });

  it('callerEntry takes the prefix off a raw environ entry', () => {
    expect(callerEntry(Buffer.from('MULTUS_TS_HELD_CNI_ARGS=a\xff', 'latin1')).toString('latin1')).toBe(
      'CNI_ARGS=a\xff',
    );
    expect(callerEntry(Buffer.from('CNI_ARGS=b')).toString()).toBe('CNI_ARGS=b');
  });
});
