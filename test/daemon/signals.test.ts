/**
 * build/multus daemon stopped while a delegate hangs with a child (`sleep 3600 & sleep 3600`): on SIGTERM, SIGINT
 * or SIGHUP it waits shutdownGraceSeconds for the call, then kills the delegate's process group and exits 0; a
 * second signal ends the wait at once. Without the kill, the group (its own, as exec.ts runs every plugin) would
 * outlive the daemon. docs/reliability.md, "Signals end the delegates too". Needs root and build/multus.
 */
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { groupGone, hangingPlugin, hungGroup, killGroups } from '../helpers/groups.ts';
import { fileExists, isRoot, needs } from '../helpers/skip.ts';
import { cniBody, http } from '../helpers/daemon.ts';
import { testNetns } from '../helpers/netns.ts';

const EXE = process.env.MULTUS_TS_BIN || resolve('build/multus');
const ready = () => needs(isRoot(), fileExists(EXE, 'the built executable (npm run build)'));

let dir: string;
let child: ChildProcess | undefined;
let left: number[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mts-daemon-sig-'));
  mkdirSync(join(dir, 'net.d'));
  mkdirSync(join(dir, 'bin'));
});
afterEach(() => {
  if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  child = undefined;
  const groups = left;
  left = [];
  killGroups(groups);
  rmSync(dir, { recursive: true, force: true });
});

async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 1500 && !cond(); i++) await new Promise((r) => setTimeout(r, 10));
  if (!cond()) throw new Error(`timed out waiting for ${what}`);
}

/** A daemon whose cluster network hangs in ADD, with one ADD in flight; the hung group's pgid. */
async function hungDaemon(graceSeconds: number, hangOn = ['ADD']) {
  const plugin = hangingPlugin(join(dir, 'bin'), 'hang', hangOn);
  writeFileSync(join(dir, 'net.d', '10-hang.conf'), JSON.stringify({ cniVersion: '1.0.0', name: 'h', type: 'hang' }));
  const config = join(dir, 'daemon-config.json');
  const socketDir = join(dir, 'run');
  writeFileSync(
    config,
    JSON.stringify({
      socketDir,
      cniConfigDir: join(dir, 'net.d'),
      binDir: join(dir, 'bin'),
      cniDir: join(dir, 'cache'),
      shutdownGraceSeconds: graceSeconds,
    }),
  );
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin' };
  const c = spawn(EXE, ['daemon', '--config', config], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  child = c;
  let stderr = '';
  c.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<{ code: number | null; stderr: string }>((r) =>
    c.on('exit', (code) => r({ code, stderr })),
  );
  const socket = join(socketDir, 'multus.sock');
  const generated = join(dir, 'net.d', '00-multus.conf');
  await until(() => existsSync(socket) && existsSync(generated), 'the daemon to listen');
  const callEnv = {
    CNI_COMMAND: 'ADD',
    CNI_CONTAINERID: 'c1',
    CNI_NETNS: testNetns(),
    CNI_IFNAME: 'eth0',
    CNI_PATH: join(dir, 'bin'),
  };
  const conf = {
    cniVersion: '1.0.0',
    name: 'm',
    type: 'multus-shim',
    cniDir: join(dir, 'cache'),
    clusterNetwork: join(dir, 'net.d', '10-hang.conf'),
  };
  http(socket, '/cni', { body: cniBody(callEnv, conf) }).catch(() => {}); // cut when the daemon stops
  const pgid = await hungGroup(plugin, 'ADD');
  left.push(pgid);
  return { child: c, exited, pgid };
}

describe.runIf(ready())('multus daemon stopped with a delegate hung', () => {
  it.each(['SIGTERM', 'SIGINT', 'SIGHUP'] as const)(
    '%s: after the grace the hung group is killed, exit 0',
    async (signal) => {
      const d = await hungDaemon(1);
      d.child.kill(signal);
      const { code, stderr } = await d.exited;
      expect(code).toBe(0);
      expect(stderr).toMatch(/killed the process groups of 1 delegate/);
      expect(await groupGone(d.pgid), `left running in group ${d.pgid}`).toEqual([]);
    },
  );

  it('a second signal ends the wait for the call at once, and the group is killed', async () => {
    const d = await hungDaemon(3600);
    d.child.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 300));
    expect(d.child.exitCode).toBe(null); // still waiting for the call
    d.child.kill('SIGINT');
    const { code, stderr } = await d.exited;
    expect(code).toBe(0);
    expect(stderr).toMatch(/caught SIGINT again/);
    expect(await groupGone(d.pgid)).toEqual([]);
  });

  // issue 28 finding 3: the killed ADD fails and would roll back with a DEL that hangs too (up to
  // delegateTimeoutSeconds), past the grace; after the grace no delegate is started, the scratch cache stays
  it("after the grace no delegate starts: the killed ADD's rollback runs no DEL, the scratch cache is kept", async () => {
    if (!ready()) return;
    const d = await hungDaemon(1, ['ADD', 'DEL']);
    const started = Date.now();
    d.child.kill('SIGTERM');
    const { code, stderr } = await d.exited;
    expect(code).toBe(0);
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(stderr).toMatch(/killed the process groups of 1 delegate/);
    expect(existsSync(join(dir, 'bin', 'hang.DEL.pid')), 'a DEL was started after the grace').toBe(false);
    expect(existsSync(join(dir, 'cache', 'c1')), `the scratch cache, for the runtime's DEL: ${stderr}`).toBe(true);
  });
});
