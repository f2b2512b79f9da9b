/**
 * Issue 28, finding 8 (root): a socket planted by another user in a socketDir others may write to. The shim reads
 * the listener's credentials (SO_PEERCRED) and sends nothing to one that is not root: it runs the thin plugin
 * instead; the daemon refuses to start beside a socket (or in a socketDir) that is not root's.
 */
import type { ChildProcess } from 'node:child_process';
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fileExists, isRoot, needs } from '../helpers/skip.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const SHIM = join(ROOT, 'build/multus-shim');
const MULTUS = process.env.MULTUS_TS_BIN || join(ROOT, 'build/multus');
const NOBODY = 65534;
const ready = needs(isRoot(), fileExists(SHIM, 'build/multus-shim (Go)'), fileExists(MULTUS, 'build/multus'));

/** An HTTP listener on `sock` that records every request in `marker` and answers a fake result. */
const FAKE_DAEMON = `
const fs = require('node:fs');
require('node:http').createServer((req, res) => {
  fs.appendFileSync(process.argv[2], req.url + '\\n');
  res.end('{"Result":{"cniVersion":"1.0.0","fake":true}}');
}).listen(process.argv[1], () => fs.chmodSync(process.argv[1], 0o777));
`;

let dir: string;
let listener: ChildProcess | undefined;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mts-peer-'));
  chmodSync(dir, 0o755); // nobody reaches the open socketDir inside
});
afterEach(() => {
  listener?.kill('SIGKILL');
  listener = undefined;
  rmSync(dir, { recursive: true, force: true });
});

/** Starts the fake daemon as uid 65534 in an open socketDir; resolves once its socket is there. */
async function plantedListener(): Promise<{ sockDir: string; marker: string }> {
  const sockDir = join(dir, 'run');
  mkdirSync(sockDir);
  chmodSync(sockDir, 0o777);
  const marker = join(sockDir, 'requests');
  const sock = join(sockDir, 'multus.sock');
  listener = spawn(process.execPath, ['-e', FAKE_DAEMON, sock, marker], { uid: NOBODY, gid: NOBODY, stdio: 'ignore' });
  for (let i = 0; i < 500 && !existsSync(sock); i++) await new Promise((r) => setTimeout(r, 10));
  if (!existsSync(sock)) throw new Error('the planted listener did not start');
  return { sockDir, marker };
}

describe.runIf(ready)('finding 8: a planted socket', () => {
  it('the shim sends nothing to a listener of uid 65534 and runs the thin plugin', async () => {
    const { sockDir, marker } = await plantedListener();
    const bin = join(dir, 'bin');
    mkdirSync(bin);
    copyFileSync(SHIM, join(bin, 'multus-shim'));
    chmodSync(join(bin, 'multus-shim'), 0o755);
    writeFileSync(join(bin, 'multus'), '#!/bin/sh\ncat >/dev/null\nprintf \'{"cniVersion":"1.0.0","from":"thin"}\'\n', {
      mode: 0o755,
    });
    const conf = { cniVersion: '1.0.0', name: 'm', type: 'multus-shim', daemonSocketDir: sockDir };
    const r = spawnSync(join(bin, 'multus-shim'), [], {
      env: { PATH: '/usr/bin:/bin', CNI_COMMAND: 'ADD', CNI_CONTAINERID: 'c1', CNI_IFNAME: 'eth0', CNI_PATH: bin },
      input: JSON.stringify(conf),
      encoding: 'utf8',
    });
    expect(r.stdout).toBe('{"cniVersion":"1.0.0","from":"thin"}');
    expect(r.stderr).toContain(`runs as uid ${NOBODY}, not root`);
    expect(existsSync(marker)).toBe(false);
  });

  it('the daemon refuses a socketDir of another user, and a socket it does not own', async () => {
    const { sockDir } = await plantedListener();
    listener!.kill('SIGKILL'); // its socket file stays, owned by 65534
    await new Promise((r) => setTimeout(r, 100));
    const config = join(dir, 'daemon-config.json');
    const run = (socketDir: string) => {
      writeFileSync(config, JSON.stringify({ socketDir, cniConfigDir: join(dir, 'net.d'), cniDir: join(dir, 'cache') }));
      return spawnSync(MULTUS, ['daemon', '--config', config], { encoding: 'utf8', timeout: 20_000 });
    };
    mkdirSync(join(dir, 'net.d'));
    const open = run(sockDir); // root's, 0777: refused and left as it is (issue 51, finding 2)
    expect(open.status).not.toBe(0);
    expect(open.stderr).toContain('is writable by group or others (mode 777)');
    expect(statSync(sockDir).mode & 0o777).toBe(0o777);
    chmodSync(sockDir, 0o700);
    const planted = run(sockDir); // root's alone now: the socket of 65534 is refused
    expect(planted.status).not.toBe(0);
    expect(planted.stderr).toContain(`multus.sock belongs to uid ${NOBODY}`);
    expect(existsSync(join(sockDir, 'multus.sock'))).toBe(true);
    const theirs = join(dir, 'theirs');
    mkdirSync(theirs);
    spawnSync('chown', [`${NOBODY}:${NOBODY}`, theirs]);
    const other = run(theirs);
    expect(other.status).not.toBe(0);
    expect(other.stderr).toContain(`belongs to uid ${NOBODY}, not root`);
  });
});
