/**
 * The thin plugin's fsync of the scratch cache (base/files.ts `deferBackgroundSyncs`, cli.ts): no worker thread,
 * the fsync runs on the call's own thread once the first delegate was started, and before any result cache is
 * written; a failed one fails the ADD with code 5 and rolls it back, as on the worker threads
 * (docs/reliability.md, "Which cache writes are fsynced"). A file of its own: the mode is the module's for the
 * process, as it is the thin plugin's.
 */
import type * as Fs from 'node:fs';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { backgroundSyncs, deferBackgroundSyncs, runDeferredSyncs, writeFileAtomic } from '../../../src/base/files.ts';
import { parseRequest } from '../../../src/cni/request.ts';
import { cmdAdd } from '../../../src/multus/commands/add.ts';
import { parseMultusConf } from '../../../src/multus/conf.ts';
import { localDeps, withContext } from '../../helpers/commands.ts';
import { FakeExec } from '../../helpers/fake-exec.ts';

/** Every fsync(2) this file's code makes, by path of the fd; the synchronous one fails with EIO while `fail`. */
const syncs = { fail: false, seen: [] as string[], callbackCalls: 0 };
vi.mock('node:fs', async (original) => {
  const fs = await original<typeof Fs>();
  const fsyncSync = (fd: number): void => {
    syncs.seen.push(fs.readlinkSync(`/proc/self/fd/${fd}`));
    if (syncs.fail) throw Object.assign(new Error('EIO: i/o error, fsync'), { code: 'EIO' });
    fs.fsyncSync(fd);
  };
  const fsync = (fd: number, cb: (err: NodeJS.ErrnoException | null) => void): void => {
    syncs.callbackCalls += 1;
    fs.fsync(fd, cb);
  };
  return { ...fs, fsync, fsyncSync, default: { ...fs, fsync, fsyncSync } };
});

const fds = () => readdirSync('/proc/self/fd').length;
let dir: string;
let cniDir: string;
beforeAll(() => deferBackgroundSyncs());
beforeEach(() => {
  syncs.fail = false;
  syncs.seen = [];
  syncs.callbackCalls = 0;
  dir = mkdtempSync(join(tmpdir(), 'mts-defer-'));
  cniDir = join(dir, 'cni');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe("writeFileAtomic 'background' after deferBackgroundSyncs", () => {
  it('renames at once and keeps the file open, unsynced, until runDeferredSyncs', async () => {
    const before = fds();
    const path = join(dir, 'bg');
    writeFileAtomic(path, 'contents', 0o600, { durable: 'background' });
    expect(readFileSync(path, 'utf8')).toBe('contents');
    expect(fds(), 'open until its fsync').toBe(before + 1);
    expect(syncs.seen).toEqual([]);
    runDeferredSyncs();
    expect(syncs.seen).toEqual([path]);
    expect(fds(), 'closed after it').toBe(before);
    runDeferredSyncs(); // nothing left: no second fsync
    await backgroundSyncs(dir);
    expect(syncs.seen).toEqual([path]);
    expect(syncs.callbackCalls, 'no worker thread').toBe(0);
  });

  it('backgroundSyncs runs what is still deferred, and throws code 5 for a failed one', async () => {
    syncs.fail = true;
    writeFileAtomic(join(dir, 'x'), 'x', 0o600, { durable: 'background' });
    await expect(backgroundSyncs(dir)).rejects.toMatchObject({
      code: 5,
      msg: expect.stringMatching(/fsync of .*x: EIO/),
    });
  });
});

describe('an ADD in the thin plugin (deferBackgroundSyncs)', () => {
  const TWO = [
    { cniVersion: '1.1.0', name: 'cluster', type: 'p0' },
    { cniVersion: '1.1.0', name: 'second', type: 'p1' },
  ];
  let exec: FakeExec;
  const request = () => {
    const stdin = Buffer.from(
      JSON.stringify({ cniVersion: '1.1.0', name: 'multus-cni-network', type: 'multus', cniDir, delegates: TWO }),
    );
    const vars = { CNI_CONTAINERID: 'cid1', CNI_NETNS: '/var/run/netns/x', CNI_IFNAME: 'eth0', CNI_PATH: '/x' };
    return withContext(
      parseRequest('ADD', { CNI_COMMAND: 'ADD', ...vars, CNI_ARGS: 'IgnoreUnknown=1' }, stdin),
      parseMultusConf(stdin),
      localDeps(exec),
    );
  };
  beforeEach(() => {
    exec = new FakeExec('p0', 'p1');
  });

  it('fsyncs the scratch cache once its first delegate was started, before any result cache exists', async () => {
    const seenAtStart: string[][] = [];
    exec.returns['p0 ADD'] = () => {
      seenAtStart.push([...syncs.seen]);
      return { stdout: Buffer.from('{"cniVersion":"1.1.0"}') };
    };
    const before = fds();
    await cmdAdd(...request());
    expect(seenAtStart, 'p0 was started before the fsync ran').toEqual([[]]);
    expect(syncs.seen, 'one fsync: the scratch cache; result caches are not fsynced').toEqual([join(cniDir, 'cid1')]);
    expect(syncs.callbackCalls).toBe(0);
    expect(fds()).toBe(before);
  });

  it('a failed fsync fails the ADD with code 5 and rolls the attachment back', async () => {
    syncs.fail = true;
    const error = await cmdAdd(...request()).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 5 });
    expect((error as { msg: string }).msg).toMatch(/fsync of .*cid1.*EIO.*check the disk/);
    expect(exec.calls()).toEqual(['ADD p0 eth0', 'DEL p0 eth0']);
    expect(existsSync(join(cniDir, 'cid1'))).toBe(false);
    expect(existsSync(join(cniDir, 'results')) ? readdirSync(join(cniDir, 'results')) : []).toEqual([]);
  });
});
