/**
 * daemon/components.ts: the daemon as a list of components under one cancel signal, as Go Multus' daemon is a
 * `Server.Start(ctx)` whose context a stop signal cancels (docs/resident.md, "Signals").
 *
 * Each component starts in order with the daemon's `AbortSignal` (aborted when a stop signal comes: each reacts to
 * it at once, e.g. `/readyz` answers 500), may say why it is not ready, and stops in reverse order, so what a
 * component uses is still there while it stops. A start that fails stops what had started, in reverse, and throws.
 * Tested by test/unit/daemon/components.test.ts.
 */

/** How the daemon stops: the signal that stopped it, and a second one (it cuts the waits of the stop short). */
export interface Stopping {
  reason: string;
  again: Promise<string>;
}

export interface Component {
  name: string;
  start(signal: AbortSignal): Promise<void> | void;
  /** Why it is not ready to serve yet, or undefined. */
  notReady?(): string | undefined;
  /** Undoes start: `how` is undefined when a later component failed to start (nothing to drain). */
  stop(how: Stopping | undefined): Promise<void> | void;
}

export interface Components {
  /** Aborts the daemon's signal, then stops every component in reverse order. */
  stop(how: Stopping): Promise<void>;
}

/** Starts `list` in order under `daemon`'s signal; a failure stops the started ones (reverse order) and throws. */
export async function startComponents(list: readonly Component[], daemon: AbortController): Promise<Components> {
  const started: Component[] = [];
  const stopAll = async (how: Stopping | undefined): Promise<void> => {
    for (const c of started.reverse()) await c.stop(how);
    started.length = 0;
  };
  try {
    for (const c of list) {
      await c.start(daemon.signal);
      started.push(c);
    }
  } catch (e) {
    daemon.abort(e);
    await stopAll(undefined);
    throw e;
  }
  return {
    async stop(how) {
      daemon.abort(new Error(how.reason));
      await stopAll(how);
    },
  };
}

/** The first component's reason not to be ready, in start order; undefined when all are ready. */
export function notReadyOf(list: readonly Component[]): string | undefined {
  for (const c of list) {
    const why = c.notReady?.();
    if (why !== undefined) return why;
  }
  return undefined;
}

/** A bad setting or an unusable resource at start: one line on stderr, exit 2 (daemon/main.ts). */
export class StartError extends Error {}
