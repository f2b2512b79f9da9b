/**
 * How much of a file the page cache holds, through util-linux's fincore: the installer and the launcher leave the
 * executables they write out of it (docs/archive/performance.md, "The installed executable's page cache").
 */
import { spawnSync } from 'node:child_process';
import { fileExists, type Requirement } from './skip.ts';

const FINCORE = '/usr/bin/fincore';

export function haveFincore(): Requirement {
  return fileExists(FINCORE, "util-linux's fincore (the page cache's share of a file)");
}

/** Bytes of `file` in the page cache. */
export function cachedBytes(file: string): number {
  const r = spawnSync(FINCORE, ['--bytes', '--noheadings', '--output', 'RES', file], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`fincore ${file}: ${r.stderr}`);
  return Number(r.stdout.trim());
}
