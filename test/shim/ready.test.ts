/**
 * `multus-shim --ready` (shim/main.go readyMain), the resident DaemonSet's readiness probe: it asks the daemon over its
 * socket (GET /readyz) instead of starting the JavaScript executable. Against a fake daemon (what it prints and
 * exits for each answer, no socket, bad arguments), then against build/multus daemon: not ready while no master
 * network config is there to generate 00-multus.conf from, ready once it is (docs/resident.md, "Readiness").
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fileExists, isRoot, needs } from '../helpers/skip.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const SHIM = join(ROOT, 'build/multus-shim');
const EXE = join(ROOT, 'build/multus');
const shimBuilt = () => needs(fileExists(SHIM, 'the native shim built from shim/ (npm run build, with Go installed)'));

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** The probe, as the kubelet runs it; stdin stays open and empty (a CNI call would wait for it). */
function probe(args: string[]): Promise<Run> {
  return new Promise((res) => {
    execFile(SHIM, ['--ready', ...args], { env: { PATH: '/usr/bin:/bin' } }, (err, stdout, stderr) =>
      res({ status: err ? Number(err.code) : 0, stdout, stderr }),
    );
  });
}

let dir: string;
let servers: Server[];
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'multus-shim-ready-'));
  mkdirSync(join(dir, 'run'), { mode: 0o700 });
  servers = [];
});
afterEach(async () => {
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  rmSync(dir, { recursive: true, force: true });
});

/** A fake daemon on <dir>/run/multus.sock answering every request with `answer`; the paths asked are recorded. */
function fakeDaemon(answer: (res: ServerResponse) => void, asked: string[]): Promise<void> {
  const srv = createServer((req, res) => {
    asked.push(`${req.method} ${req.url}`);
    req.resume();
    answer(res);
  });
  servers.push(srv);
  return new Promise((r) => srv.listen(join(dir, 'run/multus.sock'), r));
}

const reply = (status: number, body: string) => (res: ServerResponse) => {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(body);
};

describe.runIf(shimBuilt())('multus-shim --ready against a fake daemon', () => {
  it('200 on GET /readyz: "ready", exit 0', async () => {
    const asked: string[] = [];
    await fakeDaemon(reply(200, ''), asked);
    expect(await probe(['--socket-dir', join(dir, 'run')])).toEqual({ status: 0, stdout: 'ready\n', stderr: '' });
    expect(asked).toEqual(['GET /readyz?config']);
  });

  it("503 or 500: the daemon's reason on stdout, exit 1", async () => {
    const asked: string[] = [];
    const why = 'the multus daemon is not ready: waiting for /run/flannel/subnet.env';
    await fakeDaemon(reply(503, JSON.stringify({ cniVersion: '', code: 11, msg: why })), asked);
    expect(await probe([`--socket-dir=${join(dir, 'run')}`])).toEqual({
      status: 1,
      stdout: `not ready: ${why}\n`,
      stderr: '',
    });
  });

  it('an answer that is not a CNI error: its status and text', async () => {
    await fakeDaemon(reply(500, 'boom'), []);
    const r = await probe(['--socket-dir', join(dir, 'run')]);
    expect(r.status).toBe(1);
    expect(r.stdout).toMatch(/^not ready: the multus daemon on .*multus\.sock answered HTTP 500: "?boom/);
  });

  it('no daemon: exit 1, naming the socket; a bad argument: exit 2', async () => {
    const r = await probe(['--socket-dir', join(dir, 'run')]);
    expect(r.status).toBe(1);
    expect(r.stdout).toMatch(new RegExp(`^not ready: no multus daemon on ${join(dir, 'run/multus.sock')}: .*no such file`));
    const bad = await probe(['--wait=0']);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/unexpected argument "--wait=0": usage: multus-shim --ready \[--socket-dir DIR\]/);
  });
});

describe.runIf(shimBuilt() && needs(isRoot(), fileExists(EXE, 'the built executable (npm run build)')))(
  'multus-shim --ready against build/multus daemon',
  () => {
    it('not ready until a master network config is there to serve, then ready', async () => {
      mkdirSync(join(dir, 'net.d'));
      const cfg = { socketDir: join(dir, 'run'), cniConfigDir: join(dir, 'net.d'), shutdownDrainSeconds: 0 };
      writeFileSync(join(dir, 'daemon-config.json'), JSON.stringify(cfg));
      const daemon = spawn(EXE, ['daemon', '--config', join(dir, 'daemon-config.json')], {
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
        stdio: 'ignore',
      });
      const exited = new Promise((r) => daemon.on('exit', r));
      try {
        const sock = join(dir, 'run/multus.sock');
        for (let i = 0; i < 1500 && !existsSync(sock); i++) await new Promise((r) => setTimeout(r, 10));
        const before = await probe(['--socket-dir', join(dir, 'run')]);
        expect(before).toMatchObject({ status: 1, stdout: expect.stringMatching(/no multus config is served yet/) });
        writeFileSync(join(dir, 'net.d/10-br.conf'), JSON.stringify({ cniVersion: '1.0.0', name: 'br', type: 'bridge' }));
        let after: Run | undefined;
        for (let i = 0; i < 100 && after?.status !== 0; i++) {
          after = await probe(['--socket-dir', join(dir, 'run')]);
          if (after.status !== 0) await new Promise((r) => setTimeout(r, 100));
        }
        expect(after).toEqual({ status: 0, stdout: 'ready\n', stderr: '' });
        expect(existsSync(join(dir, 'net.d/00-multus.conf'))).toBe(true);
      } finally {
        daemon.kill('SIGTERM');
        await exited;
      }
    });
  },
);
