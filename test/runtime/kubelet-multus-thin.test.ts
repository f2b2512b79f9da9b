// Multus' thin manifest (deployments/multus-daemonset.yml) on the kubelet node: Go Multus, multus-ts by
// kubectl set image, then Go Multus again; the cases are in multus-lane.ts.
import { multusLaneSuite } from './multus-lane.ts';

multusLaneSuite('thin');
