/**
 * The validator's machinery: where issues go (a shared path stack, copied only when an issue is
 * reported; the first MAX_ISSUES kept, the rest counted), the checks of single values, and
 * {@link walk}, the one loop over an object's keys that every xAPI object type goes through,
 * driven by that type's table of fields ({@link fields}).
 *
 * Conventions (xAPI-Data §2.2): unknown properties are rejected at every level, keys are
 * case-sensitive, `null` is rejected everywhere except inside extension values, JSON types are
 * exact, and a value whose type is wrong is not descended into.
 */
import { MAX_ISSUES, type ValidationIssue } from '../../errors.ts';
import { isLanguageTag } from '../langtag.ts';
import { is2, type XapiVersion } from '../versions.ts';
import { isIri, isIrl, isUuid, parseTimestamp, timestampOutOfRange } from './syntax.ts';

export type Loc = (string | number)[];
export type J = Record<string, unknown>;

export interface Ctx {
  /** Path of the value being validated; pushed/popped as the validator descends. */
  path: Loc;
  issues: ValidationIssue[];
  /** Problems found once `issues` holds MAX_ISSUES: counted, not collected. */
  dropped: { count: number };
  /** The request's xAPI version. */
  version: XapiVersion;
}

/**
 * A path stack starting at `loc`, of one array kind from the start (a path of numbers only would
 * change kind on its first key, and each push site would then see two kinds).
 */
export function pathFrom(loc: Loc): Loc {
  const path: Loc = [''];
  path.pop();
  for (let i = 0; i < loc.length; i++) path.push(loc[i]);
  return path;
}

// ---------------------------------------------------------------------------------------------
// Reporting
// ---------------------------------------------------------------------------------------------

export const isObject = (v: unknown): v is J => typeof v === 'object' && v !== null && !Array.isArray(v);

export function report(c: Ctx, msg: string, type: string): void {
  if (c.issues.length >= MAX_ISSUES) c.dropped.count++;
  else c.issues.push({ loc: c.path.slice(), msg, type });
}

export function reportAt(c: Ctx, key: string | number, msg: string, type: string): void {
  if (c.issues.length >= MAX_ISSUES) {
    c.dropped.count++;
    return;
  }
  const loc = c.path.slice();
  loc.push(key);
  c.issues.push({ loc, msg, type });
}

export const EXTRA = 'extra field not permitted';
export const extra = (c: Ctx): void => report(c, EXTRA, 'value_error.extra');
export const missing = (c: Ctx, key: string, why?: string): void => reportAt(c, key, why ? `field required: ${why}` : 'field required', 'value_error.missing');

export function jsonTypeName(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v;
}

const WHAT: Record<string, string> = {
  object: 'a JSON object',
  array: 'an array',
  string: 'a string',
  number: 'a number',
  boolean: 'a boolean',
  integer: 'a non-negative integer',
};

/** Reports a value of the wrong JSON type (null gets its own message and code). */
export function wrongType(c: Ctx, v: unknown, expected: string, what?: string): void {
  if (v === null) report(c, 'null is not allowed here (only extension values may be null)', 'type_error.null');
  else report(c, `must be ${what ?? WHAT[expected]}, got ${jsonTypeName(v)}`, `type_error.${expected}`);
}

// ---------------------------------------------------------------------------------------------
// The walker
// ---------------------------------------------------------------------------------------------

/** What a check returns when the value was refused: the key is left out of the copy. */
export const OMIT: unique symbol = Symbol('omit');

/**
 * Checks the value `x` of key `k` (the path already ends with `k`), reports what is wrong and
 * returns the value to copy, or OMIT. `s` is the state the walk of the enclosing object was given.
 */
export type Check<S> = (c: Ctx, x: unknown, s: S, k: string) => unknown;

export interface Field<S> {
  check: Check<S>;
  /** Reported when absent: true, or the reason that follows "field required: ". */
  required?: true | string;
  /** xAPI 2.0 only: under 1.0.3 the key is an extra field. */
  since2?: true;
}

/**
 * The table of one object type, laid out for the walker: parallel arrays indexed by field, and
 * bit masks over the same indexes (a table has at most 31 fields).
 */
export interface Fields<S> {
  readonly keys: readonly string[];
  readonly checks: readonly Check<S>[];
  /** The reason each required field gives when absent (undefined: none). */
  readonly why: readonly (string | undefined)[];
  readonly requiredMask: number;
  readonly since2Mask: number;
  /** Message for a key the table does not have. */
  readonly unknown: string;
  /** Cross-field rules, run after the keys and the required checks. */
  readonly rules: ((c: Ctx, v: J, out: J, s: S) => void) | undefined;
}

/** Builds a table; a bare function is a field with only a check. Required keys are reported in table order. */
export function fields<S>(table: Record<string, Field<S> | Check<S>>, opts: { unknown?: string; rules?: (c: Ctx, v: J, out: J, s: S) => void } = {}): Fields<S> {
  const keys = Object.keys(table);
  if (keys.length > 31) throw new Error('a table of fields has at most 31 fields');
  const checks: Check<S>[] = [];
  const why: (string | undefined)[] = [];
  let requiredMask = 0;
  let since2Mask = 0;
  keys.forEach((k, i) => {
    const f = table[k];
    const field = typeof f === 'function' ? { check: f } : f;
    checks.push(field.check);
    why.push(typeof field.required === 'string' ? field.required : undefined);
    if (field.required !== undefined) requiredMask |= 1 << i;
    if (field.since2) since2Mask |= 1 << i;
  });
  return { keys, checks, why, requiredMask, since2Mask, unknown: opts.unknown ?? EXTRA, rules: opts.rules };
}

/**
 * Validates the object `v` by its table: each key in order (unknown keys reported), then the
 * absent required keys in table order, then the cross-field rules. Returns the normalised copy.
 *
 * Hot path: keys are found by a linear scan (tables are small, keys are internalized strings, so
 * this is a few pointer compares) and the keys present are recorded in a bit mask, not looked up.
 */
export function walk<S>(c: Ctx, v: J, t: Fields<S>, s: S): J {
  const out: J = {};
  const keys = t.keys;
  const n = keys.length;
  let present = 0;
  for (const k in v) {
    const x = v[k];
    c.path.push(k);
    let i = 0;
    while (i < n && keys[i] !== k) i++;
    if (i === n) report(c, t.unknown, 'value_error.extra');
    else {
      if (x !== undefined) present |= 1 << i;
      if ((t.since2Mask & (1 << i)) !== 0 && !is2(c.version)) {
        report(c, `extra field not permitted ("${k}" is xAPI 2.0: send X-Experience-API-Version: 2.0.0)`, 'value_error.extra');
      } else {
        const y = t.checks[i](c, x, s, k);
        if (y !== OMIT) out[k] = y;
      }
    }
    c.path.pop();
  }
  const absent = t.requiredMask & ~present;
  if (absent !== 0) {
    // Looked up to be sure: for-in does not see non-enumerable properties (an inherited `length`, say).
    for (let i = 0; i < n; i++) if ((absent & (1 << i)) !== 0 && v[keys[i]] === undefined) missing(c, keys[i], t.why[i]);
  }
  if (t.rules !== undefined) t.rules(c, v, out, s);
  return out;
}

/** A field holding an object of the type `t` (`what` names it when the value is not an object). */
export function object<S>(t: Fields<S>, what?: string): Check<S> {
  return (c, x, s) => {
    if (!isObject(x)) {
      wrongType(c, x, 'object', what);
      return undefined;
    }
    return walk(c, x, t, s);
  };
}

/**
 * A field holding an array; each item checked by `item` at its index (OMIT leaves a hole).
 * `wrong` is what a value that is not an array copies as (undefined, or OMIT to leave it out).
 */
export function list<S>(item: Check<S>, what: string, wrong: undefined | typeof OMIT = undefined): Check<S> {
  return (c, x, s, k) => {
    if (!Array.isArray(x)) {
      wrongType(c, x, 'array', what);
      return wrong;
    }
    const out = new Array<unknown>(x.length);
    for (let i = 0; i < x.length; i++) {
      c.path.push(i);
      const y = item(c, x[i], s, k);
      if (y !== OMIT) out[i] = y;
      c.path.pop();
    }
    return out;
  };
}

// ---------------------------------------------------------------------------------------------
// Checks of single values
// ---------------------------------------------------------------------------------------------

/** The value as is, already checked by whoever dispatched on it (an objectType). */
export const copy: Check<unknown> = (_c, x) => x;

/** Refused wherever it appears (`msg`, a `value_error.not_allowed`). */
export const forbidden =
  (msg: string): Check<unknown> =>
  (c) => {
    report(c, msg, 'value_error.not_allowed');
    return OMIT;
  };

export function str(c: Ctx, v: unknown): v is string {
  if (typeof v === 'string') return true;
  wrongType(c, v, 'string');
  return false;
}

export function num(c: Ctx, v: unknown): v is number {
  if (typeof v === 'number' && Number.isFinite(v)) return true;
  wrongType(c, v, 'number');
  return false;
}

export function iri(c: Ctx, v: unknown): v is string {
  if (!str(c, v)) return false;
  if (isIri(v)) return true;
  report(c, 'must be an absolute IRI (with a scheme, e.g. "http://example.com/x")', 'value_error.iri');
  return false;
}

function timestamp(c: Ctx, v: unknown): v is string {
  if (!str(c, v)) return false;
  if (parseTimestamp(v) !== undefined) return true;
  if (timestampOutOfRange(v)) {
    report(c, 'the instant it denotes is outside years 0000-9999 once converted to UTC (its offset takes it across a year boundary)', 'value_error.datetime_range');
    return false;
  }
  report(c, 'must be an ISO 8601 date-time such as "2013-05-18T05:32:34.804Z" (a full date and time; offset "-00:00" is not allowed)', 'value_error.datetime');
  return false;
}

/** A string that `test` accepts; otherwise `msg` as a `value_error.${type}`. */
export const format =
  (test: (s: string) => boolean, msg: string, type: string): Check<unknown> =>
  (c, x) => {
    if (!str(c, x)) return OMIT;
    if (test(x)) return x;
    report(c, msg, `value_error.${type}`);
    return OMIT;
  };

export const STRING: Check<unknown> = (c, x) => (str(c, x) ? x : OMIT);
export const NUMBER: Check<unknown> = (c, x) => (num(c, x) ? x : OMIT);
export const BOOLEAN: Check<unknown> = (c, x) => {
  if (typeof x === 'boolean') return x;
  wrongType(c, x, 'boolean');
  return OMIT;
};
export const IRI: Check<unknown> = (c, x) => (iri(c, x) ? x : OMIT);
export const IRL = format(isIrl, 'must be an absolute IRL (with a scheme, e.g. "http://example.com/x")', 'irl');
export const UUID = format(isUuid, 'must be a UUID in standard form (8-4-4-4-12 hex digits)', 'uuid');
export const TIMESTAMP: Check<unknown> = (c, x) => (timestamp(c, x) ? x : OMIT);
export const LANGUAGE_TAG = format(isLanguageTag, 'must be an RFC 5646 language tag such as "en" or "en-US"', 'language_tag');

// ---------------------------------------------------------------------------------------------
// Maps with keys of the client's choosing: language maps, extensions
// ---------------------------------------------------------------------------------------------

/**
 * Nesting limit for extension values. Not a spec rule but a resource limit: V8's JSON.stringify
 * (which the store needs) overflows the stack a few thousand levels down, so deeper values are
 * reported as a 400 here rather than failing later as a 500.
 */
export const MAX_JSON_DEPTH = 512;
export const TOO_DEEP: unique symbol = Symbol('too deep');

/** Deep copy of an arbitrary JSON value (extension values), safe against `__proto__` keys. */
export function copyJson(v: unknown, depth: number): unknown {
  if (typeof v !== 'object' || v === null) return v;
  if (depth >= MAX_JSON_DEPTH) return TOO_DEEP;
  if (Array.isArray(v)) {
    const out = new Array<unknown>(v.length);
    for (let i = 0; i < v.length; i++) {
      const x = copyJson(v[i], depth + 1);
      if (x === TOO_DEEP) return TOO_DEEP;
      out[i] = x;
    }
    return out;
  }
  const out: J = {};
  for (const k in v as J) {
    const x = copyJson((v as J)[k], depth + 1);
    if (x === TOO_DEEP) return TOO_DEEP;
    if (k === '__proto__') Object.defineProperty(out, k, { value: x, enumerable: true, writable: true, configurable: true });
    else out[k] = x;
  }
  return out;
}

/** Language map (§4.2): RFC 5646 tags as keys, strings as values, at least one entry. */
export const LANGUAGE_MAP: Check<unknown> = (c, v) => {
  if (!isObject(v)) {
    wrongType(c, v, 'object', 'a language map (JSON object of language tag to string)');
    return undefined;
  }
  const out: J = {};
  let n = 0;
  for (const k in v) {
    n++;
    const x = v[k];
    c.path.push(k);
    const okKey = isLanguageTag(k);
    if (!okKey) report(c, `"${k}" is not a valid RFC 5646 language tag`, 'value_error.language_tag');
    if (str(c, x) && okKey) out[k] = x;
    c.path.pop();
  }
  if (n === 0) report(c, 'a language map must have at least one entry', 'value_error.empty');
  return out;
};

/** Extensions (§4.1): keys are absolute IRIs, values any JSON (null included). */
export const EXTENSIONS: Check<unknown> = (c, v) => {
  if (!isObject(v)) {
    wrongType(c, v, 'object', 'an extensions map (JSON object of IRI to any value)');
    return undefined;
  }
  const out: J = {};
  for (const k in v) {
    if (!isIri(k)) {
      reportAt(c, k, 'an extension key must be an absolute IRI', 'value_error.iri');
      continue;
    }
    const x = copyJson(v[k], 0);
    if (x === TOO_DEEP) reportAt(c, k, `extension value nested too deeply (more than ${MAX_JSON_DEPTH} levels)`, 'value_error.too_deep');
    else out[k] = x;
  }
  return out;
};
