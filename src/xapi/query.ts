/**
 * The Statement resource's GET parameters (xAPI-Communication §2.1.3): parsing and validation into
 * a StatementQuery the store answers, and the query string of the `more` link.
 */
import type { ValidationIssue } from '../errors.ts';
import { ValidationFailed } from '../errors.ts';
import { actorKeys } from './agents.ts';
import type { Actor } from './types.ts';
import { isIri, isUuid, parseTimestamp, validateAgentParam } from './validate.ts';

export type StatementFormat = 'ids' | 'exact' | 'canonical';

/** Filters that select statements; a StatementRef to a matching statement matches too. */
export interface StatementFilter {
  /** IFI key of the `agent` parameter. */
  agent?: string;
  verb?: string;
  activity?: string;
  registration?: string;
  relatedAgents: boolean;
  relatedActivities: boolean;
  /** IFI key of the requesting user's agent, as the authority (`mine=true`, Ralph's extension). */
  authority?: string;
}

export interface StatementQuery {
  filter: StatementFilter;
  /** Exclusive lower bound on `stored`, epoch ms. */
  since?: number;
  /** Inclusive upper bound on `stored`, epoch ms. */
  until?: number;
  /** Page size, already clamped to the server maximum. */
  limit: number;
  ascending: boolean;
  /** Keyset cursor from a `more` link: the position of the last statement already returned. */
  after?: string;
  format: StatementFormat;
  attachments: boolean;
}

export type StatementRequest =
  | { kind: 'single'; id: string; voided: boolean; format: StatementFormat; attachments: boolean; authority?: string }
  | { kind: 'query'; query: StatementQuery; params: Record<string, string> };

const FILTER_PARAMS = [
  'agent',
  'verb',
  'activity',
  'registration',
  'related_activities',
  'related_agents',
  'since',
  'until',
  'limit',
  'ascending',
  'mine',
  'search_after',
  // Ralph's point-in-time id: accepted and ignored, since `more` links page on the immutable
  // stored order (keyset on seq) and are consistent without a snapshot.
  'pit_id',
] as const;
const KNOWN = new Set<string>(['statementId', 'voidedStatementId', 'format', 'attachments', ...FILTER_PARAMS]);

/** A trailing ` hh`, ` hhmm` or ` hh:mm`: a `+hh:mm` offset whose `+` was not percent-encoded. */
const OFFSET_AS_SPACE = / (\d\d(?::?\d\d)?)$/;

function parseBool(name: string, v: string, issues: ValidationIssue[]): boolean {
  if (v === 'true') return true;
  if (v === 'false') return false;
  issues.push({ loc: ['query', name], msg: 'must be true or false', type: 'type_error.bool' });
  return false;
}

/**
 * Parses GET statement parameters (a plain object: each name once). `mineAgent` is the caller's
 * own agent, used by `mine=true`; `onlyMine` applies it whatever the parameters say (the user may
 * only read statements it is the authority of).
 */
export function parseStatementRequest(
  params: Record<string, string>,
  opts: { maxLimit: number; mineAgent?: Actor; onlyMine?: boolean },
): StatementRequest {
  const forced = opts.onlyMine && opts.mineAgent ? actorKeys(opts.mineAgent)[0] : undefined;
  const issues: ValidationIssue[] = [];
  for (const name of Object.keys(params)) {
    if (!KNOWN.has(name)) {
      const near = [...KNOWN].find((k) => k.toLowerCase() === name.toLowerCase());
      issues.push({
        loc: ['query', name],
        msg: near ? `unknown parameter (parameter names are case-sensitive: did you mean ${near}?)` : 'unknown parameter',
        type: 'value_error.extra',
      });
    }
  }
  const format = (params.format ?? 'exact') as StatementFormat;
  if (!['ids', 'exact', 'canonical'].includes(format)) {
    issues.push({ loc: ['query', 'format'], msg: 'must be one of ids, exact, canonical', type: 'value_error.format' });
  }
  const attachments = params.attachments === undefined ? false : parseBool('attachments', params.attachments, issues);

  const single = params.statementId !== undefined ? 'statementId' : params.voidedStatementId !== undefined ? 'voidedStatementId' : undefined;
  if (single) {
    if (params.statementId !== undefined && params.voidedStatementId !== undefined) {
      issues.push({ loc: ['query'], msg: 'statementId and voidedStatementId cannot be used together', type: 'value_error.conflict' });
    }
    for (const name of Object.keys(params)) {
      if (name !== single && name !== 'format' && name !== 'attachments' && KNOWN.has(name) && name !== 'statementId' && name !== 'voidedStatementId') {
        issues.push({ loc: ['query', name], msg: `cannot be combined with ${single}`, type: 'value_error.conflict' });
      }
    }
    const id = params[single];
    if (!isUuid(id)) issues.push({ loc: ['query', single], msg: 'must be a UUID', type: 'value_error.uuid' });
    if (issues.length) throw new ValidationFailed(issues);
    return { kind: 'single', id: id.toLowerCase(), voided: single === 'voidedStatementId', format, attachments, authority: forced };
  }

  const filter: StatementFilter = {
    relatedAgents: params.related_agents !== undefined && parseBool('related_agents', params.related_agents, issues),
    relatedActivities: params.related_activities !== undefined && parseBool('related_activities', params.related_activities, issues),
  };
  if (params.agent !== undefined) {
    let agent: unknown;
    try {
      agent = JSON.parse(params.agent);
    } catch {
      issues.push({ loc: ['query', 'agent'], msg: 'must be an Agent or identified Group as JSON', type: 'value_error.json' });
    }
    if (agent !== undefined) {
      const before = issues.length;
      validateAgentParam(agent, ['query', 'agent'], issues);
      if (issues.length === before) filter.agent = actorKeys(agent as Actor)[0];
    }
  }
  if (params.verb !== undefined) {
    if (isIri(params.verb)) filter.verb = params.verb;
    else issues.push({ loc: ['query', 'verb'], msg: 'must be an absolute IRI', type: 'value_error.iri' });
  }
  if (params.activity !== undefined) {
    if (isIri(params.activity)) filter.activity = params.activity;
    else issues.push({ loc: ['query', 'activity'], msg: 'must be an absolute IRI', type: 'value_error.iri' });
  }
  if (params.registration !== undefined) {
    if (isUuid(params.registration)) filter.registration = params.registration.toLowerCase();
    else issues.push({ loc: ['query', 'registration'], msg: 'must be a UUID', type: 'value_error.uuid' });
  }
  if (params.mine !== undefined && parseBool('mine', params.mine, issues) && opts.mineAgent) {
    filter.authority = actorKeys(opts.mineAgent)[0];
  }
  if (forced !== undefined) filter.authority = forced;
  const time = (name: 'since' | 'until'): number | undefined => {
    const raw = params[name];
    if (raw === undefined) return undefined;
    // An offset's "+" sent unencoded arrives as a space (form decoding): no timestamp has a space there.
    const t = parseTimestamp(raw) ?? (OFFSET_AS_SPACE.test(raw) ? parseTimestamp(raw.replace(OFFSET_AS_SPACE, '+$1')) : undefined);
    if (t === undefined) issues.push({ loc: ['query', name], msg: 'must be an ISO 8601 timestamp', type: 'value_error.datetime' });
    return t;
  };
  const since = time('since');
  const until = time('until');
  let limit = opts.maxLimit;
  if (params.limit !== undefined) {
    if (!/^\d+$/.test(params.limit)) {
      issues.push({ loc: ['query', 'limit'], msg: 'must be a non-negative integer', type: 'type_error.integer' });
    } else {
      const n = Number(params.limit);
      limit = n === 0 ? opts.maxLimit : Math.min(n, opts.maxLimit);
    }
  } else {
    limit = Math.min(100, opts.maxLimit);
  }
  const ascending = params.ascending !== undefined && parseBool('ascending', params.ascending, issues);
  const after = params.search_after;
  if (after !== undefined && !/^\d{1,19}$/.test(after)) {
    issues.push({ loc: ['query', 'search_after'], msg: 'not a cursor this server issued', type: 'value_error.cursor' });
  }
  if (issues.length) throw new ValidationFailed(issues);
  return {
    kind: 'query',
    query: { filter, since, until, limit, ascending, after, format, attachments },
    params,
  };
}

/** The relative `more` URL: the same parameters with the cursor moved past `lastPosition`. */
export function moreUrl(base: string, params: Record<string, string>, lastPosition: string): string {
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (k !== 'search_after') qs.set(k, v);
  qs.set('search_after', lastPosition);
  return `${base}?${qs.toString()}`;
}
