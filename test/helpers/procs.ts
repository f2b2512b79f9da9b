/** Child processes in tests: a plugin script in a directory, and whether a process still runs. */
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** An executable `#!/bin/sh` script `dir/name` with `body`; returns its path. */
export function shellScript(dir: string, name: string, body: string): string {
  mkdirSync(dir, { recursive: true });
  const path = join(dir, name);
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

/** Alive and not a zombie (a killed orphan may stay a zombie where init does not reap it). */
export function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

/**
 * SIGKILLs one process a test started, if it is still there. A pid of 0 or 1 is refused with an error: kill(0) is
 * the caller's whole process group (the test runner's), kill(1) is init.
 */
export function killPid(pid: number): void {
  if (!Number.isInteger(pid) || pid <= 1) throw new Error(`refusing to kill pid ${pid}: not a process a test started`);
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // gone
  }
}
