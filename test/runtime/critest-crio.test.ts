/**
 * critest (cri-tools' CRI validation suite: its networking, runtime-status and sandbox-lifecycle specs) against
 * CRI-O (crio.ts) whose CNI config is multus-ts, thin and resident, delegating to bridge + portmap (critest.ts),
 * with multus' config at CNI 1.1.0: CRI-O's NetworkReady is then libcni's STATUS of multus-ts. Each case prints
 * critest's own counts.
 */
import { describe, it } from 'vitest';
import { fileExists, needs } from '../helpers/skip.ts';
import { type Daemon, SHIM_BIN } from './cri-suite.ts';
import { crioRequirements, prepareCrio } from './crio.ts';
import { critestRequirements, critestThrough } from './critest.ts';
import { runtimeRequirements } from './runtime.ts';

const ready = needs(
  ...runtimeRequirements(),
  ...crioRequirements(),
  ...critestRequirements(),
  fileExists(SHIM_BIN, 'the native shim build/multus-shim (npm run build with Go)'),
);

describe.skipIf(!ready)(
  'critest v1.37.0 (networking, runtime status, sandbox lifecycle) through CRI-O and multus-ts',
  () => {
    for (const mode of ['thin', 'resident'] as const) {
      it(`${mode} mode: every focused spec passes, nothing left`, async () => {
        const rt = await prepareCrio();
        const held: { daemon?: Daemon } = {};
        try {
          await critestThrough(rt, mode, `crio-${mode}`, held);
        } finally {
          await rt.stop();
          await held.daemon?.stop();
        }
      }, 900_000);
    }
  },
);
