/**
 * exec.ts against real child processes (tiny shell scripts in a temp dir): lookup order and validation,
 * stdin/stdout/stderr, exit status, the timeout that kills the whole process group, and libcni's retry of
 * "text file busy".
 */
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ExecOptions } from '../../../src/cni/exec.ts';
import { StoppingError, execPlugin, findInPath } from '../../../src/cni/exec.ts';
import { killPid, running, shellScript } from '../../helpers/procs.ts';

const dir = mkdtempSync(join(tmpdir(), 'mts-exec-'));

afterAll(() => rmSync(dir, { recursive: true, force: true }));

const script = (subdir: string, name: string, body: string): string => shellScript(join(dir, subdir), name, body);
const run = (path: string, timeoutMs: number, signal?: AbortSignal): ExecOptions => ({
  path,
  stdin: Buffer.alloc(0),
  env: { PATH: '/usr/bin:/bin' },
  timeoutMs,
  ...(signal ? { signal } : {}),
});

describe('findInPath', () => {
  const first = script('a', 'plug', 'exit 0');
  script('b', 'plug', 'exit 0');
  script('b', 'only-b', 'exit 0');
  writeFileSync(join(dir, 'a', 'not-exec'), 'x');

  it('takes the first directory that has an executable of that name', () => {
    expect(findInPath('plug', [join(dir, 'a'), join(dir, 'b')])).toBe(first);
    expect(findInPath('only-b', [join(dir, 'a'), join(dir, 'b')])).toBe(join(dir, 'b', 'only-b'));
  });

  it.each([
    ['missing', 'failed to find plugin "missing" in path'],
    ['not-exec', 'failed to find plugin "not-exec" in path'],
    ['../a/plug', 'invalid plugin type "../a/plug"'],
    ['a/plug', 'invalid plugin type "a/plug"'],
  ])('rejects %s with code 7', (type, text) => {
    expect(() => findInPath(type, [join(dir, 'a'), join(dir, 'b')])).toThrowError(
      expect.objectContaining({ code: 7, msg: expect.stringContaining(text) }),
    );
  });
});

describe('execPlugin', () => {
  it('passes stdin and env, and returns stdout, stderr and the exit status', async () => {
    const path = script('c', 'echo', 'cat; echo "$CNI_COMMAND" >&2; exit 3');
    const env = { CNI_COMMAND: 'ADD', PATH: '/usr/bin:/bin' };
    const out = await execPlugin({ path, stdin: Buffer.from('{"a":1}'), env, timeoutMs: 5000 });
    expect(out).toMatchObject({ exitCode: 3, signal: null, timedOut: false });
    expect(out.stdout.toString()).toBe('{"a":1}');
    expect(out.stderr.toString()).toBe('ADD\n');
  });

  it('kills a plugin that runs too long, with the processes it started, and does not wait for them', async () => {
    const pidFile = join(dir, 'c', 'bg.pid');
    const path = script('c', 'hang', `sleep 30 & echo $! > ${pidFile}; sleep 30`);
    const started = Date.now();
    const out = await execPlugin(run(path, 300));
    expect(out.timedOut).toBe(true);
    expect(Date.now() - started).toBeLessThan(5000);
    await new Promise((r) => setTimeout(r, 100));
    expect(running(Number(readFileSync(pidFile, 'utf8'))), "the plugin's background child was killed too").toBe(false);
  });

  it('does not wait for pipes a background child keeps open once the plugin itself exited', async () => {
    const path = script('c', 'bg', 'sleep 30 & echo done');
    const started = Date.now();
    const out = await execPlugin(run(path, 20_000));
    expect(out).toMatchObject({ exitCode: 0, timedOut: false });
    expect(out.stdout.toString()).toBe('done\n');
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('retries "text file busy" like libcni (a plugin binary still being written)', async () => {
    const path = join(dir, 'c', 'busy');
    const fd = openSync(path, 'w', 0o755);
    writeSync(fd, '#!/bin/sh\necho ok\n');
    const started = Date.now();
    setTimeout(() => closeSync(fd), 300);
    const out = await execPlugin(run(path, 5000));
    expect(out.stdout.toString()).toBe('ok\n');
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
  });
});

describe("execPlugin's cancel signal", () => {
  it('kills the running plugin and what it started at once, long before its timeout', async () => {
    const pidFile = join(dir, 'c', 'abort-bg.pid');
    const path = script('c', 'sleeper', `sleep 30 & echo $! > ${pidFile}; sleep 30`);
    const call = new AbortController();
    const out = execPlugin(run(path, 60_000, call.signal));
    await waitFor(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim() !== '');
    call.abort(new Error('stop'));
    const done = await out;
    expect(done).toMatchObject({ exitCode: null, signal: 'SIGKILL', timedOut: false });
    await waitFor(() => !running(Number(readFileSync(pidFile, 'utf8'))));
  });

  it('starts no plugin once the signal is aborted: StoppingError, code 11', async () => {
    const marker = join(dir, 'c', 'ran-after-abort');
    const path = script('c', 'marks', `touch ${marker}`);
    const error = await execPlugin(run(path, 5000, AbortSignal.abort())).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoppingError);
    expect(error).toMatchObject({ code: 11 });
    expect(existsSync(marker)).toBe(false);
  });

  it('is a deadline too: AbortSignal.timeout stops a plugin whose own timeout is far away', async () => {
    const path = script('c', 'long', 'sleep 30');
    const out = await execPlugin(run(path, 60_000, AbortSignal.timeout(200)));
    expect(out).toMatchObject({ signal: 'SIGKILL', timedOut: false });
  });

  it('leaves a plugin that already exited, and what it left running, alone', async () => {
    const pidFile = join(dir, 'c', 'left.pid');
    const path = script('c', 'leaves', `sleep 30 > /dev/null 2>&1 & echo $! > ${pidFile}`);
    const call = new AbortController();
    expect(await execPlugin(run(path, 5000, call.signal))).toMatchObject({ exitCode: 0 });
    call.abort();
    const left = Number(readFileSync(pidFile, 'utf8'));
    expect(running(left), 'a daemon the plugin started is not ours to kill').toBe(true);
    killPid(left);
  });
});

/** Polls `ok` every 20 ms (up to 10 s). */
async function waitFor(ok: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !ok(); i++) await new Promise((r) => setTimeout(r, 20));
  expect(ok()).toBe(true);
}
