/**
 * overlap.ts: which attachments of one call may run at the same time, and the runner that keeps to it
 * (docs/behaviour.md#parallel-attachments). Pure but for the promises it is handed.
 *
 * Without `parallelAttachments` every attachment is a step of its own, in Multus' order. With it the attachments
 * go in steps: the cluster network and every other network at once, at most PARALLEL_ATTACHMENTS at a time, taken
 * in Multus' order, then each network that takes its master link inside the pod (`linkInContainer`: a VLAN on
 * another attachment's interface) alone, in order, then the auxiliary chain alone (its plugins act on the whole
 * pod, so every interface must exist first).
 * DEL runs the steps, and the attachments in each, backwards. Nothing here holds a slot of the daemon's delegate
 * bound (daemon/exec.ts) while it waits: each plugin process takes one only while it runs.
 */
import type { Network } from '../cni/network.ts';
import type { AttachmentSource } from './attachments.ts';

/** The most attachments of one call that run at once (docs/behaviour.md#parallel-attachments). */
export const PARALLEL_ATTACHMENTS = 8;

/** What places an attachment: its source (none: found in a result cache only, a secondary's) and its network. */
export interface Placed {
  source?: AttachmentSource | undefined;
  network?: Network;
}

/** A plugin of the network takes its master link inside the pod, so it needs the other attachments first. */
function buildsOnThePod(network: Network | undefined): boolean {
  return network?.plugins.some((plugin) => plugin.linkInContainer === true) ?? false;
}

/**
 * The steps of a call's attachments, as indexes into `placed` (in Multus' order): one each when serial, else the
 * groups above, each in its own order. `reverse` (DEL): the steps and their members backwards.
 */
export function attachmentSteps(placed: Placed[], parallel: boolean, reverse = false): number[][] {
  let steps: number[][];
  if (!parallel) steps = placed.map((_, i) => [i]);
  else {
    const together: number[] = [];
    const dependent: number[] = [];
    const aux: number[] = [];
    placed.forEach(({ source, network }, i) => {
      if (source === 'auxiliary') aux.push(i);
      else if (source !== 'cluster' && buildsOnThePod(network)) dependent.push(i);
      else together.push(i);
    });
    steps = [together, ...dependent.map((i) => [i]), aux].filter((step) => step.length > 0);
  }
  return reverse ? steps.reverse().map((step) => [...step].reverse()) : steps;
}

export type Outcome<T> = { kind: 'ok'; value: T } | { kind: 'failed'; error: unknown } | { kind: 'not-run' };

export interface StepsRun<T> {
  /** By index into `placed`. */
  outcomes: Outcome<T>[];
  /** The failures in the order a serial call meets them (the steps' order), with their indexes. */
  failures: { index: number; error: unknown }[];
}

export interface RunOptions {
  parallel: boolean;
  /** DEL and rollback: the steps backwards. */
  reverse?: boolean;
  /** ADD: no attachment starts once one failed (the running ones are waited for; the rest stay 'not-run'). */
  stopOnFailure?: boolean;
}

/**
 * Runs `run(i)` for every attachment (`placed` in Multus' order), one step after another, at most
 * PARALLEL_ATTACHMENTS of a step at once (1 when serial), taken in the step's order. Never rejects.
 */
export async function runAttachments<T>(
  placed: Placed[],
  options: RunOptions,
  run: (index: number) => Promise<T>,
): Promise<StepsRun<T>> {
  const steps = attachmentSteps(placed, options.parallel, options.reverse);
  const limit = options.parallel ? PARALLEL_ATTACHMENTS : 1;
  const outcomes: Outcome<T>[] = placed.map(() => ({ kind: 'not-run' }));
  let stopped = false;
  for (const step of steps) {
    if (stopped) break;
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < step.length && !stopped) {
        const i = step[next++]!;
        try {
          outcomes[i] = { kind: 'ok', value: await run(i) };
        } catch (error) {
          outcomes[i] = { kind: 'failed', error };
          if (options.stopOnFailure) stopped = true;
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(limit, step.length) }, worker));
  }
  const failures: StepsRun<T>['failures'] = [];
  for (const index of steps.flat()) {
    const outcome = outcomes[index]!;
    if (outcome.kind === 'failed') failures.push({ index, error: outcome.error });
  }
  return { outcomes, failures };
}
