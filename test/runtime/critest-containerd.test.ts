/**
 * critest (cri-tools' CRI validation suite: its networking, runtime-status and sandbox-lifecycle specs) against
 * containerd whose CNI config is multus-ts, thin and resident, delegating to bridge + portmap (critest.ts). Each
 * case prints critest's own counts (and the spec skipped under containerd 1.6, with its reason).
 *
 * containerd 1.6 does not answer the CRI RuntimeConfig call, so critest gives its sandboxes the cgroup parent
 * `/test.slice`: cleanup.sh removes the fixture's cgroups there, and afterAll the empty `test.slice` itself
 * (when it was not there before).
 */
import { afterAll, beforeAll, describe, it } from 'vitest';
import { fileExists, needs } from '../helpers/skip.ts';
import { type Daemon, SHIM_BIN } from './cri-suite.ts';
import { critestRequirements, critestThrough, testSliceCleanup } from './critest.ts';
import { prepareRuntime, runtimeRequirements } from './runtime.ts';

const ready = needs(
  ...runtimeRequirements(),
  ...critestRequirements(),
  fileExists(SHIM_BIN, 'the native shim build/multus-shim (npm run build with Go)'),
);

describe.skipIf(!ready)(
  'critest v1.37.0 (networking, runtime status, sandbox lifecycle) through containerd CRI and multus-ts',
  () => {
    let removeSlices: () => Promise<void> = async () => {};
    beforeAll(async () => {
      removeSlices = await testSliceCleanup();
    });
    afterAll(() => removeSlices());
    for (const mode of ['thin', 'resident'] as const) {
      it(`${mode} mode: every focused spec passes, nothing left`, async () => {
        const rt = await prepareRuntime();
        const held: { daemon?: Daemon } = {};
        try {
          await critestThrough(rt, mode, `containerd-${mode}`, held);
        } finally {
          await rt.stop();
          await held.daemon?.stop();
        }
      }, 900_000);
    }
  },
);
