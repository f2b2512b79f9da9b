/**
 * build/multus-shim's bounded wait for the daemon's socket (shim/wait.go, docs/resident.md "When the daemon is not
 * there"): a daemon that comes up within `shimWaitSeconds` serves the call; one that does not gets the thin
 * fallback after the wait, and a marker beside the socket makes the next calls fall back at once, until a shim
 * connects or the daemon listens again. Runs the real shim against a stand-in daemon (an HTTP server on the unix
 * socket) and a stand-in thin plugin (a script named `multus` beside the shim), so it needs no root.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { type Server, createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SHIM_GAVE_UP, listenUnix } from '../../src/daemon/socket.ts';
import { REPO_ROOT } from '../e2e/helpers.ts';
import { fileExists, needs } from '../helpers/skip.ts';

const SHIM = process.env.MULTUS_TS_SHIM ?? join(REPO_ROOT, 'build/multus-shim');
const withShim = needs(fileExists(SHIM, 'the native shim build/multus-shim (npm run build with Go)'));

let dir: string;
let servers: Server[];
let children: ChildProcess[];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'shim-wait-'));
  servers = [];
  children = [];
  copyFileSync(SHIM, join(dir, 'multus-shim'));
  chmodSync(join(dir, 'multus-shim'), 0o755);
  // the thin plugin: says it ran
  writeFileSync(join(dir, 'multus'), '#!/bin/sh\ncat >/dev/null\necho \'{"cniVersion":"1.0.0","thin":true}\'\n', {
    mode: 0o755,
  });
});
afterEach(async () => {
  for (const c of children) c.kill('SIGKILL');
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  rmSync(dir, { recursive: true, force: true });
});

const sock = () => join(dir, 'run', 'multus.sock');
const marker = () => join(dir, 'run', SHIM_GAVE_UP);

/** The stand-in daemon: every /cni call answers a result that says the daemon served it. */
async function startDaemon(): Promise<Server> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.end(JSON.stringify({ Result: { cniVersion: '1.0.0', daemon: true } })));
  });
  servers.push(server);
  await listenUnix(server, join(dir, 'run'));
  return server;
}

/** One shim call; its output, exit code and wall time. */
function shim(command: string, waitSeconds?: number): Promise<{ out: any; code: number | null; ms: number }> {
  const conf = {
    cniVersion: '1.0.0',
    name: 'm',
    type: 'multus-shim',
    daemonSocketDir: join(dir, 'run'),
    ...(waitSeconds === undefined ? {} : { shimWaitSeconds: waitSeconds }),
  };
  const t0 = performance.now();
  const c = spawn(join(dir, 'multus-shim'), [], {
    env: { CNI_COMMAND: command, CNI_CONTAINERID: 'c1', CNI_NETNS: '/x', CNI_IFNAME: 'eth0', CNI_PATH: dir },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  children.push(c);
  let out = '';
  c.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  c.stdin!.end(JSON.stringify(conf));
  return new Promise((resolve) =>
    c.on('close', (code) => resolve({ out: JSON.parse(out || 'null'), code, ms: performance.now() - t0 })),
  );
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.skipIf(!withShim)('the shim waits, bounded, for the daemon', () => {
  it('a daemon that comes up within the wait serves the call (socket dir missing at first)', async () => {
    const call = shim('ADD', 10);
    await sleep(1500);
    await startDaemon();
    const r = await call;
    expect(r.out).toEqual({ cniVersion: '1.0.0', daemon: true });
    expect(r.code).toBe(0);
    expect(r.ms).toBeGreaterThanOrEqual(1400);
    expect(existsSync(marker())).toBe(false);
  });

  it('a socket left by a dead daemon (refusing) is waited for too: the restarted daemon serves', async () => {
    // a daemon SIGKILLed while listening: its socket file stays and connect() gets ECONNREFUSED
    mkdirSync(join(dir, 'run'), { mode: 0o700 });
    const script = `require('net').createServer().listen(${JSON.stringify(sock())}, () => process.kill(process.pid, 'SIGKILL'))`;
    const dead = spawn(process.execPath, ['-e', script], { stdio: 'ignore' });
    await new Promise((r) => dead.on('exit', r));
    expect(statSync(sock()).isSocket()).toBe(true);
    const call = shim('DEL', 10);
    await sleep(800);
    await startDaemon(); // removes the stale socket file as the real daemon does
    const r = await call;
    expect(r.out).toEqual({ cniVersion: '1.0.0', daemon: true });
    expect(r.ms).toBeGreaterThanOrEqual(700);
  });

  it('a daemon that does not come: thin fallback after the wait, and the next calls fall back at once', async () => {
    const first = await Promise.all([shim('ADD', 1), shim('DEL', 1)]);
    for (const r of first) {
      expect(r.out).toEqual({ cniVersion: '1.0.0', thin: true });
      expect(r.ms).toBeGreaterThanOrEqual(950);
    }
    expect(statSync(marker()).mode & 0o777).toBe(0o600);
    const next = await shim('ADD', 30);
    expect(next.out).toEqual({ cniVersion: '1.0.0', thin: true });
    expect(next.ms).toBeLessThan(15_000); // not the 30 s it was told

  });

  it('a shim already waiting gives up when another leaves the marker', async () => {
    const long = shim('ADD', 30);
    await sleep(300);
    const short = await shim('ADD', 1);
    expect(short.out).toEqual({ cniVersion: '1.0.0', thin: true });
    const r = await long;
    expect(r.out).toEqual({ cniVersion: '1.0.0', thin: true });
    expect(r.ms).toBeLessThan(15_000); // not its 30 s
  });

  it('the daemon listening removes the marker: calls are served and wait again later', async () => {
    await shim('ADD', 1);
    expect(existsSync(marker())).toBe(true);
    const d = await startDaemon();
    expect(existsSync(marker())).toBe(false);
    expect((await shim('ADD', 1)).out).toEqual({ cniVersion: '1.0.0', daemon: true });
    await new Promise((r) => d.close(r));
    const call = shim('ADD', 10);
    await sleep(500);
    await startDaemon();
    expect((await call).out).toEqual({ cniVersion: '1.0.0', daemon: true });
  });

  it('a shim that connects removes a marker left behind', async () => {
    await startDaemon();
    writeFileSync(marker(), 'left over\n', { mode: 0o600 });
    expect((await shim('CHECK', 1)).out).toEqual({ cniVersion: '1.0.0', daemon: true });
    expect(existsSync(marker())).toBe(false);
  });

  it('shimWaitSeconds 0: the thin fallback at once, no marker; VERSION never waits', async () => {
    const r = await shim('ADD', 0);
    expect(r.out).toEqual({ cniVersion: '1.0.0', thin: true });
    expect(r.ms).toBeLessThan(15_000);
    expect(existsSync(marker())).toBe(false);
    const v = await shim('VERSION'); // no shimWaitSeconds: the default 30 s would apply to the other commands
    expect(v.out).toEqual({ cniVersion: '1.0.0', thin: true });
    expect(v.ms).toBeLessThan(15_000);
    expect(existsSync(marker())).toBe(false);
  });
});
