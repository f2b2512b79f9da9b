/**
 * D2 on a real read-only file system (root): the cache dir is a tmpfs remounted read-only. unlink of a missing
 * file there fails with EROFS, not ENOENT; DEL of a container that was never added must still succeed (Go
 * Multus returns 0), and a DEL that has something to remove must still fail with code 5.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { fileExists, isRoot, needs } from '../helpers/skip.ts';
import { MULTUS_BIN } from './helpers.ts';

const ok = needs(isRoot(), fileExists(MULTUS_BIN, 'the built executable (npm run build)'));

describe.runIf(ok)('DEL on a read-only cache dir', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mts-ro-'));
  const cache = join(dir, 'cache');
  const plugin = join(dir, 'bin', 'noop');
  mkdirSync(cache);
  mkdirSync(join(dir, 'bin'));
  writeFileSync(plugin, '#!/bin/sh\ncat >/dev/null\nexit 0\n');
  chmodSync(plugin, 0o755);
  writeFileSync(join(dir, 'netns'), '');
  const mount = (...args: string[]) => spawnSync('mount', args, { stdio: 'ignore' }).status;
  mount('-t', 'tmpfs', '-o', 'size=1m,mode=0700', 'mts-ro', cache);
  mkdirSync(join(cache, 'results'));
  writeFileSync(join(cache, 'present'), '[]');
  mount('-o', 'remount,ro', cache);
  afterAll(() => {
    spawnSync('umount', [cache]);
    rmSync(dir, { recursive: true, force: true });
  });

  function del(containerId: string) {
    const conf = {
      cniVersion: '1.0.0',
      name: 'multus-cni-network',
      type: 'multus',
      cniDir: cache,
      binDir: join(dir, 'bin'),
      delegates: [{ cniVersion: '1.0.0', name: 'noop', type: 'noop' }],
    };
    const r = spawnSync(MULTUS_BIN, [], {
      input: JSON.stringify(conf),
      env: {
        PATH: '/usr/bin:/bin',
        CNI_COMMAND: 'DEL',
        CNI_CONTAINERID: containerId,
        CNI_NETNS: join(dir, 'netns'),
        CNI_IFNAME: 'eth0',
        CNI_PATH: join(dir, 'bin'),
      },
    });
    return { code: r.status, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
  }

  it('the mount really is read-only and gives EROFS for a missing file', () => {
    expect(() => unlinkSync(join(cache, 'absent'))).toThrowError(expect.objectContaining({ code: 'EROFS' }));
  });

  it('DEL of a container never added succeeds', () => {
    expect(del('never-added')).toMatchObject({ code: 0, stdout: '' });
  });

  it('DEL that must remove a cache file still fails with code 5', () => {
    const r = del('present');
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stdout)).toMatchObject({ code: 5 });
  });
});
