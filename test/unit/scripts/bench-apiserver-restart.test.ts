/**
 * The cluster bench's reading of "synced again" after an API-server restart (scripts/bench/cluster/apiserver-restart.ts):
 * per resource, the daemon's watch begun after the restart that is still open 5 s on, from the audit log.
 */
import { describe, expect, it } from 'vitest';
import { syncedWatches } from '../../../scripts/bench/cluster/apiserver-restart.ts';
import type { Audit } from '../../../scripts/bench/cluster/measure.ts';

const T0 = Date.parse('2026-12-07T21:00:00Z');
const iso = (s: number) => new Date(T0 + s * 1000).toISOString();
const ours = { username: 'system:serviceaccount:kube-system:multus-ts' };

function ev(id: string, verb: string, resource: string, stage: string, at: number, uri = '', code = 200): Audit {
  return {
    auditID: id,
    stage,
    verb,
    user: ours,
    objectRef: { resource },
    requestURI: `/api/v1/${resource}?${uri}`,
    responseStatus: { code },
    requestReceivedTimestamp: iso(at),
    stageTimestamp: iso(at),
  };
}

const NADS = 'network-attachment-definitions';
const events: Audit[] = [
  // before the restart: not counted
  ev('old', 'watch', 'pods', 'ResponseStarted', -30),
  // the resumed pod watch: a 410 at once, then a watch-list that stays open
  ev('p1', 'watch', 'pods', 'ResponseStarted', 2, 'resourceVersion=5&fieldSelector=spec.nodeName%3Dn'),
  ev('p1', 'watch', 'pods', 'ResponseComplete', 2),
  ev('p2', 'watch', 'pods', 'ResponseStarted', 3, 'sendInitialEvents=true&fieldSelector=spec.nodeName%3Dn'),
  // NADs: refused once (429), then a LIST and a watch from its resourceVersion
  ev('n1', 'watch', NADS, 'ResponseStarted', 2, 'resourceVersion=5', 429),
  ev('n2', 'list', NADS, 'ResponseComplete', 4),
  ev('n3', 'watch', NADS, 'ResponseStarted', 6, 'resourceVersion=9'),
  // another user's watch
  { ...ev('x', 'watch', NADS, 'ResponseStarted', 1), user: { username: 'admin' } },
];

describe('syncedWatches', () => {
  it("takes each resource's watch that stayed open, not the one a 410 or a refusal ended", () => {
    const s = syncedWatches(events, T0, T0 + 20_000);
    const [pods, nads] = [s.pods, s[NADS]];
    expect(pods).toEqual({ at: T0 + 3000, query: 'sendInitialEvents=true', lists: 0, watches: 2, codes: [200, 200] });
    expect(nads).toEqual({ at: T0 + 6000, query: 'resourceVersion=9', lists: 1, watches: 2, codes: [429, 200, 200] });
  });

  it('waits until a watch has been open 5 s', () => {
    const s = syncedWatches(events, T0, T0 + 10_000);
    expect(s.pods?.at).toBe(T0 + 3000);
    expect(s[NADS]).toBeUndefined();
  });

  it('counts nothing from before the restart', () => {
    expect(syncedWatches(events, T0 + 7000, T0 + 60_000)).toEqual({});
  });
});
