/**
 * scripts/build-steps/align.mjs: the Bun executable's loadable segments moved in the file so that address and
 * offset agree modulo 64 KiB (docs/archive/performance.md, "The installed copy kept in 32 KiB folios"), on a small ELF64
 * file made here: every segment's bytes found at its new offset, every header offset moved with them.
 */
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs build step without type declarations
import { ALIGN, alignSegments, segmentSkews } from '../../../scripts/build-steps/align.mjs';

interface Seg {
  type: number;
  offset: number;
  vaddr: number;
  size: number;
}
interface Sec {
  type: number;
  offset: number;
}

const PT_LOAD = 1;
const PT_TLS = 7;

/** An ELF64 file: header, program headers at 64, segments' bytes (each filled with its index + 1), section table. */
function elf(segs: Seg[], secs: Sec[], shoff: number): Buffer {
  const end = Math.max(shoff + secs.length * 64, ...segs.map((s) => s.offset + s.size));
  const b = Buffer.alloc(end);
  b.writeUInt32BE(0x7f454c46, 0);
  b[4] = 2;
  b[5] = 1;
  b.writeBigUInt64LE(64n, 0x20);
  b.writeBigUInt64LE(BigInt(shoff), 0x28);
  b.writeUInt16LE(56, 0x36);
  b.writeUInt16LE(segs.length, 0x38);
  b.writeUInt16LE(64, 0x3a);
  b.writeUInt16LE(secs.length, 0x3c);
  segs.forEach((s, i) => {
    const at = 64 + i * 56;
    b.writeUInt32LE(s.type, at);
    b.writeBigUInt64LE(BigInt(s.offset), at + 8);
    b.writeBigUInt64LE(BigInt(s.vaddr), at + 16);
    b.writeBigUInt64LE(BigInt(s.size), at + 32);
    if (s.type === PT_LOAD && s.offset > 0) b.fill(i + 1, s.offset, s.offset + s.size);
  });
  secs.forEach((s, i) => {
    b.writeUInt32LE(s.type, shoff + i * 64 + 4);
    b.writeBigUInt64LE(BigInt(s.offset), shoff + i * 64 + 24);
  });
  return b;
}

const phdr = (b: Buffer, i: number) => Number(b.readBigUInt64LE(64 + i * 56 + 8));
const shdr = (b: Buffer, i: number) => Number(b.readBigUInt64LE(Number(b.readBigUInt64LE(0x28)) + i * 64 + 24));

// Bun 1.4.5's layout in small: code 32 KiB off a 64 KiB boundary, data 36 KiB off
const SEGS: Seg[] = [
  { type: PT_LOAD, offset: 0, vaddr: 0x200000, size: 0x1764 },
  { type: PT_LOAD, offset: 0x1d00, vaddr: 0x209d00, size: 0x3000 },
  { type: PT_LOAD, offset: 0x4d00, vaddr: 0x20dd00, size: 0x800 },
  { type: PT_TLS, offset: 0x4d00, vaddr: 0x20dd00, size: 0x10 },
];
const SECS: Sec[] = [
  { type: 0, offset: 0 },
  { type: 1, offset: 0x1000 },
  { type: 1, offset: 0x1d00 },
  { type: 1, offset: 0x4d00 },
  { type: 8, offset: 0x5500 },
];

describe('alignSegments', () => {
  it('moves each loadable segment to its address modulo 64 KiB, bytes and headers with it', () => {
    const before = elf(SEGS, SECS, 0x5500);
    expect(segmentSkews(before)).toEqual([0, 0x8000, 0x9000]);
    const after = alignSegments(before);
    expect(segmentSkews(after)).toEqual([0, 0, 0]);
    expect(after.length - before.length).toBe(0x9000);
    expect([0, 1, 2, 3].map((i) => phdr(after, i))).toEqual([0, 0x1d00 + 0x8000, 0x4d00 + 0x9000, 0x4d00 + 0x9000]);
    for (const i of [1, 2]) {
      const s = SEGS[i]!;
      const moved = phdr(after, i);
      expect(after.subarray(moved, moved + s.size).equals(before.subarray(s.offset, s.offset + s.size))).toBe(true);
    }
    expect(Number(after.readBigUInt64LE(0x28))).toBe(0x5500 + 0x9000);
    expect([0, 1, 2, 3, 4].map((i) => shdr(after, i))).toEqual([0, 0x1000, 0x9d00, 0xdd00, 0xe500]);
    // what lies between the program headers and the first insert is where it was
    const phEnd = 64 + SEGS.length * 56;
    expect(after.subarray(phEnd, 0x1d00).equals(before.subarray(phEnd, 0x1d00))).toBe(true);
  });

  it('leaves an aligned file as it is', () => {
    const aligned = alignSegments(elf(SEGS, SECS, 0x5500));
    expect(alignSegments(aligned).equals(aligned)).toBe(true);
  });

  it('refuses what is not an ELF64 file, and a segment to move that holds the headers', () => {
    expect(() => alignSegments(Buffer.alloc(128))).toThrow('not a little-endian ELF64 file');
    const headers: Seg[] = [{ type: PT_LOAD, offset: 0, vaddr: 0x208000, size: 0x1000 }];
    expect(() => alignSegments(elf(headers, [], 0x1000))).toThrow('a segment to move holds the headers');
    expect(ALIGN).toBe(0x10000);
  });
});
