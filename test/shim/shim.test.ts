/**
 * build/multus-shim (shim/main.go), the resident mode's native shim, against a fake daemon: a node:http server
 * on a unix socket in a temp dir, speaking Multus thick's wire format (docs/archive/resident-protocol.md). Checks the
 * request it sends (POST /cni, the environment, the config as base64), what it prints for the daemon's
 * answers, the fallback to the thin plugin `multus` beside it when nothing was sent yet (socket missing or
 * refusing), and no fallback once a request was sent.
 */
import { spawn } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fileExists, needs } from '../helpers/skip.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const SHIM = join(ROOT, 'build/multus-shim');
const ready = needs(fileExists(SHIM, 'the native shim built from shim/ (npm run build, with Go installed)'));

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
}
interface Seen {
  method: string | undefined;
  url: string | undefined;
  contentType: string | undefined;
  body: { env: Record<string, string>; config: string };
}

/** A thin plugin stand-in: records argv, stdin and env into $THIN_OUT, prints a result, exits $THIN_EXIT. */
const FAKE_THIN = `#!/bin/sh
printf '%s' "$*" > "$THIN_OUT/argv"
cat > "$THIN_OUT/stdin"
env > "$THIN_OUT/env"
printf '{"cniVersion":"1.0.0","from":"thin"}'
exit "\${THIN_EXIT:-0}"
`;

describe.skipIf(!ready)('multus-shim (resident mode) against a fake daemon', () => {
  let dir: string;
  let bin: string; // the copy of the shim; the fake thin plugin goes beside it
  let sockDir: string;
  let sock: string;
  let thinOut: string;
  let servers: Server[];
  let seen: Seen[];

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'multus-shim-test-'));
    mkdirSync(join(dir, 'bin'));
    bin = join(dir, 'bin/multus-shim');
    copyFileSync(SHIM, bin);
    chmodSync(bin, 0o755);
    sockDir = join(dir, 'run');
    mkdirSync(sockDir);
    sock = join(sockDir, 'multus.sock');
    thinOut = join(dir, 'thin-out');
    mkdirSync(thinOut);
    servers = [];
    seen = [];
  });
  afterEach(async () => {
    await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
    rmSync(dir, { recursive: true, force: true });
  });

  // shimWaitSeconds 0: the fallback at once when nothing answers (the bounded wait: shim-wait.test.ts)
  const conf = (extra: Record<string, unknown> = {}) =>
    JSON.stringify({
      cniVersion: '1.0.0',
      name: 'multus-cni-network',
      type: 'multus-shim',
      daemonSocketDir: sockDir,
      shimWaitSeconds: 0,
      ...extra,
    });

  const placeThin = () => {
    writeFileSync(join(dir, 'bin/multus'), FAKE_THIN);
    chmodSync(join(dir, 'bin/multus'), 0o755);
  };
  const thinRan = () => existsSync(join(thinOut, 'stdin'));

  function runShim(command: string, stdin: string, env: Record<string, string> = {}): Promise<Run> {
    return new Promise((res, rej) => {
      const child = spawn(bin, [], {
        env: {
          PATH: process.env.PATH ?? '/usr/bin:/bin',
          CNI_COMMAND: command,
          CNI_CONTAINERID: 'c0ffee',
          CNI_NETNS: '/var/run/netns/test',
          CNI_IFNAME: 'eth0',
          CNI_ARGS: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=pod;K8S_POD_UID=uid-1',
          CNI_PATH: '/opt/cni/bin',
          THIN_OUT: thinOut,
          ...env,
        },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => (stdout += d));
      child.stderr.on('data', (d) => (stderr += d));
      child.on('error', rej);
      child.on('close', (status) => res({ status, stdout, stderr }));
      child.stdin.end(stdin);
    });
  }

  /** The fake daemon: records each request, answers with `answer`. */
  function daemon(answer: (req: IncomingMessage, res: ServerResponse, seen: Seen) => void): Promise<void> {
    const srv = createHttpServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const s: Seen = {
          method: req.method,
          url: req.url,
          contentType: req.headers['content-type'],
          body: JSON.parse(Buffer.concat(chunks).toString('utf8')),
        };
        seen.push(s);
        answer(req, res, s);
      });
    });
    servers.push(srv);
    return new Promise((r) => srv.listen(sock, r));
  }

  const reply = (status: number, body: string) => (_q: IncomingMessage, res: ServerResponse) => {
    res.writeHead(status, { 'Content-Type': 'application/json' });
    res.end(body);
  };

  it('ADD: POST /cni with the environment and the config as base64, prints Result', async () => {
    const result = { cniVersion: '1.0.0', interfaces: [{ name: 'eth0', sandbox: '/var/run/netns/test' }], ips: [] };
    await daemon(reply(200, JSON.stringify({ Result: result })));
    const stdin = conf({ delegates: [{ type: 'bridge', note: 'bytes ✓ "quoted"\n' }] });
    const r = await runShim('ADD', stdin, { SOME_RUNTIME_VAR: 'kept' });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual(result);
    expect(seen).toHaveLength(1);
    const s = seen[0]!;
    expect(s.method).toBe('POST');
    expect(s.url).toBe('/cni');
    expect(s.contentType).toBe('application/json');
    expect(s.body.env).toMatchObject({
      CNI_COMMAND: 'ADD',
      CNI_CONTAINERID: 'c0ffee',
      CNI_NETNS: '/var/run/netns/test',
      CNI_IFNAME: 'eth0',
      CNI_ARGS: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=pod;K8S_POD_UID=uid-1',
      CNI_PATH: '/opt/cni/bin',
      SOME_RUNTIME_VAR: 'kept', // like Multus' shim: the whole environment
    });
    expect(Buffer.from(s.body.config, 'base64').toString('utf8')).toBe(stdin);
    expect(Object.keys(s.body).sort()).toEqual(['config', 'env']);
    expect(thinRan()).toBe(false);
  });

  it('DEL and CHECK: an empty 200 or a null Result prints nothing, exit 0', async () => {
    let n = 0;
    await daemon((q, res) => reply(200, n++ === 0 ? '' : '{"Result":null}')(q, res));
    const del = await runShim('DEL', conf());
    expect([del.status, del.stdout]).toEqual([0, '']);
    const check = await runShim('CHECK', conf());
    expect([check.status, check.stdout]).toEqual([0, '']);
    expect(seen.map((s) => s.body.env.CNI_COMMAND)).toEqual(['DEL', 'CHECK']);
  });

  it('passes a CNI error through unchanged with exit 1, also for DEL (not turned into success)', async () => {
    const err = '{"cniVersion":"1.0.0","code":7,"msg":"delegate failed","details":"bridge: boom"}';
    await daemon(reply(400, err));
    for (const cmd of ['ADD', 'DEL']) {
      const r = await runShim(cmd, conf());
      expect(r.status).toBe(1);
      expect(r.stdout).toBe(err);
    }
    expect(thinRan()).toBe(false);
  });

  it('wraps a non-JSON error body as CNI error 999', async () => {
    await daemon(reply(400, 'plain text failure\n'));
    const r = await runShim('ADD', conf());
    expect(r.status).toBe(1);
    const e = JSON.parse(r.stdout);
    expect(e).toMatchObject({ cniVersion: '1.0.0', code: 999, msg: 'plain text failure' });
    expect(e.details).toContain('HTTP 400');
  });

  it('falls back to the thin plugin beside it when the socket is missing: same stdin, env and argv, its exit code', async () => {
    placeThin();
    // Bigger than a pipe's default 64 KiB: the shim hands stdin over through a pipe before exec.
    const stdin = conf({ padding: 'x'.repeat(200 * 1024) });
    const r = await runShim('ADD', stdin, { THIN_EXIT: '3' });
    expect(r.status).toBe(3);
    expect(r.stdout).toBe('{"cniVersion":"1.0.0","from":"thin"}');
    expect(readFileSync(join(thinOut, 'stdin'), 'utf8')).toBe(stdin);
    expect(readFileSync(join(thinOut, 'env'), 'utf8')).toContain('CNI_CONTAINERID=c0ffee');
  });

  it('falls back when the socket file is stale (no listener: ECONNREFUSED)', async () => {
    placeThin();
    // A listener killed with SIGKILL leaves its socket file behind.
    const killed = spawn(process.execPath, ['-e',
      `require('net').createServer().listen(${JSON.stringify(sock)}, () => process.kill(process.pid, 'SIGKILL'))`]);
    await new Promise((r) => killed.on('close', r));
    expect(existsSync(sock)).toBe(true);
    const r = await runShim('DEL', conf());
    expect(r.status).toBe(0);
    expect(thinRan()).toBe(true);
  });

  it('does not fall back when the daemon closes the connection after the request was sent', async () => {
    placeThin();
    await daemon((req) => req.socket.destroy());
    const r = await runShim('ADD', conf());
    expect(seen).toHaveLength(1);
    expect(r.status).toBe(1);
    expect(JSON.parse(r.stdout)).toMatchObject({ code: 999, msg: expect.stringContaining('did not answer') });
    expect(thinRan()).toBe(false);
  });

  it('does not fall back when the daemon answers something that is not HTTP', async () => {
    placeThin();
    const raw = createNetServer((c) => c.once('data', () => c.end('garbage\r\n\r\n')));
    servers.push(raw);
    await new Promise<void>((r) => raw.listen(sock, r));
    const r = await runShim('ADD', conf());
    expect(r.status).toBe(1);
    expect(JSON.parse(r.stdout)).toMatchObject({ code: 999 });
    expect(thinRan()).toBe(false);
  });

  it('does not fall back when a 200 answer is not JSON', async () => {
    placeThin();
    await daemon(reply(200, '<html>not json</html>'));
    const r = await runShim('ADD', conf());
    expect(r.status).toBe(1);
    expect(JSON.parse(r.stdout)).toMatchObject({ code: 999 });
    expect(thinRan()).toBe(false);
  });

  it('names the socket and the missing thin plugin when neither is there', async () => {
    const r = await runShim('ADD', conf());
    expect(r.status).toBe(1);
    const e = JSON.parse(r.stdout);
    expect(typeof e.code).toBe('number');
    expect(e.details).toContain(sock);
    expect(e.details).toContain(join(dir, 'bin/multus'));
  });

  it('VERSION is answered by the thin plugin, not sent to the daemon', async () => {
    placeThin();
    await daemon(reply(200, '{}'));
    const r = await runShim('VERSION', '{"cniVersion":"1.0.0"}');
    expect(r.status).toBe(0);
    expect(r.stdout).toBe('{"cniVersion":"1.0.0","from":"thin"}');
    expect(seen).toHaveLength(0);
  });
});
