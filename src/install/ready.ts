/**
 * ready.ts: `multus --is-default-ready [FILE] [--wait SECONDS] [--cni-conf-dir DIR] [--host-prefix DIR]`.
 *
 * Ready when FILE exists; without FILE, when the installed 00-multus.conf(list) in the conf dir exists and its
 * `readinessindicatorfile` (if any; under --host-prefix, as a container sees the host) exists. Not ready yet:
 * checks again on the conf's `readinessBackoff` schedule (src/multus/readiness.ts), or for --wait seconds
 * (`--wait 0` checks once), then answers one line. The plan of the checks is pure (`readySchedule`); the
 * file checks and sleeps are `ReadinessDeps`.
 * Tested by test/unit/install/install-conf.test.ts, test/install/cli.test.ts.
 */
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { backoffSchedule, DEFAULT_BACKOFF, type BackoffOptions } from '../base/backoff.ts';
import type { ReadinessDeps } from '../multus/readiness.ts';
import { InstallError } from './options.ts';
import { messageOf } from '../base/errors.ts';
import { parseJson } from '../base/json.ts';

export interface ReadyArgs {
  file: string;
  waitSeconds: number | null;
  cniConfDir: string;
  hostPrefix: string;
}

export function parseReadyArgs(argv: readonly string[]): ReadyArgs {
  const a: ReadyArgs = { file: '', waitSeconds: null, cniConfDir: '/etc/cni/net.d', hostPrefix: '' };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--is-default-ready') continue;
    const m = /^--(wait|cni-conf-dir|host-prefix)(?:=(.*))?$/s.exec(arg);
    if (m) {
      const v = m[2] ?? argv[++i];
      if (v === undefined) throw new InstallError(`--${m[1]} needs a value`);
      if (m[1] === 'wait') {
        if (!/^\d+(\.\d+)?$/.test(v)) throw new InstallError(`--wait ${v}: give a number of seconds >= 0`);
        a.waitSeconds = Number(v);
      } else if (m[1] === 'cni-conf-dir') a.cniConfDir = v;
      else a.hostPrefix = v;
    } else if (arg.startsWith('-') || a.file !== '') {
      throw new InstallError(
        `unexpected argument "${arg}": usage: multus --is-default-ready [FILE] [--wait SECONDS] ` +
          '[--cni-conf-dir DIR] [--host-prefix DIR]',
      );
    } else {
      a.file = arg;
    }
  }
  return a;
}

/** The sleeps between checks: the backoff's, or --wait seconds cut into the backoff's steps. */
export function readySchedule(waitSeconds: number | null, backoff: BackoffOptions, random?: () => number): number[] {
  const steps = backoffSchedule(backoff, random);
  if (waitSeconds === null) return steps;
  const budget = Math.round(waitSeconds * 1000);
  const out: number[] = [];
  let used = 0;
  let i = 0;
  while (used < budget) {
    const next = Math.max(1, Math.min(steps[Math.min(i, steps.length - 1)] ?? budget, budget - used));
    out.push(next);
    used += next;
    i++;
  }
  return out;
}

const CONF_NAMES = ['00-multus.conf', '00-multus.conflist'];

interface Installed {
  path: string;
  indicator: string;
  backoff: BackoffOptions;
}

/** The installed conf's indicator and backoff; null when there is none; a reason string when it is unreadable. */
async function installedConf(dir: string): Promise<Installed | null | string> {
  for (const name of CONF_NAMES) {
    const path = join(dir, name);
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') continue;
      return `cannot read ${path}: ${(e as Error).message}`;
    }
    let conf: Record<string, unknown>;
    try {
      const parsed = parseJson(text, 'its text') as Record<string, unknown>;
      const plugins = parsed.plugins;
      conf = Array.isArray(plugins) ? (plugins[0] as Record<string, unknown>) : parsed;
      if (conf === null || typeof conf !== 'object') throw new Error('no plugin object');
    } catch (e) {
      return `${path} is not a multus config: ${messageOf(e)}`;
    }
    const indicator = typeof conf.readinessindicatorfile === 'string' ? conf.readinessindicatorfile : '';
    const b = conf.readinessBackoff as Partial<BackoffOptions> | undefined;
    return { path, indicator, backoff: b && typeof b === 'object' ? { ...DEFAULT_BACKOFF, ...b } : DEFAULT_BACKOFF };
  }
  return null;
}

export interface ReadyAnswer {
  ready: boolean;
  line: string;
}

/** Checks (and waits) as the arguments say. */
export async function isDefaultReady(a: ReadyArgs, deps: ReadinessDeps, random?: () => number): Promise<ReadyAnswer> {
  let backoff = DEFAULT_BACKOFF;
  const check = async (): Promise<ReadyAnswer> => {
    if (a.file !== '') {
      const path = resolve(a.file);
      return (await deps.exists(path))
        ? { ready: true, line: `ready: ${path} exists` }
        : { ready: false, line: `not ready: the readiness indicator file ${path} does not exist` };
    }
    const conf = await installedConf(a.cniConfDir);
    if (conf === null) {
      return {
        ready: false,
        line: `not ready: no 00-multus.conf or 00-multus.conflist in ${a.cniConfDir} (has multus install run?)`,
      };
    }
    if (typeof conf === 'string') return { ready: false, line: `not ready: ${conf}` };
    backoff = conf.backoff;
    if (conf.indicator === '') return { ready: true, line: `ready: ${conf.path} names no readinessindicatorfile` };
    const path = resolve(join(a.hostPrefix || '/', conf.indicator));
    return (await deps.exists(path))
      ? { ready: true, line: `ready: ${path} exists` }
      : { ready: false, line: `not ready: the readinessindicatorfile ${path} of ${conf.path} does not exist` };
  };
  let answer = await check();
  if (answer.ready) return answer;
  const schedule = readySchedule(a.waitSeconds, backoff, random);
  for (const ms of schedule) {
    await deps.sleep(ms);
    answer = await check();
    if (answer.ready) return answer;
  }
  const total = schedule.reduce((s, ms) => s + ms, 0) / 1000;
  return { ready: false, line: `${answer.line} (after ${schedule.length + 1} checks over ${total} s)` };
}
