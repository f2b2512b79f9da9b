/**
 * Process groups from /proc, for the tests of what a signal leaves running: a plugin that hangs with a child
 * (`sleep 3600 & sleep 3600`) written into a test's directory, and the live (not zombie) members of its group.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Pids of the processes in group `pgid` that are not zombies (a zombie runs nothing). */
export function groupMembers(pgid: number): number[] {
  const members: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    // after "pid (comm) ": state ppid pgrp ...
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(fields[2]) === pgid && fields[0] !== 'Z') members.push(Number(name));
  }
  return members;
}

/**
 * Writes `<dir>/<name>`: a plugin that, on each command in `hangOn`, records its pid in `<dir>/<name>.<command>.pid`
 * and hangs with a background child; on ADD otherwise prints a result (or, with `failAdd`, a CNI error), and on
 * other commands exits 0.
 */
export function hangingPlugin(dir: string, name: string, hangOn: string[], failAdd = false): string {
  const path = join(dir, name);
  const add = failAdd
    ? `echo '{"cniVersion":"1.0.0","code":11,"msg":"${name} fails its ADD"}'; exit 1`
    : `echo '{"cniVersion":"1.0.0","interfaces":[{"name":"'"$CNI_IFNAME"'","sandbox":"'"$CNI_NETNS"'"}],"ips":[{"address":"10.7.0.2/24","interface":0}]}'`;
  const hang = hangOn.map(
    (c) =>
      `[ "$CNI_COMMAND" = ${c} ] && { echo $$ > ${path}.$CNI_COMMAND.tmp && mv ${path}.$CNI_COMMAND.tmp ${path}.$CNI_COMMAND.pid; sleep 3600 & sleep 3600; }`,
  );
  writeFileSync(
    path,
    `#!/bin/sh\ncat >/dev/null\n${hang.join('\n')}\n[ "$CNI_COMMAND" = ADD ] && { ${add}; }\nexit 0\n`,
    { mode: 0o755 },
  );
  return path;
}

/**
 * Waits (bounded) until `<plugin>.<command>.pid` names a group with the plugin and its child running; its pgid.
 * Only a whole line counts: a file read between the shell's truncation and its write is empty, Number('') is 0,
 * and group 0 is every kernel thread's, so a read that early once handed the tests a group whose kill (kill(0)) is
 * their own process group's, the test runner's included.
 */
export async function hungGroup(plugin: string, command: string): Promise<number> {
  for (let i = 0; i < 1000; i++) {
    try {
      const line = /^([1-9]\d*)\n$/.exec(readFileSync(`${plugin}.${command}.pid`, 'utf8'));
      const pgid = line ? Number(line[1]) : 0;
      if (pgid > 1 && groupMembers(pgid).length >= 3) return pgid; // sh, the background sleep, the foreground sleep
    } catch {
      // not written yet
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`${plugin} never hung in ${command}`);
}

/** This process's own group, from /proc/self/stat. */
export function ownGroup(): number {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
}

/**
 * SIGKILLs what is left of groups a test started (a failed test must not leave its sleeps behind). A pgid of 0 or
 * 1, or this process's own group, is refused with an error: kill(-0) is kill(0), the caller's whole group.
 */
export function killGroups(pgids: number[]): void {
  for (const pgid of pgids) {
    if (!Number.isInteger(pgid) || pgid <= 1 || pgid === ownGroup()) {
      throw new Error(`refusing to kill process group ${pgid}: not a group a test started`);
    }
    try {
      process.kill(-pgid, 'SIGKILL');
    } catch {
      // gone
    }
  }
}

/** Waits (bounded) until the group is empty; the members still there otherwise. */
export async function groupGone(pgid: number): Promise<number[]> {
  for (let i = 0; i < 250; i++) {
    if (groupMembers(pgid).length === 0) return [];
    await new Promise((r) => setTimeout(r, 20));
  }
  return groupMembers(pgid);
}
