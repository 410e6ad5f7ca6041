/** Maps errors to xAPI responses: a status and a JSON body saying what is wrong and where. */
import { LrsError } from '../errors.ts';
import { json, type XapiResponse } from './request.ts';

/** Known errors become their status; anything else is a 500 whose details stay in the log. */
export function errorResponse(err: unknown): XapiResponse {
  if (err instanceof LrsError) {
    return json(err.status, err.issues ? { detail: err.issues } : { detail: err.message });
  }
  return json(500, { detail: 'internal server error' });
}
