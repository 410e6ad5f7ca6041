/**
 * Structural comparison of JSON values (as produced by `JSON.parse`), ignoring object key order.
 *
 * Pure and general: xAPI-specific equivalence rules (what may differ between two serializations of
 * the same statement) live with their callers, which normalize both sides before comparing.
 */

/**
 * Where `a` and `b` first differ, as a JSON-path-like string (`$` is the root: `$.actor.mbox`,
 * `$.context.contextActivities.parent[0]`), or `undefined` when they are equal.
 *
 * Objects are equal when they have the same keys with equal values, in any order; arrays when they
 * have the same length and equal items in the same order; numbers by value (so `1` and `1.0`, which
 * parse to the same number, are equal). A property whose value is `undefined` counts as absent, so
 * `{a: 1, b: undefined}` equals `{a: 1}` (values built in code, not parsed, may carry those).
 */
export function jsonDifference(a: unknown, b: unknown, path = '$'): string | undefined {
  if (a === b) return undefined;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object') {
    return path; // different primitives, or a primitive versus an object/array/null
  }
  const aIsArray = Array.isArray(a);
  if (aIsArray !== Array.isArray(b)) return path;
  if (aIsArray) {
    const x = a as unknown[];
    const y = b as unknown[];
    if (x.length !== y.length) return path;
    for (let i = 0; i < x.length; i++) {
      const d = jsonDifference(x[i], y[i], `${path}[${i}]`);
      if (d !== undefined) return d;
    }
    return undefined;
  }
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  for (const key of Object.keys(x)) {
    if (x[key] === undefined) continue;
    const d = jsonDifference(x[key], y[key], childPath(path, key));
    if (d !== undefined) return d;
  }
  for (const key of Object.keys(y)) {
    if (y[key] !== undefined && x[key] === undefined) return childPath(path, key);
  }
  return undefined;
}

/** Deep equality of two JSON values, ignoring object key order (see {@link jsonDifference}). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  return jsonDifference(a, b) === undefined;
}

/**
 * A canonical serialization: `JSON.stringify` with object keys sorted at every level and
 * `undefined`-valued properties dropped. Two values are {@link jsonEqual} exactly when their
 * canonical serializations are identical, so it can sort unordered lists or key a Map.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const obj = value as Record<string, unknown>;
  const keys = Object.keys(obj)
    .filter((k) => obj[k] !== undefined)
    .sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(obj[k])}`).join(',')}}`;
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

function childPath(path: string, key: string): string {
  return IDENTIFIER.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
}
