/**
 * Thin mode through containerd's CRI: build/multus is the plugin of the CNI conf dir (cases: cri-suite.ts).
 */
import { criSuite } from './cri-suite.ts';

criSuite('thin');
