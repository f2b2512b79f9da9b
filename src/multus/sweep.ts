/**
 * multus/sweep.ts: removing what interrupted writes left in the cache directories (I/O).
 *
 * An atomic write killed between creating its temp file and renaming it (kill -9, OOM, power loss) leaves a
 * `.<name>.tmp-<pid>-...` file behind. DEL and GC sweep the scratch cache dir and `results/` so such files do
 * not accumulate on a node (docs/reliability.md).
 * Tested by test/unit/multus/reliability.test.ts (D1).
 */
import { join } from 'node:path';
import type { SweepDeps } from '../base/files.ts';
import { sweepTempFiles } from '../base/files.ts';

export function sweepCacheTemps(cniDir: string, deps?: SweepDeps): string[] {
  return [...sweepTempFiles(cniDir, deps), ...sweepTempFiles(join(cniDir, 'results'), deps)];
}
