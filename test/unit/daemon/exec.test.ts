/** The daemon's Exec wrappers: chroot (argv, lookup inside the root) and delegate timing for the metrics. */
import { describe, expect, it } from 'vitest';
import type { Exec, ExecOutput } from '../../../src/cni/exec.ts';
import { chrootExec, findChrootProgram, timedExec } from '../../../src/daemon/exec.ts';
import type { Metrics } from '../../../src/daemon/metrics.ts';

function recording(exitCode = 0): Exec & { calls: unknown[][]; looked: string[][] } {
  const calls: unknown[][] = [];
  const looked: string[][] = [];
  return {
    calls,
    looked,
    findInPath(type, dirs) {
      looked.push(dirs);
      return `${dirs[1]}/${type}`;
    },
    async execPlugin(path, _stdin, env, timeoutMs, args): Promise<ExecOutput> {
      calls.push([path, env.CNI_COMMAND, timeoutMs, args]);
      return { stdout: Buffer.alloc(0), stderr: Buffer.alloc(0), exitCode, signal: null, timedOut: false };
    },
  };
}

describe('chrootExec', () => {
  it('looks plugins up inside the root and runs `chroot <root> <plugin>` with no shell', async () => {
    const inner = recording();
    const e = chrootExec(inner, '/hostroot', '/usr/sbin/chroot');
    expect(e.findInPath('bridge', ['/opt/cni/bin', '/usr/lib/cni'])).toBe('/usr/lib/cni/bridge');
    expect(inner.looked).toEqual([['/hostroot/opt/cni/bin', '/hostroot/usr/lib/cni']]);
    await e.execPlugin('/usr/lib/cni/bridge', Buffer.from('{}'), { CNI_COMMAND: 'ADD' }, 5000);
    expect(inner.calls).toEqual([['/usr/sbin/chroot', 'ADD', 5000, ['/hostroot', '/usr/lib/cni/bridge']]]);
  });

  it('finds the chroot program', () => {
    expect(findChrootProgram((p) => p === '/usr/bin/chroot')).toBe('/usr/bin/chroot');
    expect(findChrootProgram(() => false)).toBeUndefined();
  });
});

describe('timedExec', () => {
  it('reports each delegate call by plugin type and command, ok by exit code', async () => {
    const seen: unknown[][] = [];
    const metrics = { delegateCall: (...a: unknown[]) => seen.push(a) } as unknown as Metrics;
    const none = Buffer.alloc(0);
    await timedExec(recording(0), metrics).execPlugin('/opt/cni/bin/bridge', none, { CNI_COMMAND: 'ADD' }, 1);
    await timedExec(recording(1), metrics).execPlugin('/opt/cni/bin/macvlan', none, { CNI_COMMAND: 'DEL' }, 1);
    expect(seen.map(([type, command, seconds, ok]) => [type, command, typeof seconds, ok])).toEqual([
      ['bridge', 'ADD', 'number', true],
      ['macvlan', 'DEL', 'number', false],
    ]);
  });
});
