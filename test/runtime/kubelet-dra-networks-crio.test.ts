// Networks as DRA devices under kubelet and CRI-O; the cases are in kubelet-dra-cases.ts.
import { draNetworksSuite } from './kubelet-dra-networks.ts';

draNetworksSuite('crio');
