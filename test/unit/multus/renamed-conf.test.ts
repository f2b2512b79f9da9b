/** renamed-conf.ts: which file another program renamed ours to, and the warning's words. */
import { describe, expect, it } from 'vitest';
import { renamedAway, renamedAwayMessage } from '../../../src/multus/renamed-conf.ts';

const OURS = ['00-multus.conf', '00-multus.conflist'];

describe('renamedAway', () => {
  it.each<[string, string[], ReturnType<typeof renamedAway>]>([
    [
      "Cilium's backup",
      ['00-multus.conf.cilium_bak', '05-cilium.conflist'],
      { own: '00-multus.conf', renamed: '00-multus.conf.cilium_bak' },
    ],
    [
      'a conflist renamed',
      ['00-multus.conflist.bak'],
      { own: '00-multus.conflist', renamed: '00-multus.conflist.bak' },
    ],
    ['ours still there (a stale backup beside it)', ['00-multus.conf', '00-multus.conf.cilium_bak'], undefined],
    ['simply deleted', ['05-cilium.conflist'], undefined],
    ["another writer's temp file (Go Multus' .new)", ['00-multus.conf.new'], undefined],
    ['a name that only starts like ours', ['00-multus.confx', '00-multus.conf.'], undefined],
    [
      'the first of several, by name',
      ['00-multus.conf.z', '00-multus.conf.a'],
      { own: '00-multus.conf', renamed: '00-multus.conf.a' },
    ],
  ])('%s', (_title, names, expected) => {
    expect(renamedAway(names, OURS)).toEqual(expected);
  });
});

describe('renamedAwayMessage', () => {
  it("names Cilium's setting for .cilium_bak, and the generic cause otherwise", () => {
    expect(renamedAwayMessage('/etc/cni/net.d', { own: '00-multus.conf', renamed: '00-multus.conf.cilium_bak' })).toBe(
      '00-multus.conf in /etc/cni/net.d was renamed to 00-multus.conf.cilium_bak by another program, so the runtime ' +
        'ran the primary network alone for new pods; Cilium renames every other CNI config when its cni.exclusive is ' +
        'true: set cni.exclusive=false (Helm value) to run Cilium as the primary network under multus. Writing ' +
        '00-multus.conf again',
    );
    expect(renamedAwayMessage('/d', { own: '00-multus.conf', renamed: '00-multus.conf.old' })).toContain(
      "another CNI's installer renames the configs it does not own",
    );
  });
});
