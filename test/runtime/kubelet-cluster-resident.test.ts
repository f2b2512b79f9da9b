// Two kubelet nodes run the resident DaemonSet (deployments/multus-ts-resident.yml); the cases are in
// kubelet-cluster*.ts.
import { clusterSuite } from './kubelet-cluster.ts';

clusterSuite('resident');
