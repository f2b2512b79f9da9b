/**
 * dra/checkpoint.ts: what the DRA plugin prepared, one file per claim (I/O): `<cniDir>/dra/<claim uid>.json`,
 * beside the delegate configs Multus keeps in its cniDir (`/var/lib/cni/multus` unless the config says), which the
 * daemon's DaemonSet already mounts from the host, so a restarted daemon finds them. The directory is 0700 and
 * root's alone (base/private-dir.ts), each file 0600 written to a temp name then renamed (base/files.ts), so a
 * reader sees the old file or the new one, never half of one. A kubelet retry after a daemon restart answers from
 * the file; unprepare removes it. Tested by test/unit/dra/prepare.test.ts.
 */
import { join } from 'node:path';
import { readOutcome, removeIfPresent, writeFileAtomic } from '../base/files.ts';
import { securePrivateDir } from '../base/private-dir.ts';

/** A device the kubelet is told about (`NodePrepareResourceResponse.devices[]`, camelCase as grpc.ts hands it). */
export interface PreparedDevice {
  requestNames: string[];
  poolName: string;
  deviceName: string;
  cdiDeviceIds: string[];
  shareId?: string;
}

export interface Checkpoint {
  uid: string;
  namespace: string;
  name: string;
  devices: PreparedDevice[];
}

export interface CheckpointStore {
  get(uid: string): Checkpoint | undefined;
  put(c: Checkpoint): void;
  remove(uid: string): void;
}

/** A claim UID as Kubernetes makes them (a UUID); anything else never names a file. */
const UID = /^[0-9a-f][0-9a-f-]{0,62}$/;

const isCheckpoint = (v: unknown): v is Checkpoint => {
  const c = v as Partial<Checkpoint> | null;
  return !!c && typeof c.uid === 'string' && typeof c.namespace === 'string' && Array.isArray(c.devices);
};

/** The files of `dir` (made 0700 on the first write). */
export function fileCheckpoints(dir: string): CheckpointStore {
  const path = (uid: string): string => {
    if (!UID.test(uid)) throw new Error(`claim uid ${JSON.stringify(uid)} is not a Kubernetes UID`);
    return join(dir, `${uid}.json`);
  };
  let checked = false;
  const secure = (): void => {
    if (checked) return;
    securePrivateDir(dir, 'the DRA checkpoint directory');
    checked = true;
  };
  return {
    get(uid) {
      secure();
      const got = readOutcome(path(uid), 'DRA checkpoint', (b) => JSON.parse(b.toString('utf8')) as unknown);
      // a corrupt file (a disk that lost it half-way) is no checkpoint: the claim is prepared again from the API
      return got.kind === 'ok' && isCheckpoint(got.value) && got.value.uid === uid ? got.value : undefined;
    },
    put(c) {
      secure();
      writeFileAtomic(path(c.uid), JSON.stringify(c), 0o600);
    },
    remove(uid) {
      secure();
      removeIfPresent(path(uid));
    },
  };
}
