/** daemon/pages.ts: which mappings the daemon may unmap at rest (only those that cannot hold its own data). */
import { describe, expect, it } from 'vitest';
import { droppable, dropFilePages, parseSmaps } from '../../../src/daemon/pages.ts';

const EXE = '/opt/cni/bin/.multus-bun-0123456789abcdef';
const mapping = (range: string, perms: string, path: string, rss: number, anon: number): string =>
  `${range} ${perms} 00000000 08:01 1234                       ${path}\n` +
  `Size:              10240 kB\nRss:               ${rss} kB\nPss:               ${rss} kB\n` +
  `Anonymous:         ${anon} kB\nSwap:                  0 kB\nVmFlags: rd ex mr mw me\n`;

const SMAPS = [
  mapping('00200000-01a40000', 'r--p', EXE, 6656, 0), // rodata: dropped
  mapping('01a40000-0684a000', 'r-xp', EXE, 34560, 0), // text: dropped
  mapping('0684a000-07204000', 'rw-p', EXE, 6144, 120), // data and the module graph: written, kept
  mapping('07204000-07300000', 'rw-p', '', 2048, 2048), // bss
  mapping('7f0000000000-7f0040000000', 'rw-p', '', 16000, 16000), // the heap
  mapping('7f1000000000-7f1000020000', 'r--p', '/usr/lib/x86_64-linux-gnu/libc.so.6', 300, 0), // dropped
  mapping('7f1000020000-7f1000030000', 'r--p', '/usr/lib/x86_64-linux-gnu/libc.so.6', 16, 16), // RELRO: kept
  mapping('7f1000030000-7f1000040000', 'r-xp', '/usr/lib/x86_64-linux-gnu/libm.so.6', 0, 0), // nothing resident
  mapping('7f2000000000-7f2000001000', 'r--s', '/dev/shm/x', 4, 0), // shared: kept
  mapping('7f3000000000-7f3000010000', 'r-xp', '/opt/cni/bin/.multus-bun-old (deleted)', 64, 0), // upgraded: dropped
  mapping('7ffd00000000-7ffd00002000', 'r-xp', '[vdso]', 8, 0), // not a file
].join('');

describe('daemon pages', () => {
  it('parses smaps: range, permissions, path, Rss and Anonymous', () => {
    const maps = parseSmaps(SMAPS);
    expect(maps).toHaveLength(11);
    expect(maps[1]).toEqual({ start: 0x1a40000, end: 0x684a000, perms: 'r-xp', path: EXE, rssKib: 34560, anonKib: 0 });
    expect(maps[3]!.path).toBe('');
  });

  it('drops only private, unwritable file mappings with resident pages and no anonymous page', () => {
    const chosen = droppable(parseSmaps(SMAPS)).map((m) => `${m.perms} ${m.path} ${m.start.toString(16)}`);
    expect(chosen).toEqual([
      `r--p ${EXE} 200000`,
      `r-xp ${EXE} 1a40000`,
      'r--p /usr/lib/x86_64-linux-gnu/libc.so.6 7f1000000000',
      'r-xp /opt/cni/bin/.multus-bun-old (deleted) 7f3000000000',
    ]);
  });

  it('outside Bun (no FFI) drops nothing and does not read smaps', () => {
    let read = 0;
    expect(
      dropFilePages(() => {
        read++;
        return SMAPS;
      }),
    ).toEqual({ kib: 0, mappings: 0 });
    expect(read).toBe(0);
  });
});
