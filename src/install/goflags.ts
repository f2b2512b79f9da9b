/**
 * goflags.ts: the command lines of Multus' own programs, parsed as Go parses them (pure), so that each name of
 * the image (`thin_entrypoint`, `install_multus`, `multus-daemon`, `multus`) takes the same flags and answers a
 * bad one as the Go program does (docs/install.md, "Multus' names"):
 * - `flag` (Go's standard package: multus-daemon, multus): `-name`, `--name`, `-name=value`, `-name value`;
 *   parsing stops at the first argument that is not a flag (or after `--`); an error prints the error line,
 *   then "Usage of <program>:" and the defaults, and exits 2; `-h`/`-help` print the usage and exit 0;
 * - `pflag` v1.0.9 (thin_entrypoint, install_multus): `--name[=value]`, shorthands `-t value`, `-tvalue`,
 *   `-t=value`, bool shorthands grouped (`-hx`); arguments that are not flags are skipped (interspersed); an
 *   error prints "Usage of <program>:" and the defaults, then the error line, and exits 2.
 * Usage text is laid out as each package's PrintDefaults lays it out (flags sorted by name).
 */

export interface GoFlag {
  name: string;
  /** pflag's one-letter shorthand */
  short?: string;
  kind: 'string' | 'bool';
  def: string | boolean;
  usage: string;
  hidden?: boolean;
}

export type FlagStyle = 'flag' | 'pflag';

export type FlagValues = Record<string, string | boolean>;

/** The flags' values (defaults for those not given), or what to print on stderr and the exit code. */
export type FlagParse =
  { ok: true; values: FlagValues; given: Set<string> } | { ok: false; exitCode: number; stderr: string };

const byName = (a: GoFlag, b: GoFlag): number => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
const quote = (s: string): string => JSON.stringify(s);
const isZero = (f: GoFlag): boolean => f.def === '' || f.def === false;

/** PrintDefaults of Go's flag package. */
function flagDefaults(flags: readonly GoFlag[]): string {
  let out = '';
  for (const f of [...flags].sort(byName)) {
    if (f.hidden) continue;
    let line = `  -${f.name}`;
    if (f.kind === 'string') line += ' string';
    line += line.length <= 4 ? '\t' : '\n    \t';
    line += f.usage.replaceAll('\n', '\n    \t');
    if (!isZero(f)) line += f.kind === 'string' ? ` (default ${quote(f.def as string)})` : ` (default ${f.def})`;
    out += line + '\n';
  }
  return out;
}

/** PrintDefaults of pflag (FlagUsagesWrapped(0)): the usage column aligned after the longest flag. */
function pflagDefaults(flags: readonly GoFlag[]): string {
  const rows = [...flags]
    .sort(byName)
    .filter((f) => !f.hidden)
    .map((f) => {
      const head =
        (f.short ? `  -${f.short}, --${f.name}` : `      --${f.name}`) + (f.kind === 'string' ? ' string' : '');
      let usage = f.usage;
      if (!isZero(f)) usage += f.kind === 'string' ? ` (default ${quote(f.def as string)})` : ` (default ${f.def})`;
      return { head, usage };
    });
  const width = Math.max(0, ...rows.map((r) => r.head.length)) + 1;
  return rows.map((r) => `${r.head} ${' '.repeat(width - r.head.length)} ${r.usage}\n`).join('');
}

/** What the program prints for `-h` with its own help flag (thin_entrypoint, install_multus): the defaults. */
export function printDefaults(style: FlagStyle, flags: readonly GoFlag[]): string {
  return style === 'flag' ? flagDefaults(flags) : pflagDefaults(flags);
}

/** The usage text of a flag set named `program` (Go prints os.Args[0]). */
export function usageOf(style: FlagStyle, program: string, flags: readonly GoFlag[]): string {
  return `Usage of ${program}:\n${printDefaults(style, flags)}`;
}

/** strconv.ParseBool */
function parseBool(v: string): boolean | undefined {
  if (['1', 't', 'T', 'true', 'TRUE', 'True'].includes(v)) return true;
  if (['0', 'f', 'F', 'false', 'FALSE', 'False'].includes(v)) return false;
  return undefined;
}

class FlagError extends Error {
  constructor(
    message: string,
    readonly help = false,
  ) {
    super(message);
  }
}

function defaults(flags: readonly GoFlag[]): FlagValues {
  return Object.fromEntries(flags.map((f) => [f.name, f.def]));
}

/** Go's flag.FlagSet.Parse. */
function parseFlag(flags: readonly GoFlag[], argv: readonly string[], values: FlagValues, given: Set<string>): void {
  const known = new Map(flags.map((f) => [f.name, f]));
  for (let i = 0; i < argv.length; i++) {
    const s = argv[i]!;
    if (s.length < 2 || s[0] !== '-') return;
    const minuses = s[1] === '-' ? 2 : 1;
    if (s === '--') return;
    const body = s.slice(minuses);
    if (body === '' || body[0] === '-' || body[0] === '=') throw new FlagError(`bad flag syntax: ${s}`);
    const eq = body.indexOf('=');
    const name = eq < 0 ? body : body.slice(0, eq);
    const f = known.get(name);
    if (!f) {
      if (name === 'help' || name === 'h') throw new FlagError('', true);
      throw new FlagError(`flag provided but not defined: -${name}`);
    }
    if (f.kind === 'bool') {
      const v = eq < 0 ? true : parseBool(body.slice(eq + 1));
      if (v === undefined)
        throw new FlagError(`invalid boolean value ${quote(body.slice(eq + 1))} for -${name}: parse error`);
      values[name] = v;
    } else if (eq >= 0) {
      values[name] = body.slice(eq + 1);
    } else if (i + 1 < argv.length) {
      values[name] = argv[++i]!;
    } else {
      throw new FlagError(`flag needs an argument: -${name}`);
    }
    given.add(name);
  }
}

/** Sets pflag flag `f` from `value` (strconv.ParseBool for bools). */
function setP(f: GoFlag, value: string, values: FlagValues, given: Set<string>): void {
  if (f.kind === 'bool') {
    const v = parseBool(value);
    if (v === undefined) {
      const shown = f.short ? `-${f.short}, --${f.name}` : `--${f.name}`;
      throw new FlagError(
        `invalid argument ${quote(value)} for ${quote(shown)} flag: strconv.ParseBool: parsing ${quote(value)}: invalid syntax`,
      );
    }
    values[f.name] = v;
  } else {
    values[f.name] = value;
  }
  given.add(f.name);
}

/** One `--name[=value]` of pflag; returns how many following arguments it took. */
function pflagLong(
  flags: readonly GoFlag[],
  s: string,
  rest: readonly string[],
  values: FlagValues,
  given: Set<string>,
): number {
  const body = s.slice(2);
  if (body === '' || body[0] === '-' || body[0] === '=') throw new FlagError(`bad flag syntax: ${s}`);
  const eq = body.indexOf('=');
  const name = eq < 0 ? body : body.slice(0, eq);
  const f = flags.find((x) => x.name === name);
  if (!f) {
    if (name === 'help') throw new FlagError('', true);
    throw new FlagError(`unknown flag: --${name}`);
  }
  if (eq >= 0) return (setP(f, body.slice(eq + 1), values, given), 0);
  if (f.kind === 'bool') return (setP(f, 'true', values, given), 0);
  if (rest.length === 0) throw new FlagError(`flag needs an argument: --${name}`);
  setP(f, rest[0]!, values, given);
  return 1;
}

/** One `-abc` group of pflag shorthands; returns how many following arguments it took. */
function pflagShort(
  flags: readonly GoFlag[],
  s: string,
  rest: readonly string[],
  values: FlagValues,
  given: Set<string>,
): number {
  let shorts = s.slice(1);
  while (shorts.length > 0) {
    const c = shorts[0]!;
    const f = flags.find((x) => x.short === c);
    if (!f) {
      if (c === 'h') throw new FlagError('', true);
      throw new FlagError(`unknown shorthand flag: '${c}' in -${shorts}`);
    }
    if (shorts.length > 2 && shorts[1] === '=') return (setP(f, shorts.slice(2), values, given), 0);
    if (f.kind === 'bool') {
      setP(f, 'true', values, given);
      shorts = shorts.slice(1);
      continue;
    }
    if (shorts.length > 1) return (setP(f, shorts.slice(1), values, given), 0);
    if (rest.length === 0) throw new FlagError(`flag needs an argument: '${c}' in -${shorts}`);
    setP(f, rest[0]!, values, given);
    return 1;
  }
  return 0;
}

/** pflag's FlagSet.Parse (interspersed: arguments that are not flags are skipped). */
function parsePflag(flags: readonly GoFlag[], argv: readonly string[], values: FlagValues, given: Set<string>): void {
  for (let i = 0; i < argv.length; i++) {
    const s = argv[i]!;
    if (s.length < 2 || s[0] !== '-') continue;
    if (s === '--') return;
    const rest = argv.slice(i + 1);
    i += s[1] === '-' ? pflagLong(flags, s, rest, values, given) : pflagShort(flags, s, rest, values, given);
  }
}

/** Parses `argv` (without the program name) the way `style`'s Go package does with ExitOnError. */
export function parseGoFlags(
  style: FlagStyle,
  program: string,
  flags: readonly GoFlag[],
  argv: readonly string[],
): FlagParse {
  const values = defaults(flags);
  const given = new Set<string>();
  try {
    (style === 'flag' ? parseFlag : parsePflag)(flags, argv, values, given);
    return { ok: true, values, given };
  } catch (e) {
    if (!(e instanceof FlagError)) throw e;
    const usage = usageOf(style, program, flags);
    if (e.help) return { ok: false, exitCode: 0, stderr: usage };
    const stderr = style === 'flag' ? `${e.message}\n${usage}` : `${usage}${e.message}\n`;
    return { ok: false, exitCode: 2, stderr };
  }
}
