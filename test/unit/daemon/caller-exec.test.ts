/**
 * `"delegateExec": "caller"` (daemon/caller-exec.ts, daemon/caller-http.ts): the per-call channel over fakes, then
 * the daemon's /cni in-process with a Node stand-in for the shim that answers each streamed exec on /cni/exec:
 * what the shim is asked to run (the path found, its own environment with the call's CNI_* variables), that the
 * daemon then runs nothing itself, the rollback of a failed ADD through the shim, the shim gone mid-call (the
 * rollback runs in the daemon), and the old wire for shims that do not offer it and for the default mode.
 */
import type { Server } from 'node:http';
import { request } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CniError } from '../../../src/base/errors.ts';
import type { ExecOptions } from '../../../src/cni/exec.ts';
import { StoppingError } from '../../../src/cni/exec.ts';
import { callerChannel, shimEnvFor } from '../../../src/daemon/caller-exec.ts';
import { createQueue } from '../../../src/daemon/queue.ts';
import { createCniServer } from '../../../src/daemon/server.ts';
import { listenUnix } from '../../../src/daemon/socket.ts';
import { createHost } from '../../../src/host/host.ts';
import { FakeExec } from '../../helpers/fake-exec.ts';
import { cniBody, closeServer, http } from '../../helpers/daemon.ts';
import { testNetns } from '../../helpers/netns.ts';

const run = (over: Partial<ExecOptions> = {}): ExecOptions => ({
  path: '/opt/cni/bin/p0',
  stdin: Buffer.from('{"x":1}'),
  env: { PATH: '/daemon/bin', CNI_COMMAND: 'ADD', CNI_IFNAME: 'net1' },
  timeoutMs: 1000,
  ...over,
});

describe('the channel of one call', () => {
  let local: FakeExec;
  let lines: Record<string, unknown>[];
  let open: boolean;
  const channel = () =>
    callerChannel({
      local,
      send: (line) => open && lines.push((JSON.parse(line) as { exec: Record<string, unknown> }).exec) > 0,
      shimEnv: { PATH: '/shim/bin', HOME: '/root', CNI_COMMAND: 'ADD', CNI_IFNAME: 'eth0' },
      token: 't1',
    });
  beforeEach(() => {
    local = new FakeExec('p0');
    lines = [];
    open = true;
  });

  it("asks the shim to run the path with its own environment and the call's CNI_* variables", async () => {
    const c = channel();
    const out = c.exec.execPlugin(run());
    expect(lines).toEqual([
      {
        call: 't1',
        id: 1,
        path: '/opt/cni/bin/p0',
        env: { PATH: '/shim/bin', HOME: '/root', CNI_COMMAND: 'ADD', CNI_IFNAME: 'net1' },
        timeoutMs: 1000,
        stdin: Buffer.from('{"x":1}').toString('base64'),
      },
    ]);
    expect(c.deliver({ call: 'other', id: 1, exitCode: 0 })).toBe(false);
    expect(c.deliver({ call: 't1', id: 1, stdout: Buffer.from('{}').toString('base64'), exitCode: 0 })).toBe(true);
    expect(await out).toEqual({
      stdout: Buffer.from('{}'),
      stderr: Buffer.alloc(0),
      exitCode: 0,
      signal: null,
      timedOut: false,
    });
    expect(c.deliver({ call: 't1', id: 1, exitCode: 0 })).toBe(false); // answered once
    expect(local.received).toEqual([]);
    expect(c.exec.findInPath('p0', ['/d'])).toBe('/fake/p0'); // the daemon's lookup
  });

  it('a program the shim could not start is an error (it ran nothing)', async () => {
    const c = channel();
    const out = c.exec.execPlugin(run());
    c.deliver({ call: 't1', id: 1, error: 'no such file or directory' });
    await expect(out).rejects.toThrow(CniError);
    await expect(out).rejects.toThrow(/failed to execute plugin \/opt\/cni\/bin\/p0: no such file/);
  });

  it('the shim gone: what it ran ends as killed, the rest runs in the daemon', async () => {
    const c = channel();
    const out = c.exec.execPlugin(run());
    c.close();
    expect(await out).toMatchObject({ exitCode: null, signal: 'SIGKILL', timedOut: false });
    const after = await c.exec.execPlugin(run({ path: '/fake/p0', stdin: Buffer.from('{}') }));
    expect(after.exitCode).toBe(0);
    expect(local.calls()).toEqual(['ADD p0 net1']);
  });

  it('a line that cannot be written runs the exec in the daemon', async () => {
    open = false;
    const c = channel();
    await c.exec.execPlugin(run({ path: '/fake/p0', stdin: Buffer.from('{}') }));
    expect(local.calls()).toEqual(['ADD p0 net1']);
  });

  it("the call's stop ends a waiting exec with StoppingError and starts none", async () => {
    const c = channel();
    const stop = new AbortController();
    const out = c.exec.execPlugin(run({ signal: stop.signal }));
    stop.abort();
    await expect(out).rejects.toThrow(StoppingError);
    await expect(c.exec.execPlugin(run({ signal: stop.signal }))).rejects.toThrow(StoppingError);
    expect(lines).toHaveLength(1);
  });

  it('shimEnvFor drops the CNI_* variables of the shim and the daemon-side rest', () => {
    expect(shimEnvFor({ A: '1', CNI_NETNS: 'x' }, { B: '2', CNI_NETNS: 'y' })).toEqual({ A: '1', CNI_NETNS: 'y' });
  });
});

describe('/cni with a shim that runs the delegates', () => {
  let dir: string;
  let exec: FakeExec;
  let server: Server | undefined;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'mts-caller-'));
    exec = new FakeExec('p0', 'p1');
  });
  afterEach(async () => {
    if (server) await closeServer(server);
    server = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  async function start(delegateExec: 'daemon' | 'caller' = 'caller'): Promise<string> {
    const readiness = { exists: async () => true, sleep: async () => {} };
    const host = createHost({ writeStderr: () => {}, exec, readiness, clock: { now: () => 0, sleep: async () => {} } });
    const log = { error() {}, warn() {}, verbose() {}, debug() {}, enabled: () => false };
    server = createCniServer({
      host,
      daemonEnv: { PATH: '/daemon/bin' },
      log,
      queue: createQueue(0),
      notReady: () => undefined,
      delegateExec,
    });
    return listenUnix(server, join(dir, 'run'));
  }

  const body = (command: string) =>
    cniBody(
      {
        PATH: '/shim/bin',
        SHIM_ONLY: 'yes',
        CNI_COMMAND: command,
        CNI_CONTAINERID: 'cid1',
        CNI_NETNS: testNetns(),
        CNI_IFNAME: 'eth0',
        CNI_PATH: '/opt/cni/bin',
        CNI_ARGS: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=pod1;K8S_POD_UID=u1',
      },
      {
        cniVersion: '1.0.0',
        name: 'multus-cni-network',
        type: 'multus',
        cniDir: join(dir, 'cache'),
        delegates: [
          { cniVersion: '1.0.0', name: 'cluster', type: 'p0' },
          { cniVersion: '1.0.0', name: 'second', type: 'p1' },
        ],
      },
    );

  interface Exec {
    call: string;
    id: number;
    path: string;
    env: Record<string, string>;
  }
  /** A shim stand-in: the streamed lines, each exec answered by `answer` (undefined: the shim goes away). */
  function shim(socket: string, command: string, answer: (e: Exec) => Record<string, unknown> | undefined) {
    const execs: Exec[] = [];
    const done = new Promise<{ header?: string; last: Record<string, unknown> | undefined }>((resolve) => {
      const headers = { Host: 'dummy', 'X-Multus-Exec': '1' };
      const req = request({ socketPath: socket, path: '/cni', method: 'POST', headers }, (res) => {
        let text = '';
        let last: Record<string, unknown> | undefined;
        res.on('data', (c: Buffer) => {
          text += c.toString();
          for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n')) {
            const msg = JSON.parse(text.slice(0, i)) as { exec?: Exec } & Record<string, unknown>;
            text = text.slice(i + 1);
            if (!msg.exec) last = msg;
            else {
              execs.push(msg.exec);
              const reply = answer(msg.exec);
              if (!reply) return req.destroy();
              void http(socket, '/cni/exec', {
                body: JSON.stringify({ call: msg.exec.call, id: msg.exec.id, ...reply }),
              });
            }
          }
        });
        res.on('end', () =>
          resolve({
            header: res.headers['x-multus-exec'] as string | undefined,
            last: last ?? JSON.parse(text || 'null'),
          }),
        );
        res.on('close', () => resolve({ last }));
        res.on('error', () => resolve({ last: undefined })); // the stand-in went away
      });
      req.on('error', () => resolve({ last: undefined }));
      req.end(body(command));
    });
    return { execs, done };
  }

  const result = (ip: string) =>
    Buffer.from(JSON.stringify({ cniVersion: '1.0.0', ips: [{ address: ip }] })).toString('base64');

  it('ADD: every delegate is run by the shim with its environment; the answer is the last line', async () => {
    const socket = await start();
    const s = shim(socket, 'ADD', (e) => ({
      exitCode: 0,
      stdout: result(e.path.endsWith('p0') ? '10.0.0.2/24' : '10.1.0.2/24'),
    }));
    const { header, last } = await s.done;
    expect(header).toBe('1');
    expect(s.execs.map((e) => `${e.path} ${e.env.CNI_COMMAND} ${e.env.CNI_IFNAME}`)).toEqual([
      '/fake/p0 ADD eth0',
      '/fake/p1 ADD net1',
    ]);
    expect(s.execs[0]!.env).toMatchObject({ PATH: '/shim/bin', SHIM_ONLY: 'yes', CNI_CONTAINERID: 'cid1' });
    expect(last).toMatchObject({ status: 200, answer: { Result: { ips: [{ address: '10.0.0.2/24' }] } } });
    expect(exec.received).toEqual([]); // the daemon ran nothing itself
  });

  it('a failed ADD is rolled back through the shim', async () => {
    const socket = await start();
    const error = Buffer.from('{"code":42,"msg":"nope"}').toString('base64');
    const s = shim(socket, 'ADD', (e) =>
      e.path.endsWith('p1') && e.env.CNI_COMMAND === 'ADD'
        ? { exitCode: 1, stdout: error }
        : { exitCode: 0, stdout: result('10.0.0.2/24') },
    );
    const { last } = await s.done;
    expect(last).toMatchObject({ status: 500, answer: { code: 42 } });
    const calls = s.execs.map((e) => `${e.path.slice('/fake/'.length)} ${e.env.CNI_COMMAND}`);
    expect(calls.slice(0, 2)).toEqual(['p0 ADD', 'p1 ADD']);
    expect(calls.slice(2).sort()).toEqual(['p0 DEL', 'p1 DEL']);
    expect(exec.received).toEqual([]);
  });

  it('the shim gone during an ADD: the daemon rolls it back itself', async () => {
    const socket = await start();
    const s = shim(socket, 'ADD', () => undefined);
    await s.done;
    expect(s.execs.map((e) => e.path)).toEqual(['/fake/p0']);
    for (let i = 0; i < 200 && exec.calls().length < 1; i++) await new Promise((r) => setTimeout(r, 5));
    expect(exec.calls()).toEqual(['DEL p0 eth0']); // p1 was never added
  });

  it('a shim that does not offer it, and the default mode, get the answer as before', async () => {
    for (const [mode, offered] of [
      ['caller', false],
      ['daemon', true],
    ] as const) {
      const socket = await start(mode);
      const headers: Record<string, string> = offered ? { 'X-Multus-Exec': '1' } : {};
      const via = await http(socket, '/cni', { body: body('ADD'), headers });
      expect(via.status).toBe(200);
      expect(via.json()).toMatchObject({ Result: { cniVersion: '1.0.0' } });
      await closeServer(server!);
      server = undefined;
    }
    expect(exec.calls()).toEqual(['ADD p0 eth0', 'ADD p1 net1', 'ADD p0 eth0', 'ADD p1 net1']);
  });

  it('/cni/exec for no waiting call is 404, and not served in the default mode', async () => {
    let socket = await start();
    expect((await http(socket, '/cni/exec', { body: '{"call":"x","id":1}' })).status).toBe(404);
    await closeServer(server!);
    socket = await start('daemon');
    expect((await http(socket, '/cni/exec', { body: '{"call":"x","id":1}' })).status).toBe(404);
  });
});
