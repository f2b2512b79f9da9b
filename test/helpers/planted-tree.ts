/** Runs a checking script of scripts/ on a tree of planted files (path in the tree -> content), the tree its argument. */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach } from 'vitest';

/** The `check(files)` of `script`; the planted trees are removed after each test. */
export function plantedCheck(
  script: string,
): (files: Record<string, string>) => { status: number | null; stderr: string } {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  return (files) => {
    const dir = mkdtempSync(join(tmpdir(), 'planted-'));
    dirs.push(dir);
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, path)), { recursive: true });
      writeFileSync(join(dir, path), text);
    }
    const out = spawnSync(process.execPath, [script, dir], { encoding: 'utf8' });
    return { status: out.status, stderr: out.stderr };
  };
}
