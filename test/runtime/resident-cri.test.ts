/**
 * Resident mode through containerd's CRI: the daemon (`build/multus daemon`, in containerd's namespace)
 * generates 00-multus.conf for build/multus-shim, which containerd runs; build/multus stays in the bin dir as
 * the shim's thin fallback. The cases of cri-suite.ts, plus the daemon killed between runp and stopp.
 *
 * Hot-plug into a running sandbox is not here: there is no hot-plug on main yet (its own issue).
 */
import { describe, it } from 'vitest';
import { criSuite } from './cri-suite.ts';

criSuite('resident');

describe('hot-plug through containerd CRI (waits for hot-plug to land on main)', () => {
  it.todo('hot-plug of a NAD into a running sandbox, then stopp/rmp removes it too');
});
