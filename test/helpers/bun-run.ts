/**
 * The pinned Bun of node_modules (package.json's `@oven/bun-linux-x64`, the runtime of build/multus) and a runner for
 * test/helpers/bun-driver.ts, so that the sources' Bun-only paths (Bun.spawn in cni/exec.ts, fetch in
 * k8s/fetch.ts) are tested under Bun while vitest itself runs under Node.
 */
import { spawn } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Requirement } from './skip.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const DRIVER = join(ROOT, 'test/helpers/bun-driver.ts');

/** The platform package's binary, the one scripts/build-steps/compile.mjs compiles with. */
export function bunPath(): string | undefined {
  const full = join(ROOT, 'node_modules/@oven/bun-linux-x64/bin/bun');
  return existsSync(full) && statSync(full).size > 1 << 20 ? full : undefined;
}

export function haveBun(): Requirement {
  return { ok: bunPath() !== undefined, reason: 'needs the bun npm package (npm ci)' };
}

/** One driver request; resolves with its JSON answer. `env` is the driver's whole environment. */
export function onBun<T = Record<string, unknown>>(
  request: Record<string, unknown>,
  env: Record<string, string> = {},
): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = spawn(bunPath()!, [DRIVER], {
      env: { PATH: '/usr/bin:/bin', ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (b: Buffer) => (out += b));
    child.stderr.on('data', (b: Buffer) => (err += b));
    child.on('error', reject);
    child.on('close', (code) => {
      try {
        resolve(JSON.parse(out) as T);
      } catch {
        reject(new Error(`bun driver exited ${code}: ${out}${err}`));
      }
    });
    child.stdin.end(JSON.stringify(request));
  });
}
