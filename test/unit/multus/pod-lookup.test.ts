/**
 * How ADD and DEL ask for their pod (src/multus/podnetworks.ts lookupPod): ADD lets a cache wait for a pod it does
 * not hold yet, DEL takes a synced cache's miss as NotFound (CallOptions.cacheMiss; the daemon's informers honour
 * it, the lean client ignores it), each with the pod UID from CNI_ARGS.
 */
import { describe, expect, it } from 'vitest';
import { CniCode } from '../../../src/base/errors.ts';
import { silentLogger } from '../../../src/base/log.ts';
import type { K8sArgs } from '../../../src/cni/cniargs.ts';
import type { CallOptions, KubeClient, Pod } from '../../../src/k8s/types.ts';
import { KubeApiError } from '../../../src/k8s/types.ts';
import { lookupPod } from '../../../src/multus/podnetworks.ts';

const k8s: K8sArgs = {
  ignoreUnknown: false,
  podNamespace: 'ns',
  podName: 'p',
  podInfraContainerId: 'c',
  podUid: 'u1',
  ip: '',
};
const clock = { now: () => 0, sleep: async () => {} };

function kube(answer: () => Pod): { client: KubeClient; asked: (CallOptions | undefined)[] } {
  const asked: (CallOptions | undefined)[] = [];
  const client = {
    getPod: async (_ns: string, _name: string, opts?: CallOptions) => {
      asked.push(opts);
      return answer();
    },
  } as unknown as KubeClient;
  return { client, asked };
}
const pod = { metadata: { namespace: 'ns', name: 'p', uid: 'u1' } } as Pod;

describe('lookupPod: what ADD and DEL ask of a cache', () => {
  it("ADD: the UID and cacheMiss 'wait'", async () => {
    const { client, asked } = kube(() => pod);
    expect(await lookupPod(client, k8s, 'ADD', { clock, log: silentLogger })).toEqual({ kind: 'found', pod });
    expect(asked).toEqual([{ uid: 'u1', cacheMiss: 'wait' }]);
  });

  it("DEL: the UID and cacheMiss 'only'; the cache's NotFound means the pod is gone (the caches decide)", async () => {
    const { client, asked } = kube(() => {
      throw new KubeApiError(CniCode.Internal, 'pods "p" not found', 404, 'NotFound');
    });
    const got = await lookupPod(client, k8s, 'DEL', { clock, log: silentLogger });
    expect(got.kind).toBe('unknown');
    expect(asked).toEqual([{ uid: 'u1', cacheMiss: 'only' }]);
  });
});
