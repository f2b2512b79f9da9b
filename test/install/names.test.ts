/**
 * Multus' program names, served by build/multus from argv[0] (src/install/entrypoints.ts, docs/install.md
 * "Multus' names"): each name run with its flags, bad ones included, beside Multus v4.3.0's program of that name
 * (built by test/peers/build-gomultus.sh): the same argv (and argv[0]) to both gives the same exit code and the
 * same stderr, but that thin_entrypoint's usage also lists the options multus-ts adds.
 * As root, install_multus runs beside Multus' in a mount namespace where /usr/src/multus-cni/bin holds test
 * files (the path both read): the same files, modes and output, for both types and a failing destination.
 */
import { spawnSync } from 'node:child_process';
import { linkSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { fileExists, isRoot, needs } from '../helpers/skip.ts';

const REPO = join(import.meta.dirname, '..', '..');
const CACHE = process.env.MULTUS_TS_CACHE_DIR || join(REPO, '.cache');
const TS = process.env.MULTUS_TS_BIN || join(REPO, 'build', 'multus');
const GO_DIR = join(CACHE, 'gomultus');
const NAMES = ['thin_entrypoint', 'install_multus', 'multus-daemon', 'multus'] as const;
type Name = (typeof NAMES)[number];

const built = needs(fileExists(TS, 'the built executable (npm run build)'));
const goBuilt =
  built &&
  needs(
    ...[...NAMES, 'passthru'].map((n) =>
      fileExists(join(GO_DIR, n), `Multus' ${n} (bash test/peers/build-gomultus.sh)`),
    ),
  );

const dir = mkdtempSync(join(tmpdir(), 'multus-names-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Our executable under `name` (a hard link in a temp dir, as the image has it). */
function ours(name: string): string {
  const path = join(dir, 'ts', name);
  mkdirSync(join(dir, 'ts'), { recursive: true });
  try {
    linkSync(TS, path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  }
  return path;
}

interface Out {
  code: number | null;
  stdout: string;
  stderr: string;
}
/** Runs `file` with argv[0] = `name` (so Go's "Usage of <name>:" and ours agree), an empty environment. */
function run(file: string, name: string, args: string[], env: Record<string, string> = {}): Out {
  const r = spawnSync(file, args, { argv0: name, env, encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** The flag names a pflag/flag usage text lists. */
const flagNames = (usage: string): string[] =>
  [...usage.matchAll(/^\s+(?:-\w, )?--?([a-z][a-z-]*)/gm)].map((m) => m[1]!).sort();

const CASES: Record<Name, string[][]> = {
  thin_entrypoint: [
    ['--bogus'],
    ['-x'],
    ['-h'],
    ['--help'],
    ['--cni-bin-dir'],
    ['--namespace-isolation=maybe'],
    ['--=x'],
  ],
  install_multus: [['--bogus'], ['-x'], ['-h'], ['--help'], [], ['-t', 'bogus'], ['-t'], ['--type'], ['-hx']],
  'multus-daemon': [
    ['-bogus'],
    ['--bogus=1'],
    ['-h'],
    ['-help'],
    ['--help'],
    ['-config'],
    ['-version=maybe'],
    ['---x'],
  ],
  multus: [['-h'], ['-bogus'], ['--x=1'], ['-v=maybe']],
};

describe.runIf(built)("Multus' names: flags and usage", () => {
  it('each name answers a bad flag with its usage and exit 2, -h as its program does', () => {
    expect(run(ours('thin_entrypoint'), 'thin_entrypoint', ['--bogus'])).toMatchObject({
      code: 2,
      stdout: '',
      stderr: expect.stringMatching(/^Usage of thin_entrypoint:\n[^]*\nunknown flag: --bogus\n$/),
    });
    const help = run(ours('thin_entrypoint'), 'thin_entrypoint', ['-h']);
    expect([help.code, help.stderr]).toEqual([1, expect.stringContaining('  -h, --help ')]);
    expect(run(ours('install_multus'), 'install_multus', ['-x']).code).toBe(2);
    expect(run(ours('install_multus'), 'install_multus', [])).toEqual({
      code: 1,
      stdout: '',
      stderr: '--type is missing or --type has invalid value\n',
    });
    expect(run(ours('multus-daemon'), 'multus-daemon', ['-bogus'])).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(
        /^flag provided but not defined: -bogus\nUsage of multus-daemon:\n {2}-config string/,
      ),
    });
    expect(run(ours('multus-daemon'), 'multus-daemon', ['-h']).code).toBe(0);
    expect(run(ours('multus'), 'multus', ['-bogus']).code).toBe(2);
  });

  it('multus-daemon -version exits 4 (as Multus), multus -version 0; the daemon runs with -config', () => {
    const v = run(ours('multus-daemon'), 'multus-daemon', ['-version']);
    expect([v.code, v.stdout]).toEqual([4, expect.stringMatching(/^multus-daemon: version:\S+/)]);
    expect(run(ours('multus'), 'multus', ['-version'])).toMatchObject({ code: 0, stdout: /^multus-ts: version:/ });
    // -config reaches the daemon: a file that is not there is its own start-up error
    const missing = join(dir, 'no-such-config.json');
    const d = run(ours('multus-daemon'), 'multus-daemon', ['-config', missing]);
    expect(d.code).not.toBe(0);
    expect(d.stderr).toContain(`cannot read the daemon config ${missing}`);
  });

  it('passthru ignores flags (as Multus, whose skel reads none) and serves CNI', () => {
    const env = { CNI_COMMAND: 'VERSION' };
    const r = run(ours('passthru'), 'passthru', ['--bogus'], env);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).supportedVersions).toContain('1.1.0');
  });

  describe.runIf(goBuilt)("beside Multus' own programs", () => {
    for (const name of NAMES) {
      it(`${name}: the same exit code and stderr for ${CASES[name].length} command lines`, () => {
        for (const args of CASES[name]) {
          const go = run(join(GO_DIR, name), name, args);
          const ts = run(ours(name), name, args);
          const what = `${name} ${args.join(' ')}`;
          expect(ts.code, what).toBe(go.code);
          expect(ts.stdout, what).toBe(go.stdout);
          if (name !== 'thin_entrypoint') {
            expect(ts.stderr, what).toBe(go.stderr);
            continue;
          }
          // ours lists Multus' flags, laid out the same, and the options multus-ts adds
          const goFlags = flagNames(go.stderr);
          expect(goFlags.length, what).toBeGreaterThan(10);
          expect(flagNames(ts.stderr), what).toEqual(expect.arrayContaining(goFlags));
          const onlyGo = ts.stderr
            .split('\n')
            .filter((l) => !/^\s+-/.test(l) || goFlags.includes(flagNames(l)[0] ?? ''))
            .join('\n');
          expect(onlyGo, what).toBe(go.stderr);
        }
      });
    }

    it.runIf(needs(isRoot()))('passthru: the same ADD result, DEL and VERSION answers', () => {
      const conf = JSON.stringify({ cniVersion: '1.0.0', name: 'aux', type: 'passthru' });
      // the plugin in a network namespace of its own (unshare), CNI_NETNS this process's: skel refuses its own
      const env = (command: string) => ({
        PATH: '/usr/sbin:/usr/bin:/sbin:/bin',
        CNI_COMMAND: command,
        CNI_CONTAINERID: 'c1',
        CNI_NETNS: `/proc/${process.pid}/ns/net`,
        CNI_IFNAME: 'eth0',
        CNI_PATH: '/opt/cni/bin',
      });
      // Go omits the empty lists of a result; ours writes them (both decode to the same result)
      const result = (out: string): unknown =>
        out === ''
          ? null
          : Object.fromEntries(
              Object.entries(JSON.parse(out) as Record<string, unknown>).filter(
                ([, v]) => !(Array.isArray(v) ? v.length === 0 : typeof v === 'object' && Object.keys(v!).length === 0),
              ),
            );
      for (const command of ['ADD', 'DEL', 'VERSION']) {
        const call = (file: string) =>
          spawnSync('unshare', ['--net', file], { env: env(command), input: conf, encoding: 'utf8' });
        const go = call(join(GO_DIR, 'passthru'));
        const ts = call(ours('passthru'));
        expect(go.status, `${command}: ${go.stdout}`).toBe(0);
        expect([ts.status, result(ts.stdout)], command).toEqual([go.status, result(go.stdout)]);
      }
    });
  });
});

// install_multus reads /usr/src/multus-cni/bin: a mount namespace gives both programs the same test files there
const WRAP =
  'mount -t tmpfs -o mode=0755 tmpfs /usr/src && mkdir -p /usr/src/multus-cni/bin && ' +
  'cp -p "$SRC"/* /usr/src/multus-cni/bin/ && exec "$@"';

describe.runIf(goBuilt && needs(isRoot()))("install_multus copies as Multus' does", () => {
  const src = join(dir, 'src');
  mkdirSync(src, { recursive: true });
  for (const [f, mode] of [
    ['multus', 0o755],
    ['multus-shim', 0o750],
    ['passthru', 0o755],
  ] as const) {
    writeFileSync(join(src, f), `#!/bin/sh\n# ${f}\n`, { mode });
  }
  const install = (file: string, args: string[]): Out => {
    const r = spawnSync('unshare', ['--mount', '--propagation', 'private', 'sh', '-c', WRAP, 'sh', file, ...args], {
      argv0: 'unshare',
      env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', SRC: src },
      encoding: 'utf8',
    });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr };
  };
  /** name -> content, for the files of a directory. */
  const listing = (d: string) => Object.fromEntries(readdirSync(d).map((f) => [f, readFileSync(join(d, f), 'utf8')]));

  for (const type of ['thick', 'thin']) {
    it(`-t ${type}: the same files (temp files renamed away) and the same lines`, () => {
      const outs: Record<string, { out: Out; files: Record<string, string> }> = {};
      for (const [who, file] of [
        ['go', join(GO_DIR, 'install_multus')],
        ['ts', ours('install_multus')],
      ] as const) {
        const dest = join(dir, `dest-${who}-${type}`);
        mkdirSync(dest, { recursive: true });
        writeFileSync(join(dest, 'passthru'), 'old');
        const out = install(file, ['-d', dest, '-t', type]);
        outs[who] = { out, files: listing(dest) };
        expect(statSync(join(dest, 'passthru')).mode & 0o111, `${who}: passthru is executable`).not.toBe(0);
      }
      expect(outs.ts!.out).toEqual(outs.go!.out);
      expect(outs.ts!.files).toEqual(outs.go!.files);
      const main = type === 'thick' ? 'multus-shim' : 'multus';
      expect(Object.keys(outs.ts!.files).sort()).toEqual([main, 'passthru'].sort());
      expect(outs.ts!.out.stdout).toBe(
        `multus ${main} copy succeeded!\npassthru cni /usr/src/multus-cni/bin/passthru copy succeeded!\n`,
      );
    });
  }

  it('a destination that is not there: exit 1 and a line naming the file, from both', () => {
    const missing = join(dir, 'not-there');
    const go = install(join(GO_DIR, 'install_multus'), ['-d', missing, '-t', 'thick']);
    const ts = install(ours('install_multus'), ['-d', missing, '-t', 'thick']);
    expect([ts.code, ts.stdout]).toEqual([go.code, go.stdout]);
    expect(go.stderr).toMatch(/^failed to copy file multus-shim: /);
    expect(ts.stderr).toMatch(/^failed to copy file multus-shim: .*not-there/);
  });
});
