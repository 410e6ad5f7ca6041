/**
 * What the admin API reads of a request: the query's parameters and the body's fields, each
 * checked against the route's list (an unknown one is likely a typo) and its type, a mistake a 400
 * naming the field (`loc`: query or body, and its name).
 */
import { LrsError, ValidationFailed } from '../../errors.ts';
import type { Agent } from '../../xapi/types.ts';
import { validateAgentParam } from '../../xapi/validate.ts';
import { parseQuery, rawQuery } from '../request.ts';

/** A 400 about one query parameter or body field. */
export const issue = (where: 'query' | 'body', name: string, msg: string, type = 'value_error'): ValidationFailed => new ValidationFailed([{ loc: [where, name], msg, type }]);

/** The query parameters of `url`, only those of `allowed` (another is a 400 naming it). */
export function routeQuery(url: string, allowed: readonly string[]): Record<string, string> {
  const query = parseQuery(rawQuery(url));
  const unknown = Object.keys(query).filter((k) => !allowed.includes(k));
  if (unknown.length) {
    throw new ValidationFailed(
      unknown.map((k) => ({ loc: ['query', k], msg: `unknown parameter (this route takes ${allowed.join(', ') || 'none'})`, type: 'value_error.unknown_parameter' })),
    );
  }
  return query;
}

/** The body as a JSON object with only `allowed` fields (an unknown one is likely a typo: 400 naming it). */
export function parseBody(raw: Buffer | undefined, contentType: string | undefined, allowed: readonly string[]): Record<string, unknown> {
  if (raw === undefined || raw.length === 0) return {};
  if (!/^application\/json\s*(;|$)/i.test(contentType ?? '')) throw new LrsError('bad_request', 'an admin request body must be JSON, sent with Content-Type: application/json');
  let value: unknown;
  try {
    value = JSON.parse(raw.toString('utf8'));
  } catch (err) {
    throw new LrsError('bad_request', `the body is not valid JSON: ${(err as Error).message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new LrsError('bad_request', 'the body must be a JSON object');
  const body = value as Record<string, unknown>;
  const unknown = Object.keys(body).filter((k) => !allowed.includes(k));
  if (unknown.length) {
    throw new ValidationFailed(
      unknown.map((k) => ({ loc: ['body', k], msg: `unknown field (this route takes ${allowed.join(', ') || 'none'})`, type: 'value_error.unknown_field' })),
    );
  }
  return body;
}

export const optionalString = (body: Record<string, unknown>, name: string): string | undefined => {
  const v = body[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw issue('body', name, 'must be a string', 'type_error.str');
  return v;
};

export const optionalBoolean = (body: Record<string, unknown>, name: string): boolean | undefined => {
  const v = body[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'boolean') throw issue('body', name, 'must be true or false', 'type_error.bool');
  return v;
};

export const stringList = (body: Record<string, unknown>, name: string): string[] => {
  const v = body[name];
  if (v === undefined) throw issue('body', name, 'is required: a list of names', 'value_error.missing');
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) throw issue('body', name, 'must be a list of strings', 'type_error.list');
  return v as string[];
};

/** The Agent of a body's `agent` field, validated as the `agent` parameter is; `missing` says what it is for. */
export function bodyAgent(b: Record<string, unknown>, missing: string): Agent {
  if (b.agent === undefined) throw issue('body', 'agent', `is required: ${missing}`, 'value_error.missing');
  const issues: ConstructorParameters<typeof ValidationFailed>[0] = [];
  const agent = validateAgentParam(b.agent, ['body', 'agent'], issues);
  if (issues.length || !agent) throw new ValidationFailed(issues);
  return agent as Agent;
}

export const timeParam = (query: Record<string, string>, name: string): number | undefined => {
  const v = query[name];
  if (v === undefined) return undefined;
  const ms = /^\d{4}-\d\d-\d\dT/.test(v) ? Date.parse(v) : Number.NaN;
  if (Number.isNaN(ms)) throw issue('query', name, 'must be an ISO 8601 timestamp, e.g. 2026-01-31T12:00:00Z');
  return ms;
};

export const intParam = (query: Record<string, string>, name: string, min: number, max: number): number | undefined => {
  const v = query[name];
  if (v === undefined) return undefined;
  if (!/^\d{1,15}$/.test(v) || Number(v) < min || Number(v) > max) throw issue('query', name, `must be an integer from ${min} to ${max}`, 'type_error.integer');
  return Number(v);
};
