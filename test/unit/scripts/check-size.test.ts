/**
 * scripts/check-size.mjs (run by `npm run check`) on planted trees (a src/ and a scripts/): it must fail on a function
 * over 80 lines in src/ (a declaration, a method, an arrow function) and on a file over 400 lines in src/ or
 * scripts/, naming each; a tree within both passes, as do a long function in scripts/ and a long file under `gen/`.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { plantedCheck } from '../../helpers/planted-tree.ts';

const check = plantedCheck(join(import.meta.dirname, '../../../scripts/check-size.mjs'));

/** A body of `n` statement lines. */
const body = (n: number): string => Array.from({ length: n }, (_, i) => `  const v${i} = ${i};\n`).join('');

describe('check-size', () => {
  it('passes functions of 80 lines and files of 400', () => {
    const fn = `export function ok(): void {\n${body(78)}}\n`; // 80 lines with its braces
    const out = check({ 'src/a/ok.ts': fn + '\n'.repeat(400 - 81), 'scripts/ok.mjs': '\n'.repeat(400) });
    expect(out.stderr).toBe('');
    expect(out.status).toBe(0);
  });

  it('fails on a function, a method and an arrow function of 81 lines in src/, naming each', () => {
    const out = check({
      'src/a/fn.ts': `export function long(): void {\n${body(79)}}\n`,
      'src/a/cls.ts': `export class C {\n  method(): void {\n${body(79)}  }\n}\n`,
      'src/a/arrow.ts': `export const arrow = (): void => {\n${body(79)}};\n`,
    });
    expect(out.status).toBe(1);
    expect(out.stderr).toContain('src/a/fn.ts:1: long is 81 lines');
    expect(out.stderr).toContain('src/a/cls.ts:2: method is 81 lines');
    expect(out.stderr).toContain('src/a/arrow.ts:1: arrow is 81 lines');
  });

  it('fails on a file of 401 lines in src/', () => {
    const out = check({ 'src/b/big.ts': 'export const x = 1;\n' + '\n'.repeat(400) });
    expect(out.status).toBe(1);
    expect(out.stderr).toContain('src/b/big.ts: 401 lines (at most 400)');
  });

  it('fails on a file of 401 lines in scripts/, whatever its script extension', () => {
    const big = 'export const x = 1;\n' + '\n'.repeat(400);
    const out = check({ 'scripts/bench/big.mjs': big, 'scripts/big.ts': big, 'scripts/notes.txt': big });
    expect(out.status).toBe(1);
    expect(out.stderr).toContain('scripts/bench/big.mjs: 401 lines (at most 400)');
    expect(out.stderr).toContain('scripts/big.ts: 401 lines (at most 400)');
    expect(out.stderr).not.toContain('notes.txt');
  });

  it('leaves functions in scripts/ and generated code under gen/ alone', () => {
    const out = check({
      'scripts/long.mjs': `export function long() {\n${body(79)}}\n`,
      'src/kubelet/gen/big.ts': 'export const x = 1;\n' + '\n'.repeat(400),
    });
    expect(out.stderr).toBe('');
    expect(out.status).toBe(0);
  });
});
