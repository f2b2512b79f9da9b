/**
 * cni/ip.ts: IP addresses and CIDRs as Go parses them (netip.ParseAddr, net.ParseCIDR) and prints them
 * (net.IP.String, net.IPNet.String): IPv6 compressed, IPv4-mapped shown as IPv4, no leading zeros; and the checks
 * Multus makes with net.ParseIP, net.ParseCIDR and net.ParseMAC on selection requests (pure).
 * Tested by test/unit/cni/result.test.ts (addresses as Go prints them).
 */

export interface Cidr {
  text: string; // Go's IPNet.String() of types.ParseCIDR(s): host bits kept, "a.b.c.d/n" or "v6/n"
  is4: boolean; // Go's Dst.IP.To4() != nil: IPv4, or IPv4-mapped IPv6
}

const V4_PART = /^(0|[1-9]\d{0,2})$/; // netip rejects leading zeros
const V6_GROUP = /^[0-9a-fA-F]{1,4}$/;

export function parseIPv4(s: string): number[] | null {
  const parts = s.split('.');
  if (parts.length !== 4 || !parts.every((p) => V4_PART.test(p) && Number(p) <= 255)) return null;
  return parts.map(Number);
}

/** 16-bit words of an IPv6 literal, or null. An embedded IPv4 is allowed only at the very end. */
export function parseIPv6(s: string): number[] | null {
  const halves = s.split('::');
  if (halves.length > 2) return null;
  const pieces = halves.map((h) => (h === '' ? [] : h.split(':')));
  const words: number[][] = [];
  for (const [i, list] of pieces.entries()) {
    const out: number[] = [];
    for (const [j, piece] of list.entries()) {
      const last = i === pieces.length - 1 && j === list.length - 1;
      const v4 = last && piece.includes('.') ? parseIPv4(piece) : null;
      if (v4) out.push((v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!);
      else if (V6_GROUP.test(piece)) out.push(parseInt(piece, 16));
      else return null;
    }
    words.push(out);
  }
  const [head = [], tail = []] = words;
  if (halves.length === 1) return head.length === 8 ? head : null;
  const missing = 8 - head.length - tail.length;
  return missing >= 1 ? [...head, ...new Array<number>(missing).fill(0), ...tail] : null; // "::" stands for 1+ groups
}

/**
 * 4 for an IPv4 literal, 6 for an IPv6 one, else 0: node:net's isIP for texts without a zone (a zone is 0 here;
 * every caller refuses zones). Pure, so that parsing an address loads no node:net on the thin path (docs/build.md).
 */
export function ipFamily(s: string): 0 | 4 | 6 {
  if (!s.includes(':')) return parseIPv4(s) ? 4 : 0;
  return !s.includes('%') && parseIPv6(s) ? 6 : 0;
}

/** 8 words (IPv4 as IPv4-mapped) and whether the text was IPv4; zones rejected like net.ParseIP. */
export function parseIp(s: string): { words: number[]; v4Text: boolean } | null {
  const v4 = s.includes(':') ? null : parseIPv4(s);
  if (v4) return { words: [0, 0, 0, 0, 0, 0xffff, (v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!], v4Text: true };
  const v6 = s.includes('%') ? null : parseIPv6(s);
  return v6 ? { words: v6, v4Text: false } : null;
}

export function isV4Mapped(w: number[]): boolean {
  return w.slice(0, 5).every((x) => x === 0) && w[5] === 0xffff;
}

/** Go's IP.String(): dotted IPv4 for IPv4-mapped, else RFC 5952 (longest run of 2+ zero groups, first wins). */
export function formatIp(w: number[]): string {
  if (isV4Mapped(w)) return [w[6]! >> 8, w[6]! & 255, w[7]! >> 8, w[7]! & 255].join('.');
  let [start, end] = [-1, -1];
  for (let i = 0; i < 8; i++) {
    let j = i;
    while (j < 8 && w[j] === 0) j++;
    if (j - i >= 2 && j - i > end - start) [start, end] = [i, j];
  }
  const hex = (ws: number[]): string => ws.map((x) => x.toString(16)).join(':');
  return start < 0 ? hex(w) : `${hex(w.slice(0, start))}::${hex(w.slice(end))}`;
}

export function parseCidr(s: string): Cidr | null {
  const slash = s.indexOf('/');
  const ip = slash < 0 ? null : parseIp(s.slice(0, slash));
  const bitsText = s.slice(slash + 1);
  if (!ip || !/^\d+$/.test(bitsText)) return null;
  const bits = Number(bitsText);
  if (bits > (ip.v4Text ? 32 : 128)) return null;
  const is4 = isV4Mapped(ip.words);
  // IPNet.String() of an IPv4-mapped address with a 128-bit mask prints the mask's last 32 bits.
  const prefix = is4 && !ip.v4Text ? Math.max(0, bits - 96) : bits;
  return { text: `${formatIp(ip.words)}/${prefix}`, is4 };
}

// ---------------------------------------------------------------------------------------------------------
// Go's parsers, as Multus calls them: net.ParseMAC, net.ParseIP, net.ParseCIDR.

/** Go net.ParseMAC: 6, 8 or 20 octets as `xx:xx…`/`xx-xx…`, or `xxxx.xxxx…`; Go's error text, or null. */
export function macError(s: string): string | null {
  const invalid = `address ${s}: invalid MAC address`;
  const colons = s[2] === ':' || s[2] === '-';
  if (!colons && s[4] !== '.') return invalid;
  const groups = s.split(colons ? s[2]! : '.');
  const group = colons ? /^[0-9a-fA-F]{2}$/ : /^[0-9a-fA-F]{4}$/;
  const octets = groups.length * (colons ? 1 : 2);
  return [6, 8, 20].includes(octets) && groups.every((g) => group.test(g)) ? null : invalid;
}

/** Go net.ParseIP: an IPv4 (no leading zeros) or IPv6 address, no zone. */
export function isGoIp(s: string): boolean {
  return ipFamily(s) !== 0;
}

/** Go net.ParseCIDR: `<ip>/<decimal prefix>` with the prefix at most 32 (IPv4 text) or 128. */
export function isGoCidr(s: string): boolean {
  const slash = s.indexOf('/');
  const ip = s.slice(0, slash);
  const bits = s.slice(slash + 1);
  if (slash < 0 || !isGoIp(ip) || !/^\d+$/.test(bits)) return false;
  return Number(bits) <= (ipFamily(ip) === 4 ? 32 : 128);
}

/** An IPv6 address text in ::ffff:0:0/96 (IPv4-mapped), in any spelling. */
export function isV4MappedText(ip: string): boolean {
  const w = ip.includes('%') ? null : parseIPv6(ip);
  return w !== null && isV4Mapped(w);
}

/** Go's `ip.To4() != nil`: IPv4, or IPv4-mapped IPv6. */
export function isV4(ip: string): boolean {
  return ipFamily(ip) === 4 || isV4MappedText(ip);
}
