// kubelet runs the thin DaemonSet (deployments/multus-ts-thin.yml); the cases are in kubelet-suite.ts.
import { kubeletSuite } from './kubelet-suite.ts';

kubeletSuite('thin');
