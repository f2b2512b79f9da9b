/**
 * The protocol edge in-process: handle() with a Host of fakes (exec, readiness, clock). Dispatch, the
 * error-to-wire mapping, the version gate, the netns rule and the readiness rule per command, without
 * spawning anything. The same cases run against the built executable in test/fixture/.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { CniAnswer } from '../../../src/host/handle.ts';
import { handle } from '../../../src/host/handle.ts';
import type { Host } from '../../../src/host/host.ts';
import { createHost } from '../../../src/host/host.ts';
import { StoppingError } from '../../../src/cni/exec.ts';
import { FakeExec } from '../../helpers/fake-exec.ts';
import { testNetns } from '../../helpers/netns.ts';

let dir: string;
let _stderr: string;
let exec: FakeExec;
let ready: boolean;
let sleeps: number;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mts-handle-'));
  _stderr = '';
  exec = new FakeExec('p0', 'p1');
  ready = true;
  sleeps = 0;
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function host(): Host {
  return createHost({
    writeStderr: (s) => {
      _stderr += s;
    },
    exec,
    readiness: {
      exists: async () => ready,
      sleep: async () => {
        sleeps++;
      },
    },
    clock: { now: () => 0, sleep: async () => {} },
  });
}

function conf(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    cniVersion: '1.0.0',
    name: 'multus-cni-network',
    type: 'multus',
    cniDir: join(dir, 'cni'),
    delegates: [
      { cniVersion: '1.0.0', name: 'cluster', type: 'p0' },
      { cniVersion: '1.0.0', name: 'second', type: 'p1' },
    ],
    ...extra,
  };
}

const baseEnv = () => ({
  CNI_CONTAINERID: 'cid1',
  CNI_NETNS: testNetns(),
  CNI_IFNAME: 'eth0',
  CNI_PATH: '/usr/lib/cni',
  CNI_ARGS: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=pod1;K8S_POD_UID=u1',
});

function call(
  command: string,
  config: unknown = conf(),
  env: Record<string, string | undefined> = {},
): Promise<CniAnswer> {
  const stdin = Buffer.from(typeof config === 'string' ? config : JSON.stringify(config));
  return handle(host(), { env: { ...baseEnv(), CNI_COMMAND: command, ...env }, stdin });
}

function wire(answer: CniAnswer): Record<string, unknown> {
  return JSON.parse(answer.stdout) as Record<string, unknown>;
}

describe('handle(): dispatch', () => {
  it('ADD runs every delegate and prints the first result in the config version, indented by 4', async () => {
    const answer = await call('ADD', conf({ cniVersion: '0.4.0' }));
    expect(answer.exitCode).toBe(0);
    expect(exec.calls()).toEqual(['ADD p0 eth0', 'ADD p1 net1']);
    expect(wire(answer)).toMatchObject({ cniVersion: '0.4.0', interfaces: [{ name: 'eth0' }] });
    expect(answer.stdout).toMatch(/^\{\n {4}"cniVersion"/);
  });

  it('DEL, CHECK and STATUS print nothing on success', async () => {
    await call('ADD');
    for (const command of ['CHECK', 'DEL']) {
      const answer = await call(command);
      expect(answer).toMatchObject({ exitCode: 0, stdout: '' });
    }
    // STATUS goes to delegates of 1.1.0 or later only; these are 1.0.0.
    expect(await call('STATUS', conf({ cniVersion: '1.1.0' }))).toMatchObject({ exitCode: 0, stdout: '' });
    expect(exec.calls()).toEqual([
      'ADD p0 eth0',
      'ADD p1 net1',
      'CHECK p0 eth0',
      'CHECK p1 net1',
      'DEL p1 net1',
      'DEL p0 eth0',
    ]);
  });

  it('VERSION answers without reading the config; an empty CNI_COMMAND prints the about text to stderr', async () => {
    const version = await call('VERSION', 'not json');
    expect(version.exitCode).toBe(0);
    expect(wire(version)).toMatchObject({
      cniVersion: '1.1.0',
      supportedVersions: expect.arrayContaining(['0.1.0', '1.1.0']),
    });
    const about = await call('', 'not json');
    expect(about).toMatchObject({ exitCode: 0, stdout: '' });
    expect(about.stderr).toMatch(/^multus-ts .*meta-plugin/);
    expect(exec.received).toEqual([]);
  });
});

describe('handle(): errors on the wire', () => {
  it('an unknown command is code 4 in the current version', async () => {
    const answer = await call('PATCH');
    expect(answer.exitCode).toBe(1);
    expect(wire(answer)).toMatchObject({
      cniVersion: '1.1.0',
      code: 4,
      msg: expect.stringContaining('unknown CNI_COMMAND'),
    });
  });

  it('undecodable stdin is code 6; a missing variable is code 4; a bad config is code 7 in its own version', async () => {
    expect(wire(await call('ADD', '{'))).toMatchObject({ code: 6 });
    expect(wire(await call('ADD', conf(), { CNI_IFNAME: undefined }))).toMatchObject({
      code: 4,
      msg: expect.stringContaining('CNI_IFNAME'),
    });
    const bad = wire(await call('ADD', conf({ cniVersion: '0.3.1', delegates: 'x' })));
    expect(bad).toMatchObject({ cniVersion: '0.3.1', code: 7 });
    expect(exec.received).toEqual([]);
  });

  it('the version gate: CHECK needs 0.4.0, GC and STATUS need 1.1.0 (code 1)', async () => {
    expect(wire(await call('CHECK', conf({ cniVersion: '0.3.1' })))).toMatchObject({
      code: 1,
      msg: 'config version does not allow CHECK',
    });
    expect(wire(await call('GC', conf({ cniVersion: '1.0.0' })))).toMatchObject({ code: 1 });
    expect(wire(await call('STATUS', conf({ cniVersion: '1.0.0' })))).toMatchObject({ code: 1 });
    expect(exec.received).toEqual([]);
  });

  it("a delegate's own error code reaches the wire, after the rollback", async () => {
    exec.returns['p1 ADD'] = {
      exitCode: 1,
      stdout: Buffer.from(JSON.stringify({ cniVersion: '1.0.0', code: 42, msg: 'nope' })),
    };
    const answer = await call('ADD');
    expect(answer.exitCode).toBe(1);
    expect(wire(answer)).toMatchObject({ code: 42, msg: expect.stringContaining('nope') });
    expect(answer.error?.code).toBe(42);
    expect(exec.calls()).toEqual(['ADD p0 eth0', 'ADD p1 net1', 'DEL p1 net1', 'DEL p0 eth0']);
  });

  it('a failure that is not a CniError is code 999 with no stack on stdout', async () => {
    exec.execPlugin = () => {
      throw new TypeError('boom');
    };
    const answer = await call('ADD');
    expect(wire(answer)).toMatchObject({ code: 999 });
    expect(answer.stdout).not.toMatch(/\bat .*\.ts:\d+/);
  });
});

describe("handle(): the call's cancel signal", () => {
  it('reaches every delegate the call starts; once aborted, no other starts and the call fails with code 11', async () => {
    const stop = new AbortController();
    const seen: (AbortSignal | undefined)[] = [];
    const fake = exec.execPlugin.bind(exec);
    exec.execPlugin = async (run) => {
      seen.push(run.signal);
      if (run.signal?.aborted) throw new StoppingError(run.path); // as realExec refuses it
      const out = await fake(run);
      stop.abort(); // a stop arrives while the first delegate runs
      return out;
    };
    const env = { ...baseEnv(), CNI_COMMAND: 'ADD' };
    const answer = await handle(host(), { env, stdin: Buffer.from(JSON.stringify(conf())), signal: stop.signal });
    expect(wire(answer)).toMatchObject({ code: 11 });
    expect(exec.calls()).toEqual(['ADD p0 eth0']);
    expect(seen.length).toBeGreaterThan(1);
    expect(seen.every((s) => s === stop.signal)).toBe(true);
  });
});

describe('handle(): the netns rule', () => {
  it('ADD and CHECK need an existing CNI_NETNS (code 4); DEL of a gone namespace goes on', async () => {
    const gone = join(dir, 'no-such-netns');
    expect(wire(await call('ADD', conf(), { CNI_NETNS: gone }))).toMatchObject({
      code: 4,
      msg: expect.stringContaining(gone),
    });
    expect(wire(await call('CHECK', conf(), { CNI_NETNS: gone }))).toMatchObject({ code: 4 });
    expect(await call('DEL', conf(), { CNI_NETNS: gone })).toMatchObject({ exitCode: 0 });
  });

  it('a CNI_NETNS that is not a network namespace: ADD and CHECK refuse it before any delegate, DEL runs without it', async () => {
    // issue 28 finding 9: a file, a directory, /dev/null (build/multus checks a mount namespace too, through Bun)
    const file = join(dir, 'plain-file');
    writeFileSync(file, '');
    for (const path of [file, dir, '/dev/null']) {
      expect(wire(await call('ADD', conf(), { CNI_NETNS: path }))).toMatchObject({
        code: 4,
        msg: expect.stringContaining(`CNI_NETNS "${path}" is not a network namespace`),
      });
      expect(wire(await call('CHECK', conf(), { CNI_NETNS: path }))).toMatchObject({ code: 4 });
    }
    expect(exec.received).toEqual([]);
    expect(await call('DEL', conf(), { CNI_NETNS: file })).toMatchObject({ exitCode: 0 });
    expect(exec.received.length).toBeGreaterThan(0);
    expect(exec.received.every((c) => c.command === 'DEL' && c.netns === '')).toBe(true);
  });

  it("the plugin's own namespace is refused with code 8 unless CNI_NETNS_OVERRIDE is set", async () => {
    const own = await call('ADD', conf(), { CNI_NETNS: '/proc/self/ns/net' });
    expect(wire(own)).toMatchObject({ code: 8 });
    expect(exec.received).toEqual([]);
    expect(await call('ADD', conf(), { CNI_NETNS: '/proc/self/ns/net', CNI_NETNS_OVERRIDE: '1' })).toMatchObject({
      exitCode: 0,
    });
  });
});

describe('handle(): the readiness rule', () => {
  const withFile = () => conf({ cniVersion: '1.1.0', readinessindicatorfile: join(dir, 'ready') });

  it('ADD waits for the readiness file and fails with code 11 before any delegate runs', async () => {
    ready = false;
    expect(wire(await call('ADD', withFile()))).toMatchObject({ code: 11 });
    expect(sleeps).toBe(4);
    expect(exec.received).toEqual([]);
  });

  it('STATUS and GC wait too; DEL and CHECK never wait', async () => {
    ready = false;
    expect(wire(await call('STATUS', withFile()))).toMatchObject({ code: 11 });
    expect(wire(await call('GC', withFile()))).toMatchObject({ code: 11 });
    sleeps = 0;
    expect(await call('DEL', withFile())).toMatchObject({ exitCode: 0 });
    expect(await call('CHECK', withFile())).toMatchObject({ exitCode: 0 });
    expect(sleeps).toBe(0);
  });

  it("a bad CNI_ARGS is reported before the wait (Multus' order)", async () => {
    ready = false;
    expect(wire(await call('ADD', withFile(), { CNI_ARGS: 'novalue' }))).toMatchObject({ code: 4 });
    expect(sleeps).toBe(0);
  });
});
