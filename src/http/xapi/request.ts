/**
 * The transport-neutral request the xAPI handlers work on. Building one from an HTTP request
 * applies the Alternate Request Syntax (xAPI-Communication §1.3): a POST with `?method=` carries
 * the real method, headers and parameters in a form body.
 */
import type { Access } from '../../auth/scopes.ts';
import type { AuthUser } from '../../auth/types.ts';
import { LrsError } from '../../errors.ts';
import { mediaTypeOf } from '../../xapi/media.ts';
import type { XapiVersion } from '../../xapi/versions.ts';
import type { Reader } from '../../ops/reads.ts';
import type { Answer } from '../answer.ts';
import { parseQuery } from '../request.ts';

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
}

/** An xAPI resource's handler (./resources.ts). */
export type XapiHandler = (req: XapiRequest) => Promise<Answer>;

/**
 * The admitted request's user as a reader (src/ops/reads.ts): restricted to the statements of its
 * own authority (`statements/read/mine`, LECTERN_LRS_RESTRICT_BY_AUTHORITY) unless its access says otherwise.
 */
export const readerOf = (req: XapiRequest): Reader => ({ target: req.user!.target, agent: req.user!.agent, mineOnly: req.access?.mineOnly ?? true });

/** Strict UTF-8: invalid bytes are refused, not replaced with U+FFFD. */
const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Headers the alternate syntax may carry as form fields (§1.3.s3.b6), by lower-cased name. */
const FORM_HEADERS = new Map(['Authorization', 'X-Experience-API-Version', 'Content-Type', 'Content-Length', 'If-Match', 'If-None-Match'].map((h) => [h.toLowerCase(), h]));

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
