// kubelet runs the resident DaemonSet (deployments/multus-ts-resident.yml); the cases are in kubelet-suite.ts.
import { kubeletSuite } from './kubelet-suite.ts';

kubeletSuite('resident');
