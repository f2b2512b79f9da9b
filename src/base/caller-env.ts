/**
 * base/caller-env.ts: the caller's environment, as the runtime gave it (pure).
 *
 * A runtime execs the launcher (build/multus, launcher/main.go), which starts the Bun executable with every caller
 * variable renamed `MULTUS_TS_HELD_<NAME>` (and `MULTUS_TS_LAUNCHER` set): the Bun runtime then reads none of them
 * before our code runs (BUN_OPTIONS, BUN_INSPECT, BUN_JSC_*, ...; docs/build.md, "The launcher"). Everything of
 * ours reads the caller's variables through `callerEnv`, and the delegates get exactly them. Without the launcher
 * (the bundle under node, the sources under vitest) the environment is used as it is.
 */

export const HELD_PREFIX = 'MULTUS_TS_HELD_';
export const LAUNCHER_VAR = 'MULTUS_TS_LAUNCHER';
/**
 * The Bun executable beside the launcher is `.multus-bun-<id>` (launcher/main.go; a name no plugin `type` can have):
 * the launcher carries it and writes it there on its first run; installers copy it too, so that run is not slow.
 */
export const PAYLOAD_PREFIX = '.multus-bun-';

export type Environment = Record<string, string | undefined>;

/** The caller's variables: the held ones restored when the launcher started us, else `env` itself. */
export function callerEnv(env: Environment): Record<string, string> {
  const out: Record<string, string> = {};
  const launched = env[LAUNCHER_VAR] !== undefined;
  for (const [key, value] of Object.entries(env)) {
    if (value === undefined) continue;
    if (!launched) out[key] = value;
    else if (key.startsWith(HELD_PREFIX) && key.length > HELD_PREFIX.length) out[key.slice(HELD_PREFIX.length)] = value;
  }
  return out;
}

/** The launcher's path (what `multus install` copies as `multus`), when it started us. */
export function launcherPath(env: Environment): string | undefined {
  return env[LAUNCHER_VAR] || undefined;
}

/** A raw `NAME=value` entry of /proc/self/environ as the caller gave it: the launcher's prefix taken off. */
export function callerEntry(entry: Buffer): Buffer {
  const prefix = Buffer.from(HELD_PREFIX, 'latin1');
  return entry.subarray(0, prefix.length).equals(prefix) ? entry.subarray(prefix.length) : entry;
}
