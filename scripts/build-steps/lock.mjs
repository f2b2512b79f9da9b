/**
 * build-steps/lock.mjs: one build at a time per output directory (test runners may start `npm run build` in
 * parallel): a lock directory holding the owner's pid; a lock whose owner is gone is taken over.
 */
import { mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fail, log, show } from './common.mjs';

/** Is the lock's owner alive? A lock without a pid yet gets 5 s (its owner is between mkdir and write). */
function ownerAlive(dir) {
  let owner = NaN;
  try {
    owner = Number(readFileSync(join(dir, 'pid'), 'utf8'));
  } catch {}
  if (Number.isInteger(owner) && owner > 0) {
    try {
      process.kill(owner, 0);
      return { owner, alive: true };
    } catch (e) {
      return { owner, alive: e.code === 'EPERM' };
    }
  }
  try {
    return { owner, alive: Date.now() - statSync(dir).mtimeMs < 5000 };
  } catch {
    return { owner, alive: false };
  }
}

/** Takes <outdir>/.build.lock, waiting up to 5 minutes; released when the process exits. @param {string} outdir */
export function lock(outdir) {
  const dir = join(outdir, '.build.lock');
  const deadline = Date.now() + 300_000;
  let said = false;
  for (;;) {
    try {
      mkdirSync(dir);
      writeFileSync(join(dir, 'pid'), String(process.pid));
      process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
      return;
    } catch (e) {
      if (e.code !== 'EEXIST') throw e;
    }
    const { owner, alive } = ownerAlive(dir);
    if (!alive) {
      rmSync(dir, { recursive: true, force: true });
      continue;
    }
    if (Date.now() > deadline) fail(`${show(dir)} is held by pid ${owner} for more than 5 minutes`);
    if (!said) log(`waiting for the build in progress (pid ${owner})`);
    said = true;
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100);
  }
}
