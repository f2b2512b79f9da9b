/**
 * The resident bench's command line (scripts/bench/options.mjs): `--writeback` is off unless asked for, so runs
 * stay comparable with earlier ones (docs/performance.md, "Files written back before the DEL").
 */
import { describe, expect, it } from 'vitest';
// @ts-expect-error: options.mjs is plain JavaScript with no declaration file (scripts/tsconfig.json checks it)
import { parseArgs } from '../../../scripts/bench/options.mjs';

describe('bench options', () => {
  it('leaves the DEL right after its ADD by default', () => {
    expect(parseArgs(['--scenario', 'resident']).writeback).toBe('none');
  });

  it('writes back before each DEL when asked, in both spellings', () => {
    expect(parseArgs(['--writeback', 'before-del']).writeback).toBe('before-del');
    expect(parseArgs(['--writeback=before-del', '--page-cache=installed'])).toMatchObject({
      writeback: 'before-del',
      pageCache: 'installed',
    });
  });
});
