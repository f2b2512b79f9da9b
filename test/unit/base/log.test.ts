/**
 * Tests for src/log.ts: level parsing and filtering, the line format under an injected clock, redaction, lazy
 * file creation with 0600/0700 modes, lumberjack-compatible rotation (names, gzip, pruning by count and age),
 * and that a logging failure never reaches the caller.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  backupName,
  createLogger,
  formatBackupTime,
  formatTimestamp,
  parseLogLevel,
  planPruning,
  redactSecrets,
  rotationOf,
  silentLogger,
} from '../../../src/base/log.ts';
import type { LogLevel, LogOptions } from '../../../src/base/log.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'multus-ts-log-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

const modeOf = (path: string): number => statSync(path).mode & 0o777;
const T0 = new Date(Date.UTC(2026, 10, 30, 4, 31, 2, 123)); // 2026-11-30T04:31:02.123Z
const DAY = 24 * 3600_000;

/** The expected local RFC 3339 stamp, computed from the Date's local getters (independent of the code under test). */
function localStamp(d: Date): string {
  const p = (n: number): string => String(n).padStart(2, '0');
  const off = -d.getTimezoneOffset();
  const sign = off < 0 ? '-' : '+';
  const abs = Math.abs(off);
  const zone = off === 0 ? 'Z' : `${sign}${p(Math.floor(abs / 60))}:${p(abs % 60)}`; // Go's time.RFC3339
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}${zone}`;
}

function capture(
  level: LogLevel,
  extra: { logFile?: string; logToStderr?: boolean; logOptions?: LogOptions; now?: () => Date } = {},
) {
  const out: string[] = [];
  const log = createLogger(
    { level, logToStderr: extra.logToStderr ?? true, logFile: extra.logFile, logOptions: extra.logOptions },
    { writeStderr: (s) => out.push(s), now: extra.now ?? (() => T0) },
  );
  return { log, out };
}

describe('parseLogLevel', () => {
  it.each([
    ['debug', 'debug'],
    ['DEBUG', 'debug'],
    ['Verbose', 'verbose'],
    ['error', 'error'],
    ['Panic', 'panic'],
    ['info', undefined],
    ['warning', undefined],
    ['', undefined],
    ['toString', undefined],
    [' debug', undefined],
  ])('%j → %j', (input, expected) => {
    expect(parseLogLevel(input)).toBe(expected);
  });
});

describe('level filtering', () => {
  // configured level, then whether error / warn / verbose / debug print
  it.each([
    ['panic', [false, false, false, false]],
    ['error', [true, true, false, false]],
    ['verbose', [true, true, true, false]],
    ['debug', [true, true, true, true]],
  ] as const)('at %s', (level, printed) => {
    const { log, out } = capture(level);
    log.error('e');
    log.warn('w');
    log.verbose('v');
    log.debug('d');
    const expected = (['[error] e', '[error] warning: w', '[verbose] v', '[debug] d'] as const).filter(
      (_, i) => printed[i],
    );
    expect(out.map((l) => l.slice(l.indexOf(' ') + 1, -1))).toEqual(expected);
    expect([log.enabled('panic'), log.enabled('error'), log.enabled('verbose'), log.enabled('debug')]).toEqual([
      true,
      printed[0],
      printed[2],
      printed[3],
    ]);
  });

  it('silentLogger prints nothing and enables nothing', () => {
    expect(() => silentLogger.error('x')).not.toThrow();
    expect(silentLogger.enabled('panic')).toBe(false);
    expect(silentLogger.enabled('debug')).toBe(false);
  });
});

describe('line format', () => {
  it.each([
    [0, '2026-11-30T04:31:02Z'],
    [330, '2026-11-30T10:01:02+05:30'],
    [-300, '2026-11-29T23:31:02-05:00'],
    [-570, '2026-11-29T19:01:02-09:30'],
    [840, '2026-11-30T18:31:02+14:00'],
  ])('formatTimestamp at offset %i minutes is %s', (offset, expected) => {
    expect(formatTimestamp(T0, offset)).toBe(expected);
  });

  it('writes "<local RFC 3339> [<level>] <message>\\n" with the injected clock', () => {
    const { log, out } = capture('debug');
    log.error('Multus: error loading netconf');
    log.warn('readiness indicator file missing');
    expect(out).toEqual([
      `${localStamp(T0)} [error] Multus: error loading netconf\n`,
      `${localStamp(T0)} [error] warning: readiness indicator file missing\n`,
    ]);
    expect(out[0]).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d) \[error\] /);
  });

  it('redacts secrets in logged messages', () => {
    const { log, out } = capture('debug');
    log.debug('GET /api/v1/pods Authorization: Bearer eyJhbGciOi.abc');
    expect(out[0]?.endsWith(' [debug] GET /api/v1/pods Authorization: Bearer <redacted>\n')).toBe(true);
  });

  it('writes nothing anywhere when stderr is off and no file is set', () => {
    const { log, out } = capture('debug', { logToStderr: false });
    log.error('x');
    log.debug('y');
    expect(out).toEqual([]);
  });
});

describe('redactSecrets', () => {
  it.each([
    ['Authorization: Bearer abc.def-ghi', 'Authorization: Bearer <redacted>'],
    ['authorization=Basic dXNlcjpwYXNz', 'authorization=Basic <redacted>'],
    ['{"Authorization": "Bearer abc"}', '{"Authorization": "Bearer <redacted>"}'],
    ['sending bearer abc123== to the API', 'sending bearer <redacted> to the API'],
    ['{"token": "s3cr\\"et", "name": "x"}', '{"token": "<redacted>", "name": "x"}'],
    [
      '{"user":{"token":"abc","client-key-data":"LS0t"}}',
      '{"user":{"token":"<redacted>","client-key-data":"<redacted>"}}',
    ],
    ['{"bearerToken": "abc", "password":"p"}', '{"bearerToken": "<redacted>", "password":"<redacted>"}'],
    ['delegate: {\\"token\\":\\"abc\\"}', 'delegate: {\\"token\\":\\"<redacted>\\"}'],
    [
      '{"tokenFile": "/var/run/secrets/token", "type": "macvlan"}',
      '{"tokenFile": "/var/run/secrets/token", "type": "macvlan"}',
    ],
    ['no secrets here: authorization failed', 'no secrets here: authorization failed'],
  ])('%s', (input, expected) => {
    expect(redactSecrets(input)).toBe(expected);
  });
});

describe('log file', () => {
  it('is created lazily: nothing logged means no file and no directory', () => {
    const logFile = join(dir, 'sub', 'multus.log');
    const { log } = capture('error', { logFile });
    log.verbose('filtered out');
    log.debug('filtered out');
    expect(readdirSync(dir)).toEqual([]);
  });

  it('appends lines to a 0600 file in a created 0700 directory, without stderr when it is off', () => {
    const logFile = join(dir, 'a', 'b', 'multus.log');
    const { log, out } = capture('verbose', { logFile, logToStderr: false });
    log.error('one');
    log.verbose('two');
    expect(readFileSync(logFile, 'utf8')).toBe(`${localStamp(T0)} [error] one\n${localStamp(T0)} [verbose] two\n`);
    expect(modeOf(logFile)).toBe(0o600);
    expect(modeOf(join(dir, 'a'))).toBe(0o700);
    expect(modeOf(join(dir, 'a', 'b'))).toBe(0o700);
    expect(out).toEqual([]);
  });

  it('never throws when the file cannot be written; reports once on stderr and carries on', () => {
    writeFileSync(join(dir, 'plain'), '');
    const logFile = join(dir, 'plain', 'multus.log'); // parent is a regular file
    const { log, out } = capture('error', { logFile });
    expect(() => log.error('first')).not.toThrow();
    expect(() => log.error('second')).not.toThrow();
    expect(out.length).toBe(3);
    expect(out[0]).toBe(`${localStamp(T0)} [error] first\n`);
    expect(out[1]).toMatch(new RegExp(`^multus logging: cannot write log file ${logFile}: .*\\n$`));
    expect(out[2]).toBe(`${localStamp(T0)} [error] second\n`);
  });

  it('stays silent about a failure when stderr is off', () => {
    writeFileSync(join(dir, 'plain'), '');
    const { log, out } = capture('error', { logFile: join(dir, 'plain', 'x.log'), logToStderr: false });
    expect(() => log.error('x')).not.toThrow();
    expect(out).toEqual([]);
  });

  it('survives a stderr writer that throws', () => {
    const log = createLogger(
      { level: 'error', logToStderr: true },
      {
        writeStderr: () => {
          throw new Error('EPIPE');
        },
      },
    );
    expect(() => log.error('x')).not.toThrow();
  });
});

describe('rotation settings and names', () => {
  it.each([
    [undefined, { maxBytes: 100 * 1024 * 1024, maxBackups: 5, maxAgeDays: 5, compress: true }],
    [{}, { maxBytes: 104857600, maxBackups: 5, maxAgeDays: 5, compress: true }],
    [{ maxSize: 0.0001 }, { maxBytes: 104, maxBackups: 5, maxAgeDays: 5, compress: true }],
    [
      { maxSize: 2, maxBackups: 0, maxAge: 0, compress: false },
      { maxBytes: 2097152, maxBackups: 0, maxAgeDays: 0, compress: false },
    ],
    [
      { maxSize: 0, maxBackups: -1, maxAge: -3 },
      { maxBytes: 104857600, maxBackups: 0, maxAgeDays: 0, compress: true },
    ],
  ])('rotationOf(%j)', (opts, expected) => {
    expect(rotationOf(opts)).toEqual(expected);
  });

  it.each([
    ['/var/log/multus.log', '/var/log/multus-2026-11-30T04-31-02.123.log'],
    ['/var/log/multus', '/var/log/multus-2026-11-30T04-31-02.123'],
    ['/a/b.c.log', '/a/b.c-2026-11-30T04-31-02.123.log'],
  ])('backupName(%s)', (file, expected) => {
    expect(backupName(file, T0)).toBe(expected);
  });

  it('formats backup times in UTC with milliseconds', () => {
    expect(formatBackupTime(new Date(Date.UTC(2026, 0, 2, 3, 4, 5, 6)))).toBe('2026-01-02T03-04-05.006');
  });

  it('plans pruning like lumberjack: a file and its .gz count once, then age', () => {
    const b = (name: string, time: number) => ({ name, time });
    const backups = [
      b('m-5.log', T0.getTime()),
      b('m-4.log.gz', T0.getTime() - 1),
      b('m-4.log', T0.getTime() - 1),
      b('m-3.log.gz', T0.getTime() - 2 * DAY),
      b('m-2.log', T0.getTime() - 10 * DAY),
    ];
    const rot = { maxBytes: 1, maxBackups: 3, maxAgeDays: 1, compress: true };
    expect(planPruning(backups, rot, T0.getTime())).toEqual({
      remove: [b('m-2.log', T0.getTime() - 10 * DAY), b('m-3.log.gz', T0.getTime() - 2 * DAY)],
      keep: [b('m-5.log', T0.getTime()), b('m-4.log.gz', T0.getTime() - 1), b('m-4.log', T0.getTime() - 1)],
    });
    expect(planPruning(backups, { ...rot, maxBackups: 0, maxAgeDays: 0 }, T0.getTime()).remove).toEqual([]);
  });
});

describe('rotation', () => {
  // bytes per line below: the stamp (20 in UTC, `Z`; 25 with an offset) + " [error] " (9) + 25 message + "\n"
  const LINE = localStamp(T0).length + 35;
  const msg = (i: number): string => `message number ${String(i).padStart(10, '0')}`;
  const logFile = (): string => join(dir, 'multus.log');

  function logger(opts: LogOptions, clock: { t: Date }) {
    return createLogger(
      { level: 'error', logToStderr: false, logFile: logFile(), logOptions: opts },
      { now: () => clock.t },
    );
  }

  it('rotates before a write that would exceed maxSize, naming and gzipping the backup', () => {
    const clock = { t: T0 };
    const log = logger({ maxSize: (2 * LINE) / (1024 * 1024) }, clock);
    log.error(msg(1));
    log.error(msg(2)); // exactly 2 lines = maxSize: no rotation yet
    expect(readdirSync(dir)).toEqual(['multus.log']);
    expect(readFileSync(logFile()).length).toBe(2 * LINE);
    log.error(msg(3));
    expect(readdirSync(dir).sort()).toEqual(['multus-2026-11-30T04-31-02.123.log.gz', 'multus.log']);
    const backup = join(dir, 'multus-2026-11-30T04-31-02.123.log.gz');
    expect(gunzipSync(readFileSync(backup)).toString()).toBe(
      `${localStamp(T0)} [error] ${msg(1)}\n${localStamp(T0)} [error] ${msg(2)}\n`,
    );
    expect(modeOf(backup)).toBe(0o600);
    expect(readFileSync(logFile(), 'utf8')).toBe(`${localStamp(T0)} [error] ${msg(3)}\n`);
    expect(modeOf(logFile())).toBe(0o600);
  });

  it('keeps the backup uncompressed when compress is false', () => {
    const clock = { t: T0 };
    const log = logger({ maxSize: LINE / (1024 * 1024), compress: false }, clock);
    log.error(msg(1));
    log.error(msg(2));
    expect(readdirSync(dir).sort()).toEqual(['multus-2026-11-30T04-31-02.123.log', 'multus.log']);
    expect(readFileSync(join(dir, 'multus-2026-11-30T04-31-02.123.log'), 'utf8')).toBe(
      `${localStamp(T0)} [error] ${msg(1)}\n`,
    );
  });

  it('writes an over-long line into an empty file instead of dropping it', () => {
    const log = logger({ maxSize: 10 / (1024 * 1024) }, { t: T0 });
    log.error(msg(1));
    expect(readdirSync(dir)).toEqual(['multus.log']);
    expect(readFileSync(logFile()).length).toBe(LINE);
  });

  it('prunes by count, oldest first, and leaves unrelated files alone', () => {
    const clock = { t: T0 };
    for (const ts of ['2026-11-30T01-00-00.000', '2026-11-30T02-00-00.000', '2026-11-30T03-00-00.000']) {
      writeFileSync(join(dir, `multus-${ts}.log.gz`), 'old');
    }
    writeFileSync(join(dir, 'multus-2026-11-29T23-00-00.000.log'), 'older, uncompressed');
    writeFileSync(join(dir, 'multus-notatime.log'), 'keep');
    writeFileSync(join(dir, 'multus-2026-13-40T00-00-00.000.log'), 'keep: no such date, so not a backup');
    writeFileSync(join(dir, 'other.log'), 'keep');
    mkdirSync(join(dir, 'multus-2026-11-20T00-00-00.000.log'));
    const log = logger({ maxSize: LINE / (1024 * 1024), maxBackups: 2, maxAge: 0 }, clock);
    log.error(msg(1));
    log.error(msg(2));
    expect(readdirSync(dir).sort()).toEqual([
      'multus-2026-11-20T00-00-00.000.log', // a directory: never a backup
      'multus-2026-11-30T03-00-00.000.log.gz',
      'multus-2026-11-30T04-31-02.123.log.gz',
      'multus-2026-13-40T00-00-00.000.log',
      'multus-notatime.log',
      'multus.log',
      'other.log',
    ]);
  });

  it('prunes by age from the time in the name, and maxAge 0 keeps everything', () => {
    writeFileSync(join(dir, 'multus-2026-11-28T04-31-02.122.log.gz'), 'two days old');
    writeFileSync(join(dir, 'multus-2026-11-29T16-00-00.000.log.gz'), 'half a day old');
    const clock = { t: T0 };
    const log = logger({ maxSize: LINE / (1024 * 1024), maxAge: 1, maxBackups: 0 }, clock);
    log.error(msg(1));
    log.error(msg(2));
    expect(readdirSync(dir).sort()).toEqual([
      'multus-2026-11-29T16-00-00.000.log.gz',
      'multus-2026-11-30T04-31-02.123.log.gz',
      'multus.log',
    ]);

    clock.t = new Date(T0.getTime() + 30 * DAY);
    const keepAll = logger({ maxSize: LINE / (1024 * 1024), maxAge: 0, maxBackups: 0 }, clock);
    keepAll.error(msg(3));
    expect(readdirSync(dir).length).toBe(4);
  });

  it('uses the default maxBackups of 5 when only maxSize is given', () => {
    for (let h = 0; h < 6; h++) writeFileSync(join(dir, `multus-2026-11-30T0${h}-00-00.000.log.gz`), 'x');
    const log = logger({ maxSize: LINE / (1024 * 1024) }, { t: T0 });
    log.error(msg(1));
    log.error(msg(2));
    const backups = readdirSync(dir)
      .filter((n) => n !== 'multus.log')
      .sort();
    expect(backups).toEqual([
      'multus-2026-11-30T02-00-00.000.log.gz',
      'multus-2026-11-30T03-00-00.000.log.gz',
      'multus-2026-11-30T04-00-00.000.log.gz',
      'multus-2026-11-30T04-31-02.123.log.gz',
      'multus-2026-11-30T05-00-00.000.log.gz',
    ]);
  });
});
