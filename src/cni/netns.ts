/**
 * netns.ts: sanity checks on CNI_NETNS before any delegate runs (I/O: stat, statfs, and the namespace's type).
 *
 * ADD and CHECK need a network namespace that exists. No command may be pointed at the plugin's own
 * namespace: the delegates would then configure (or, on DEL, delete) the host's interfaces. libcni's skel
 * rejects that with code 8 unless CNI_NETNS_OVERRIDE is set; we check before running anything.
 *
 * A path that exists but is not a network namespace (a regular file, a directory, /dev/null, a mount namespace)
 * is refused on ADD and CHECK with code 4 before any delegate runs, and on DEL, GC and STATUS treated like a
 * missing one (the delegates get no CNI_NETNS), so that DEL cannot fail for ever (issue 28; docs/reliability.md).
 * A namespace file is on nsfs (statfs, as the plugins' ns.GetNS checks). Its type: a /proc/<pid>/ns/<type> link
 * names it ("net:[4026532281]"); a bind mount of a namespace (what runtimes pass) is asked with NS_GET_NSTYPE
 * through Bun's FFI where the process has it (base/libc.ts: the daemon). The thin plugin runs without the JIT and
 * so without FFI (docs/archive/performance.md): there a bind-mounted namespace of another type passes as Go Multus and
 * the plugins' ns.GetNS let it pass (its delegates' setns then fails); docs/reliability.md, finding 9.
 * Tested by test/unit/host/handle.test.ts (the netns rule per command) and test/fixture/hardening-caches.test.ts
 * (finding 9, on build/multus).
 */
import { closeSync, openSync, readlinkSync, statSync, statfsSync } from 'node:fs';
import { CniCode, CniError } from '../base/errors.ts';
import { libc } from '../base/libc.ts';
import type { CallEnv } from './request.ts';

const OWN_NETNS = '/proc/self/ns/net';
const NSFS_MAGIC = 0x6e736673;
const NS_GET_NSTYPE = 0xb703; // _IO(0xb7, 0x3)
const CLONE_NEWNET = 0x40000000;

/** What CNI_NETNS names: nothing, a network namespace, or something else (described). */
export type NetnsKind =
  { kind: 'missing' } | { kind: 'netns'; dev: number; ino: number } | { kind: 'other'; what: string };

const NS_LINK = /^([a-z_]+):\[\d+\]$/;

/** Whether an nsfs file is a network namespace; undefined when that cannot be told (see above). */
function isNetworkNamespace(path: string): boolean | undefined {
  try {
    const kind = NS_LINK.exec(readlinkSync(path))?.[1];
    if (kind !== undefined) return kind === 'net';
  } catch {
    // not a link: a bind mount
  }
  const c = libc();
  if (!c) return undefined;
  let fd: number | undefined;
  try {
    fd = openSync(path, 'r');
    const type = c.ioctl(fd, NS_GET_NSTYPE, 0);
    return type < 0 ? undefined : type === CLONE_NEWNET;
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

export function netnsKind(path: string): NetnsKind {
  let st;
  try {
    st = statSync(path);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return { kind: 'missing' };
    return { kind: 'other', what: `it cannot be read: ${code ?? String(e)}` };
  }
  if (!st.isFile()) return { kind: 'other', what: st.isDirectory() ? 'a directory' : 'not a namespace file' };
  let fsType: number;
  try {
    fsType = Number(statfsSync(path).type);
  } catch {
    return { kind: 'other', what: 'a file whose file system cannot be read' };
  }
  if (fsType !== NSFS_MAGIC) return { kind: 'other', what: 'a file, not a namespace' };
  if (isNetworkNamespace(path) === false) return { kind: 'other', what: 'a namespace of another type' };
  return { kind: 'netns', dev: st.dev, ino: st.ino };
}

/**
 * `mustExist`: ADD and CHECK need the namespace; DEL of one that is already gone is normal. Returns the request
 * the command runs with: on DEL, GC and STATUS one whose CNI_NETNS is not a network namespace goes without it.
 */
export function checkNetns<R extends Pick<CallEnv, 'netns' | 'netnsOverride'>>(
  req: R,
  mustExist: boolean,
  kindOf = netnsKind,
): R {
  if (!req.netns) return req;
  const target = kindOf(req.netns);
  if (target.kind === 'missing') {
    if (mustExist) {
      throw new CniError(
        CniCode.InvalidEnv,
        `CNI_NETNS "${req.netns}" does not exist: pass the path of the container's network namespace`,
      );
    }
    return req;
  }
  if (target.kind === 'other') {
    if (mustExist) {
      throw new CniError(
        CniCode.InvalidEnv,
        `CNI_NETNS "${req.netns}" is not a network namespace (${target.what}): pass the path of the container's network namespace`,
      );
    }
    return { ...req, netns: '' };
  }
  if (req.netnsOverride) return req;
  let own;
  try {
    own = statSync(OWN_NETNS);
  } catch {
    return req; // no procfs: nothing to compare with
  }
  if (own.dev === target.dev && own.ino === target.ino) {
    throw new CniError(
      CniCode.InvalidNetns,
      `CNI_NETNS "${req.netns}" is the plugin's own network namespace; refusing to configure the host (set CNI_NETNS_OVERRIDE=1 if this is intended)`,
    );
  }
  return req;
}
