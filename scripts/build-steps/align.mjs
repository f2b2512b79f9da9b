/**
 * Moves the loadable segments of an ELF64 executable in its file so that each one's address and file offset are
 * equal modulo 64 KiB, without changing any address: zero bytes are inserted before a segment that needs it, and
 * every file offset after them (program headers, section headers, the section header table) is moved by as much.
 *
 * Why: a page fault on a file mapping maps the kernel's 64 KiB fault-around window, and since Linux 6.18 every
 * folio of the page cache the window touches, whole. Bun's code lies 32 KiB off a 64 KiB boundary in its file,
 * so a file cached in 64 KiB folios (a `cp`, copy_file_range, readahead of a read) mapped two folios per fault:
 * 36.7 MiB peak RSS per call instead of 31.1. Aligned, a 64 KiB folio is exactly one window, as in Go's binaries
 * (docs/archive/performance.md, "The installed copy kept in the page cache").
 *
 * Pure: bytes in, bytes out (test/unit/build/align.test.ts).
 */

export const ALIGN = 0x10000;
const PT_LOAD = 1;
const SHT_NOBITS = 8;

/** The loadable segments' (address - offset) modulo ALIGN, in file order: all 0 once aligned. */
export function segmentSkews(elf) {
  return loads(header(elf)).map((p) => Number((p.vaddr - p.offset) % BigInt(ALIGN)));
}

/**
 * @typedef {{ at: number, type: number, offset: bigint, vaddr: bigint }} Phdr
 * @typedef {{ at: number, type: number, offset: bigint }} Shdr
 * @param {Uint8Array} elf
 */
function header(elf) {
  const b = Buffer.from(elf.buffer, elf.byteOffset, elf.byteLength);
  if (b.readUInt32BE(0) !== 0x7f454c46 || b[4] !== 2 || b[5] !== 1) throw new Error('not a little-endian ELF64 file');
  const h = {
    b,
    phoff: b.readBigUInt64LE(0x20),
    shoff: b.readBigUInt64LE(0x28),
    phentsize: b.readUInt16LE(0x36),
    phnum: b.readUInt16LE(0x38),
    shentsize: b.readUInt16LE(0x3a),
    shnum: b.readUInt16LE(0x3c),
  };
  /** @type {Phdr[]} */
  const phdrs = [];
  for (let i = 0; i < h.phnum; i++) {
    const at = Number(h.phoff) + i * h.phentsize;
    phdrs.push({
      at,
      type: b.readUInt32LE(at),
      offset: b.readBigUInt64LE(at + 8),
      vaddr: b.readBigUInt64LE(at + 16),
    });
  }
  /** @type {Shdr[]} */
  const shdrs = [];
  for (let i = 0; i < h.shnum; i++) {
    const at = Number(h.shoff) + i * h.shentsize;
    shdrs.push({ at, type: b.readUInt32LE(at + 4), offset: b.readBigUInt64LE(at + 24) });
  }
  return { ...h, phdrs, shdrs };
}

/** @param {{ phdrs: Phdr[] }} h */
function loads(h) {
  return h.phdrs.filter((p) => p.type === PT_LOAD).sort((a, b) => (a.offset < b.offset ? -1 : 1));
}

/**
 * The executable with its loadable segments aligned (see above); the same bytes when they already are. Throws
 * when the file is not one this can move safely (a segment that does not start past the program headers).
 */
export function alignSegments(elf) {
  const h = header(elf);
  const align = BigInt(ALIGN);
  // where zero bytes go (a segment's first byte in the file) and how many, so that each skew becomes 0
  const inserts = [];
  let shift = 0n;
  for (const p of loads(h)) {
    const need = (((p.vaddr - p.offset - shift) % align) + align) % align;
    if (need === 0n) continue;
    if (p.offset < h.phoff + BigInt(h.phnum * h.phentsize)) throw new Error('a segment to move holds the headers');
    inserts.push({ at: p.offset, add: need });
    shift += need;
  }
  if (inserts.length === 0) return Buffer.from(h.b);
  const moved = (off) => inserts.reduce((o, ins) => (off >= ins.at ? o + ins.add : o), off);
  const parts = [];
  let from = 0n;
  for (const ins of inserts) {
    parts.push(h.b.subarray(Number(from), Number(ins.at)), Buffer.alloc(Number(ins.add)));
    from = ins.at;
  }
  parts.push(h.b.subarray(Number(from)));
  const out = Buffer.concat(parts);
  // headers: they lie before the first insert (checked above for the program headers; the ELF header is at 0),
  // so they are found at their old place in `out`, except the section header table, which moves
  const shoff = moved(h.shoff);
  out.writeBigUInt64LE(shoff, 0x28);
  for (const p of h.phdrs) {
    // every segment's offset past an insert moves (LOAD, TLS, DYNAMIC...); a zero-sized one at 0 stays
    out.writeBigUInt64LE(moved(p.offset), p.at + 8);
  }
  for (let i = 0; i < h.shdrs.length; i++) {
    const s = h.shdrs[i];
    const at = Number(shoff) + i * h.shentsize;
    // SHT_NOBITS (.bss, .tbss) have no bytes in the file; their offsets move with their neighbours all the same
    if (s.offset === 0n && s.type !== SHT_NOBITS) continue;
    out.writeBigUInt64LE(moved(s.offset), at + 24);
  }
  return out;
}
