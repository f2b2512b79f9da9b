/**
 * gojson.ts: JSON text as Go's `encoding/json` Marshal writes a decoded `map[string]interface{}` (pure).
 *
 * Multus' entrypoint decodes the master CNI config into a generic map and marshals it back into the generated
 * 00-multus.conf, so the delegate there is the master with its keys sorted (bytewise, at every depth), `<`, `>`,
 * `&`, U+2028 and U+2029 escaped as `\u003c`..., and numbers in Go's float64 form. `goMarshal` writes the same
 * bytes for any value `JSON.parse` returns, so the two generated files can be compared byte for byte
 * (docs/install.md, "Generated config").
 * Tested by test/unit/install/install-conf.test.ts (goMarshal, goNumber).
 */
import { GO_HTML_ESCAPES } from './json.ts';

const ESCAPES: Record<string, string> = {
  '"': '\\"',
  '\\': '\\\\',
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
  ...GO_HTML_ESCAPES,
};

/** A string as Go's json.Marshal quotes it (HTML-safe; other control characters as \u00XX). */
export function goQuoteJSON(s: string): string {
  const hex = (c: string): string => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0');
  // eslint-disable-next-line no-control-regex
  const special = /["\\<>&\u2028\u2029\u0000-\u001f]/g;
  return '"' + s.replace(special, (c) => ESCAPES[c] ?? hex(c)) + '"';
}

/** A float64 as Go's json.Marshal writes it: 'f' form, or 'e' form below 1e-6 and from 1e21, e-07 -> e-7. */
export function goNumber(n: number): string {
  if (!Number.isFinite(n)) throw new Error(`json: unsupported value: ${n}`);
  if (Object.is(n, -0)) return '-0';
  // JavaScript's shortest round-trip digits are Go's `-1` precision; only the notation thresholds differ.
  const abs = Math.abs(n);
  if (abs !== 0 && (abs < 1e-6 || abs >= 1e21)) {
    const [mant, exp] = n.toExponential().split('e') as [string, string];
    const sign = exp.startsWith('-') ? '-' : '+';
    const digits = exp.replace(/^[+-]/, '');
    // Go's 'e' format has at least two exponent digits; Marshal then trims the e-0X case back to one.
    const e = sign === '-' ? digits : digits.padStart(2, '0');
    return `${mant}e${sign}${e}`;
  }
  return String(n);
}

function byteOrder(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/** The compact JSON of `v` with Go's key order, escaping and numbers. */
export function goMarshal(v: unknown): string {
  if (v === null) return 'null';
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (typeof v === 'number') return goNumber(v);
  if (typeof v === 'string') return goQuoteJSON(v);
  if (Array.isArray(v)) return '[' + v.map(goMarshal).join(',') + ']';
  if (typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return (
      '{' +
      Object.keys(o)
        .sort(byteOrder)
        .map((k) => goQuoteJSON(k) + ':' + goMarshal(o[k]))
        .join(',') +
      '}'
    );
  }
  throw new Error(`json: unsupported type: ${typeof v}`);
}
