/**
 * The process-group helpers the signal tests kill with (test/helpers/groups.ts). A CI run was once SIGKILLed whole:
 * a pid file read between the shell's truncation and its write parsed as group 0, every kernel thread's group, so
 * it "hung", and the clean-up's kill(-0) was kill(0), the test runner's own group.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { groupGone, groupMembers, hungGroup, killGroups, ownGroup } from '../../helpers/groups.ts';
import { killPid } from '../../helpers/procs.ts';

let dir = '';
let child: ChildProcess | undefined;
afterEach(() => {
  if (child?.pid) killGroups([child.pid]);
  child = undefined;
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = '';
});

describe('process groups in tests', () => {
  it('group 0 has members (kernel threads), so a pgid read as 0 would look hung', () => {
    expect(groupMembers(0).length).toBeGreaterThanOrEqual(3);
  });

  it('hungGroup takes no pid from an empty or partly written file, only the whole line once it is there', async () => {
    dir = mkdtempSync(join(tmpdir(), 'mts-groups-'));
    const plugin = join(dir, 'hang');
    writeFileSync(`${plugin}.ADD.pid`, ''); // truncated, not yet written
    child = spawn('sh', ['-c', 'sleep 30 & sleep 30'], { detached: true, stdio: 'ignore' });
    const pgid = child.pid!;
    setTimeout(() => writeFileSync(`${plugin}.ADD.pid`, String(pgid)), 150); // no newline yet
    setTimeout(() => writeFileSync(`${plugin}.ADD.pid`, `${pgid}\n`), 300);
    const started = Date.now();
    expect(await hungGroup(plugin, 'ADD')).toBe(pgid);
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    killGroups([pgid]);
    expect(await groupGone(pgid)).toEqual([]);
  });

  it('killGroups and killPid refuse 0, 1 and the caller’s own group', () => {
    for (const pgid of [0, 1, -1, Number.NaN, ownGroup()]) {
      expect(() => killGroups([pgid]), String(pgid)).toThrow(/refusing to kill process group/);
    }
    for (const pid of [0, 1, -1, Number.NaN]) expect(() => killPid(pid), String(pid)).toThrow(/refusing to kill pid/);
  });
});
