/**
 * netns.ts: sanity checks on CNI_NETNS before any delegate runs (I/O: two stat calls).
 *
 * ADD and CHECK need a network namespace that exists. No command may be pointed at the plugin's own
 * namespace: the delegates would then configure (or, on DEL, delete) the host's interfaces. libcni's skel
 * rejects that with code 8 unless CNI_NETNS_OVERRIDE is set; we check before running anything.
 * Tested by test/unit/host/handle.test.ts (the netns rule per command).
 */
import { statSync } from 'node:fs';
import { CniCode, CniError } from '../base/errors.ts';
import type { CallEnv } from './request.ts';

const OWN_NETNS = '/proc/self/ns/net';

/** `mustExist`: ADD and CHECK need the namespace; DEL of one that is already gone is normal. */
export function checkNetns(req: CallEnv, mustExist: boolean): void {
  if (!req.netns) return;
  let target;
  try {
    target = statSync(req.netns);
  } catch {
    if (mustExist) {
      throw new CniError(
        CniCode.InvalidEnv,
        `CNI_NETNS "${req.netns}" does not exist: pass the path of the container's network namespace`,
      );
    }
    return;
  }
  if (req.netnsOverride) return;
  let own;
  try {
    own = statSync(OWN_NETNS);
  } catch {
    return; // no procfs: nothing to compare with
  }
  if (own.dev === target.dev && own.ino === target.ino) {
    throw new CniError(
      CniCode.InvalidNetns,
      `CNI_NETNS "${req.netns}" is the plugin's own network namespace; refusing to configure the host (set CNI_NETNS_OVERRIDE=1 if this is intended)`,
    );
  }
}
