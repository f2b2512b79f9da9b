/**
 * docs/reliability.md, "Which cache writes are fsynced": the scratch cache is fsynced in the background while the
 * first delegate runs, and a failed fsync fails the ADD (code 5) and rolls it back, as a synchronous one did.
 * fsync(2) is made to fail with EIO through a mock of node:fs' callback fsync, the one the background path uses.
 */
import type * as Fs from 'node:fs';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../../../src/base/log.ts';
import { parseRequest } from '../../../src/cni/request.ts';
import { cmdAdd } from '../../../src/multus/commands/add.ts';
import type { CommandDeps } from '../../../src/multus/commands/context.ts';
import { parseMultusConf } from '../../../src/multus/conf.ts';
import { withContext } from '../../helpers/commands.ts';
import { FakeExec } from '../../helpers/fake-exec.ts';

const failFsync = { on: false };
vi.mock('node:fs', async (original) => {
  const fs = await original<typeof Fs>();
  const fsync = (fd: number, cb: (err: NodeJS.ErrnoException | null) => void): void => {
    if (!failFsync.on) return fs.fsync(fd, cb);
    setTimeout(() => cb(Object.assign(new Error('EIO: i/o error, fsync'), { code: 'EIO' })), 5);
  };
  return { ...fs, fsync, default: { ...fs, fsync } };
});

let dir: string;
let cniDir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mts-fsync-'));
  cniDir = join(dir, 'cni');
});
afterEach(() => {
  failFsync.on = false;
  rmSync(dir, { recursive: true, force: true });
});

function add(exec: FakeExec) {
  const conf = {
    cniVersion: '1.1.0',
    name: 'multus-cni-network',
    type: 'multus',
    cniDir,
    delegates: [
      { cniVersion: '1.1.0', name: 'cluster', type: 'p0' },
      { cniVersion: '1.1.0', name: 'second', type: 'p1' },
    ],
  };
  const stdin = Buffer.from(JSON.stringify(conf));
  const env = {
    CNI_COMMAND: 'ADD',
    CNI_CONTAINERID: 'cid1',
    CNI_NETNS: '/var/run/netns/x',
    CNI_IFNAME: 'eth0',
    CNI_PATH: '/x',
    CNI_ARGS: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=pod1;K8S_POD_UID=u1',
  };
  const deps: CommandDeps = {
    exec,
    log: silentLogger,
    readiness: { exists: async () => true, sleep: async () => {} },
    env: {},
    kube: async () => undefined,
    clock: { now: () => 0, sleep: async () => {} },
  };
  return cmdAdd(...withContext(parseRequest('ADD', env, stdin), parseMultusConf(stdin), deps));
}

describe('a failed background fsync of the scratch cache', () => {
  it('fails the ADD with code 5 naming the file, and rolls the attachment back', async () => {
    failFsync.on = true;
    const exec = new FakeExec('p0', 'p1');
    const error = await add(exec).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 5 });
    expect((error as { msg: string }).msg).toMatch(/fsync of .*cid1.*EIO.*check the disk/);
    expect(exec.calls()).toEqual(['ADD p0 eth0', 'DEL p0 eth0']);
    expect(existsSync(join(cniDir, 'cid1'))).toBe(false);
    expect(existsSync(join(cniDir, 'results')) ? readdirSync(join(cniDir, 'results')) : []).toEqual([]);
  });

  it('an ADD whose fsyncs succeed is untouched by the mock', async () => {
    const exec = new FakeExec('p0', 'p1');
    await add(exec);
    expect(exec.calls()).toEqual(['ADD p0 eth0', 'ADD p1 net1']);
    expect(existsSync(join(cniDir, 'cid1'))).toBe(true);
  });
});
