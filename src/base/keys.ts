/**
 * base/keys.ts: reading the keys of a JSON config (pure). One predicate per value kind, `getKey` that reads a
 * key with Go's rule (absent or null is the default, another type is an error naming the key, code 7),
 * `decodeObject` for JSON text that must be an object (code 6), and `withContext` to prefix an error.
 * Tested by test/unit/multus/conf.test.ts (typed key reads and their messages).
 */
import { CniCode, CniError, wrapError } from './errors.ts';
import { decodeJsonObject, isObject } from './json.ts';

export interface Kind<T> {
  readonly what: string;
  is(value: unknown): value is T;
}

export const isNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

export const STRING: Kind<string> = { what: 'a string', is: (v): v is string => typeof v === 'string' };
export const BOOLEAN: Kind<boolean> = { what: 'a boolean', is: (v): v is boolean => typeof v === 'boolean' };
export const OBJECT: Kind<Record<string, unknown>> = { what: 'a JSON object', is: isObject };
export const STRINGS: Kind<string[]> = {
  what: 'an array of strings',
  is: (v): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string'),
};
export const NAMES: Kind<string[]> = {
  what: 'an array of non-empty strings',
  is: (v): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string' && x !== ''),
};
export const OBJECTS: Kind<Record<string, unknown>[]> = {
  what: 'an array of JSON objects',
  is: (v): v is Record<string, unknown>[] => Array.isArray(v) && v.every(isObject),
};
export const BOOLEAN_MAP: Kind<Record<string, boolean>> = {
  what: 'an object of booleans',
  is: (v): v is Record<string, boolean> => isObject(v) && Object.values(v).every((x) => typeof x === 'boolean'),
};
export const POSITIVE: Kind<number> = { what: 'a number greater than 0', is: (v): v is number => isNumber(v) && v > 0 };
export const FRACTION: Kind<number> = {
  what: 'a number from 0 to 1',
  is: (v): v is number => isNumber(v) && v >= 0 && v <= 1,
};
export const COUNT: Kind<number> = {
  what: 'a whole number >= 0',
  is: (v): v is number => Number.isInteger(v) && (v as number) >= 0,
};
export const STEPS: Kind<number> = {
  what: 'a whole number from 0 to 20',
  is: (v): v is number => Number.isInteger(v) && (v as number) >= 0 && (v as number) <= 20,
};
/** libcni readBool: a boolean, or the string "true"/"false" in any case. */
export const FLAG: Kind<boolean | string> = {
  what: 'a boolean or "true"/"false"',
  is: (v): v is boolean | string => typeof v === 'boolean' || (typeof v === 'string' && /^(true|false)$/i.test(v)),
};

export function invalid(msg: string): CniError {
  return new CniError(CniCode.InvalidConfig, msg);
}

/**
 * One key of `obj`, or undefined when absent or null (compat: Go's json leaves a field at its default on
 * null). A value of another type throws "`<label>` must be <what>".
 */
export function getKey<T>(obj: Record<string, unknown>, key: string, kind: Kind<T>, label = key): T | undefined {
  const value = obj[key];
  if (value === undefined || value === null) return undefined;
  if (!kind.is(value)) throw invalid(`\`${label}\` must be ${kind.what}`);
  return value;
}

export function readFlag(obj: Record<string, unknown>, key: string): boolean {
  const value = getKey(obj, key, FLAG);
  return typeof value === 'string' ? value.toLowerCase() === 'true' : (value ?? false);
}

export function decodeObject(bytes: Buffer | string, what: string): Record<string, unknown> {
  return decodeJsonObject(bytes, (p) =>
    'syntax' in p
      ? new CniError(CniCode.DecodingFailure, `${what} is not valid JSON: ${p.syntax}`, { cause: p.cause })
      : new CniError(CniCode.DecodingFailure, `${what} must be a JSON object, got ${p.got}`),
  );
}

export function withContext<T>(context: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    throw wrapError(err, context, CniCode.InvalidConfig);
  }
}
