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
/**
 * The rest of a held variable too long to carry in one (within 15 bytes of the kernel's 128 KiB a string): the
 * launcher holds it as `MULTUS_TS_HELD_<NAME>=<start>` and `MULTUS_TS_MORE_<NAME>=<rest>` (launcher/env.go).
 */
export const MORE_PREFIX = 'MULTUS_TS_MORE_';
export const LAUNCHER_VAR = 'MULTUS_TS_LAUNCHER';

export type Environment = Record<string, string | undefined>;

/** The caller's variables: the held ones restored when the launcher started us, else `env` itself. */
export function callerEnv(env: Environment): Record<string, string> {
  const out: Record<string, string> = {};
  const launched = env[LAUNCHER_VAR] !== undefined;
  const more: [string, string][] = [];
  for (const [key, value] of Object.entries(env)) {
    if (value === undefined) continue;
    if (!launched) out[key] = value;
    else if (key.startsWith(HELD_PREFIX) && key.length > HELD_PREFIX.length) out[key.slice(HELD_PREFIX.length)] = value;
    else if (key.startsWith(MORE_PREFIX)) more.push([key.slice(MORE_PREFIX.length), value]);
  }
  for (const [key, rest] of more) if (out[key] !== undefined) out[key] += rest;
  return out;
}

/** The launcher's path (what `multus install` copies as `multus`), when it started us. */
export function launcherPath(env: Environment): string | undefined {
  return env[LAUNCHER_VAR] || undefined;
}

/**
 * A raw `NAME=value` entry of /proc/self/environ as the caller gave it: the launcher's prefix taken off (the rest of
 * a variable held in two parts comes out as `NAME=<rest>`).
 */
export function callerEntry(entry: Buffer): Buffer {
  for (const p of [HELD_PREFIX, MORE_PREFIX]) {
    const prefix = Buffer.from(p, 'latin1');
    if (entry.subarray(0, prefix.length).equals(prefix)) return entry.subarray(prefix.length);
  }
  return entry;
}
