/**
 * k8s/yaml.ts: the block-style YAML subset that kubectl, kubeadm, kind, k3s and Multus' entrypoint write, read
 * by a small strict reader that either returns exactly what a YAML parser would or throws `YamlSubsetError`;
 * the caller then hands the text to a full YAML parser in the lazily loaded fallback module (pure).
 * Tested by test/unit/k8s/kubeconfig.test.ts.
 */
import { YamlSubsetError } from './kubeconfig.ts';

// ---------------------------------------------------------------------------------------------------------------
// YAML, the block subset (pure)

interface Line {
  indent: number;
  text: string;
  no: number;
}

interface Cursor {
  lines: Line[];
  i: number;
}

const unsupported = (no: number, what: string): never => {
  throw new YamlSubsetError(`line ${no}: ${what}`);
};

function splitLines(src: string): Line[] {
  const out: Line[] = [];
  const rows = src.replace(/^\uFEFF/, '').split(/\r?\n/);
  rows.forEach((raw, idx) => {
    const no = idx + 1;
    if (/^\s*(?:#.*)?$/.test(raw)) return;
    if (raw.startsWith('---') && out.length === 0 && /^---\s*(?:#.*)?$/.test(raw)) return;
    if (/^(?:---|\.\.\.|%)/.test(raw)) unsupported(no, 'document markers and directives');
    const indent = /^ */.exec(raw)?.[0].length ?? 0;
    if (raw[indent] === '\t') unsupported(no, 'tab indentation');
    out.push({ indent, text: raw.slice(indent).trimEnd(), no });
  });
  return out;
}

const isSeqItem = (t: string): boolean => t === '-' || t.startsWith('- ');
const KEY = /^([A-Za-z0-9_][-A-Za-z0-9_./]*):(?: +(.*))?$/;

/** Skips a trailing ` # comment` after a quoted scalar or flow token; anything else there is unsupported. */
function afterToken(rest: string, no: number): void {
  if (rest !== '' && !/^\s+#/.test(rest)) unsupported(no, 'text after a quoted value');
}

function doubleQuoted(s: string, no: number): string {
  const m = /^"((?:[^"\\]|\\.)*)"(.*)$/.exec(s);
  if (!m) return unsupported(no, 'multi-line double-quoted string');
  afterToken(m[2] ?? '', no);
  try {
    return JSON.parse(`"${m[1] ?? ''}"`) as string; // JSON escapes are a subset of YAML's
  } catch {
    return unsupported(no, 'a YAML-only escape or a raw control character in a double-quoted string');
  }
}

function singleQuoted(s: string, no: number): string {
  const m = /^'((?:[^']|'')*)'(.*)$/.exec(s);
  if (!m) return unsupported(no, 'multi-line single-quoted string');
  afterToken(m[2] ?? '', no);
  return (m[1] ?? '').replace(/''/g, "'");
}

const CLEAN_NUMBER = /^[-+]?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?$/;
/** js-yaml's int (binary, octal, hex, underscores) and float (leading dot, .inf, .nan) forms. */
const YAML_NUMBER =
  /^[-+]?(?:0b[01_]+|0x[0-9a-fA-F_]+|0o[0-7_]+|[0-9][0-9_]*(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9_]+(?:[eE][-+]?[0-9]+)?|\.(?:inf|Inf|INF|nan|NaN|NAN))$/;

/** YAML 1.2 core schema (js-yaml's default) for a plain scalar; forms where parsers differ are unsupported. */
function plainScalar(s: string, no: number): unknown {
  const hash = s.search(/\s#/);
  const v = (hash >= 0 ? s.slice(0, hash) : s).trimEnd();
  if (/^[[\]{}&*!|>%@`"'?,]/.test(v) || /^-(?:\s|$)/.test(v))
    unsupported(no, 'a flow collection, anchor, alias, tag or block scalar');
  if (/:(?:\s|$)/.test(v)) unsupported(no, 'a ": " inside a plain value');
  if (/^(?:~|null|Null|NULL)?$/.test(v)) return null;
  if (/^(?:true|True|TRUE)$/.test(v)) return true;
  if (/^(?:false|False|FALSE)$/.test(v)) return false;
  if (CLEAN_NUMBER.test(v)) return Number(v);
  if (YAML_NUMBER.test(v) || /^[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}/.test(v) || v === '<<') {
    unsupported(no, 'a number, timestamp or merge key that YAML parsers read differently');
  }
  return v;
}

function scalar(s: string, no: number): unknown {
  if (s.startsWith('"')) return doubleQuoted(s, no);
  if (s.startsWith("'")) return singleQuoted(s, no);
  const flow = /^(\{\}|\[\])(.*)$/.exec(s);
  if (flow) {
    afterToken(flow[2] ?? '', no);
    return flow[1] === '{}' ? {} : [];
  }
  return plainScalar(s, no);
}

/** The value of a key or item with nothing after it: a nested block, a compact sequence, or null. */
function nested(c: Cursor, parentIndent: number, compactSeq: boolean): unknown {
  const next = c.lines[c.i];
  if (!next) return null;
  if (next.indent > parentIndent) return block(c, next.indent);
  if (compactSeq && next.indent === parentIndent && isSeqItem(next.text)) return sequence(c, parentIndent);
  return null;
}

function block(c: Cursor, indent: number): unknown {
  const line = c.lines[c.i];
  if (!line) return null;
  return isSeqItem(line.text) ? sequence(c, indent) : mapping(c, indent);
}

function mapping(c: Cursor, indent: number): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (let line = c.lines[c.i]; line && line.indent >= indent; line = c.lines[c.i]) {
    if (line.indent > indent) unsupported(line.no, 'unexpected indentation (a multi-line value?)');
    if (isSeqItem(line.text)) unsupported(line.no, 'a list item where a key was expected');
    const m = KEY.exec(line.text);
    if (!m) return unsupported(line.no, 'a key that is quoted, complex or not followed by ": "');
    const key = m[1] as string;
    if (Object.hasOwn(out, key) || key === '__proto__') unsupported(line.no, `the key ${key} twice`);
    const rest = m[2] ?? '';
    c.i++;
    out[key] = rest === '' || rest.startsWith('#') ? nested(c, indent, true) : scalar(rest, line.no);
  }
  return out;
}

function sequence(c: Cursor, indent: number): unknown[] {
  const out: unknown[] = [];
  for (let line = c.lines[c.i]; line && line.indent >= indent; line = c.lines[c.i]) {
    if (line.indent > indent) unsupported(line.no, 'unexpected indentation (a multi-line value?)');
    if (!isSeqItem(line.text)) break; // the next key of the mapping that holds this compact sequence
    const after = line.text.slice(1);
    const gap = /^ */.exec(after)?.[0].length ?? 0;
    const content = after.slice(gap);
    if (content === '' || content.startsWith('#')) {
      c.i++;
      out.push(nested(c, indent, false));
    } else if (isSeqItem(content)) {
      unsupported(line.no, 'a list directly inside a list item');
    } else if (KEY.test(content)) {
      // "- key: v": a mapping whose keys line up with this first key
      c.lines[c.i] = { indent: indent + 1 + gap, text: content, no: line.no };
      out.push(mapping(c, indent + 1 + gap));
    } else {
      c.i++;
      out.push(scalar(content, line.no));
    }
  }
  return out;
}

/**
 * YAML in block style: mappings with plain keys, sequences (also compact, at the parent key's indentation),
 * single-line plain/quoted scalars, `{}` / `[]`, comments. Throws `YamlSubsetError` for anything else (anchors,
 * tags, block scalars, flow collections with content, multi-line scalars, several documents).
 */
export function parseYamlSubset(src: string): unknown {
  const lines = splitLines(src);
  const c: Cursor = { lines, i: 0 };
  const first = lines[0];
  if (!first) return null;
  const value = block(c, first.indent);
  const left = lines[c.i];
  if (left) unsupported(left.no, 'content after the top-level value');
  return value;
}

/** JSON when it is JSON, else the YAML subset; throws `YamlSubsetError` when a full YAML parser is needed. */
export function parseKubeconfigText(text: string): unknown {
  if (/^\s*\{/.test(text)) {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      // flow-style YAML, not JSON: fall through (the subset reader refuses it)
    }
  }
  return parseYamlSubset(text);
}
