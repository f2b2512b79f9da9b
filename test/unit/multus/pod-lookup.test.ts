/**
 * How ADD and DEL ask for their pod (src/multus/podnetworks.ts lookupPod): ADD lets a cache wait for a pod it does
 * not hold yet, DEL takes a synced cache's miss as NotFound (CallOptions.cacheMiss; the daemon's informers honour
 * it, the lean client ignores it), each with the pod UID from CNI_ARGS; ADD's 401 waits for a rotated kubeconfig within
 * the readiness wait, then asks once more.
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
const slept: number[] = [];
const clock = { now: () => 0, sleep: async (ms: number) => void slept.push(ms) };
const deps = {
  log: silentLogger,
  conf: { readinessBackoff: { initialMs: 250, factor: 4, jitter: 0, steps: 4 } },
  seams: { clock },
};

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
    expect(await lookupPod(client, k8s, 'ADD', deps)).toEqual({ kind: 'found', pod });
    expect(asked).toEqual([{ uid: 'u1', cacheMiss: 'wait' }]);
  });

  it("DEL: the UID and cacheMiss 'only'; the cache's NotFound means the pod is gone (the caches decide)", async () => {
    const { client, asked } = kube(() => {
      throw new KubeApiError(CniCode.Internal, 'pods "p" not found', 404, 'NotFound');
    });
    const got = await lookupPod(client, k8s, 'DEL', deps);
    expect(got.kind).toBe('unknown');
    expect(asked).toEqual([{ uid: 'u1', cacheMiss: 'only' }]);
  });
});

describe("lookupPod: ADD refused 401 (a DaemonSet pod's token, its successor not yet there)", () => {
  const refused = () => new KubeApiError(CniCode.Internal, 'Unauthorized: ...', 401, 'Unauthorized');

  /** A client whose kubeconfig is rewritten after `changesAfter` looks; the old token is refused. */
  function rotating(changesAfter: number) {
    let looks = 0;
    let token = 'old';
    const client = {
      getPod: async () => {
        if (token === 'old') throw refused();
        return pod;
      },
      reloadKubeconfig: async () => {
        if (++looks <= changesAfter) return false;
        const changed = token === 'old';
        token = 'new';
        return changed;
      },
    } as unknown as KubeClient;
    return { client, looks: () => looks };
  }

  it('reads the kubeconfig again at once and after each sleep of the schedule; the GET is tried again once it changed', async () => {
    slept.length = 0;
    const k = rotating(3);
    expect(await lookupPod(k.client, k8s, 'ADD', deps)).toEqual({ kind: 'found', pod });
    expect([k.looks(), slept]).toEqual([4, [250, 1000, 4000]]);
  });

  it('fails with the 401 when the kubeconfig stays the same for the whole wait (21.25 s here)', async () => {
    slept.length = 0;
    const k = rotating(99);
    await expect(lookupPod(k.client, k8s, 'ADD', deps)).rejects.toMatchObject({
      msg: expect.stringContaining('error waiting for pod: Unauthorized'),
    });
    expect([k.looks(), slept]).toEqual([5, [250, 1000, 4000, 16000]]);
  });

  it('asks once more only: a new token refused too fails at once; a client without a kubeconfig to read does not wait', async () => {
    slept.length = 0;
    let gets = 0;
    const stillRefused = {
      getPod: async () => {
        gets++;
        throw refused();
      },
      reloadKubeconfig: async () => true,
    } as unknown as KubeClient;
    await expect(lookupPod(stillRefused, k8s, 'ADD', deps)).rejects.toMatchObject({ code: CniCode.Internal });
    expect([gets, slept]).toEqual([2, []]);
    const { client } = kube(() => {
      throw refused();
    });
    await expect(lookupPod(client, k8s, 'ADD', deps)).rejects.toMatchObject({ code: CniCode.Internal });
    expect(slept).toEqual([]);
  });

  it('DEL does not wait: the caches decide', async () => {
    slept.length = 0;
    const k = rotating(0);
    expect((await lookupPod(k.client, k8s, 'DEL', deps)).kind).toBe('unknown');
    expect([k.looks(), slept]).toEqual([0, []]);
  });
});
