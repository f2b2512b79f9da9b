/**
 * install/entrypoints.ts in-process: install_multus with the image's hard-linked passthru, thin_entrypoint's
 * own option checks. (Flags and output beside Multus' programs: test/install/names.test.ts.)
 */
import { linkSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { installMultusMain, thinEntrypointMain } from '../../../src/install/entrypoints.ts';

const dir = mkdtempSync(join(tmpdir(), 'entrypoints-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function io() {
  const out = { stdout: '', stderr: '' };
  return { out, io: { stdout: (s: string) => (out.stdout += s), stderr: (s: string) => (out.stderr += s) } };
}

/** An image's bin dir: multus, passthru as a hard link to it (as scripts/image.sh makes it), multus-shim. */
function imageBin(): string {
  const src = join(dir, `src-${Math.random().toString(16).slice(2)}`);
  mkdirSync(src);
  writeFileSync(join(src, 'multus'), 'the executable');
  linkSync(join(src, 'multus'), join(src, 'passthru'));
  writeFileSync(join(src, 'multus-shim'), 'the shim');
  return src;
}

describe('install_multus', () => {
  it('-t thin: multus copied, passthru a hard link to it (the image links them), no temp file left', async () => {
    const dest = join(dir, 'thin');
    mkdirSync(dest);
    writeFileSync(join(dest, 'passthru'), 'an older passthru');
    const src = imageBin();
    const { out, io: o } = io();
    expect(await installMultusMain('install_multus', ['-t', 'thin', '-d', dest], o, src)).toBe(0);
    expect(readdirSync(dest).sort()).toEqual(['multus', 'passthru']);
    expect(statSync(join(dest, 'passthru')).ino).toBe(statSync(join(dest, 'multus')).ino);
    expect(statSync(join(dest, 'multus')).mode & 0o777).toBe(0o755);
    expect(out.stdout).toBe(`multus multus copy succeeded!\npassthru cni ${join(src, 'passthru')} copy succeeded!\n`);
  });

  it('-t thin over an older build: its Bun executable copied first, the older one removed (docs/build.md)', async () => {
    const launcher = (id: string) => {
      const trailer = Buffer.alloc(64);
      Buffer.from(id, 'hex').copy(trailer, 16);
      Buffer.from('multus-ts-bun\x00\x00\x01', 'latin1').copy(trailer, 48);
      return Buffer.concat([Buffer.from('launcher'), trailer]);
    };
    const dest = join(dir, 'upgrade');
    mkdirSync(dest);
    writeFileSync(join(dest, 'multus'), launcher('aaaaaaaaaaaaaaaa'));
    writeFileSync(join(dest, '.multus-bun-aaaaaaaaaaaaaaaa'), 'older');
    const src = imageBin();
    writeFileSync(join(src, 'multus'), launcher('0123456789abcdef')); // passthru: a hard link to it
    writeFileSync(join(src, '.multus-bun-0123456789abcdef'), 'new');
    const { io: o } = io();
    expect(await installMultusMain('install_multus', ['-t', 'thin', '-d', dest], o, src)).toBe(0);
    expect(readdirSync(dest).sort()).toEqual(['.multus-bun-0123456789abcdef', 'multus', 'passthru']);
  });

  it('-t thick: multus-shim and a copy of passthru (no multus beside it to link to)', async () => {
    const dest = join(dir, 'thick');
    mkdirSync(dest);
    const src = imageBin();
    const { out, io: o } = io();
    expect(await installMultusMain('install_multus', ['--type=thick', `--dest-dir=${dest}`], o, src)).toBe(0);
    expect(readdirSync(dest).sort()).toEqual(['multus-shim', 'passthru']);
    expect(readFileSync(join(dest, 'multus-shim'), 'utf8')).toBe('the shim');
    expect(readFileSync(join(dest, 'passthru'), 'utf8')).toBe('the executable');
    expect(statSync(join(dest, 'passthru')).nlink).toBe(1);
    expect(out.stdout).toBe(
      `multus multus-shim copy succeeded!\npassthru cni ${join(src, 'passthru')} copy succeeded!\n`,
    );
  });

  it('a missing source: exit 1, a line naming the file, nothing left in the destination', async () => {
    const dest = join(dir, 'missing');
    mkdirSync(dest);
    const { out, io: o } = io();
    expect(await installMultusMain('install_multus', ['-t', 'thick', '-d', dest], o, join(dir, 'nothing'))).toBe(1);
    expect(out.stderr).toMatch(/^failed to copy file multus-shim: cannot copy .*multus-shim/);
    expect(readdirSync(dest)).toEqual([]);
  });
});

describe('thin_entrypoint', () => {
  it("checks multus install's option values (exit 2, one line) after pflag accepted them", async () => {
    const { out, io: o } = io();
    expect(await thinEntrypointMain('thin_entrypoint', ['--token-binding', 'bogus'], o)).toBe(2);
    expect(out.stderr).toBe(
      'thin_entrypoint: --token-binding=bogus: write --token-binding=pod or --token-binding=node\n',
    );
  });

  it('-h: the defaults on stderr and exit 1, as Multus', async () => {
    const { out, io: o } = io();
    expect(await thinEntrypointMain('thin_entrypoint', ['-h'], o)).toBe(1);
    expect(out.stderr).toMatch(/^ {6}--additional-bin-dir string/);
    expect(out.stderr).toContain('  -h, --help ');
  });
});
