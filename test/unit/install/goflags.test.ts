/**
 * install/goflags.ts: Go's flag and pflag command lines, as Multus' programs parse them. The texts expected here
 * are laid out from the packages' sources (flag.PrintDefaults, pflag v1.0.9's FlagUsagesWrapped and error types);
 * test/install/names.test.ts compares the same cases with Multus' own binaries.
 */
import { describe, expect, it } from 'vitest';
import { type GoFlag, parseGoFlags, printDefaults, usageOf } from '../../../src/install/goflags.ts';

const DAEMON: GoFlag[] = [
  { name: 'version', kind: 'bool', def: false, usage: 'Show version' },
  { name: 'config', kind: 'string', def: '/etc/d.json', usage: 'Specify the path' },
];
const INSTALL: GoFlag[] = [
  { name: 'type', short: 't', kind: 'string', def: '', usage: 'specify installer type (thick/thin)' },
  { name: 'dest-dir', short: 'd', kind: 'string', def: '/host/opt/cni/bin', usage: 'destination directory' },
  { name: 'help', short: 'h', kind: 'bool', def: false, usage: 'show help message and quit' },
  { name: 'on', kind: 'bool', def: true, usage: 'a flag on by default' },
  { name: 'secret', kind: 'bool', def: false, usage: 'hidden', hidden: true },
];

describe("Go's flag package (multus-daemon, multus)", () => {
  const usage =
    'Usage of /bin/d:\n' +
    '  -config string\n    \tSpecify the path (default "/etc/d.json")\n' +
    '  -version\n    \tShow version\n';

  it('prints the defaults sorted by name, a one-letter bool on its line', () => {
    expect(usageOf('flag', '/bin/d', DAEMON)).toBe(usage);
    const v: GoFlag = { name: 'v', kind: 'bool', def: false, usage: 'Show application version' };
    expect(printDefaults('flag', [v])).toBe('  -v\tShow application version\n');
  });

  it('takes -name, --name, -name=value and -name value; stops at the first argument that is not a flag', () => {
    const r = parseGoFlags('flag', '/bin/d', DAEMON, ['--config', '/a', '-version', 'rest', '-config=/b']);
    expect(r).toEqual({ ok: true, values: { version: true, config: '/a' }, given: new Set(['config', 'version']) });
    const eq = parseGoFlags('flag', '/bin/d', DAEMON, ['-config=/c', '--version=false']);
    expect(eq.ok && eq.values).toEqual({ version: false, config: '/c' });
    const dash = parseGoFlags('flag', '/bin/d', DAEMON, ['--', '-config=/c']);
    expect(dash.ok && dash.values.config).toBe('/etc/d.json');
  });

  it('an error: its line, then the usage, exit 2; -h and -help: the usage, exit 0', () => {
    const cases: [string[], string][] = [
      [['-foo'], 'flag provided but not defined: -foo'],
      [['--config'], 'flag needs an argument: -config'],
      [['-version=maybe'], 'invalid boolean value "maybe" for -version: parse error'],
      [['---x'], 'bad flag syntax: ---x'],
      [['-=x'], 'bad flag syntax: -=x'],
    ];
    for (const [argv, line] of cases) {
      expect(parseGoFlags('flag', '/bin/d', DAEMON, argv), argv.join(' ')).toEqual({
        ok: false,
        exitCode: 2,
        stderr: `${line}\n${usage}`,
      });
    }
    for (const h of ['-h', '-help', '--help']) {
      expect(parseGoFlags('flag', '/bin/d', DAEMON, [h])).toEqual({ ok: false, exitCode: 0, stderr: usage });
    }
  });
});

describe('pflag (thin_entrypoint, install_multus)', () => {
  const defaults =
    '  -d, --dest-dir string   destination directory (default "/host/opt/cni/bin")\n' +
    '  -h, --help              show help message and quit\n' +
    '      --on                a flag on by default (default true)\n' +
    '  -t, --type string       specify installer type (thick/thin)\n';

  it('lays the defaults out in aligned columns, hidden flags left out', () => {
    expect(printDefaults('pflag', INSTALL)).toBe(defaults);
    expect(usageOf('pflag', '/install_multus', INSTALL)).toBe(`Usage of /install_multus:\n${defaults}`);
  });

  it('takes --name=value, --name value, -t value, -tvalue, -t=value, grouped bools; skips other arguments', () => {
    const r = parseGoFlags('pflag', 'p', INSTALL, ['x', '-t', 'thick', 'y', '--dest-dir', '/d', '--on=false']);
    expect(r.ok && r.values).toEqual({ type: 'thick', 'dest-dir': '/d', help: false, on: false, secret: false });
    expect(r.ok && [...r.given].sort()).toEqual(['dest-dir', 'on', 'type']);
    for (const argv of [['-tthin'], ['-t=thin'], ['--type=thin'], ['-ht', 'thin']]) {
      const p = parseGoFlags('pflag', 'p', INSTALL, argv);
      expect(p.ok && p.values.type, argv.join(' ')).toBe('thin');
    }
    const grouped = parseGoFlags('pflag', 'p', INSTALL, ['-ht', 'thin']);
    expect(grouped.ok && grouped.values.help).toBe(true);
    // a string flag takes the next argument whatever it is; a bool never does
    const next = parseGoFlags('pflag', 'p', INSTALL, ['-d', '--on', '--on', 'false']);
    expect(next.ok && [next.values['dest-dir'], next.values.on]).toEqual(['--on', true]);
    expect(parseGoFlags('pflag', 'p', INSTALL, ['--', '--bogus']).ok).toBe(true);
  });

  it('an error: the usage, then its line, exit 2', () => {
    const cases: [string[], string][] = [
      [['--bogus'], 'unknown flag: --bogus'],
      [['--bogus=1'], 'unknown flag: --bogus'],
      [['-x'], "unknown shorthand flag: 'x' in -x"],
      [['-hx'], "unknown shorthand flag: 'x' in -x"],
      [['--type'], 'flag needs an argument: --type'],
      [['-t'], "flag needs an argument: 't' in -t"],
      [['--on=maybe'], 'invalid argument "maybe" for "--on" flag: strconv.ParseBool: parsing "maybe": invalid syntax'],
      [
        ['-h=maybe'],
        'invalid argument "maybe" for "-h, --help" flag: strconv.ParseBool: parsing "maybe": invalid syntax',
      ],
      [['--=x'], 'bad flag syntax: --=x'],
    ];
    for (const [argv, line] of cases) {
      expect(parseGoFlags('pflag', '/p', INSTALL, argv), argv.join(' ')).toEqual({
        ok: false,
        exitCode: 2,
        stderr: `Usage of /p:\n${defaults}${line}\n`,
      });
    }
  });

  it('without a help flag of its own, --help and -h print the usage and exit 0', () => {
    const flags = INSTALL.filter((f) => f.name !== 'help');
    for (const h of ['--help', '-h']) {
      expect(parseGoFlags('pflag', '/p', flags, [h])).toEqual({
        ok: false,
        exitCode: 0,
        stderr: usageOf('pflag', '/p', flags),
      });
    }
  });
});
