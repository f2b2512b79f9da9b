/**
 * base/json.ts: the decoding kit (pure). JSON text to objects, and typed field reads with Go encoding/json's
 * rules: an absent or null key is the zero value, a wrong type is an error naming the key. Also the Go-compatible
 * encoding helpers (sorted map keys, HTML-safe escapes) that make our cache bytes equal Go's.
 * Tested by test/unit/cni/request.test.ts (decoding), test/unit/multus/network-status.test.ts (Go's escapes).
 */
import { CniCode, CniError } from './errors.ts';
import { jsonSyntaxMessage } from './json-syntax.ts';

export type Json = Record<string, unknown>;

/** Go marshals map[string]interface{} with sorted keys, recursively; struct-typed values keep field order. */
export function sortKeysDeep(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeysDeep);
  if (!isObject(value)) return value;
  const out: Json = {};
  for (const key of Object.keys(value).sort()) out[key] = sortKeysDeep(value[key]);
  return out;
}

export function sortKeys(value: Json): Json {
  const out: Json = {};
  for (const key of Object.keys(value).sort()) out[key] = value[key];
  return out;
}

/** compat: what Go's json.Marshal escapes inside strings besides JSON's own (HTML safety, JS line terminators). */
export const GO_HTML_ESCAPES: Readonly<Record<string, string>> = {
  '<': '\\u003c',
  '>': '\\u003e',
  '&': '\\u0026',
  '\u2028': '\\u2028',
  '\u2029': '\\u2029',
};

const HTML_ESCAPED = Object.keys(GO_HTML_ESCAPES);

/**
 * JSON text with Go's HTML-safe escapes (those characters can only be inside its strings). The one place. Text
 * without any of them (most caches and results) is returned as it is after a native search for each: the regular
 * expression's scan runs in the daemon's interpreter (docs/archive/performance.md, "The daemon's CPU per pod").
 */
export function goHtmlEscape(json: string): string {
  if (!HTML_ESCAPED.some((c) => json.includes(c))) return json;
  return json.replace(/[<>&\u2028\u2029]/g, (c) => GO_HTML_ESCAPES[c]!);
}

/** JSON.stringify plus Go's HTML-safe escapes, so our bytes equal Go's for the same value. */
export function goJson(value: unknown): string {
  return goHtmlEscape(JSON.stringify(value));
}

export function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function corrupt(ctx: string, detail: string): CniError {
  return new CniError(CniCode.DecodingFailure, `${ctx}: ${detail}`);
}

/**
 * Why JSON text is not an object: a syntax error (where, by line and column, never the bytes: base/json-syntax.ts),
 * or the type of value it holds.
 */
export type JsonProblem = { syntax: string; cause: unknown } | { got: string };

/** 'null', 'an array', or the typeof of a JSON value: for "must be an object, got ..." messages. */
export function jsonTypeOf(value: unknown): string {
  return value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value;
}

/**
 * The one decoder of JSON text that must be an object. Each caller words its own error from the problem
 * (`fail` returns the error to throw), so the messages of the protocol edge, the config parsers and the cache
 * codecs stay theirs.
 */
export function decodeJsonObject(bytes: Buffer | string, fail: (problem: JsonProblem) => Error): Json {
  const text = typeof bytes === 'string' ? bytes : bytes.toString('utf8');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw fail({ syntax: jsonSyntaxMessage(text), cause: err });
  }
  if (!isObject(value)) throw fail({ got: jsonTypeOf(value) });
  return value;
}

export function parseJson(bytes: Buffer | string, ctx: string): unknown {
  const text = typeof bytes === 'string' ? bytes : bytes.toString('utf8');
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new CniError(CniCode.DecodingFailure, `${ctx} is not valid JSON: ${jsonSyntaxMessage(text)}`, {
      cause: err,
    });
  }
}

export function parseJsonObject(bytes: Buffer | string, ctx: string): Json {
  return decodeJsonObject(bytes, (p) =>
    'syntax' in p
      ? new CniError(CniCode.DecodingFailure, `${ctx} is not valid JSON: ${p.syntax}`, { cause: p.cause })
      : corrupt(ctx, 'expected a JSON object'),
  );
}

// Field readers: Go leaves a field at its zero value when the key is absent or null, and fails on a wrong type.

export function readString(o: Json, key: string, ctx: string): string {
  const v = o[key];
  if (v === undefined || v === null) return '';
  if (typeof v !== 'string') throw corrupt(ctx, `"${key}" must be a string`);
  return v;
}

export function readBool(o: Json, key: string, ctx: string): boolean {
  const v = o[key];
  if (v === undefined || v === null) return false;
  if (typeof v !== 'boolean') throw corrupt(ctx, `"${key}" must be true or false`);
  return v;
}

export function readArray(o: Json, key: string, ctx: string): unknown[] | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v)) throw corrupt(ctx, `"${key}" must be an array`);
  return v;
}

export function readStringArray(o: Json, key: string, ctx: string): string[] | undefined {
  const v = readArray(o, key, ctx);
  if (v !== undefined && !v.every((s) => typeof s === 'string'))
    throw corrupt(ctx, `"${key}" must be an array of strings`);
  return v as string[] | undefined;
}

export function readObject(o: Json, key: string, ctx: string): Json | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (!isObject(v)) throw corrupt(ctx, `"${key}" must be a JSON object`);
  return v;
}

/** Go's []byte is standard base64 with padding; Buffer.from would silently skip bad characters, so check first. */
export function readBase64(o: Json, key: string, ctx: string): Buffer | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string' || v.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(v)) {
    throw corrupt(ctx, `"${key}" must be a base64 string`);
  }
  return Buffer.from(v, 'base64');
}
