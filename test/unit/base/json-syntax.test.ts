/**
 * base/json-syntax.ts (issue 51, finding 7): where JSON text stops being JSON, by line and column, never the bytes;
 * and it agrees with JSON.parse on what is JSON.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jsonSyntaxProblem } from '../../../src/base/json-syntax.ts';
import { parseJson } from '../../../src/base/json.ts';

function parses(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

describe('jsonSyntaxProblem', () => {
  it.each([
    ['root:x:0:0:root:/root:/bin/bash\n', 'line 1, column 1: expected a JSON value'],
    ['{"a": 1,\n "b" 2}', "line 2, column 6: expected ':' after the member name"],
    ['{"a": "secret', 'line 1, column 7: unterminated string'],
    ['[1, 2', 'line 1, column 6: unexpected end of the text'],
    ['{"a": 1} trailing-secret', 'line 1, column 10: unexpected data after the JSON value'],
    ['{a: 1}', 'line 1, column 2: expected a member name in double quotes'],
    ['01', 'line 1, column 2: unexpected data after the JSON value'],
    ['"\\x"', 'line 1, column 2: a bad escape in a string'],
  ])('%j: %s', (text, want) => {
    expect(parses(text)).toBe(false);
    expect(jsonSyntaxProblem(text)).toBe(want);
  });

  it('quotes nothing of the text: a config file that is not JSON stays out of the message', () => {
    expect(() => parseJson('password=hunter2\n', 'CNI config file /etc/x')).toThrowError(
      expect.objectContaining({
        msg: 'CNI config file /etc/x is not valid JSON: line 1, column 1: expected a JSON value',
      }),
    );
  });

  it('agrees with JSON.parse on what is JSON', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.json(),
          fc.string(),
          fc.json().map((j) => j.slice(0, -1)),
        ),
        (text) => {
          expect(jsonSyntaxProblem(text) === undefined).toBe(parses(text));
        },
      ),
      { numRuns: 2000 },
    );
  });
});
