/**
 * SQL shared by the backends: the statement query (filters, StatementRef targeting, keyset
 * paging). Both schemas use the same table and column names; only placeholders differ.
 */
import type { StatementFilter, StatementQuery } from '../xapi/query.ts';

export type Placeholder = (index: number) => string;
export const sqlitePlaceholder: Placeholder = () => '?';
export const postgresPlaceholder: Placeholder = (i) => `$${i}`;

/** Collects parameters and hands out placeholders in order. */
export class Params {
  readonly values: unknown[] = [];
  private readonly ph: Placeholder;
  constructor(ph: Placeholder) {
    this.ph = ph;
  }
  add(v: unknown): string {
    this.values.push(v);
    return this.ph(this.values.length);
  }
}

/** Inclusive/exclusive bounds on `seq`, from since/until (translated by the backend) and the cursor. */
export interface SeqWindow {
  /** seq > after */
  after?: bigint;
  /** seq < before */
  before?: bigint;
  /** seq >= from */
  from?: bigint;
  /** seq <= to */
  to?: bigint;
}

/** True when the filter has conditions that StatementRef targeting applies to. */
export const hasTargetableFilter = (f: StatementFilter): boolean =>
  f.agent !== undefined || f.verb !== undefined || f.activity !== undefined || f.registration !== undefined;

function windowConds(alias: string, w: SeqWindow, p: Params): string[] {
  const c: string[] = [];
  if (w.after !== undefined) c.push(`${alias}.seq > ${p.add(w.after)}`);
  if (w.before !== undefined) c.push(`${alias}.seq < ${p.add(w.before)}`);
  if (w.from !== undefined) c.push(`${alias}.seq >= ${p.add(w.from)}`);
  if (w.to !== undefined) c.push(`${alias}.seq <= ${p.add(w.to)}`);
  return c;
}

/** The spec's filter conditions on statement `alias` (not time, not voided, not `mine`). */
function matchConds(alias: string, f: StatementFilter, p: Params, skip?: 'agent' | 'activity'): string[] {
  const c: string[] = [];
  if (f.verb !== undefined) c.push(`${alias}.verb = ${p.add(f.verb)}`);
  if (f.registration !== undefined) c.push(`${alias}.registration = ${p.add(f.registration)}`);
  if (f.agent !== undefined && skip !== 'agent') {
    c.push(
      `EXISTS (SELECT 1 FROM statement_agents xa WHERE xa.seq = ${alias}.seq AND xa.agent_key = ${p.add(f.agent)}` +
        `${f.relatedAgents ? '' : ' AND xa.direct = 1'})`,
    );
  }
  if (f.activity !== undefined && skip !== 'activity') {
    c.push(
      `EXISTS (SELECT 1 FROM statement_activities xc WHERE xc.seq = ${alias}.seq AND xc.activity_id = ${p.add(f.activity)}` +
        `${f.relatedActivities ? '' : ' AND xc.direct = 1'})`,
    );
  }
  return c;
}

/**
 * Seqs of statements matching the filter directly, driven by the most selective index: the agent
 * or activity link table when filtered on, else the statements table itself.
 */
function directMatches(tenant: string, q: StatementQuery, w: SeqWindow, p: Params, order: string): string {
  const f = q.filter;
  const tail = (conds: string[], seqCol: string) => `WHERE ${conds.join(' AND ')} ORDER BY ${seqCol} ${order} LIMIT ${p.add(q.limit + 1)}`;
  const common = (alias: string, skip?: 'agent' | 'activity') => {
    const c = [`s.voided = 0`, ...matchConds('s', f, p, skip)];
    if (f.authority !== undefined) c.push(`s.authority_key = ${p.add(f.authority)}`);
    return { c, alias };
  };
  if (f.agent !== undefined) {
    const head = [`d.tenant = ${p.add(tenant)}`, `d.agent_key = ${p.add(f.agent)}`];
    if (!f.relatedAgents) head.push('d.direct = 1');
    head.push(...windowConds('d', w, p));
    const { c } = common('s', 'agent');
    return `SELECT d.seq FROM statement_agents d JOIN statements s ON s.seq = d.seq ${tail([...head, ...c], 'd.seq')}`;
  }
  if (f.activity !== undefined) {
    const head = [`d.tenant = ${p.add(tenant)}`, `d.activity_id = ${p.add(f.activity)}`];
    if (!f.relatedActivities) head.push('d.direct = 1');
    head.push(...windowConds('d', w, p));
    const { c } = common('s', 'activity');
    return `SELECT d.seq FROM statement_activities d JOIN statements s ON s.seq = d.seq ${tail([...head, ...c], 'd.seq')}`;
  }
  const head = [`s.tenant = ${p.add(tenant)}`, ...windowConds('s', w, p)];
  const { c } = common('s');
  return `SELECT s.seq FROM statements s ${tail([...head, ...c], 's.seq')}`;
}

/**
 * Seqs of statements that target a matching statement through a StatementRef, recursively
 * (xAPI-Communication 2.1.3.s3): time bounds and `mine` apply to the targeting statement, the
 * other filters to the targeted one, which may itself be voided.
 */
function targetingMatches(tenant: string, q: StatementQuery, w: SeqWindow, p: Params, order: string): string {
  const seed = [`r.tenant = ${p.add(tenant)}`, 'r.ref_id IS NOT NULL', 'r.voided = 0', ...windowConds('r', w, p)];
  if (q.filter.authority !== undefined) seed.push(`r.authority_key = ${p.add(q.filter.authority)}`);
  const cte =
    `WITH RECURSIVE chain(seq, target) AS (SELECT r.seq, r.ref_id FROM statements r WHERE ${seed.join(' AND ')} ` +
    `UNION SELECT c.seq, t.ref_id FROM chain c JOIN statements t ON t.tenant = ${p.add(tenant)} AND t.id = c.target ` +
    `WHERE t.ref_id IS NOT NULL) `;
  const join = `SELECT DISTINCT c.seq FROM chain c JOIN statements t ON t.tenant = ${p.add(tenant)} AND t.id = c.target `;
  const where = `WHERE ${matchConds('t', q.filter, p).join(' AND ')} `;
  // Placeholders are added in textual order: SQLite's `?` are positional.
  return `${cte}${join}${where}ORDER BY c.seq ${order} LIMIT ${p.add(q.limit + 1)}`;
}

/**
 * The page query: `limit + 1` rows (seq, stored_ms, full) in the requested order, so the caller
 * knows whether more exist without a short page.
 */
export function statementPageSql(tenant: string, q: StatementQuery, w: SeqWindow, ph: Placeholder): { sql: string; params: unknown[] } {
  const p = new Params(ph);
  const order = q.ascending ? 'ASC' : 'DESC';
  let seqs: string;
  if (hasTargetableFilter(q.filter)) {
    const a = directMatches(tenant, q, w, p, order);
    const b = targetingMatches(tenant, q, w, p, order);
    seqs = `SELECT seq FROM (${a}) da UNION SELECT seq FROM (${b}) tb`;
  } else {
    seqs = directMatches(tenant, q, w, p, order);
  }
  const sql = `SELECT s.seq, s.stored_ms, s.full FROM statements s WHERE s.seq IN (${seqs}) ORDER BY s.seq ${order} LIMIT ${p.add(q.limit + 1)}`;
  return { sql, params: p.values };
}
