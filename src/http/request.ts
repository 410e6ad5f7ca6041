/**
 * What every front door reads of a request before its body: its query string, parsed once and
 * strictly (each name once, UTF-8 escapes, a bounded number of fields).
 */
import { LrsError, ValidationFailed } from '../errors.ts';

/** A `%` not followed by two hex digits: kept as a literal `%`, as URLSearchParams does. */
const LONE_PERCENT = /%(?![0-9A-Fa-f]{2})/g;

/**
 * One name or value of `application/x-www-form-urlencoded` text (WHATWG URL §5.1): `+` is a space,
 * percent-escapes are UTF-8 bytes. Strict where URLSearchParams is lenient: escapes that do not
 * decode as UTF-8 (`%FF`, a cut sequence, an overlong form, a surrogate) are undefined, never
 * U+FFFD, so that `%FF` and `%FE` cannot name the same thing.
 */
function decodeFormComponent(s: string): string | undefined {
  const spaced = s.includes('+') ? s.replaceAll('+', ' ') : s;
  if (!spaced.includes('%')) return spaced;
  try {
    return decodeURIComponent(spaced.replace(LONE_PERCENT, '%25'));
  } catch {
    return undefined;
  }
}

/**
 * Most fields a query string or an alternate-syntax form may have. A resource takes at most 17
 * parameters and a form adds 6 headers and `content`: a few dozen at most. Parsing stops at the
 * cap, so a form of millions of fields costs no more than its bytes (docs/security.md, "Input and
 * resources").
 */
export const MAX_FIELDS = 64;

/**
 * Parses a query string (or an alternate-syntax form body: `where` = 'form') into single-valued
 * parameters, in one pass; a repeated name, a name or value whose percent-escapes are not UTF-8,
 * or more than MAX_FIELDS fields is a 400 naming the parameter or the cap.
 */
export function parseQuery(qs: string, where: 'query' | 'form' = 'query'): Record<string, string> {
  const out: Record<string, string> = Object.create(null) as Record<string, string>;
  const what = where === 'query' ? 'query parameter' : 'form field';
  let fields = 0;
  for (let start = 0; start < qs.length; ) {
    let end = qs.indexOf('&', start);
    if (end === -1) end = qs.length;
    if (end === start) {
      start = end + 1;
      continue;
    }
    if (++fields > MAX_FIELDS) {
      const whole = where === 'query' ? 'the query string' : 'the form (alternate request syntax)';
      throw new LrsError(
        'bad_request',
        `${whole} has more than ${MAX_FIELDS} ${what}s, the most this LRS reads (a resource's parameters, and in a form a few headers and content)`,
      );
    }
    const pair = qs.slice(start, end);
    start = end + 1;
    const eq = pair.indexOf('=');
    const rawName = eq === -1 ? pair : pair.slice(0, eq);
    const k = decodeFormComponent(rawName);
    const v = decodeFormComponent(eq === -1 ? '' : pair.slice(eq + 1));
    if (k === undefined || v === undefined) {
      const name = k ?? rawName.slice(0, 100);
      const part = k === undefined ? 'name' : 'value';
      throw new ValidationFailed([{ loc: [where, name], msg: `the ${what}'s ${part} is not valid UTF-8 once its percent-escapes are decoded`, type: 'value_error.encoding' }]);
    }
    if (k in out) throw new LrsError('bad_request', `${what} ${k.slice(0, 100)} is given more than once`);
    out[k] = v;
  }
  return out;
}

/** The raw query string of a request URL (after `?`), '' without one. */
export function rawQuery(url: string): string {
  const q = url.indexOf('?');
  return q < 0 ? '' : url.slice(q + 1);
}

/** A request URL's query parameters (parseQuery). */
export const queryOf = (url: string): Record<string, string> => parseQuery(rawQuery(url));
