/**
 * scripts/check-size.mjs (run by `npm run check`) on planted trees: it must fail on a function over 80 lines (a
 * declaration, a method, an arrow function) and on a file over 400 lines, naming each; a tree within both passes;
 * a gen/ folder is left out.
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
    const out = check({ 'a/ok.ts': fn + '\n'.repeat(400 - 81) });
    expect(out.stderr).toBe('');
    expect(out.status).toBe(0);
  });

  it('fails on a function, a method and an arrow function of 81 lines, naming each', () => {
    const out = check({
      'a/fn.ts': `export function long(): void {\n${body(79)}}\n`,
      'a/cls.ts': `export class C {\n  method(): void {\n${body(79)}  }\n}\n`,
      'a/arrow.ts': `export const arrow = (): void => {\n${body(79)}};\n`,
    });
    expect(out.status).toBe(1);
    expect(out.stderr).toContain('a/fn.ts:1: long is 81 lines');
    expect(out.stderr).toContain('a/cls.ts:2: method is 81 lines');
    expect(out.stderr).toContain('a/arrow.ts:1: arrow is 81 lines');
  });

  it('fails on a file of 401 lines', () => {
    const out = check({ 'b/big.ts': 'export const x = 1;\n' + '\n'.repeat(400) });
    expect(out.status).toBe(1);
    expect(out.stderr).toContain('b/big.ts: 401 lines (at most 400)');
  });

  it('leaves a gen/ folder of generated code out, and only that', () => {
    const big = 'export const x = 1;\n' + '\n'.repeat(400);
    expect(check({ 'c/gen/big.ts': big }).status).toBe(0);
    expect(check({ 'c/general/big.ts': big }).stderr).toContain('c/general/big.ts: 401 lines');
  });
});
