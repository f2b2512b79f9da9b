/**
 * dynamic-plan.ts: what to plug and unplug so a running pod's attachments follow its networks annotation
 * (pure; the daemon's dynamic networks, docs/hotplug.md).
 *
 * The pod's current attachments are its scratch cache, each with its source (multus/attachments.ts
 * `fromCachedDelegates`). Those made from the config (the cluster network, the defaultNetworks, the auxiliary
 * chain), those not made from a NAD (a hot-plugged config) and those of a DRA claim are never touched. The others are matched with the
 * annotation's elements by
 * `<namespace>/<name>@<interface>`; an element without an interface matches the first unmatched attachment of
 * the same NAD, and when it has none it gets the first `net<N>` nobody uses or asks for. Unmatched attachments
 * are removed, unmatched elements added, in annotation order. Reordering the annotation changes nothing.
 */
import { createHash } from 'node:crypto';
import type { Attachment } from '../multus/attachments.ts';
import type { NetworkSelection } from '../multus/selection.ts';

export interface DynamicChange {
  kind: 'add' | 'remove';
  /** `<namespace>/<name>` */
  network: string;
  ifName: string;
  /** The element to add (its requests); undefined for removals. */
  selection?: NetworkSelection;
}

export const changeKey = (c: { network: string; ifName: string }): string => `${c.network}@${c.ifName}`;

/**
 * The name of the event that reports `what` (a change, or the annotation itself) for one networks annotation
 * value of one pod: `<pod>.<16 hex>`, the same in every life of every daemon, so the API server keeps one report
 * however often it is made (a second create is refused, 409) for as long as the event lives (docs/hotplug.md).
 */
export function reportName(pod: { name: string; uid: string }, annotation: string, what: string): string {
  const digest = createHash('sha256').update(`${pod.uid}\0${annotation}\0${what}`).digest('hex');
  return `${pod.name}.${digest.slice(0, 16)}`;
}

/**
 * An attachment the annotation owns: one of its elements (or a hot-plugged NAD), named `<namespace>/<nad>`; not a
 * network of a claim of our DRA driver (its claim owns it: docs/behaviour.md#claim-networks).
 */
const followsAnnotation = (a: Attachment): boolean =>
  (a.source === 'selection' || a.source === 'hotplug') && a.displayName.includes('/') && !a.request.claimNetwork;

export function planDynamicChanges(current: Attachment[], selections: NetworkSelection[]): DynamicChange[] {
  const owned = current.filter(followsAnnotation);
  const used = new Set(current.map((a) => a.ifName));
  const matched = new Set<Attachment>();
  const adds: DynamicChange[] = [];
  const pending: NetworkSelection[] = [];
  for (const sel of selections) {
    const network = `${sel.namespace}/${sel.name}`;
    const wanted = sel.request.ifname;
    const hit = owned.find(
      (a) => !matched.has(a) && a.displayName === network && (wanted === undefined || a.ifName === wanted),
    );
    if (hit) matched.add(hit);
    else pending.push(sel);
  }
  const removes: DynamicChange[] = owned
    .filter((a) => !matched.has(a))
    .map((a) => ({ kind: 'remove', network: a.displayName, ifName: a.ifName }));
  for (const r of removes) used.delete(r.ifName);
  const requested = new Set(selections.map((s) => s.request.ifname).filter((n): n is string => !!n));
  for (const sel of pending) {
    let ifName = sel.request.ifname;
    if (!ifName) {
      let n = 1;
      while (used.has(`net${n}`) || requested.has(`net${n}`)) n++;
      ifName = `net${n}`;
    }
    used.add(ifName);
    adds.push({ kind: 'add', network: `${sel.namespace}/${sel.name}`, ifName, selection: sel });
  }
  return [...removes, ...adds];
}
