/**
 * The defects of issue 12, each pinned in-process: temp files of interrupted writes swept by DEL and GC (D1),
 * removal on a read-only file system (D2, injected EROFS), plugin files that are not programs (D4), the stuck
 * DEL of an attachment whose ADD never ran, GC for every network, and cache files that are links.
 */
import type * as Fs from 'node:fs';
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  backgroundSyncs,
  readOutcome,
  removeIfPresent,
  sweepTempFiles,
  TEMP_MAX_AGE_MS,
  writeFileAtomic,
} from '../../../src/base/files.ts';
import { execPlugin } from '../../../src/cni/exec.ts';
import type { Command } from '../../../src/cni/request.ts';
import { parseRequest } from '../../../src/cni/request.ts';
import { cmdAdd } from '../../../src/multus/commands/add.ts';
import type { TestSeams } from '../../helpers/commands.ts';
import { cmdDel } from '../../../src/multus/commands/del.ts';
import { cmdGc } from '../../../src/multus/commands/gc.ts';
import { parseMultusConf } from '../../../src/multus/conf.ts';
import { handle } from '../../../src/host/handle.ts';
import { createHost } from '../../../src/host/host.ts';
import { findNonUtf8CniVar, firstInvalidUtf8 } from '../../../src/host/raw-env.ts';
import { localDeps, withContext } from '../../helpers/commands.ts';
import { FakeExec } from '../../helpers/fake-exec.ts';
import { testNetns } from '../../helpers/netns.ts';

/** fsync(2) failing with EIO while on: node:fs' callback fsync, the one the background fsync uses; else the real one. */
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
  failFsync.on = false;
  dir = mkdtempSync(join(tmpdir(), 'mts-rel-'));
  cniDir = join(dir, 'cni');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** Above any pid_max (2^22), so no process has it. */
const DEAD_PID = 4_194_305;
const ARGS = 'IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=pod1;K8S_POD_UID=u1';

function conf(delegates: unknown[], extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { cniVersion: '1.1.0', name: 'multus-cni-network', type: 'multus', cniDir, delegates, ...extra };
}

const TWO = [
  { cniVersion: '1.1.0', name: 'cluster', type: 'p0' },
  { cniVersion: '1.1.0', name: 'second', type: 'p1' },
];

function request(command: Exclude<Command, 'VERSION'>, c: Record<string, unknown>, env: Record<string, string> = {}) {
  const stdin = Buffer.from(JSON.stringify(c));
  const vars = {
    CNI_CONTAINERID: 'cid1',
    CNI_NETNS: '/var/run/netns/x',
    CNI_IFNAME: 'eth0',
    CNI_PATH: '/x',
    CNI_ARGS: ARGS,
  };
  return withContext(
    parseRequest(command, { CNI_COMMAND: command, ...vars, ...env }, stdin),
    parseMultusConf(stdin),
    deps,
  );
}

let exec: FakeExec;
let deps: TestSeams;
beforeEach(() => {
  exec = new FakeExec('p0', 'p1', 'p2');
  deps = localDeps(exec);
});

describe('D1: temp files of interrupted atomic writes', () => {
  function plant(d: string, name: string, pid: number): string {
    mkdirSync(d, { recursive: true });
    const path = join(d, `.${name}.tmp-${pid}-abc-1-xyz`);
    writeFileSync(path, '{"partial');
    return path;
  }

  it("sweepTempFiles removes those of dead writers and old ones, never a live writer's recent one", () => {
    const dead = plant(cniDir, 'cid1', 1234);
    const live = plant(cniDir, 'cid2', 5678);
    const oldLive = plant(cniDir, 'cid3', 5678);
    const old = (Date.now() - TEMP_MAX_AGE_MS - 60_000) / 1000;
    utimesSync(oldLive, old, old);
    writeFileSync(join(cniDir, 'cid4'), '[]');
    const removed = sweepTempFiles(cniDir, { now: () => Date.now(), alive: (pid) => pid === 5678 });
    expect(removed.sort()).toEqual([dead, oldLive].sort());
    expect(existsSync(live)).toBe(true);
    expect(existsSync(join(cniDir, 'cid4'))).toBe(true);
  });

  it('DEL and GC remove what a killed writer left in the cache dir and results/', async () => {
    const a = plant(cniDir, 'cid9', DEAD_PID);
    const b = plant(join(cniDir, 'results'), 'cluster-cid9-eth0', DEAD_PID);
    const mine = plant(cniDir, 'cid8', process.ppid); // a live process: kept
    await cmdDel(...request('DEL', conf(TWO)));
    expect(existsSync(a) || existsSync(b)).toBe(false);
    expect(existsSync(mine)).toBe(true);
    const c = plant(join(cniDir, 'results'), 'second-cid7-net1', DEAD_PID);
    await cmdGc(...request('GC', conf(TWO)));
    expect(existsSync(c)).toBe(false);
  });
});

describe('the order of the cache writes of an ADD (docs/reliability.md, "Which cache writes are fsynced")', () => {
  it('the scratch cache is in place before the first delegate runs, and its fsync ends before any result cache exists', async () => {
    const fds = () => readdirSync('/proc/self/fd').length;
    const seen: { type: string; scratch: boolean; results: string[]; fds: number }[] = [];
    const look = (type: string) => () => {
      const results = existsSync(join(cniDir, 'results')) ? readdirSync(join(cniDir, 'results')) : [];
      seen.push({ type, scratch: existsSync(join(cniDir, 'cid1')), results, fds: fds() });
      return { stdout: Buffer.from('{"cniVersion":"1.1.0"}') };
    };
    exec.returns['p0 ADD'] = look('p0');
    exec.returns['p1 ADD'] = look('p1');
    const before = fds();
    await cmdAdd(...request('ADD', conf(TWO)));
    expect(seen.map((s) => [s.type, s.scratch])).toEqual([
      ['p0', true],
      ['p1', true],
    ]);
    expect(seen[1]!.results, 'the first attachment wrote its result cache').toEqual(['cluster-cid1-eth0']);
    expect(seen[1]!.fds, "the scratch cache's background fsync had ended (its file closed) by then").toBe(before);
    expect(fds()).toBe(before);
  });
});

describe('D2: removal on a read-only file system', () => {
  const erofs = () => {
    throw Object.assign(new Error('EROFS: read-only file system, unlink'), { code: 'EROFS' });
  };

  it('a missing file is absent even when unlink says EROFS', () => {
    expect(() => removeIfPresent(join(dir, 'nothing'), { unlinkSync: erofs, lstatSync })).not.toThrow();
  });

  it('an existing file that cannot be removed is still an error (code 5)', () => {
    writeFileSync(join(dir, 'there'), 'x');
    const fs = { unlinkSync: erofs, lstatSync: () => ({}) };
    expect(() => removeIfPresent(join(dir, 'there'), fs)).toThrowError(expect.objectContaining({ code: 5 }));
  });
});

describe('D4: a plugin file that is not a program', () => {
  it('fails with "exec format error" and runs nothing (no /bin/sh fallback)', async () => {
    const marker = join(dir, 'ran');
    const path = join(dir, 'damaged');
    writeFileSync(path, `touch ${marker}\n`);
    chmodSync(path, 0o755);
    const run = { path, stdin: Buffer.alloc(0), env: { PATH: '/usr/bin:/bin' }, timeoutMs: 5000 };
    const error = await execPlugin(run).catch((e: unknown) => e);
    expect(error).toMatchObject({ msg: expect.stringContaining('exec format error') });
    expect(existsSync(marker)).toBe(false);
  });
});

describe('stuck DEL: an attachment whose ADD never completed', () => {
  it('DEL succeeds when the plugin of an attachment without a result cache cannot be found', async () => {
    const delegates = [TWO[0], { cniVersion: '1.1.0', name: 'broken', type: 'missing-plugin' }];
    await expect(cmdAdd(...request('ADD', conf(delegates)))).rejects.toMatchObject({ code: 7 });
    // the rollback DEL of "broken" failed, so the scratch cache stayed for the runtime's DEL
    writeFileSync(
      join(cniDir, 'cid1'),
      JSON.stringify([
        {
          Conf: {},
          ConfList: {},
          Name: 'broken',
          Bytes: Buffer.from(JSON.stringify(delegates[1])).toString('base64'),
          IsFilterV4Gateway: false,
          IsFilterV6Gateway: false,
        },
      ]),
    );
    exec.received.length = 0;
    await cmdDel(...request('DEL', conf(delegates)));
    expect(existsSync(join(cniDir, 'cid1'))).toBe(false);
  });

  it('DEL still fails when a result cache says the attachment exists', async () => {
    await cmdAdd(...request('ADD', conf(TWO)));
    exec.known.delete('p1');
    await expect(cmdDel(...request('DEL', conf(TWO)))).rejects.toMatchObject({ code: 7 });
    expect(readdirSync(join(cniDir, 'results'))).toEqual(['second-cid1-net1']);
  });
});

describe('GC for every network', () => {
  it('sends GC to each configured and cached network with its own valid attachments', async () => {
    const three = [...TWO, { cniVersion: '1.1.0', name: 'gone-from-config', type: 'p2' }];
    await cmdAdd(...request('ADD', conf(three)));
    await cmdAdd(...request('ADD', conf(TWO), { CNI_CONTAINERID: 'cid2' }));
    exec.received.length = 0;
    const valid = [
      { containerID: 'cid1', ifname: 'eth0' },
      { containerID: 'cid2', ifname: 'eth0' },
    ];
    await cmdGc(...request('GC', conf(TWO, { 'cni.dev/valid-attachments': valid })));
    const gcs = exec.received.filter((c) => c.command === 'GC');
    const byType = Object.fromEntries(gcs.map((c) => [c.type, c.stdin['cni.dev/valid-attachments']]));
    expect(byType).toEqual({
      p0: [
        { containerID: 'cid1', ifname: 'eth0' },
        { containerID: 'cid2', ifname: 'eth0' },
      ],
      p1: [
        { containerID: 'cid1', ifname: 'net1' },
        { containerID: 'cid2', ifname: 'net1' },
      ],
      p2: [{ containerID: 'cid1', ifname: 'net2' }],
    });
  });
});

describe('GC with default networks that are NADs', () => {
  it('GCs the cluster network and the cached ones instead of failing on a default network it cannot resolve', async () => {
    const clusterFile = join(dir, 'cluster.conf');
    writeFileSync(clusterFile, JSON.stringify({ cniVersion: '1.1.0', name: 'cluster', type: 'p0' }));
    const c = {
      ...conf([], { clusterNetwork: clusterFile, defaultNetworks: ['a-nad'], confDir: join(dir, 'none') }),
      'cni.dev/valid-attachments': [],
    };
    delete (c as Record<string, unknown>).delegates;
    await cmdGc(...request('GC', c));
    expect(exec.calls()).toEqual(['GC p0 ']);
  });
});

describe('cache files that are not regular files', () => {
  it('a symlinked scratch cache is refused: DEL runs no delegate defined outside the cache dir', async () => {
    const outside = join(dir, 'outside.json');
    writeFileSync(
      outside,
      JSON.stringify([
        {
          Conf: {},
          ConfList: {},
          Name: 'evil',
          IsFilterV4Gateway: false,
          IsFilterV6Gateway: false,
          Bytes: Buffer.from('{"cniVersion":"1.1.0","name":"evil","type":"p2"}').toString('base64'),
        },
      ]),
    );
    mkdirSync(cniDir, { recursive: true });
    symlinkSync(outside, join(cniDir, 'cid1'));
    await cmdDel(...request('DEL', conf(TWO))).catch(() => undefined);
    expect(exec.received.map((c) => c.type)).not.toContain('p2');
  });

  it('readOutcome reports a link or a directory as corrupt, never follows it', () => {
    writeFileAtomic(join(dir, 'real'), '{}');
    symlinkSync(join(dir, 'real'), join(dir, 'link'));
    mkdirSync(join(dir, 'adir'));
    const decode = (b: Buffer) => JSON.parse(b.toString()) as unknown;
    expect(readOutcome(join(dir, 'real'), 'x', decode)).toMatchObject({ kind: 'ok' });
    expect(readOutcome(join(dir, 'link'), 'x', decode)).toMatchObject({
      kind: 'corrupt',
      error: { msg: expect.stringContaining('symbolic link') },
    });
    expect(readOutcome(join(dir, 'adir'), 'x', decode)).toMatchObject({ kind: 'corrupt' });
  });
});

describe('D3: environment bytes Node cannot carry', () => {
  const environ = (...entries: Buffer[]) => Buffer.concat(entries.flatMap((e) => [e, Buffer.from([0])]));

  it('finds a CNI_* variable that is not UTF-8 and names the byte; ignores valid UTF-8 and other variables', () => {
    const bad = Buffer.concat([Buffer.from('CNI_ARGS=FOO='), Buffer.from([0xff, 0xfe, 0x80])]);
    const other = Buffer.concat([Buffer.from('LANGX='), Buffer.from([0xff])]);
    const fine = Buffer.from('CNI_IFNAME=é\u{fffd}\u{10348}');
    expect(findNonUtf8CniVar(environ(other, fine))).toBeUndefined();
    expect(findNonUtf8CniVar(environ(other, fine, bad))).toMatchObject({
      code: 4,
      msg: 'CNI_ARGS is not valid UTF-8: byte 0xff at offset 4',
    });
  });

  it.each([
    [[0xc0, 0x80], 0],
    [[0xed, 0xa0, 0x80], 0],
    [[0x41, 0xe2, 0x82], 1],
    [[0xf4, 0x90, 0x80, 0x80], 0],
    [[0x80], 0],
  ])('firstInvalidUtf8(%j) is %i (overlong, surrogate, truncated, too large, stray continuation)', (bytes, at) => {
    expect(firstInvalidUtf8(Buffer.from(bytes))).toBe(at);
  });

  it('handle() refuses ADD with the problem (no delegate runs) and lets DEL complete', async () => {
    const envProblem = findNonUtf8CniVar(environ(Buffer.concat([Buffer.from('CNI_ARGS=A='), Buffer.from([0xff])])))!;
    const env = {
      CNI_CONTAINERID: 'cid1',
      CNI_NETNS: testNetns(),
      CNI_IFNAME: 'eth0',
      CNI_PATH: '/x',
      CNI_ARGS: 'A=\ufffd;IgnoreUnknown=1',
    };
    const stdin = Buffer.from(JSON.stringify(conf(TWO)));
    const host = createHost({ writeStderr: () => {}, exec });
    const add = await handle(host, { env: { ...env, CNI_COMMAND: 'ADD' }, stdin, envProblem });
    expect(add.exitCode).toBe(1);
    expect(JSON.parse(add.stdout)).toMatchObject({ code: 4 });
    expect(exec.received).toEqual([]);
    const del = await handle(host, { env: { ...env, CNI_COMMAND: 'DEL' }, stdin, envProblem });
    expect(del.exitCode).toBe(0);
  });
});

describe('a failed background fsync of the scratch cache (docs/reliability.md, "Which cache writes are fsynced")', () => {
  it('fails the ADD with code 5 naming the file, and rolls the attachment back', async () => {
    failFsync.on = true;
    const error = await cmdAdd(...request('ADD', conf(TWO))).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 5 });
    expect((error as { msg: string }).msg).toMatch(/fsync of .*cid1.*EIO.*check the disk/);
    expect(exec.calls()).toEqual(['ADD p0 eth0', 'DEL p0 eth0']);
    expect(existsSync(join(cniDir, 'cid1'))).toBe(false);
    expect(existsSync(join(cniDir, 'results')) ? readdirSync(join(cniDir, 'results')) : []).toEqual([]);
  });

  it('a failed fsync that ended before anyone waited for it still fails the wait (a delegate slower than the disk)', async () => {
    failFsync.on = true;
    writeFileAtomic(join(cniDir, 'cid1'), '[]', 0o600, { durable: 'background' });
    await new Promise((resolve) => setTimeout(resolve, 50)); // the fsync failed after 5 ms
    await expect(backgroundSyncs(cniDir)).rejects.toMatchObject({ code: 5, msg: expect.stringMatching(/cid1.*EIO/) });
    await backgroundSyncs(cniDir); // reported once: the next wait is not failed by it again
  });
});
