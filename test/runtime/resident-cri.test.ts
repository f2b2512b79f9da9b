/**
 * Resident mode through containerd's CRI: the daemon (`build/multus daemon`, in containerd's namespace)
 * generates 00-multus.conf for build/multus-shim, which containerd runs; build/multus stays in the bin dir as
 * the shim's thin fallback. The cases of cri-suite.ts, plus the daemon killed between runp and stopp, plus
 * hot-plug into a sandbox containerd made (hotplug-case.ts).
 */
import { criSuite } from './cri-suite.ts';
import { hotplugCase } from './hotplug-case.ts';

criSuite('resident', hotplugCase);
