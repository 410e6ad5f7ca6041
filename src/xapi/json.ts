/**
 * Statement bodies as JSON: strict UTF-8 (Communication §1.4; a leading BOM is dropped, RFC 8259
 * §8.1), no string holding an unpaired surrogate escape (`"\udfff"`: see `unpairedSurrogate`)
 * and, under 2.0, no property twice in one object (9274.1.1 §4.2.1: "a Statement MUST NOT
 * contain the same property more than once"). JSON.parse keeps the last of duplicate keys
 * silently, so they are found by a scan of the text that JSON.parse has just accepted.
 */
import { ValidationFailed } from '../errors.ts';
import { is2, type XapiVersion } from './versions.ts';

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/** Parses a JSON body, turning invalid UTF-8, syntax errors and (2.0) duplicate keys into a 400 that says where. */
export function parseJson(body: Buffer | undefined, version: XapiVersion): unknown {
  if (!body || body.length === 0) throw new ValidationFailed([{ loc: ['body'], msg: 'a JSON body is required', type: 'value_error.missing' }]);
  let text: string;
  try {
    text = UTF8.decode(body);
  } catch {
    // Decoding leniently would store U+FFFD in place of the client's bytes.
    throw new ValidationFailed([{ loc: ['body'], msg: 'the body is not valid UTF-8', type: 'value_error.encoding' }]);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new ValidationFailed([{ loc: ['body'], msg: `malformed JSON: ${(err as Error).message}`, type: 'value_error.jsondecode' }]);
  }
  const lone = unpairedSurrogate(text, value);
  if (lone) throw new ValidationFailed([{ loc: ['body', ...lone.path], msg: surrogateMessage(lone), type: 'value_error.surrogate' }]);
  if (is2(version)) {
    const dup = duplicateKey(text);
    if (dup) throw new ValidationFailed([{ loc: ['body', ...dup.path], msg: `the property "${dup.key}" appears more than once in one object`, type: 'value_error.duplicate_key' }]);
  }
  return value;
}

/** A `\uD800`-`\uDFFF` escape: JSON text that decoded as UTF-8 can only hold a surrogate this way. */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F][0-9a-fA-F]{2}/;

/** Most steps of a path a 400 names. */
const REPORTED_DEPTH = 64;

/** String.prototype.isWellFormed (ES2024, in every Node this runs on; the compiler targets ES2023). */
const wellFormed = (s: string): boolean => (s as string & { isWellFormed(): boolean }).isWellFormed();

/** Where {@link unpairedSurrogate} found one: the path to the string, or to the key holding it. */
export interface SurrogateAt {
  path: (string | number)[];
  key: boolean;
}

/**
 * The first string of `value` (keys included) holding an unpaired UTF-16 surrogate, which only a
 * `\uD800`-`\uDFFF` escape in `text` (the JSON `value` was parsed from) can produce: such a string
 * is valid JSON but no Unicode text (RFC 8259 §8.2), and once encoded as UTF-8 (by SQLite, by
 * PostgreSQL's driver) it becomes U+FFFD or is refused, so two distinct identifiers would merge
 * or a statement fail to store. Text without such an escape is not walked. The walk keeps a stack
 * of its own (any nesting JSON.parse accepts) and builds a path only for what it reports.
 */
export function unpairedSurrogate(text: string, value: unknown): SurrogateAt | undefined {
  if (!SURROGATE_ESCAPE.test(text)) return undefined;
  interface Step {
    value: unknown;
    up?: Step;
    at?: string | number;
  }
  // Leaf to root, then reversed; a path deeper than REPORTED_DEPTH is cut short (the 400 stays short).
  const pathOf = (step: Step, last?: string): (string | number)[] => {
    const path: (string | number)[] = last === undefined ? [] : [last];
    for (let s: Step | undefined = step; s?.at !== undefined; s = s.up) path.push(s.at);
    path.reverse();
    return path.length > REPORTED_DEPTH ? [...path.slice(0, REPORTED_DEPTH), '…'] : path;
  };
  const stack: Step[] = [{ value }];
  while (stack.length > 0) {
    const step = stack.pop()!;
    const v = step.value;
    if (typeof v === 'string') {
      if (!wellFormed(v)) return { path: pathOf(step), key: false };
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], up: step, at: i });
    } else if (v !== null && typeof v === 'object') {
      const keys = Object.keys(v);
      const bad = keys.find((k) => !wellFormed(k));
      if (bad !== undefined) return { path: pathOf(step, bad), key: true };
      for (let i = keys.length - 1; i >= 0; i--) stack.push({ value: (v as Record<string, unknown>)[keys[i]!], up: step, at: keys[i]! });
    }
  }
  return undefined;
}

/** The problem {@link unpairedSurrogate} found, in words. */
export const surrogateMessage = (at: SurrogateAt): string =>
  `${at.key ? 'this property name' : 'this string'} holds an unpaired UTF-16 surrogate (a \\uD800-\\uDFFF escape not part of a pair), which is no Unicode character`;

/** What {@link countJson} found; `over` names the limit passed, where counting stopped. */
export interface JsonCount {
  /** Elements of a top-level array (1 for any other value). */
  items: number;
  /** JSON values of every kind and depth: objects, arrays, strings, numbers, true, false, null. */
  values: number;
  over?: 'items' | 'values';
}

const isDigitOrMinus = (b: number): boolean => (b >= 0x30 && b <= 0x39) || b === 0x2d;
/** Bytes a number may continue with: digits, `.`, `e`/`E`, `+`, `-`. */
const inNumber = (b: number): boolean => isDigitOrMinus(b) || b === 0x2e || b === 0x65 || b === 0x45 || b === 0x2b;

/**
 * Counts what JSON.parse would build from `bytes` without building it, and stops as soon as a
 * limit is passed: a few megabytes of `[{},{},…]` are millions of objects once parsed (and
 * validated: copied), so a body is refused on its counts before it is parsed. One pass over the
 * bytes as they are (a UTF-8 multi-byte sequence holds no ASCII byte); strings are skipped with
 * indexOf. Values are containers, numbers and literals (each `t`, `f`, `n` outside a string
 * starts one), plus strings that are not keys (each key is followed by one `:`). Malformed JSON
 * is counted as far as it resembles JSON: JSON.parse then says what is wrong with it.
 */
export function countJson(bytes: Uint8Array, limits: { maxItems: number; maxValues: number }): JsonCount {
  const n = bytes.length;
  let values = 0;
  let items = 0;
  let depth = 0;
  let rootArray = false;
  // Inside the top-level array, after `[` or `,`: the next value is a new element.
  let awaiting = false;
  let number = false;
  for (let i = 0; i < n; i++) {
    const b = bytes[i];
    if (number) {
      if (inNumber(b)) continue;
      number = false;
    }
    if (b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09) continue;
    if (b === 0x2c /* , */) {
      if (depth === 1 && rootArray) awaiting = true;
      continue;
    }
    if (b === 0x3a /* : */) {
      values--; // the string before it was a key
      continue;
    }
    if (b === 0x7d /* } */ || b === 0x5d /* ] */) {
      depth--;
      continue;
    }
    // Anything else starts a value (or is a stray byte JSON.parse will refuse).
    if (depth === 0 && values === 0 && b === 0x5b /* [ */) {
      rootArray = true;
      awaiting = true;
    } else if (depth === 1 && awaiting) {
      awaiting = false;
      if (++items > limits.maxItems) return { items, values, over: 'items' };
    }
    if (b === 0x22 /* " */) {
      // The closing quote: the next one not preceded by an odd run of backslashes.
      let j = i;
      for (;;) {
        j = bytes.indexOf(0x22, j + 1);
        if (j === -1) break;
        let k = j - 1;
        while (bytes[k] === 0x5c) k--;
        if ((j - 1 - k) % 2 === 0) break;
      }
      if (j === -1) break; // unterminated: malformed
      i = j;
    } else if (b === 0x7b /* { */ || b === 0x5b /* [ */) {
      depth++;
    } else if (isDigitOrMinus(b)) {
      number = true;
    } else if (b !== 0x74 /* t */ && b !== 0x66 /* f */ && b !== 0x6e /* n */) {
      continue; // the rest of a literal, or a stray byte
    }
    if (++values > limits.maxValues) return { items, values, over: 'values' };
  }
  return { items: rootArray ? items : values > 0 ? 1 : 0, values };
}

/**
 * The first key repeated within one object of `text` (valid JSON), with the path of that object;
 * undefined when there is none. One pass, no allocation beyond one key set per open object.
 */
export function duplicateKey(text: string): { key: string; path: (string | number)[] } | undefined {
  // Per open container: its keys (objects) or next index (arrays), and the key/index it sits under.
  const stack: { keys?: Set<string>; index: number; at: string | number | undefined }[] = [];
  let pending: string | number | undefined;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      const top = stack[stack.length - 1];
      const at = top && !top.keys ? top.index : pending;
      stack.push(c === 0x7b ? { keys: new Set(), index: 0, at } : { index: 0, at });
      pending = undefined;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      stack.pop();
    } else if (c === 0x2c /* , */) {
      const top = stack[stack.length - 1];
      if (top && !top.keys) top.index++;
    } else if (c === 0x22 /* " */) {
      const start = i;
      // The closing quote: the next one not preceded by an odd run of backslashes.
      for (;;) {
        i = text.indexOf('"', i + 1);
        let b = i - 1;
        while (text.charCodeAt(b) === 0x5c) b--;
        if ((i - 1 - b) % 2 === 0) break;
      }
      const top = stack[stack.length - 1];
      if (!top?.keys) continue;
      let j = i + 1;
      while (j < n && (text[j] === ' ' || text[j] === '\t' || text[j] === '\n' || text[j] === '\r')) j++;
      if (text[j] !== ':') continue; // a value, not a key
      const raw = text.slice(start + 1, i);
      const key = raw.includes('\\') ? (JSON.parse(text.slice(start, i + 1)) as string) : raw;
      if (top.keys.has(key)) return { key, path: [...stack.slice(1).map((s) => s.at as string | number), key] };
      top.keys.add(key);
      pending = key;
    }
  }
  return undefined;
}
