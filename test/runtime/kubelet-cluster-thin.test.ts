// Two kubelet nodes run the thin DaemonSet (deployments/multus-ts-thin.yml); the cases are in kubelet-cluster*.ts.
import { clusterSuite } from './kubelet-cluster.ts';

clusterSuite('thin');
