/**
 * build/multus daemon spoken to as Multus HEAD's multus-shim speaks (pkg/server/api, #1525): before ADD, CHECK,
 * GC and STATUS it POSTs `null` to /readyz until a 200, before DEL it POSTs to /healthz once, then it POSTs the
 * call to /cni. While serving, /readyz is 200 and ADD, CHECK and DEL go through; after SIGTERM the daemon drains
 * for shutdownDrainSeconds: /readyz answers 500 (such a shim waits for the next daemon instead of starting an
 * ADD), /healthz stays 200 and a DEL is still served; then the socket closes and the daemon exits 0.
 * Needs root and build/multus.
 */
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fileExists, isRoot, needs } from '../helpers/skip.ts';
import type { HttpAnswer } from '../helpers/daemon.ts';
import { cniBody, connectError, http } from '../helpers/daemon.ts';
import { testNetns } from '../helpers/netns.ts';

const EXE = resolve('build/multus');
const ready = () => needs(isRoot(), fileExists(EXE, 'the built executable (npm run build)'));

let dir: string;
let child: ChildProcess | undefined;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mts-daemon-drain-'));
  mkdirSync(join(dir, 'net.d'));
  mkdirSync(join(dir, 'bin'));
});
afterEach(() => {
  if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  child = undefined;
  rmSync(dir, { recursive: true, force: true });
});

/** A delegate that records each command and answers ADD with one interface and one address. */
function writeRecorder(): void {
  writeFileSync(
    join(dir, 'bin', 'rec'),
    `#!/bin/sh
cat >/dev/null
echo "$CNI_COMMAND" >> ${dir}/calls
if [ "$CNI_COMMAND" = ADD ]; then
  echo '{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","sandbox":"/x"}],"ips":[{"address":"10.9.0.2/24","interface":0}]}'
fi
`,
    { mode: 0o755 },
  );
  writeFileSync(join(dir, 'net.d', '10-rec.conf'), JSON.stringify({ cniVersion: '1.0.0', name: 'rec', type: 'rec' }));
}

const calls = (): string[] =>
  existsSync(join(dir, 'calls')) ? readFileSync(join(dir, 'calls'), 'utf8').trim().split('\n') : [];

/** What Multus HEAD's DoCNI sends for a readiness check: POST, `application/json`, body `null`. */
function probe(socket: string, path: '/readyz' | '/healthz'): Promise<HttpAnswer> {
  return http(socket, path, { body: 'null' });
}

function callEnv(command: string): Record<string, string> {
  return {
    PATH: '/usr/bin:/bin', // the shim sends its whole environment; the daemon takes only CNI_*
    CNI_COMMAND: command,
    CNI_CONTAINERID: 'c1',
    CNI_NETNS: testNetns(),
    CNI_IFNAME: 'eth0',
    CNI_PATH: join(dir, 'bin'),
    CNI_ARGS: 'IgnoreUnknown=1',
  };
}

async function until(cond: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 1500; i++) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe.runIf(ready())('multus daemon and Multus HEAD shim protocol (/readyz, drain)', () => {
  it('serves ADD, CHECK and DEL after /readyz; after SIGTERM /readyz is 500, a DEL is still served, then it closes', async () => {
    writeRecorder();
    const file = join(dir, 'daemon-config.json');
    const config = {
      socketDir: join(dir, 'run'),
      cniConfigDir: join(dir, 'net.d'),
      // its own caches: a scratch cache of another run's container c1 in /var/lib/cni/multus would be its DEL's
      cniDir: join(dir, 'cache'),
      logLevel: 'verbose',
      // long enough for the requests below on a loaded machine; the test waits for states, not for time
      shutdownDrainSeconds: 10,
    };
    writeFileSync(file, JSON.stringify(config));
    const c = spawn(EXE, ['daemon', '--config', file], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      stdio: 'ignore',
    });
    child = c;
    const exited = new Promise<number | null>((r) => c.on('exit', (code) => r(code)));
    const socket = join(dir, 'run', 'multus.sock');
    const generated = join(dir, 'net.d', '00-multus.conf');
    await until(() => existsSync(socket) && existsSync(generated), 'the daemon to listen');
    const conf = JSON.parse(readFileSync(generated, 'utf8')) as Record<string, unknown>;

    // WaitUntilAPIReady: poll /readyz until 200, then the call.
    await until(async () => (await probe(socket, '/readyz')).status === 200, '/readyz 200');
    const add = await http(socket, '/cni', { body: cniBody(callEnv('ADD'), conf) });
    expect(add.status, add.body).toBe(200);
    expect(add.json()).toMatchObject({ Result: { ips: [{ address: '10.9.0.2/24' }] } });
    expect((await probe(socket, '/readyz')).status).toBe(200);
    const check = await http(socket, '/cni', { body: cniBody(callEnv('CHECK'), conf) });
    expect(check.status, check.body).toBe(200);
    expect(calls()).toEqual(['ADD', 'CHECK']);

    c.kill('SIGTERM');
    let readyz: HttpAnswer | undefined;
    await until(async () => {
      readyz = await probe(socket, '/readyz');
      return readyz.status !== 200;
    }, '/readyz to turn non-200');
    expect(readyz!.status).toBe(500);
    expect(readyz!.json()).toMatchObject({ code: 11, msg: expect.stringMatching(/stopping/) });
    // CheckAPIReadyNow (DEL): /healthz once, then the DEL, which the draining daemon still runs.
    expect((await probe(socket, '/healthz')).status).toBe(200);
    const del = await http(socket, '/cni', { body: cniBody(callEnv('DEL'), conf) });
    expect(del.status, del.body).toBe(200);
    expect(calls()).toEqual(['ADD', 'CHECK', 'DEL']);
    expect(await connectError(socket)).toBe('CONNECTED');

    expect(await exited).toBe(0);
    expect(await connectError(socket)).toMatch(/ECONNREFUSED|ENOENT/);
  });
});
