/**
 * The transport-neutral request/response the xAPI handlers work on. Building one from an HTTP
 * request applies the Alternate Request Syntax (xAPI-Communication §1.3): a POST with `?method=`
 * carries the real method, headers and parameters in a form body.
 */
import { LrsError, ValidationFailed } from '../errors.ts';
import type { Access } from '../auth/scopes.ts';
import type { AuthUser } from '../auth/types.ts';
import type { StatementReads, StatementStore } from '../store/types.ts';
import { mediaTypeOf } from '../xapi/media.ts';
import type { XapiVersion } from '../xapi/versions.ts';

export interface XapiRequest {
  method: string;
  /** Query parameters, each present once. */
  query: Record<string, string>;
  /** Lower-cased header names. */
  headers: Record<string, string | undefined>;
  body: Buffer | undefined;
  /** Set once authenticated. */
  user?: AuthUser;
  /** Set once authorised: what the user may do beyond the route itself. */
  access?: Access;
  /** The negotiated xAPI version (set for versioned resources before the handler runs). */
  version?: XapiVersion;
  /** True when the request came in the alternate request syntax (`?method=`). */
  alternate?: boolean;
  /**
   * Holds the estimated parsed size of `values` JSON values (counted before parsing) against
   * LECTERN_MAX_BODIES_IN_FLIGHT until the request is answered; throws a 503 (with Retry-After)
   * when it does not fit. Set by the server once the request is admitted.
   */
  holdParsed?: (values: number) => void;
  /**
   * The server the request's statement reads go to, when its caller chose one: the console reads
   * all of a page through one view (readsOf). Absent: the handler takes a view of its own.
   */
  reads?: StatementReads;
}

/**
 * Where a request's statement reads go: the view it carries, else a new one of the store (a
 * healthy read replica, or the store itself): every read of one request from one server, whose
 * Consistent-Through is then true of all of them.
 */
export const readsOf = (req: XapiRequest, store: Pick<StatementStore, 'readView'> & StatementReads): StatementReads => req.reads ?? store.readView?.() ?? store;

export interface XapiResponse {
  status: number;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

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
 * cap, so a form of millions of fields costs no more than its bytes (6.1M fields took 35 s and 4.4 GB).
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
      throw new LrsError('bad_request', `${whole} has more than ${MAX_FIELDS} ${what}s, the most this LRS reads (a resource's parameters, and in a form a few headers and content)`);
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

/** Strict UTF-8: invalid bytes are refused, not replaced with U+FFFD. */
const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Headers the alternate syntax may carry as form fields (§1.3.s3.b6), by lower-cased name. */
const FORM_HEADERS = new Map(
  ['Authorization', 'X-Experience-API-Version', 'Content-Type', 'Content-Length', 'If-Match', 'If-None-Match'].map((h) => [h.toLowerCase(), h]),
);

/**
 * What a request is before its body is read: enough to check the method, authenticate and
 * authorise it. With `?method=` (the alternate syntax) it must be a POST whose only query parameter
 * is `method`, with an `application/x-www-form-urlencoded` body; its form is applied by `withBody`.
 */
export interface RequestHead {
  method: string;
  query: Record<string, string>;
  headers: Record<string, string | undefined>;
  alternate: boolean;
}

export function requestHead(method: string, rawQuery: string, headers: Record<string, string | string[] | undefined>): RequestHead {
  const query = parseQuery(rawQuery);
  const flat: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(headers)) flat[k] = Array.isArray(v) ? v.join(', ') : v;
  if (query.method === undefined) return { method, query, headers: flat, alternate: false };

  if (method !== 'POST') throw new LrsError('bad_request', `the method parameter (alternate request syntax) is only allowed on POST, not ${method}`);
  const others = Object.keys(query).filter((k) => k !== 'method');
  if (others.length) throw new LrsError('bad_request', `with the method parameter, every other parameter must be a form field, not in the query string: ${others.join(', ')}`);
  const target = query.method;
  if (!['GET', 'PUT', 'POST', 'DELETE', 'HEAD'].includes(target)) throw new LrsError('bad_request', `method must be GET, PUT, POST, DELETE or HEAD, got ${JSON.stringify(target)}`);
  const ct = mediaTypeOf(flat['content-type']);
  if (ct !== 'application/x-www-form-urlencoded') {
    throw new LrsError('bad_request', 'a request with the method parameter must have Content-Type application/x-www-form-urlencoded');
  }
  return { method: target, query: Object.create(null) as Record<string, string>, headers: flat, alternate: true };
}

/**
 * The XapiRequest once the body is read: for the alternate syntax, the form's fields become the
 * headers, parameters and content. An Authorization header already used to authenticate it may not
 * be contradicted by the form (which one would count?).
 */
export function withBody(head: RequestHead, body: Buffer | undefined): XapiRequest {
  if (!head.alternate) return { method: head.method, query: head.query, headers: head.headers, body };
  let text: string;
  try {
    text = UTF8.decode(body ?? Buffer.alloc(0));
  } catch {
    throw new LrsError('bad_request', 'the form body (alternate request syntax) is not valid UTF-8');
  }
  const form = parseQuery(text, 'form');
  const outHeaders: Record<string, string | undefined> = { ...head.headers };
  delete outHeaders['content-type'];
  delete outHeaders['content-length'];
  const outQuery: Record<string, string> = Object.create(null) as Record<string, string>;
  let content: Buffer | undefined;
  for (const [k, v] of Object.entries(form)) {
    const lower = k.toLowerCase();
    if (k === 'content') content = Buffer.from(v, 'utf8');
    else if (lower === 'authorization' && head.headers.authorization !== undefined && v !== head.headers.authorization) {
      throw new LrsError('bad_request', 'the Authorization form field differs from the Authorization header: send the credentials once');
    } else if (FORM_HEADERS.has(lower)) outHeaders[lower] = v;
    else outQuery[k] = v;
  }
  if (content !== undefined && outHeaders['content-type'] === undefined) outHeaders['content-type'] = 'application/json';
  return { method: head.method, query: outQuery, headers: outHeaders, body: content, alternate: true };
}

export const json = (status: number, value: unknown, headers: Record<string, string> = {}): XapiResponse => ({
  status,
  headers: { 'content-type': 'application/json; charset=utf-8', ...headers },
  body: JSON.stringify(value),
});
