/**
 * Thin mode through CRI-O (crio.ts): build/multus is the plugin of the CNI conf dir, at CNI 1.1.0 (cases:
 * cri-suite.ts).
 */
import { criSuite } from './cri-suite.ts';

criSuite('thin', undefined, 'crio');
