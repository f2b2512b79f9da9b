/**
 * entrypoints.ts: the names of Multus' images, served by the one executable (cli.ts picks the role from
 * argv[0]; docs/install.md, "Multus' names"). Each takes the flags of the Go program of that name, parsed as
 * its flag package parses them (goflags.ts), and does its job:
 * - `thin_entrypoint`: `multus install` (the same options, Multus' and ours) with pflag's errors and usage;
 * - `install_multus -t thick|thin [-d DIR]`: copies `multus-shim` (thick) or `multus` (thin), then `passthru`,
 *   from /usr/src/multus-cni/bin into DIR, each through `<name>.temp` renamed over the old file;
 * - `multus-daemon [-config PATH]`: `multus daemon --config PATH`;
 * - `multus` with flags: Multus' `-version`/`-v` (the CNI plugin itself never sees flags: runtimes pass none).
 */
import { join } from 'node:path';
import { CURRENT_VERSION } from '../base/versions.ts';
import { VERSION } from '../host/handle.ts';
import { copyExecutableAtomic, errText, linkExecutableAtomic, sameFile } from './files.ts';
import { payloadsBeside, prunePayloads } from './payloads.ts';
import { type FlagStyle, type GoFlag, parseGoFlags, printDefaults } from './goflags.ts';
import { runInstaller } from './main.ts';
import { FLAGS, InstallError, parseInstallArgs } from './options.ts';

/** Where Multus' images (and ours) keep the executables install_multus copies. */
export const IMAGE_BIN_DIR = '/usr/src/multus-cni/bin';

export interface EntrypointIo {
  stdout(s: string): void;
  stderr(s: string): void;
}

const processIo: EntrypointIo = {
  stdout: (s) => process.stdout.write(s),
  stderr: (s) => process.stderr.write(s),
};

const HELP: GoFlag = { name: 'help', short: 'h', kind: 'bool', def: false, usage: 'show help message and quit' };

/** thin_entrypoint's flags: every `multus install` option (Multus' and ours), help as -h/--help. */
export const THIN_ENTRYPOINT_FLAGS: readonly GoFlag[] = [
  ...Object.entries(FLAGS)
    .filter(([name]) => name !== 'help')
    .map(([name, f]) => ({
      name,
      kind: f.bool ? ('bool' as const) : ('string' as const),
      def: f.def,
      usage: f.help,
      ...(f.hidden ? { hidden: true } : {}),
    })),
  HELP,
];

export const INSTALL_MULTUS_FLAGS: readonly GoFlag[] = [
  { name: 'type', short: 't', kind: 'string', def: '', usage: 'specify installer type (thick/thin)' },
  { name: 'dest-dir', short: 'd', kind: 'string', def: '/host/opt/cni/bin', usage: 'destination directory' },
  HELP,
];

export const MULTUS_DAEMON_FLAGS: readonly GoFlag[] = [
  { name: 'version', kind: 'bool', def: false, usage: 'Show version' },
  {
    name: 'config',
    kind: 'string',
    def: '/etc/cni/net.d/multus.d/daemon-config.json',
    usage: 'Specify the path to the multus-daemon configuration',
  },
];

export const MULTUS_FLAGS: readonly GoFlag[] = [
  { name: 'version', kind: 'bool', def: false, usage: 'Show application version' },
  { name: 'v', kind: 'bool', def: false, usage: 'Show application version' },
];

/** Parses argv as `style` does; on an error (or Go's own help) prints what Go prints and gives the exit code. */
function parse(style: FlagStyle, program: string, flags: readonly GoFlag[], argv: readonly string[], io: EntrypointIo) {
  const r = parseGoFlags(style, program, flags, argv);
  if (!r.ok) io.stderr(r.stderr);
  return r;
}

/** A pflag command line parsed, or the exit code when it ends the program: an error, or --help (Multus:
 * pflag.PrintDefaults() and exit 1). */
function parsePflag(program: string, flags: readonly GoFlag[], argv: readonly string[], io: EntrypointIo) {
  const r = parse('pflag', program, flags, argv, io);
  if (!r.ok) return r.exitCode;
  if (r.values.help !== true) return r;
  io.stderr(printDefaults('pflag', flags));
  return 1;
}

export async function thinEntrypointMain(
  program: string,
  argv: readonly string[],
  io: EntrypointIo = processIo,
): Promise<number> {
  const r = parsePflag(program, THIN_ENTRYPOINT_FLAGS, argv, io);
  if (typeof r === 'number') return r;
  let opts;
  try {
    opts = parseInstallArgs([...r.given].map((name) => `--${name}=${String(r.values[name])}`));
  } catch (e) {
    io.stderr(`thin_entrypoint: ${e instanceof InstallError ? e.message : String(e)}\n`);
    return 2;
  }
  return runInstaller(opts, 'thin_entrypoint');
}

/** Copies `name` from `srcDir` into `destDir` through `<name>.temp`, or links it to `linkTo` there. */
async function installOne(srcDir: string, destDir: string, name: string, linkTo?: string): Promise<void> {
  if (linkTo) await linkExecutableAtomic(join(destDir, linkTo), destDir, name, `${name}.temp`);
  else await copyExecutableAtomic(join(srcDir, name), destDir, name, `${name}.temp`);
}

export async function installMultusMain(
  program: string,
  argv: readonly string[],
  io: EntrypointIo = processIo,
  srcDir = IMAGE_BIN_DIR,
): Promise<number> {
  const r = parsePflag(program, INSTALL_MULTUS_FLAGS, argv, io);
  if (typeof r === 'number') return r;
  const type = r.values.type;
  const name = type === 'thick' ? 'multus-shim' : type === 'thin' ? 'multus' : '';
  if (name === '') {
    io.stderr('--type is missing or --type has invalid value\n');
    return 1;
  }
  const dest = String(r.values['dest-dir']);
  // the Bun executable our launcher (multus) starts goes first and quietly (Multus prints two lines)
  for (const payload of name === 'multus' ? await payloadsBeside(join(srcDir, name)) : []) {
    try {
      await installOne(srcDir, dest, payload);
    } catch (e) {
      io.stderr(`failed to copy file ${payload}: ${e instanceof InstallError ? e.message : errText(e)}\n`);
      return 1;
    }
  }
  const steps: [string, string | undefined][] = [[name, undefined]];
  // our image's passthru is the executable itself: next to a copied multus, a hard link to it takes no space
  const linked = name === 'multus' && (await sameFile(join(srcDir, 'passthru'), join(srcDir, 'multus')));
  steps.push(['passthru', linked ? 'multus' : undefined]);
  for (const [file, linkTo] of steps) {
    try {
      await installOne(srcDir, dest, file, linkTo);
    } catch (e) {
      io.stderr(`failed to copy file ${file}: ${e instanceof InstallError ? e.message : errText(e)}\n`);
      return 1;
    }
    io.stdout(
      file === 'passthru' ? `passthru cni ${join(srcDir, file)} copy succeeded!\n` : `multus ${file} copy succeeded!\n`,
    );
  }
  // the Bun executables earlier builds left there, quietly (docs/build.md, "The launcher")
  await prunePayloads(dest).catch(() => []);
  return 0;
}

/** Runs the resident daemon with its own argv (`--config PATH`): the daemon's room sits beside this one. */
export type RunDaemon = (argv: string[]) => Promise<number>;

export async function multusDaemonMain(
  program: string,
  argv: readonly string[],
  runDaemon: RunDaemon,
  io: EntrypointIo = processIo,
): Promise<number> {
  const r = parse('flag', program, MULTUS_DAEMON_FLAGS, argv, io);
  if (!r.ok) return r.exitCode;
  if (r.values.version === true) {
    // Multus' multus-daemon prints its version and exits 4
    io.stdout(`multus-daemon: version:${VERSION}(multus-ts), cni:${CURRENT_VERSION}\n`);
    return 4;
  }
  return runDaemon(['--config', String(r.values.config)]);
}

/**
 * `multus` given flags: Go's flag package over Multus' `-version` and `-v`. -1: no version asked, so the
 * executable goes on as the CNI plugin (as Multus' does after flag.Parse).
 */
export function multusFlagsMain(program: string, argv: readonly string[], io: EntrypointIo = processIo): number {
  const r = parse('flag', program, MULTUS_FLAGS, argv, io);
  if (!r.ok) return r.exitCode;
  if (r.values.version !== true && r.values.v !== true) return -1;
  io.stdout(`multus-ts: version:${VERSION}, cni:${CURRENT_VERSION}\n`);
  return 0;
}

/**
 * The roles by the executable's name (cli.ts passes argv[0]'s base name and the full argv[0]); -1 from `multus`:
 * serve the CNI call.
 */
export function runEntrypoint(
  name: string,
  program: string,
  argv: readonly string[],
  runDaemon: RunDaemon,
): Promise<number> {
  switch (name) {
    case 'thin_entrypoint':
      return thinEntrypointMain(program, argv);
    case 'install_multus':
      return installMultusMain(program, argv);
    case 'multus-daemon':
      return multusDaemonMain(program, argv, runDaemon);
    default:
      return Promise.resolve(multusFlagsMain(program, argv));
  }
}
