/**
 * log.ts: the levelled logger, built once from the conf and passed in (I/O: stderr and one log file).
 *
 * Levels, line format and the `warning: ` prefix follow Multus pkg/logging (docs/behaviour.md#logging): a line
 * `<RFC3339 local time> [<level>] <message>` (Go's time.RFC3339: `Z` in UTC) goes to stderr when enabled and to the log file when one is set. The file
 * is opened lazily, so an invocation that logs nothing touches no file. Rotation is lumberjack-compatible
 * (natefinch/lumberjack v2: backup names, count and age pruning, gzip) and is honoured here, where thin Multus ignores
 * `logOptions` (docs/behaviour.md#logging quirk). Secrets are redacted before anything is written, and a logging
 * failure never reaches the caller: it is reported once on stderr (if enabled) and logging carries on.
 */
import {
  appendFileSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { basename, dirname, extname, join } from 'node:path';
import { writeFileAtomic } from './files.ts';
import { messageOf } from './errors.ts';

export type LogLevel = 'panic' | 'error' | 'verbose' | 'debug';

export interface LogOptions {
  maxAge?: number;
  maxSize?: number;
  maxBackups?: number;
  compress?: boolean;
}

export interface LoggerOptions {
  level: LogLevel;
  logFile?: string;
  logToStderr: boolean;
  logOptions?: LogOptions;
}

export interface Logger {
  error(msg: string): void;
  warn(msg: string): void;
  verbose(msg: string): void;
  debug(msg: string): void;
  enabled(level: LogLevel): boolean;
}

export interface LoggerDeps {
  writeStderr?: (s: string) => void;
  now?: () => Date;
}

const LEVEL_RANK: Readonly<Record<LogLevel, number>> = Object.freeze({ panic: 0, error: 1, verbose: 2, debug: 3 });

/** Case-insensitive, as Multus getLoggingLevel; undefined for anything else (the caller reports it). */
export function parseLogLevel(s: string): LogLevel | undefined {
  const level = s.toLowerCase();
  return Object.hasOwn(LEVEL_RANK, level) ? (level as LogLevel) : undefined;
}

export const silentLogger: Logger = Object.freeze({
  error: () => {},
  warn: () => {},
  verbose: () => {},
  debug: () => {},
  enabled: () => false,
});

// ---------------------------------------------------------------------------------------------------------------
// Pure formatting

const pad = (n: number, width = 2): string => String(n).padStart(width, '0');

/**
 * The time as Go's `t.Format(time.RFC3339)` prints a local `time.Now()`, which Multus' pkg/logging writes
 * (docs/behaviour.md#logging): local time, no fraction, `Z` for a zero offset (`2026-11-30T04:31:02Z`, what a
 * container without TZ prints, and what log parsers anchor on), else the numeric offset (`+05:30`).
 */
export function formatTimestamp(d: Date, offsetMinutes = -d.getTimezoneOffset()): string {
  const local = new Date(d.getTime() + offsetMinutes * 60_000);
  const sign = offsetMinutes < 0 ? '-' : '+';
  const abs = Math.abs(offsetMinutes);
  const date = `${pad(local.getUTCFullYear(), 4)}-${pad(local.getUTCMonth() + 1)}-${pad(local.getUTCDate())}`;
  const time = `${pad(local.getUTCHours())}:${pad(local.getUTCMinutes())}:${pad(local.getUTCSeconds())}`;
  const zone = offsetMinutes === 0 ? 'Z' : `${sign}${pad(Math.floor(abs / 60))}:${pad(abs % 60)}`;
  return `${date}T${time}${zone}`;
}

export function formatLogLine(d: Date, level: LogLevel, msg: string): string {
  return `${formatTimestamp(d)} [${level}] ${redactSecrets(msg)}\n`;
}

const REDACTED = '<redacted>';
const SECRET_KEYS = 'token|bearerToken|password|client-key-data';
/** Words one of which every pattern of redactSecrets matches (bearerToken holds token). */
const SECRET_HINTS = ['authorization', 'bearer', 'token', 'password', 'client-key-data'];

/**
 * Masks credentials that a logged config, kubeconfig or HTTP header may carry: `Authorization: <scheme> <cred>`,
 * a bare `Bearer <token>`, and JSON string values of token-like keys (also inside JSON-escaped JSON).
 */
export function redactSecrets(msg: string): string {
  // each pattern needs one of these words (any case): a line without them is its own redaction, found by a native
  // search instead of four interpreted scans (docs/archive/performance.md, "The daemon's CPU per pod")
  const lower = msg.toLowerCase();
  if (!SECRET_HINTS.some((w) => lower.includes(w))) return msg;
  return msg
    .replace(
      /(authorization["']?\s*[:=]\s*["']?)(?:(bearer|basic)\s+)?[^\s"',;}]+/gi,
      (_m, head: string, scheme?: string) => `${head}${scheme ? `${scheme} ` : ''}${REDACTED}`,
    )
    .replace(/\b(bearer\s+)(?!<redacted>)[A-Za-z0-9\-._~+/]+=*/gi, `$1${REDACTED}`)
    .replace(new RegExp(`("(?:${SECRET_KEYS})"\\s*:\\s*")(?:[^"\\\\]|\\\\.)*(")`, 'gi'), `$1${REDACTED}$2`)
    .replace(
      new RegExp(`(\\\\"(?:${SECRET_KEYS})\\\\"\\s*:\\s*\\\\")(?:[^"\\\\]|\\\\[^"])*(\\\\")`, 'gi'),
      `$1${REDACTED}$2`,
    );
}

// ---------------------------------------------------------------------------------------------------------------
// Rotation settings and backup names (pure)

export interface Rotation {
  maxBytes: number;
  maxBackups: number;
  maxAgeDays: number;
  compress: boolean;
}

const MEGABYTE = 1024 * 1024;

/**
 * Multus defaults (logging.SetLogFile): 100 MB, 5 backups, 5 days, compressed. maxSize is in MB and may be a
 * fraction; 0 or less means the default, as lumberjack's MaxSize 0. maxBackups/maxAge 0 or less: no limit.
 */
export function rotationOf(o: LogOptions = {}): Rotation {
  const size = o.maxSize !== undefined && Number.isFinite(o.maxSize) && o.maxSize > 0 ? o.maxSize : 100;
  return {
    maxBytes: Math.max(1, Math.floor(size * MEGABYTE)),
    maxBackups: Math.max(0, Math.floor(o.maxBackups ?? 5)),
    maxAgeDays: Math.max(0, o.maxAge ?? 5),
    compress: o.compress ?? true,
  };
}

/** lumberjack backupTimeFormat `2006-01-02T15-04-05.000`, in UTC (Multus leaves LocalTime false). */
export function formatBackupTime(d: Date): string {
  const date = `${pad(d.getUTCFullYear(), 4)}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}`;
  return `${date}T${pad(d.getUTCHours())}-${pad(d.getUTCMinutes())}-${pad(d.getUTCSeconds())}.${pad(d.getUTCMilliseconds(), 3)}`;
}

function parseBackupTime(s: string): number | undefined {
  const m = /^(\d{4})-(\d\d)-(\d\d)T(\d\d)-(\d\d)-(\d\d)\.(\d{3})$/.exec(s);
  if (!m) return undefined;
  const [y, mo, d, h, mi, se, ms] = m.slice(1).map(Number) as [number, number, number, number, number, number, number];
  const t = Date.UTC(y, mo - 1, d, h, mi, se, ms);
  return formatBackupTime(new Date(t)) === s ? t : undefined; // rejects 2026-02-30 and the like, as time.Parse
}

/** lumberjack backupName: `<dir>/<name>-<time><ext>` (`/var/log/multus.log` → `/var/log/multus-<time>.log`). */
export function backupName(logFile: string, at: Date): string {
  const ext = extname(logFile);
  const stem = basename(logFile, ext);
  return join(dirname(logFile), `${stem}-${formatBackupTime(at)}${ext}`);
}

export interface Backup {
  name: string;
  time: number;
}

/** Backups of `logFile` in its directory (plain or .gz), newest first (lumberjack oldLogFiles). */
function listBackups(logFile: string): Backup[] {
  const ext = extname(logFile);
  const prefix = `${basename(logFile, ext)}-`;
  const found: Backup[] = [];
  for (const entry of readdirSync(dirname(logFile), { withFileTypes: true })) {
    if (entry.isDirectory() || !entry.name.startsWith(prefix)) continue;
    for (const suffix of [ext, `${ext}.gz`]) {
      if (!entry.name.endsWith(suffix) || entry.name.length < prefix.length + suffix.length) continue;
      const time = parseBackupTime(entry.name.slice(prefix.length, entry.name.length - suffix.length));
      if (time !== undefined) {
        found.push({ name: entry.name, time });
        break;
      }
    }
  }
  return found.sort((a, b) => b.time - a.time);
}

/** lumberjack millRunOnce: which backups to delete (beyond maxBackups, a file and its .gz count once; too old). */
export function planPruning(backups: Backup[], rot: Rotation, now: number): { remove: Backup[]; keep: Backup[] } {
  const remove: Backup[] = [];
  let keep: Backup[] = [];
  const seen = new Set<string>();
  for (const b of backups) {
    seen.add(b.name.endsWith('.gz') ? b.name.slice(0, -3) : b.name);
    if (rot.maxBackups > 0 && seen.size > rot.maxBackups) remove.push(b);
    else keep.push(b);
  }
  if (rot.maxAgeDays > 0) {
    const cutoff = now - rot.maxAgeDays * 24 * 3600_000;
    remove.push(...keep.filter((b) => b.time < cutoff));
    keep = keep.filter((b) => b.time >= cutoff);
  }
  return { remove, keep };
}

// ---------------------------------------------------------------------------------------------------------------
// File output with rotation (I/O)

function fileSize(path: string): number | undefined {
  try {
    return statSync(path).size;
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ENOENT') return undefined;
    throw err;
  }
}

/**
 * Append one whole line (lumberjack gets Multus' line in three writes and may split it across files). The size is
 * read on every write because other multus processes append to the same file. A file is rotated before a write
 * that would take it past maxBytes; an empty file never is, so an over-long line is written, not dropped.
 */
function appendLine(logFile: string, line: string, rot: Rotation, now: () => Date): void {
  const size = fileSize(logFile);
  let rotateError: unknown;
  if (size === undefined) mkdirSync(dirname(logFile), { recursive: true, mode: 0o700 });
  else if (size > 0 && size + Buffer.byteLength(line) > rot.maxBytes) {
    try {
      rotate(logFile, rot, now());
    } catch (err) {
      rotateError = err; // still write the line; a full file beats a lost message
    }
  }
  appendFileSync(logFile, line, { mode: 0o600 });
  if (rotateError !== undefined) throw rotateError;
}

function rotate(logFile: string, rot: Rotation, at: Date): void {
  try {
    renameSync(logFile, backupName(logFile, at));
  } catch (err) {
    // Another multus process rotated it first: its new file is ours to append to.
    if ((err as { code?: unknown }).code === 'ENOENT') return;
    throw err;
  }
  const dir = dirname(logFile);
  const { remove, keep } = planPruning(listBackups(logFile), rot, at.getTime());
  for (const b of remove) unlinkIfPresent(join(dir, b.name));
  if (rot.compress) for (const b of keep) if (!b.name.endsWith('.gz')) compressBackup(join(dir, b.name));
}

/** gzip `<backup>` to `<backup>.gz` with the same mode, then drop the original (lumberjack compressLogFile). */
function compressBackup(path: string): void {
  // Loaded only here: most invocations never rotate, and zlib is not free to load.
  const { gzipSync } = process.getBuiltinModule('node:zlib');
  const mode = statSync(path).mode & 0o777;
  writeFileAtomic(`${path}.gz`, gzipSync(readFileSync(path)), mode);
  unlinkIfPresent(path);
}

function unlinkIfPresent(path: string): void {
  try {
    unlinkSync(path);
  } catch (err) {
    if ((err as { code?: unknown }).code !== 'ENOENT') throw err;
  }
}

function defaultWriteStderr(s: string): void {
  writeSync(2, s); // synchronous: main may exit right after the last line
}

// ---------------------------------------------------------------------------------------------------------------
// The logger

export function createLogger(opts: LoggerOptions, deps: LoggerDeps = {}): Logger {
  const threshold = LEVEL_RANK[opts.level];
  const now = deps.now ?? (() => new Date());
  const writeStderr = deps.writeStderr ?? defaultWriteStderr;
  const logFile = opts.logFile || undefined;
  const rot = rotationOf(opts.logOptions);
  let reported = false;

  const toStderr = (s: string): void => {
    if (!opts.logToStderr) return;
    try {
      writeStderr(s);
    } catch {
      // stderr gone (closed pipe): nowhere left to report to
    }
  };
  const emit = (level: LogLevel, msg: string): void => {
    if (LEVEL_RANK[level] > threshold) return;
    const line = formatLogLine(now(), level, msg);
    toStderr(line);
    if (logFile === undefined) return;
    try {
      appendLine(logFile, line, rot, now);
    } catch (err) {
      if (!reported) toStderr(`multus logging: cannot write log file ${logFile}: ${messageOf(err)}\n`);
      reported = true;
    }
  };
  return {
    error: (msg) => emit('error', msg),
    warn: (msg) => emit('error', `warning: ${msg}`),
    verbose: (msg) => emit('verbose', msg),
    debug: (msg) => emit('debug', msg),
    enabled: (level) => LEVEL_RANK[level] <= threshold,
  };
}
