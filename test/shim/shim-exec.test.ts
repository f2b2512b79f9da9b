/**
 * build/multus-shim running its call's delegates (shim/delegates.go; the daemon's `"delegateExec": "caller"`,
 * docs/archive/resident-protocol.md "Delegates run by the shim") against a fake daemon that streams exec requests on the
 * call's answer and collects the replies the shim posts to /cni/exec: the offer header, execs at once, exactly the
 * environment and stdin given, the timeout killing the delegate's group, refused paths, the stream's last line as
 * the answer, and the delegates killed when the daemon goes away mid-call.
 */
import { spawn } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fileExists, needs } from '../helpers/skip.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const SHIM = join(ROOT, 'build/multus-shim');
const ready = needs(fileExists(SHIM, 'the native shim built from shim/ (npm run build, with Go installed)'));

interface Reply {
  id: number;
  stdout?: string;
  stderr?: string;
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  error?: string;
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
const wait = async (ok: () => boolean): Promise<void> => {
  for (let i = 0; i < 500 && !ok(); i++) await new Promise((r) => setTimeout(r, 10));
};

describe.skipIf(!ready)('multus-shim runs the delegates a daemon streams to it', () => {
  let dir: string;
  let bin: string;
  let sock: string;
  let server: Server;
  let offered: string | undefined;
  let replies: Reply[];

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'multus-shim-exec-'));
    mkdirSync(join(dir, 'bin'));
    bin = join(dir, 'bin/multus-shim');
    copyFileSync(SHIM, bin);
    chmodSync(bin, 0o755);
    mkdirSync(join(dir, 'run'));
    sock = join(dir, 'run/multus.sock');
    replies = [];
  });
  afterEach(async () => {
    await new Promise((r) => server.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  const plugin = (name: string, script: string): string => {
    const path = join(dir, name);
    writeFileSync(path, `#!/bin/sh\n${script}\n`, { mode: 0o755 });
    return path;
  };

  /**
   * The fake daemon: streams `execs` on /cni, waits for as many replies (or, with `cut`, closes the connection once
   * `cut()` says so), then sends `last`.
   */
  function daemon(execs: Record<string, unknown>[], last: string, cut?: () => boolean): Promise<void> {
    let call: ServerResponse | undefined;
    const finish = () => {
      if (call && replies.length === execs.length) call.end(last);
    };
    server = createServer((req: IncomingMessage, res: ServerResponse) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (req.url === '/cni/exec') {
          replies.push(JSON.parse(Buffer.concat(chunks).toString()) as Reply);
          res.end();
          return finish();
        }
        offered = req.headers['x-multus-exec'] as string | undefined;
        res.writeHead(200, { 'Content-Type': 'application/x-ndjson', 'X-Multus-Exec': '1' });
        for (const [i, e] of execs.entries()) res.write(JSON.stringify({ exec: { call: 'tok', id: i + 1, ...e } }) + '\n');
        call = res;
        if (cut) void wait(cut).then(() => res.destroy());
        else finish();
      });
    });
    return new Promise((r) => server.listen(sock, r));
  }

  function runShim(env: Record<string, string> = {}): Promise<{ status: number | null; stdout: string }> {
    return new Promise((res, rej) => {
      const child = spawn(bin, [], {
        env: { PATH: '/usr/bin:/bin', CNI_COMMAND: 'ADD', CNI_CONTAINERID: 'c1', CNI_IFNAME: 'eth0', ...env },
        stdio: ['pipe', 'pipe', 'inherit'],
      });
      let stdout = '';
      child.stdout.on('data', (d) => (stdout += d));
      child.on('error', rej);
      child.on('close', (status) => res({ status, stdout }));
      child.stdin.end(JSON.stringify({ cniVersion: '1.0.0', name: 'm', type: 'multus-shim', daemonSocketDir: join(dir, 'run') }));
    });
  }

  const exec = (path: string, more: Record<string, unknown> = {}) => ({
    path,
    env: { ONLY: 'given', CNI_COMMAND: 'ADD' },
    stdin: Buffer.from('{"in":1}').toString('base64'),
    timeoutMs: 10_000,
    ...more,
  });
  const text = (b64 = '') => Buffer.from(b64, 'base64').toString();

  it('runs the execs at once with exactly the environment and stdin given; prints the last line', async () => {
    // each waits for the other's mark: they finish only when they run at the same time
    const a = plugin('a', `touch ${dir}/a; i=0; while [ ! -f ${dir}/b ] && [ $i -lt 200 ]; do sleep 0.02; i=$((i+1)); done; cat; env | sort`);
    const b = plugin('b', `touch ${dir}/b; i=0; while [ ! -f ${dir}/a ] && [ $i -lt 200 ]; do sleep 0.02; i=$((i+1)); done; echo oops >&2; exit 3`);
    const result = { cniVersion: '1.0.0', ips: [] };
    await daemon([exec(a), exec(b)], JSON.stringify({ status: 200, answer: { Result: result } }) + '\n');
    const r = await runShim({ SHIM_OWN: 'not passed on' });
    expect(offered).toBe('1');
    expect(r.status).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual(result);
    const byId = Object.fromEntries(replies.map((x) => [x.id, x]));
    expect(byId[1]).toMatchObject({ exitCode: 0, signal: null, timedOut: false });
    expect(text(byId[1]!.stdout).split('\n').filter((l) => l && !l.startsWith('PWD=') && !l.startsWith('SHLVL=') && !l.startsWith('_='))).toEqual([
      '{"in":1}CNI_COMMAND=ADD',
      'ONLY=given',
    ]);
    expect(byId[2]).toMatchObject({ exitCode: 3, signal: null, timedOut: false });
    expect(text(byId[2]!.stderr)).toBe('oops\n');
  });

  it("kills the delegate's group after its timeout", async () => {
    const slow = plugin('slow', `sleep 30 & echo $! > ${dir}/child; wait`);
    await daemon([exec(slow, { timeoutMs: 300 })], JSON.stringify({ status: 200, answer: null }) + '\n');
    const r = await runShim({ CNI_COMMAND: 'DEL' });
    expect(r.status).toBe(0);
    expect(replies[0]).toMatchObject({ exitCode: null, signal: 'SIGKILL', timedOut: true });
    await wait(() => !alive(Number(readFileSync(join(dir, 'child'), 'utf8'))));
    expect(alive(Number(readFileSync(join(dir, 'child'), 'utf8')))).toBe(false);
  });

  it.each([
    ['a relative path', 'bin/a'],
    ['a path with ..', '/tmp/../bin/sh'],
    ['a directory', '/tmp'],
  ])('refuses %s and runs nothing', async (_what, path) => {
    await daemon([exec(path)], JSON.stringify({ status: 500, answer: { code: 999, msg: 'refused' } }) + '\n');
    const r = await runShim();
    expect(replies[0]!.error).toMatch(/refused/);
    expect(r.status).toBe(1);
    expect(JSON.parse(r.stdout)).toEqual({ code: 999, msg: 'refused' });
  });

  it('the daemon gone mid-call: the delegates are killed and the call fails (999)', async () => {
    const hang = plugin('hang', `echo $$ > ${dir}/pid; sleep 30`);
    await daemon([exec(hang)], '', () => existsSync(join(dir, 'pid')));
    const r = await runShim();
    expect(r.status).toBe(1);
    expect(JSON.parse(r.stdout)).toMatchObject({ code: 999, msg: 'multus-shim: the multus daemon did not answer' });
    const pid = Number(readFileSync(join(dir, 'pid'), 'utf8'));
    await wait(() => !alive(pid));
    expect(alive(pid)).toBe(false);
  });
});
