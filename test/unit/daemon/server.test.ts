/**
 * The daemon's /cni API in-process: a real unix socket in a temp dir, handle() behind it with a Host of fakes.
 * The protocol cases of test/unit/host/handle.test.ts run both through handle() and through /cni: same answers,
 * the error code kept, codes mapped to statuses. Then the server's own rules: bad bodies, the body limit,
 * unknown paths and methods, healthz, per-container ordering, parallelism and connectionLimit.
 */
import { spawnSync } from 'node:child_process';
import type { Server } from 'node:http';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ExecOutput } from '../../../src/cni/exec.ts';
import { createMetrics } from '../../../src/daemon/metrics.ts';
import { createQueue } from '../../../src/daemon/queue.ts';
import { type ServerDeps, createCniServer } from '../../../src/daemon/server.ts';
import { cniCallOf, statusOf } from '../../../src/daemon/wire.ts';
import { listenUnix } from '../../../src/daemon/socket.ts';
import { handle } from '../../../src/host/handle.ts';
import type { Host } from '../../../src/host/host.ts';
import { createHost } from '../../../src/host/host.ts';
import { FakeExec } from '../../helpers/fake-exec.ts';
import { cniBody, closeServer, http } from '../../helpers/daemon.ts';
import { testNetns } from '../../helpers/netns.ts';

let dir: string;
let exec: FakeExec;
let ready: boolean;
let server: Server | undefined;
let notReady: string | undefined;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mts-daemon-'));
  exec = new FakeExec('p0', 'p1');
  ready = true;
  notReady = undefined;
});
afterEach(async () => {
  if (server) await closeServer(server);
  server = undefined;
  rmSync(dir, { recursive: true, force: true });
});

function fakeHost(): Host {
  return createHost({
    writeStderr: () => {},
    exec,
    readiness: { exists: async () => ready, sleep: async () => {} },
    clock: { now: () => 0, sleep: async () => {} },
  });
}

async function start(limit = 0, maxBodyBytes?: number, more: Partial<ServerDeps> = {}): Promise<string> {
  server = createCniServer({
    host: fakeHost(),
    daemonEnv: { PATH: '/usr/bin', CNI_COMMAND: 'IGNORED' },
    log: { error() {}, warn() {}, verbose() {}, debug() {}, enabled: () => false },
    queue: createQueue(limit),
    notReady: () => notReady,
    ...(maxBodyBytes ? { maxBodyBytes } : {}),
    ...more,
  });
  return listenUnix(server, join(dir, 'run'));
}

function conf(cniDir: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    cniVersion: '1.0.0',
    name: 'multus-cni-network',
    type: 'multus',
    cniDir,
    delegates: [
      { cniVersion: '1.0.0', name: 'cluster', type: 'p0' },
      { cniVersion: '1.0.0', name: 'second', type: 'p1' },
    ],
    ...extra,
  };
}

const baseEnv = (): Record<string, string | undefined> => ({
  CNI_CONTAINERID: 'cid1',
  CNI_NETNS: testNetns(),
  CNI_IFNAME: 'eth0',
  CNI_PATH: '/usr/lib/cni',
  CNI_ARGS: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=pod1;K8S_POD_UID=u1',
});

interface Case {
  name: string;
  command: string;
  extra?: Record<string, unknown>;
  raw?: string;
  env?: Record<string, string | undefined>;
  setup?: () => void;
}

const CASES: Case[] = [
  { name: 'ADD in the config version', command: 'ADD', extra: { cniVersion: '0.4.0' } },
  { name: 'ADD 1.0.0', command: 'ADD' },
  { name: 'VERSION', command: 'VERSION', raw: 'not json' },
  { name: 'unknown command (4)', command: 'PATCH' },
  { name: 'undecodable config (6)', command: 'ADD', raw: '{' },
  { name: 'missing CNI_IFNAME (4)', command: 'ADD', env: { CNI_IFNAME: undefined } },
  { name: 'bad delegates (7)', command: 'ADD', extra: { cniVersion: '0.3.1', delegates: 'x' } },
  { name: 'CHECK needs 0.4.0 (1)', command: 'CHECK', extra: { cniVersion: '0.3.1' } },
  { name: 'GC needs 1.1.0 (1)', command: 'GC' },
  { name: 'DEL', command: 'DEL' },
  {
    name: 'a delegate error keeps its code (42)',
    command: 'ADD',
    setup: () => {
      const error = { cniVersion: '1.0.0', code: 42, msg: 'nope' };
      exec.returns['p1 ADD'] = { exitCode: 1, stdout: Buffer.from(JSON.stringify(error)) };
    },
  },
  { name: 'a gone netns on ADD (4)', command: 'ADD', env: { CNI_NETNS: '/nonexistent/netns' } },
  { name: 'the own netns (8)', command: 'ADD', env: { CNI_NETNS: '/proc/self/ns/net' } },
  {
    name: 'not ready (11)',
    command: 'ADD',
    extra: { readinessindicatorfile: '/nonexistent/ready' },
    setup: () => (ready = false),
  },
  { name: 'bad CNI_ARGS (4)', command: 'ADD', env: { CNI_ARGS: 'novalue' } },
];

describe('/cni answers as handle() does', () => {
  for (const c of CASES) {
    it(c.name, async () => {
      const socket = await start();
      c.setup?.();
      const env = { ...baseEnv(), CNI_COMMAND: c.command, ...c.env };
      const direct = await handle(fakeHost(), {
        env,
        stdin: Buffer.from(c.raw ?? JSON.stringify(conf(join(dir, 'direct'), c.extra))),
      });
      const via = await http(socket, '/cni', { body: cniBody(env, c.raw ?? conf(join(dir, 'via'), c.extra)) });
      if (direct.exitCode === 0) {
        expect(via.status).toBe(200);
        expect(via.json()).toEqual({ Result: direct.stdout === '' ? null : JSON.parse(direct.stdout) });
      } else {
        expect(via.status).toBe(statusOf(direct.error!.code));
        expect(via.status).not.toBe(200);
        // The readiness message names the jittered time it waited: compare without it.
        const norm = (o: Record<string, unknown>): unknown =>
          JSON.parse(JSON.stringify(o).replace(/over [\d.]+ s/, 'over T s'));
        expect(norm(via.json())).toEqual(norm(JSON.parse(direct.stdout) as Record<string, unknown>));
      }
    });
  }

  it('codes of the request (1-8 but 5) are 400, the rest 500', () => {
    expect([1, 4, 6, 7, 8].map(statusOf)).toEqual([400, 400, 400, 400, 400]);
    expect([5, 11, 42, 999].map(statusOf)).toEqual([500, 500, 500, 500]); // 5: an I/O failure is the node's, not the caller's
  });

  it("every call's delegates get the daemon's cancel signal", async () => {
    const stop = new AbortController();
    const socket = await start(0, undefined, { signal: stop.signal });
    const seen: (AbortSignal | undefined)[] = [];
    const fake = exec.execPlugin.bind(exec);
    exec.execPlugin = (run) => {
      seen.push(run.signal);
      return fake(run);
    };
    const env = { ...baseEnv(), CNI_COMMAND: 'DEL' };
    expect((await http(socket, '/cni', { body: cniBody(env, conf(join(dir, 'c'))) })).status).toBe(200);
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.every((s) => s === stop.signal)).toBe(true);
  });

  it("only the request's CNI_* variables reach the delegates, over the daemon's environment", async () => {
    const socket = await start();
    let seen: Record<string, string> = {};
    exec.returns.p0 = () => ({});
    const orig = exec.execPlugin.bind(exec);
    exec.execPlugin = (run) => {
      if (run.path.endsWith('p0')) seen = run.env;
      return orig(run);
    };
    const env = { ...baseEnv(), CNI_COMMAND: 'DEL', PATH: '/evil', HOME: '/x' };
    expect((await http(socket, '/cni', { body: cniBody(env, conf(join(dir, 'c'))) })).status).toBe(200);
    expect(seen.PATH).toBe('/usr/bin');
    expect(seen.HOME).toBeUndefined();
    expect(seen.CNI_COMMAND).toBe('DEL');
    expect(seen.CNI_CONTAINERID).toBe('cid1');
  });
});

describe('/cni: what the server itself refuses', () => {
  it('a body that is not JSON is 400 code 6; env not an object 400 code 4; config not base64 400 code 6', async () => {
    const socket = await start();
    const a = await http(socket, '/cni', { body: '{nope' });
    expect([a.status, a.json().code]).toEqual([400, 6]);
    const b = await http(socket, '/cni', { body: JSON.stringify({ env: 'CNI_COMMAND=ADD', config: '' }) });
    expect([b.status, b.json().code]).toEqual([400, 4]);
    const notBase64 = JSON.stringify({ env: { CNI_COMMAND: 'ADD' }, config: 'not base64!' });
    const c = await http(socket, '/cni', { body: notBase64 });
    expect([c.status, c.json().code]).toEqual([400, 6]);
    const d = await http(socket, '/cni', { body: JSON.stringify({ env: { CNI_COMMAND: 5 } }) });
    expect([d.status, d.json().code]).toEqual([400, 4]);
    expect(exec.received).toEqual([]);
  });

  it('config: any padded standard base64 (as Go decodes it), canonical or not; nothing else', () => {
    const body = (config: string) => ({ env: {}, config });
    expect(cniCallOf(body('eyJhIjoxfQ=='), {}).stdin.toString()).toBe('{"a":1}');
    expect(cniCallOf(body(''), {}).stdin).toEqual(Buffer.alloc(0));
    // nonzero bits in the padding: not what an encoder writes, still base64 to Go's StdEncoding
    expect(cniCallOf(body('QR=='), {}).stdin).toEqual(Buffer.from([0x41]));
    for (const bad of ['QQ', 'QQ==\n', 'QQ-_', 'Q Q==']) {
      expect(() => cniCallOf(body(bad), {}), bad).toThrow(expect.objectContaining({ code: 6 }));
    }
  });

  it('a body over the limit is 413 with a CNI error, and nothing runs', async () => {
    const socket = await start(0, 4096);
    const big = cniBody({ ...baseEnv(), CNI_COMMAND: 'ADD' }, conf(join(dir, 'c'), { pad: 'x'.repeat(8192) }));
    const a = await http(socket, '/cni', { body: big });
    expect(a.status).toBe(413);
    expect(a.json()).toMatchObject({ code: 7, msg: expect.stringContaining('larger than 4096') });
    expect(exec.received).toEqual([]);
  });

  it('unknown paths are 404, wrong methods 405, both with CNI error JSON', async () => {
    const socket = await start();
    const a = await http(socket, '/nope');
    expect(a.status).toBe(404);
    expect(a.json()).toMatchObject({ code: expect.any(Number), msg: expect.stringContaining('/nope') });
    const b = await http(socket, '/cni', { method: 'GET' });
    expect(b.status).toBe(405);
    expect(b.json()).toMatchObject({ msg: expect.stringContaining('POST') });
    expect((await http(socket, '/healthz', { method: 'DELETE' })).status).toBe(405);
    expect((await http(socket, '/delegate')).status).toBe(404);
  });

  it('/healthz: 200 on GET and POST when ready, 503 with the reason when not', async () => {
    const socket = await start();
    expect((await http(socket, '/healthz', { method: 'GET' })).status).toBe(200);
    expect((await http(socket, '/healthz', { body: 'null' })).status).toBe(200);
    notReady = 'waiting for /x';
    const a = await http(socket, '/healthz', { method: 'GET' });
    expect(a.status).toBe(503);
    expect(a.json()).toMatchObject({ code: 11, msg: expect.stringContaining('waiting for /x') });
  });

  it('/readyz?config (multus-shim --ready): also 503 while no 00-multus.conf is served; Multus shims ask without it', async () => {
    let notServing: string | undefined = 'no multus config is served yet (no master network config)';
    const socket = await start(0, undefined, { notServing: () => notServing });
    expect((await http(socket, '/readyz', { body: 'null' })).status).toBe(200); // Multus HEAD's shim
    expect((await http(socket, '/healthz', { body: 'null' })).status).toBe(200); // Multus v4.3.0's
    const a = await http(socket, '/readyz?config', { method: 'GET' });
    expect(a.status).toBe(503);
    expect(a.json()).toMatchObject({ code: 11, msg: expect.stringContaining('no multus config is served yet') });
    notServing = undefined;
    expect((await http(socket, '/readyz?config', { method: 'GET' })).status).toBe(200);
    notReady = 'waiting for /x';
    expect((await http(socket, '/readyz?config', { method: 'GET' })).status).toBe(503);
  });

  it('/readyz: as /healthz while serving, 500 once stopping; each request counted as Multus counts it', async () => {
    let stopping = false;
    const metrics = createMetrics();
    server = createCniServer({
      host: fakeHost(),
      daemonEnv: {},
      log: { error() {}, warn() {}, verbose() {}, debug() {}, enabled: () => false },
      queue: createQueue(0),
      notReady: () => notReady,
      stopping: () => stopping,
      metrics,
    });
    const socket = await listenUnix(server, join(dir, 'run'));
    expect((await http(socket, '/readyz', { body: 'null' })).status).toBe(200);
    notReady = 'waiting for /x';
    expect((await http(socket, '/readyz', { method: 'GET' })).status).toBe(503);
    notReady = undefined;
    stopping = true;
    const a = await http(socket, '/readyz', { body: 'null' });
    expect(a.status).toBe(500);
    expect(a.json()).toMatchObject({ code: 11, msg: expect.stringContaining('stopping') });
    expect((await http(socket, '/healthz', { body: 'null' })).status).toBe(200);
    expect((await http(socket, '/nope', { method: 'GET' })).status).toBe(404);
    const text = (await metrics.render()).body;
    expect(text).toContain('multus_server_request_total{handler="/readyz",code="500",method="post"} 1');
    expect(text).toContain('multus_server_request_total{handler="/readyz",code="200",method="post"} 1');
    expect(text).toContain('multus_server_request_total{handler="/healthz",code="200",method="post"} 1');
    expect(text).toContain('multus_server_request_total{handler="NotFound",code="404",method="get"} 1');
  });

  it('the socket is 0600 in a 0700 directory', async () => {
    const socket = await start();
    expect(statSync(socket).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, 'run')).mode & 0o777).toBe(0o700);
  });

  it('a stale socket is replaced; a live one is refused', async () => {
    const socket = await start();
    const other = createCniServer({
      host: fakeHost(),
      daemonEnv: {},
      log: { error() {}, warn() {}, verbose() {}, debug() {}, enabled: () => false },
      queue: createQueue(0),
      notReady: () => undefined,
    });
    await expect(listenUnix(other, join(dir, 'run'))).rejects.toThrow(/another daemon/);
    await closeServer(server!);
    server = undefined;
    // A socket file left behind by a process that died: bound, never listened on, not unlinked.
    const bind = 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])';
    const r = spawnSync('python3', ['-c', bind, socket]);
    expect(r.status).toBe(0);
    expect(statSync(socket).isSocket()).toBe(true);
    server = other;
    await listenUnix(other, join(dir, 'run'));
    expect((await http(socket, '/healthz', { method: 'GET' })).status).toBe(200);
  });
});

/** An Exec whose ADDs wait until released, recording starts and ends. */
function gatedExec(): { events: string[]; release(cid: string): void; running(): number; max(): number } {
  const events: string[] = [];
  const gates = new Map<string, () => void>();
  const waiting = new Map<string, Promise<void>>();
  let running = 0;
  let max = 0;
  const gate = (cid: string): Promise<void> => {
    let p = waiting.get(cid);
    if (!p) {
      p = new Promise<void>((r) => gates.set(cid, r));
      waiting.set(cid, p);
    }
    return p;
  };
  exec.execPlugin = async (run): Promise<ExecOutput> => {
    const { path, env } = run;
    const cid = env.CNI_CONTAINERID!;
    if (!path.endsWith('p0') || env.CNI_COMMAND !== 'ADD') {
      return FakeExec.prototype.execPlugin.call(exec, run);
    }
    running++;
    max = Math.max(max, running);
    events.push(`start ${cid}`);
    await gate(cid);
    waiting.delete(cid); // the next call of this container waits for a fresh release
    running--;
    events.push(`end ${cid}`);
    return FakeExec.prototype.execPlugin.call(exec, run);
  };
  return {
    events,
    release: (cid) => {
      gate(cid);
      gates.get(cid)!();
    },
    running: () => running,
    max: () => max,
  };
}

async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 2000 && !cond(); i++) await new Promise((r) => setTimeout(r, 5));
  expect(cond()).toBe(true);
}

describe('/cni: order and concurrency', () => {
  const add = (socket: string, cid: string) =>
    http(socket, '/cni', {
      body: cniBody({ ...baseEnv(), CNI_COMMAND: 'ADD', CNI_CONTAINERID: cid }, conf(join(dir, 'c'))),
    });

  it('the same container runs in order; another container runs meanwhile', async () => {
    const socket = await start();
    const g = gatedExec();
    const a1 = add(socket, 'A');
    await until(() => g.events.includes('start A'));
    const a2 = add(socket, 'A');
    const b = add(socket, 'B');
    await until(() => g.events.includes('start B'));
    g.release('B');
    expect((await b).status).toBe(200);
    // A's second call has not started while the first is still running.
    expect(g.events.filter((e) => e === 'start A')).toHaveLength(1);
    g.release('A');
    expect((await a1).status).toBe(200);
    await until(() => g.events.filter((e) => e === 'start A').length === 2);
    g.release('A');
    expect((await a2).status).toBe(200);
    expect(g.events.indexOf('end A')).toBeLessThan(g.events.lastIndexOf('start A'));
  });

  it('connectionLimit bounds the calls running at once; the rest queue and all succeed', async () => {
    const socket = await start(2);
    const g = gatedExec();
    const calls = ['c1', 'c2', 'c3', 'c4'].map((cid) => add(socket, cid));
    await until(() => g.running() === 2);
    await new Promise((r) => setTimeout(r, 50));
    expect(g.running()).toBe(2);
    for (const cid of ['c1', 'c2', 'c3', 'c4']) g.release(cid);
    const answers = await Promise.all(calls);
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200]);
    expect(g.max()).toBe(2);
  });
});
