/** Maps errors to answers: a status and a JSON body saying what is wrong and where. */
import { LrsError } from '../errors.ts';
import { type Answer, json } from './answer.ts';

/**
 * An answer the HTTP layer decides by itself, about the transport rather than the xAPI request:
 * a body too large or too slow, a server too busy to read one (with its Retry-After).
 */
export class HttpRefusal extends Error {
  readonly status: number;
  readonly headers: Record<string, string>;
  constructor(status: number, message: string, headers: Record<string, string> = {}) {
    super(message);
    this.name = 'HttpRefusal';
    this.status = status;
    this.headers = headers;
  }
}

/**
 * Seconds a client told 503 by the storage (unreachable, or its disk full) should wait: long
 * enough not to hammer a database that is recovering, short enough for a retry to find it back.
 */
const UNAVAILABLE_RETRY_AFTER = '5';

/** Known errors become their status; anything else is a 500 whose details stay in the log. */
export function errorAnswer(err: unknown): Answer {
  if (err instanceof LrsError) {
    const headers: Record<string, string> = err.kind === 'unavailable' ? { 'retry-after': UNAVAILABLE_RETRY_AFTER } : {};
    return json(err.status, err.issues ? { detail: err.issues } : { detail: err.message }, headers);
  }
  if (err instanceof HttpRefusal) return json(err.status, { detail: err.message }, err.headers);
  return json(500, { detail: 'internal server error' });
}
