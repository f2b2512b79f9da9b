/**
 * daemon/exec.ts: the daemon's wrappers around the plugin exec seam (src/cni/exec.ts).
 *
 * `chrootExec` runs delegates inside another root, as Multus thick does from its DaemonSet (`chrootDir`, e.g.
 * the host's / mounted at /hostroot): plugins are looked up inside the root and run as `<wrapper> <root> <plugin>`
 * (argv, no shell; the wrapper calls chroot(2) then execs the plugin in place, so the process, its group and its
 * timeout kill are the plugin's own). The wrapper is the launcher the daemon was started by, under its name
 * `multus-chroot` (launcher/main.go; one exec, as Multus' Go sets `Chroot` on the child it forks), else chroot(8),
 * a program whose own start costs each delegate call about 0.6 ms more (docs/archive/performance.md, "The daemon's
 * delegates without chroot(8)"). `timedExec` reports each plugin lookup and each delegate call's duration
 * and outcome to the metrics. `boundedExec` runs at most `delegateConcurrency` plugin processes at once (the
 * others wait, first come first served): the daemon's container memory limit counts every delegate it runs, and
 * the daemon's own memory grows with the calls in flight (docs/resident.md, "Memory").
 */
import { existsSync } from 'node:fs';
import { basename, join } from 'node:path';
import type { Exec } from '../cni/exec.ts';
import type { Metrics } from './metrics.ts';

const CHROOT_PROGRAMS = ['/usr/sbin/chroot', '/usr/bin/chroot', '/sbin/chroot', '/bin/chroot'];

export function findChrootProgram(exists: (p: string) => boolean = existsSync): string | undefined {
  return CHROOT_PROGRAMS.find((p) => exists(p));
}

/** What runs a delegate inside the root: `program` (with `argv0` as its argv[0], when given) `<root> <plugin>`. */
export interface ChrootWrapper {
  program: string;
  argv0?: string;
}

/** The launcher's name for its chroot role (launcher/main.go, chrootName). */
const LAUNCHER_CHROOT_NAME = 'multus-chroot';

/** The launcher that started this process, run as `multus-chroot`; else chroot(8); undefined when neither is here. */
export function chrootWrapper(
  launcher: string | undefined,
  exists: (p: string) => boolean = existsSync,
): ChrootWrapper | undefined {
  if (launcher && exists(launcher)) return { program: launcher, argv0: LAUNCHER_CHROOT_NAME };
  const program = findChrootProgram(exists);
  return program ? { program } : undefined;
}

export function chrootExec(inner: Exec, root: string, wrapper: ChrootWrapper): Exec {
  return {
    findInPath(type, dirs) {
      const found = inner.findInPath(
        type,
        dirs.map((d) => join(root, d)),
      );
      return found.slice(join(root, '/').length - 1); // the same path as seen inside the root
    },
    execPlugin({ path, args = [], ...run }) {
      const argv0 = wrapper.argv0 === undefined ? {} : { argv0: wrapper.argv0 };
      return inner.execPlugin({ ...run, path: wrapper.program, args: [root, path, ...args], ...argv0 });
    },
  };
}

export function timedExec(inner: Exec, metrics: Metrics): Exec {
  return {
    findInPath(type, dirs) {
      let ok = false;
      try {
        const path = inner.findInPath(type, dirs);
        ok = true;
        return path;
      } finally {
        metrics.pluginLookup(type, ok);
      }
    },
    async execPlugin(run) {
      const t = performance.now();
      let ok = false;
      try {
        const out = await inner.execPlugin(run);
        ok = out.exitCode === 0;
        return out;
      } finally {
        metrics.delegateCall(basename(run.path), run.env.CNI_COMMAND ?? '', (performance.now() - t) / 1000, ok);
      }
    },
  };
}

/** At most `limit` plugin processes of `inner` at once (0 = no limit); the rest wait in arrival order. */
export function boundedExec(inner: Exec, limit: number): Exec {
  if (limit <= 0) return inner;
  let running = 0;
  const waiting: (() => void)[] = [];
  const acquire = (): Promise<void> => {
    if (running < limit) {
      running++;
      return Promise.resolve();
    }
    return new Promise((resolve) => waiting.push(resolve));
  };
  const release = (): void => {
    const next = waiting.shift();
    if (next) next();
    else running--;
  };
  return {
    findInPath: (type, dirs) => inner.findInPath(type, dirs),
    async execPlugin(run) {
      await acquire();
      try {
        return await inner.execPlugin(run);
      } finally {
        release();
      }
    },
  };
}

/** An Exec that says how many plugins it is running now. */
export interface CountedExec extends Exec {
  running(): number;
}

/** `inner`, counting its plugins running now (the shutdown says how many delegates its end killed). */
export function countedExec(inner: Exec): CountedExec {
  let running = 0;
  return {
    findInPath: (type, dirs) => inner.findInPath(type, dirs),
    async execPlugin(run) {
      running++;
      try {
        return await inner.execPlugin(run);
      } finally {
        running--;
      }
    },
    running: () => running,
  };
}
