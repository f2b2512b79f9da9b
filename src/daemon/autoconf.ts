/**
 * daemon/autoconf.ts: the 00-multus.conf the daemon serves (`multusConfigFile: auto`), as Multus thick's
 * config manager writes it.
 *
 * Pure part: `pickMaster` chooses the master (primary) network config among a directory's file names (first by
 * name among *.conf, *.conflist, *.json, or `multusMasterCNI`; never a 00-multus* file and never a config of
 * type multus/multus-shim, so the daemon cannot pick its own output), and `generateMultusConf` builds the file:
 * type `multus-shim`, `daemonSocketDir`, `clusterNetwork` = the master's path, and every 00-multus.conf key of
 * the daemon config, so a thin call with the same file behaves like the daemon (the shim's fallback).
 *
 * I/O part: `startConfigWriter` watches the directory (fs.watch, plus a poll because inotify misses changes
 * on some mounts), writes the file atomically (0600, as Multus) when its content changes, removes it when the
 * master disappears, and on `stop()` removes the file if it wrote it, unless told `{ remove: false }` (the
 * daemon passes its `cleanupConfigOnExit`, false by default: the file outlives the daemon, docs/resident.md).
 */
import type { FSWatcher } from 'node:fs';
import { readdirSync, readFileSync, unlinkSync, watch } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { messageOf } from '../base/errors.ts';
import type { Logger } from '../base/log.ts';
import { writeFileAtomic } from '../base/files.ts';
import type { DaemonConfig } from './config.ts';

export const GENERATED_NAME = '00-multus.conf';
const EXTS = ['.conf', '.conflist', '.json'];

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A config we must never use as the master: ours (by name) or any multus config (by type). */
function isMultusConfig(name: string, bytes: Buffer | undefined): boolean {
  if (name.startsWith('00-multus')) return true;
  if (bytes === undefined) return false;
  try {
    const v: unknown = JSON.parse(bytes.toString('utf8'));
    return isObject(v) && (v.type === 'multus' || v.type === 'multus-shim');
  } catch {
    return false;
  }
}

/**
 * The master config's file name among `names`, or undefined. `read` gives a file's bytes (undefined if it
 * cannot be read); unreadable or non-JSON files are skipped like libcni skips them.
 */
export function pickMaster(
  names: string[],
  masterName: string,
  read: (name: string) => Buffer | undefined,
): string | undefined {
  const candidates =
    masterName !== '' ? [masterName] : [...names].sort().filter((n) => EXTS.some((e) => n.endsWith(e)));
  for (const name of candidates) {
    if (!names.includes(name) || name.startsWith('.')) continue;
    const bytes = read(name);
    if (bytes === undefined || isMultusConfig(name, bytes)) continue;
    try {
      if (isObject(JSON.parse(bytes.toString('utf8')))) return name;
    } catch {
      // not JSON: not a network config
    }
  }
  return undefined;
}

/** The generated 00-multus.conf's text for the master at `masterPath` with content `master` (pure). */
export function generateMultusConf(cfg: DaemonConfig, masterPath: string, master: Record<string, unknown>): string {
  const plugins = Array.isArray(master.plugins) ? master.plugins.filter(isObject) : [master];
  const capabilities: Record<string, boolean> = {};
  for (const p of plugins) {
    if (!isObject(p.capabilities)) continue;
    for (const [k, v] of Object.entries(p.capabilities)) if (v === true) capabilities[k] = true;
  }
  for (const [k, v] of Object.entries(cfg.capabilities)) if (v) capabilities[k] = true;
  const masterVersion = typeof master.cniVersion === 'string' ? master.cniVersion : '';
  const own = typeof master.name === 'string' && master.name !== '' ? master.name : undefined;
  const name = cfg.overrideNetworkName && own !== undefined ? own : 'multus-cni-network';
  const out: Record<string, unknown> = {
    ...cfg.multusKeys,
    cniVersion: cfg.cniVersion || masterVersion || '1.0.0',
    name,
    type: 'multus-shim',
    ...(cfg.daemonSocketDir ? { daemonSocketDir: cfg.daemonSocketDir } : {}),
    clusterNetwork: masterPath,
  };
  if (Object.keys(capabilities).length > 0) out.capabilities = capabilities;
  return JSON.stringify(out, null, 2) + '\n';
}

/**
 * The socket dir the generated config gives the shim (pure; `sameDir` compares two paths' inodes):
 * `daemonSocketDir` when the config sets it; else `socketDir`, unless the daemon runs in a container with the
 * host's root at `chrootDir` and socketDir is not the host's path of its directory (Multus' thick manifest:
 * socketDir /host/run/multus/, the host's /run/multus): then '' (the key left out), so the shim uses its default
 * /run/multus/ as Multus' does. `warning` says when that default is not the socket's directory either.
 */
export function shimSocketDir(
  cfg: Pick<DaemonConfig, 'socketDir' | 'daemonSocketDir' | 'daemonSocketDirSet' | 'chrootDir'>,
  sameDir: (a: string, b: string) => boolean,
): { dir: string; warning?: string } {
  if (cfg.daemonSocketDirSet || !cfg.chrootDir) return { dir: cfg.daemonSocketDir };
  if (sameDir(cfg.socketDir, join(cfg.chrootDir, cfg.socketDir))) return { dir: cfg.socketDir };
  if (sameDir(cfg.socketDir, join(cfg.chrootDir, '/run/multus'))) return { dir: '' };
  return {
    dir: '',
    warning:
      `socketDir ${cfg.socketDir} is neither the host's ${cfg.socketDir} nor its /run/multus (seen under ` +
      `chrootDir ${cfg.chrootDir}): the shim will not find the socket; set daemonSocketDir to the host's path`,
  };
}

export interface ConfigWriter {
  /** Re-reads the directory now and writes/removes the file as needed. */
  sync(): void;
  /** The path of the file the daemon serves ('' until there is one). */
  current(): string;
  stop(opts?: { remove?: boolean }): void;
}

export interface ConfigWriterOptions {
  cfg: DaemonConfig;
  log: Logger;
  pollMs?: number;
}

function readOrUndefined(path: string): Buffer | undefined {
  try {
    return readFileSync(path);
  } catch {
    return undefined;
  }
}

export function startConfigWriter(o: ConfigWriterOptions): ConfigWriter {
  const { cfg, log } = o;
  const target = join(cfg.cniConfigDir, GENERATED_NAME);
  let written: string | undefined; // the content we last wrote
  let writtenPath = target; // where we wrote it
  let lastMaster = '';

  const remove = (why: string): void => {
    if (written === undefined) return;
    try {
      unlinkSync(writtenPath);
      log.verbose(`removed ${writtenPath}: ${why}`);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') log.error(`cannot remove ${writtenPath}: ${messageOf(e)}`);
    }
    written = undefined;
  };

  const desired = (): { text: string; master: string } | undefined => {
    if (cfg.multusConfigFile !== 'auto') {
      // A given file is served as is (copied into cniConfigDir when it lives elsewhere, as Multus does).
      const bytes = readOrUndefined(cfg.multusConfigFile);
      return bytes === undefined ? undefined : { text: bytes.toString('utf8'), master: cfg.multusConfigFile };
    }
    let names: string[];
    try {
      names = readdirSync(cfg.multusAutoconfigDir);
    } catch {
      return undefined;
    }
    const name = pickMaster(names, cfg.multusMasterCNI, (n) => readOrUndefined(join(cfg.multusAutoconfigDir, n)));
    if (name === undefined) return undefined;
    const path = join(cfg.multusAutoconfigDir, name);
    const bytes = readOrUndefined(path);
    if (bytes === undefined) return undefined;
    const master = JSON.parse(bytes.toString('utf8')) as Record<string, unknown>;
    return { text: generateMultusConf(cfg, path, master), master: path };
  };

  const servedPath = (): string =>
    cfg.multusConfigFile !== 'auto' && resolve(dirname(cfg.multusConfigFile)) === resolve(cfg.cniConfigDir)
      ? cfg.multusConfigFile
      : cfg.multusConfigFile !== 'auto'
        ? join(cfg.cniConfigDir, basename(cfg.multusConfigFile))
        : target;

  const sync = (): void => {
    try {
      const want = desired();
      if (want === undefined) {
        if (lastMaster !== '') {
          log.error(`the master CNI config ${lastMaster} is gone; waiting for one in ${cfg.multusAutoconfigDir}`);
        }
        lastMaster = '';
        remove('no master CNI config');
        return;
      }
      const path = servedPath();
      if (path === cfg.multusConfigFile) {
        lastMaster = want.master;
        return; // already where the runtime reads it
      }
      if (written === want.text && readOrUndefined(path)?.toString('utf8') === want.text) return;
      writeFileAtomic(path, want.text, 0o600);
      if (want.master !== lastMaster) log.verbose(`wrote ${path} for the master CNI config ${want.master}`);
      written = want.text;
      writtenPath = path;
      lastMaster = want.master;
    } catch (e) {
      log.error(`cannot write the multus config: ${messageOf(e)}`);
    }
  };

  const watchers: FSWatcher[] = [];
  const dirs = cfg.multusConfigFile === 'auto' ? [cfg.multusAutoconfigDir] : [dirname(cfg.multusConfigFile)];
  for (const dir of dirs) {
    try {
      const w = watch(dir, { persistent: false }, () => sync());
      w.on('error', () => undefined);
      watchers.push(w);
    } catch {
      // the directory may not exist yet: the poll below notices when it does
    }
  }
  const timer = setInterval(sync, o.pollMs ?? 1000);
  timer.unref();
  sync();

  return {
    sync,
    current: () =>
      written !== undefined || (cfg.multusConfigFile !== 'auto' && lastMaster !== '') ? servedPath() : '',
    stop(opts = {}) {
      clearInterval(timer);
      for (const w of watchers) w.close();
      if (opts.remove !== false) remove('the daemon is stopping');
    },
  };
}
