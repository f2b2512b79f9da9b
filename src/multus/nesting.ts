/**
 * multus/nesting.ts: the meta-plugin is never its own delegate (docs/reliability.md, "No nested multus").
 *
 * A delegate runs as root with the config it is handed. When that delegate is multus itself, the config is read as
 * a whole multus configuration, whose `binDir`, `kubeconfig`, `cniDir`, log files and `clusterNetwork` are the
 * node's to choose, not the author's of a NAD: a namespace user who may create a NAD could make the root plugin
 * exec a file of theirs (Go Multus v4.3.0 has the same hole). A nested multus also waits for the container lock
 * its parent holds, and a nested `multus-shim` sends the call back into the daemon that is running it.
 *
 * So a delegate network whose type (or a conflist plugin's type) is `multus` or `multus-shim` is refused where the
 * network is loaded (a NAD, a delegate of the node's config: pure, `assertNoMetaPlugin`), and the exec seam refuses
 * any plugin file that is this project's executable or shim under another name (`refuseNestedExec`): each carries a
 * 16-byte mark at its end (the launcher's trailer, scripts/build-steps/launcher.mjs; the shim's,
 * scripts/build-steps/shim.mjs). `passthru` is the one name of ours a delegate may have: it is the auxiliary
 * chain's passthru plugin, which reads nothing from its config but `cniVersion` and `prevResult`.
 */
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { CniCode, CniError } from '../base/errors.ts';
import type { Exec } from '../cni/exec.ts';
import type { Network } from '../cni/network.ts';

/** The meta-plugin's own types (Multus' names for the thin plugin and the thick shim). */
const META_PLUGIN_TYPES: ReadonlySet<string> = new Set(['multus', 'multus-shim']);

/** The marks at the end of our executable (the launcher's trailer) and of our shim. */
const OWN_MARKS = ['multus-ts-bun\x00\x00\x01', 'multus-ts-shim\x00\x01'].map((m) => Buffer.from(m, 'latin1'));
const MARK_BYTES = 16;

/** The type our executable may run under as a delegate: the auxiliary chain's passthru plugin (multus/auxchain.ts). */
const PASSTHRU = 'passthru';

function nestedError(type: string, where: string): CniError {
  return new CniError(
    CniCode.InvalidConfig,
    `${where}: type "${type}" is the multus meta-plugin itself, which may not be a delegate`,
    {
      details:
        "a delegate is a network's own plugin (bridge, macvlan, ...); multus's node-wide settings (binDir, kubeconfig, cniDir, logFile, clusterNetwork) come only from the node's multus config",
    },
  );
}

/** Refuses a network any of whose plugins is the meta-plugin (pure); `where` names it (a NAD, a delegate). */
export function assertNoMetaPlugin(network: Network, where: string): void {
  for (const plugin of network.plugins) {
    if (META_PLUGIN_TYPES.has(plugin.type)) throw nestedError(plugin.type, where);
  }
}

/** Whether the file at `path` ends with one of our marks (false when it cannot be read). */
export function isOwnExecutable(path: string): boolean {
  let fd: number | undefined;
  try {
    fd = openSync(path, 'r');
    const size = fstatSync(fd).size;
    if (size < MARK_BYTES) return false;
    const tail = Buffer.alloc(MARK_BYTES);
    if (readSync(fd, tail, 0, MARK_BYTES, size - MARK_BYTES) !== MARK_BYTES) return false;
    return OWN_MARKS.some((m) => m.equals(tail));
  } catch {
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * The exec seam that refuses to find the meta-plugin as a delegate: by type name, and by the mark at the end of
 * the file a type names (a copy or link of our executable or shim under any name but `passthru`).
 */
export function refuseNestedExec(inner: Exec, isOwn: (path: string) => boolean = isOwnExecutable): Exec {
  return {
    findInPath(type, dirs) {
      if (META_PLUGIN_TYPES.has(type)) throw nestedError(type, 'delegate plugin');
      const path = inner.findInPath(type, dirs);
      if (type !== PASSTHRU && isOwn(path)) throw nestedError(type, `delegate plugin ${path}`);
      return path;
    },
    execPlugin: (run) => inner.execPlugin(run),
  };
}
