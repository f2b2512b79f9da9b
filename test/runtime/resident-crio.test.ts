/**
 * Resident mode through CRI-O (crio.ts): the daemon generates 00-multus.conf (CNI 1.1.0, named for the fixture)
 * for build/multus-shim, which CRI-O runs. The cases of cri-suite.ts, the daemon killed between runp and stopp,
 * and hot-plug into a sandbox CRI-O made (hotplug-case.ts).
 */
import { criSuite } from './cri-suite.ts';
import { hotplugCase } from './hotplug-case.ts';

criSuite('resident', hotplugCase, 'crio');
