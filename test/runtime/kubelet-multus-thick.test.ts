// Multus' thick manifest (deployments/multus-daemonset-thick.yml) on the kubelet node: Go Multus, multus-ts by
// kubectl set image, then Go Multus again; the cases are in multus-lane.ts.
import { multusLaneSuite } from './multus-lane.ts';

multusLaneSuite('thick');
