/**
 * The Statement resource's GET parameters (xAPI-Communication §2.1.3), declared in params.ts: their
 * combination rules, the StatementQuery the store answers, and the query string of the `more` link.
 */
import { ValidationFailed, type ValidationIssue } from '../errors.ts';
import { actorKeys } from './agents.ts';
import { parseParams } from './params.ts';
import type { Actor } from './types.ts';

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
  /**
   * Most bytes of stored statement JSON the page carries, with `attachments` the attachment data
   * too (LECTERN_MAX_PAGE_BYTES): the page ends early past it, after at least one statement.
   */
  maxBytes: number;
  ascending: boolean;
  /**
   * Keyset cursor from a `more` link: the id of the last statement already returned. The store
   * finds its place within the tenant (and, under `mine`, among the caller's own statements):
   * the client never sees a position, which would count every store's writes (see unknownCursor).
   */
  after?: string;
  format: StatementFormat;
  attachments: boolean;
}

export type StatementRequest =
  | { kind: 'single'; id: string; voided: boolean; format: StatementFormat; attachments: boolean; authority?: string }
  | { kind: 'query'; query: StatementQuery; params: Record<string, string> };

/** Parameters that select statements, which a single-statement request (statementId/voidedStatementId) cannot take. */
const SINGLE_COMPATIBLE = new Set(['statementId', 'voidedStatementId', 'format', 'attachments']);

/**
 * Parses GET statement parameters (a plain object: each name once; their kinds are declared in
 * params.ts). `mineAgent` is the caller's own agent, used by `mine=true`;
 * `onlyMine` applies it whatever the parameters say (the user may only read statements it is the
 * authority of).
 */
export function parseStatementRequest(params: Record<string, string>, opts: { maxLimit: number; maxBytes: number; mineAgent?: Actor; onlyMine?: boolean }): StatementRequest {
  const forced = opts.onlyMine && opts.mineAgent ? actorKeys(opts.mineAgent)[0] : undefined;
  const p = parseParams('statements', 'GET', params);
  const format = (p.format ?? 'exact') as StatementFormat;
  const attachments = p.attachments === true;

  const single = params.statementId !== undefined ? 'statementId' : params.voidedStatementId !== undefined ? 'voidedStatementId' : undefined;
  if (single) {
    const issues: ValidationIssue[] = [];
    if (params.statementId !== undefined && params.voidedStatementId !== undefined) {
      issues.push({ loc: ['query'], msg: 'statementId and voidedStatementId cannot be used together', type: 'value_error.conflict' });
    }
    for (const name of Object.keys(params)) {
      if (!SINGLE_COMPATIBLE.has(name)) issues.push({ loc: ['query', name], msg: `cannot be combined with ${single}`, type: 'value_error.conflict' });
    }
    if (issues.length) throw new ValidationFailed(issues);
    return { kind: 'single', id: p[single] as string, voided: single === 'voidedStatementId', format, attachments, authority: forced };
  }

  const filter: StatementFilter = { relatedAgents: p.related_agents === true, relatedActivities: p.related_activities === true };
  if (p.agent !== undefined) filter.agent = actorKeys(p.agent as Actor)[0];
  if (p.verb !== undefined) filter.verb = p.verb as string;
  if (p.activity !== undefined) filter.activity = p.activity as string;
  if (p.registration !== undefined) filter.registration = p.registration as string;
  if (p.mine === true && opts.mineAgent) filter.authority = actorKeys(opts.mineAgent)[0];
  if (forced !== undefined) filter.authority = forced;
  const requested = p.limit as number | undefined;
  const limit = requested === undefined ? Math.min(100, opts.maxLimit) : requested === 0 ? opts.maxLimit : Math.min(requested, opts.maxLimit);
  return {
    kind: 'query',
    query: {
      filter,
      since: p.since as number | undefined,
      until: p.until as number | undefined,
      limit,
      maxBytes: opts.maxBytes,
      ascending: p.ascending === true,
      after: p.search_after as string | undefined,
      format,
      attachments,
    },
    params,
  };
}

/**
 * A 400 for a cursor that names no statement this query may continue after: not one of the
 * caller's store (or, under `mine`, of its own), or erased since the page that gave it. The
 * same answer for each, so it tells nothing about other stores' or users' statements.
 */
export const unknownCursor = (): ValidationFailed =>
  new ValidationFailed([
    {
      loc: ['query', 'search_after'],
      msg: 'names no statement this query can continue after (it was erased, or the cursor is not one this server issued for you): start again without search_after',
      type: 'value_error.cursor',
    },
  ]);

/** The relative `more` URL: the same parameters with the cursor moved past `lastId`, the last statement returned. */
export function moreUrl(base: string, params: Record<string, string>, lastId: string): string {
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (k !== 'search_after') qs.set(k, v);
  qs.set('search_after', lastId);
  return `${base}?${qs.toString()}`;
}
