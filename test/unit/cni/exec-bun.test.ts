/**
 * cni/exec.ts on Bun (the runtime of build/multus), where plugins are started with Bun.spawn instead of
 * node:child_process, their output written to unnamed files (cni/plugin-output.ts) or, where none can be made, to
 * pipes read as web streams (docs/archive/performance.md). vitest runs under Node, so each case runs in
 * test/helpers/bun-driver.ts under the pinned Bun, once with the files and once with pipes: the same rules as
 * exec.test.ts checks under Node (stdin, env, exit status, the process group killed at the timeout, the drain
 * grace, libcni's ETXTBSY retry), plus large outputs, the output's bound, a plugin killed by a signal and a file
 * that is no program.
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { haveBun, onBun } from '../../helpers/bun-run.ts';
import { running, shellScript } from '../../helpers/procs.ts';
import { needs } from '../../helpers/skip.ts';

const dir = mkdtempSync(join(tmpdir(), 'mts-exec-bun-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Out {
  stdout: string;
  stderr: string;
  stdoutBytes: number;
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  ms: number;
  error?: { code: number; msg: string };
}

const PATH = '/usr/bin:/bin';
const script = (name: string, body: string): string => shellScript(dir, name, body);

/** Where the output goes in each pass: unnamed files in the test's directory (as in the cache dir), or pipes. */
const OUTPUTS = [
  { output: 'unnamed files', outputDir: dir as string | undefined, fd1: new RegExp(`^${dir}/#\\d+ \\(deleted\\)$`) },
  { output: 'pipes', outputDir: undefined, fd1: /^socket:\[\d+\]$|^pipe:\[\d+\]$/ },
];

describe.runIf(needs(haveBun())).each(OUTPUTS)(
  'execPlugin on Bun (Bun.spawn), output to $output',
  ({ outputDir, fd1 }) => {
    const run = (path: string, stdin: string, env: Record<string, string>, timeoutMs: number) =>
      onBun<Out>({ op: 'exec', path, stdin, env, timeoutMs, outputDir });

    it('gives the plugin that output as its stdout and stderr', async () => {
      const path = script('fds', 'readlink /proc/$$/fd/1; readlink /proc/$$/fd/2 >&2');
      const out = await run(path, '', { PATH }, 5000);
      expect(out.stdout.trim()).toMatch(fd1);
      expect(out.stderr.trim()).toMatch(fd1);
    });

    it('keeps at most 16 MiB of an output and still ends when the plugin does', async () => {
      const path = script('huge', 'head -c 17000000 /dev/zero | tr "\\0" x; echo err >&2');
      const out = await run(path, '', { PATH }, 20_000);
      expect(out).toMatchObject({ exitCode: 0, timedOut: false, stderr: 'err\n' });
      expect(out.stdoutBytes).toBe(16 * 1024 * 1024);
    });

    it('passes stdin and env, and returns stdout, stderr and the exit status', async () => {
      const path = script('echo', 'cat; echo "$CNI_COMMAND $HOME" >&2; exit 3');
      const out = await run(path, '{"a":1}', { CNI_COMMAND: 'ADD', PATH }, 5000);
      expect(out).toMatchObject({ exitCode: 3, signal: null, timedOut: false });
      expect(out.stdout).toBe('{"a":1}');
      expect(out.stderr, 'the env is exactly the one given').toBe('ADD \n');
    });

    it('carries a stdin and a stdout larger than a pipe buffer', async () => {
      const path = script('big', 'cat; head -c 3000000 /dev/zero | tr "\\0" x');
      const input = 'y'.repeat(1_000_000);
      const out = await run(path, input, { PATH }, 20_000);
      expect(out.exitCode).toBe(0);
      expect(out.stdoutBytes).toBe(4_000_000);
    });

    it('runs the plugin in a process group of its own and kills the group at the timeout, without waiting for it', async () => {
      const pidFile = join(dir, 'bg.pid');
      const path = script('hang', `sleep 30 & echo $! > ${pidFile}; sleep 30`);
      const out = await run(path, '', { PATH }, 300);
      expect(out.timedOut).toBe(true);
      expect(out.signal).toBe('SIGKILL');
      expect(out.ms).toBeLessThan(5000);
      await new Promise((r) => setTimeout(r, 100));
      expect(running(Number(readFileSync(pidFile, 'utf8'))), "the plugin's background child was killed too").toBe(
        false,
      );
    });

    it("kills the plugin's group once its cancel signal aborts, long before its timeout", async () => {
      const pidFile = join(dir, 'abort-bg.pid');
      const path = script('abort-hang', `sleep 30 & echo $! > ${pidFile}; sleep 30`);
      const out = await onBun<Out>({
        op: 'exec',
        path,
        stdin: '',
        env: { PATH },
        timeoutMs: 60_000,
        abortAfterMs: 300,
        outputDir,
      });
      expect(out).toMatchObject({ exitCode: null, signal: 'SIGKILL', timedOut: false });
      await new Promise((r) => setTimeout(r, 100));
      expect(running(Number(readFileSync(pidFile, 'utf8'))), "the plugin's background child was killed too").toBe(
        false,
      );
    });

    it('does not wait for pipes a background child keeps open once the plugin itself exited', async () => {
      const path = script('bg', 'sleep 30 & echo done');
      const out = await run(path, '', { PATH }, 20_000);
      expect(out).toMatchObject({ exitCode: 0, timedOut: false, stdout: 'done\n' });
      expect(out.ms).toBeLessThan(5000);
    });

    it('reports a plugin ended by a signal with the signal, not an exit code', async () => {
      const path = script('term', 'kill -TERM $$; sleep 5');
      const out = await run(path, '', { PATH }, 10_000);
      expect(out).toMatchObject({ exitCode: null, signal: 'SIGTERM', timedOut: false });
    });

    it('refuses a file that is neither an ELF binary nor a #! script (no /bin/sh fallback)', async () => {
      const path = join(dir, 'notaprogram');
      writeFileSync(path, 'touch ' + join(dir, 'ran') + '\n');
      chmodSync(path, 0o755);
      const out = await run(path, '', { PATH }, 5000);
      expect(out.error?.msg).toContain('exec format error');
      expect(() => readFileSync(join(dir, 'ran'))).toThrow();
    });

    it('retries "text file busy" like libcni (a plugin binary still being written)', async () => {
      // The driver itself holds the file open for writing 300 ms from just before its first exec (no race with
      // its start-up): that exec is "text file busy", the retry 1 s later runs it.
      const path = script('busy', 'echo ok');
      const out = await onBun<Out>({
        op: 'exec',
        path,
        stdin: '',
        env: { PATH },
        timeoutMs: 5000,
        holdWriteMs: 300,
        outputDir,
      });
      expect(out.stdout).toBe('ok\n');
      expect(out.ms).toBeGreaterThanOrEqual(900);
    });
  },
);
