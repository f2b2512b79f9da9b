/**
 * renamed-conf.ts: noticing that another program renamed our generated 00-multus.conf(list) away (pure;
 * docs/install.md, "When another CNI renames 00-multus.conf").
 *
 * Cilium with `cni.exclusive: true` (its Helm chart's default) renames every CNI config in the runtime's conf dir
 * but its own to `<name>.cilium_bak` (Multus #972); other CNIs' installers do the like. The runtime then stops
 * calling multus and pods get the primary network alone, silently. The config writers (`multus install`'s watch and
 * the daemon's) write the file again anyway; with this they also say why it was gone, in the log and as a Warning
 * event on the Node.
 */

/** The event's reason. */
export const RENAMED_REASON = 'MultusConfigRenamed';

/** Suffixes of other writers' temp files (Go Multus' entrypoint writes `<name>.new`): not a rename away. */
const TEMP_SUFFIXES: ReadonlySet<string> = new Set(['new', 'tmp', 'temp']);

export interface RenamedConf {
  /** Our name (`00-multus.conf`). */
  own: string;
  /** What it is called now (`00-multus.conf.cilium_bak`). */
  renamed: string;
}

/**
 * The name another program gave our file, among the conf dir's `names`, when none of `generated` (the names we
 * write) is there: `<generated>.<suffix>`, e.g. `00-multus.conf.cilium_bak`. Undefined when ours is present or no
 * such file exists; with several, the first by name.
 */
export function renamedAway(names: readonly string[], generated: readonly string[]): RenamedConf | undefined {
  if (generated.some((g) => names.includes(g))) return undefined;
  for (const renamed of [...names].sort()) {
    const own = generated.find((g) => renamed.startsWith(`${g}.`));
    if (own === undefined) continue;
    const suffix = renamed.slice(own.length + 1);
    if (suffix !== '' && !TEMP_SUFFIXES.has(suffix)) return { own, renamed };
  }
  return undefined;
}

/** The warning: what happened, who does it, what to change, and what we do now. */
export function renamedAwayMessage(dir: string, { own, renamed }: RenamedConf): string {
  const who = renamed.endsWith('.cilium_bak')
    ? 'Cilium renames every other CNI config when its cni.exclusive is true: set cni.exclusive=false ' +
      '(Helm value) to run Cilium as the primary network under multus'
    : "another CNI's installer renames the configs it does not own: configure it to leave them alone";
  return (
    `${own} in ${dir} was renamed to ${renamed} by another program, so the runtime ran the primary network ` +
    `alone for new pods; ${who}. Writing ${own} again`
  );
}

/** The event's reason when another writer's 00-multus.conf is found (docs/install.md, "Two writers"). */
export const FOREIGN_REASON = 'MultusConfigForeign';

/**
 * The warning when the file we are about to write holds what we did not write: at start, another Multus's
 * (a second DaemonSet, rke2's, an installer), or, later, a change by another program after our write.
 */
export function foreignConfMessage(path: string, when: 'start' | 'later'): string {
  const what =
    when === 'start'
      ? `${path} was not written by multus-ts with this configuration`
      : `${path} was changed by another program after multus-ts wrote it`;
  return (
    `${what}: another Multus DaemonSet or installer may write it too, and two writers of one file take turns ` +
    '(kubectl get ds -A | grep -i multus; remove the other one). Writing ours'
  );
}
