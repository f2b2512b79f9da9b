/**
 * The daemon's Exec wrappers: chroot (argv, lookup inside the root), delegate timing for the metrics, and the bound on
 * delegates running at once.
 */
import { describe, expect, it } from 'vitest';
import type { Exec, ExecOptions, ExecOutput } from '../../../src/cni/exec.ts';
import { boundedExec, chrootExec, chrootWrapper, findChrootProgram, timedExec } from '../../../src/daemon/exec.ts';
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
    async execPlugin({ path, env, timeoutMs, args, argv0 }): Promise<ExecOutput> {
      calls.push(
        argv0 === undefined
          ? [path, env.CNI_COMMAND, timeoutMs, args]
          : [path, env.CNI_COMMAND, timeoutMs, args, argv0],
      );
      return { stdout: Buffer.alloc(0), stderr: Buffer.alloc(0), exitCode, signal: null, timedOut: false };
    },
  };
}

describe('chrootExec', () => {
  it('looks plugins up inside the root and runs `chroot <root> <plugin>` with no shell', async () => {
    const inner = recording();
    const e = chrootExec(inner, '/hostroot', { program: '/usr/sbin/chroot' });
    expect(e.findInPath('bridge', ['/opt/cni/bin', '/usr/lib/cni'])).toBe('/usr/lib/cni/bridge');
    expect(inner.looked).toEqual([['/hostroot/opt/cni/bin', '/hostroot/usr/lib/cni']]);
    await e.execPlugin({
      path: '/usr/lib/cni/bridge',
      stdin: Buffer.from('{}'),
      env: { CNI_COMMAND: 'ADD' },
      timeoutMs: 5000,
    });
    expect(inner.calls).toEqual([['/usr/sbin/chroot', 'ADD', 5000, ['/hostroot', '/usr/lib/cni/bridge']]]);
  });

  it('runs the launcher as multus-chroot when it started the daemon', async () => {
    const inner = recording();
    const e = chrootExec(
      inner,
      '/hostroot',
      chrootWrapper('/usr/src/multus/multus', () => true)!,
    );
    const env = { CNI_COMMAND: 'DEL' };
    await e.execPlugin({ path: '/usr/lib/cni/macvlan', stdin: Buffer.from('{}'), env, timeoutMs: 7000, args: ['x'] });
    expect(inner.calls).toEqual([
      ['/usr/src/multus/multus', 'DEL', 7000, ['/hostroot', '/usr/lib/cni/macvlan', 'x'], 'multus-chroot'],
    ]);
  });

  it('finds the chroot program', () => {
    expect(findChrootProgram((p) => p === '/usr/bin/chroot')).toBe('/usr/bin/chroot');
    expect(findChrootProgram(() => false)).toBeUndefined();
  });

  it('takes chroot(8) when no launcher started the daemon, or its file is gone; nothing when neither is here', () => {
    const onlyChroot = (p: string) => p === '/usr/sbin/chroot';
    expect(chrootWrapper(undefined, onlyChroot)).toEqual({ program: '/usr/sbin/chroot' });
    expect(chrootWrapper('/gone/multus', onlyChroot)).toEqual({ program: '/usr/sbin/chroot' });
    expect(chrootWrapper(undefined, () => false)).toBeUndefined();
  });
});

describe('timedExec', () => {
  it('reports each delegate call by plugin type and command, ok by exit code', async () => {
    const seen: unknown[][] = [];
    const metrics = { delegateCall: (...a: unknown[]) => seen.push(a) } as unknown as Metrics;
    const none = Buffer.alloc(0);
    const add = { stdin: none, env: { CNI_COMMAND: 'ADD' }, timeoutMs: 1 };
    const del = { stdin: none, env: { CNI_COMMAND: 'DEL' }, timeoutMs: 1 };
    await timedExec(recording(0), metrics).execPlugin({ path: '/opt/cni/bin/bridge', ...add });
    await timedExec(recording(1), metrics).execPlugin({ path: '/opt/cni/bin/macvlan', ...del });
    expect(seen.map(([type, command, seconds, ok]) => [type, command, typeof seconds, ok])).toEqual([
      ['bridge', 'ADD', 'number', true],
      ['macvlan', 'DEL', 'number', false],
    ]);
  });
});

describe('boundedExec', () => {
  /** An Exec whose calls end when the test releases them; how many run at most at once. */
  function gated(): Exec & { running: number; most: number; started: string[]; release(): void } {
    const gates: (() => void)[] = [];
    const o = {
      running: 0,
      most: 0,
      started: [] as string[],
      release: () => gates.shift()?.(),
      findInPath: (type: string) => `/bin/${type}`,
      async execPlugin({ path }: ExecOptions): Promise<ExecOutput> {
        o.running++;
        o.most = Math.max(o.most, o.running);
        o.started.push(path);
        await new Promise<void>((r) => gates.push(r));
        o.running--;
        if (path === 'fails') throw new Error('spawn failed');
        return { stdout: Buffer.alloc(0), stderr: Buffer.alloc(0), exitCode: 0, signal: null, timedOut: false };
      },
    };
    return o;
  }
  const tick = () => new Promise((r) => setTimeout(r, 5));
  const run = (path: string): ExecOptions => ({ path, stdin: Buffer.alloc(0), env: {}, timeoutMs: 1000 });

  it('runs at most `limit` plugins at once, the others in arrival order; a failed one frees its slot', async () => {
    const inner = gated();
    const e = boundedExec(inner, 2);
    const calls = ['a', 'fails', 'c', 'd'].map((p) => e.execPlugin(run(p)).catch((x) => x));
    await tick();
    expect(inner.started).toEqual(['a', 'fails']);
    inner.release(); // a ends
    await tick();
    expect(inner.started).toEqual(['a', 'fails', 'c']);
    inner.release(); // fails ends with an error
    await tick();
    expect(inner.started).toEqual(['a', 'fails', 'c', 'd']);
    inner.release();
    inner.release();
    const out = await Promise.all(calls);
    expect(out[1]).toBeInstanceOf(Error);
    expect(inner.most).toBe(2);
    expect(e.findInPath('bridge', [])).toBe('/bin/bridge');
  });

  it('0 is no limit', async () => {
    const inner = gated();
    const e = boundedExec(inner, 0);
    const calls = Array.from({ length: 10 }, () => e.execPlugin(run('p')));
    await tick();
    expect(inner.running).toBe(10);
    for (let i = 0; i < 10; i++) inner.release();
    await Promise.all(calls);
  });
});
