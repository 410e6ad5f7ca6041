/**
 * SQLite's statement queries' fragments (the `query` part of its dialect, ./dialect.ts; the
 * QueryDialect that src/store/sql.ts writes the queries with): 16-byte UUIDs, link tables and the
 * registration index in seq buckets (SEQ_BUCKET_BITS), and the page's JSON in one column. What
 * the reader threads load (./pages.ts): nothing but the query builder.
 */
import type { StatementFilter, StatementQuery } from '../../xapi/query.ts';
import {
  bucketOf,
  bucketsIn,
  linkProbes,
  type QueryDialect,
  type DriverCounting,
  linkRange,
  type MatchParts,
  type Params,
  type SeqWindow,
  uuidBytes,
  verbCount,
  windowConds,
} from '../sql.ts';

/** SQLite's spelling of a shared SQL text: its placeholders `$n` (../program.ts) as `?n`, the n-th value wherever it appears. */
export const sqliteSql = (sql: string): string => sql.replace(/\$(\d+)/g, '?$1');

/** SQLite: a probe of (tenant, bucket, key, seq), the role beside the key. */
function bucketLinkProbes(tenant: number, f: StatementFilter, p: Params, seq: string, skip?: 'agent' | 'activity', fence = false): string[] {
  const c: string[] = [];
  const limit = fence ? ' LIMIT 1 OFFSET 0' : '';
  const bucket = (alias: string) => ` AND ${alias}.bucket = ${bucketOf(seq)}`;
  if (f.agent !== undefined && skip !== 'agent') {
    c.push(
      `EXISTS (SELECT 1 FROM statement_agents xa WHERE xa.tenant = ${p.add(tenant)}${bucket('xa')} AND xa.agent = ${p.key(tenant, f.agent)} AND xa.seq = ${seq}` +
        `${f.relatedAgents ? '' : ' AND xa.role = 1'}${limit})`,
    );
  }
  if (f.activity !== undefined && skip !== 'activity') {
    c.push(
      `EXISTS (SELECT 1 FROM statement_activities xc WHERE xc.tenant = ${p.add(tenant)}${bucket('xc')} AND xc.activity = ${p.key(tenant, f.activity)} AND xc.seq = ${seq}` +
        `${f.relatedActivities ? '' : ' AND xc.direct = 1'}${limit})`,
    );
  }
  return c;
}

/** SQLite: the key's range of (tenant, bucket, key, seq), bucket by bucket (SEQ_BUCKET_BITS). */
function bucketLinkCounts(tenant: number, f: StatementFilter, p: Params, c: DriverCounting): string[] {
  const cols: string[] = [];
  const order = 'bucket DESC, seq DESC';
  if (f.agent !== undefined) {
    const conds = [`tenant = ${p.add(tenant)}`, `bucket IN ${bucketsIn()}`, `agent = ${p.key(tenant, f.agent)}`, ...(f.relatedAgents ? [] : ['role = 1'])];
    cols.push(`${c.count('statement_agents', conds, order)} AS agent`);
  }
  if (f.activity !== undefined) {
    const conds = [`tenant = ${p.add(tenant)}`, `bucket IN ${bucketsIn()}`, `activity = ${p.key(tenant, f.activity)}`, ...(f.relatedActivities ? [] : ['direct = 1'])];
    cols.push(`${c.count('statement_activities', conds, order)} AS activity`);
  }
  return cols;
}

/** SQLite reads a registration's bucketed index whenever the filter has one (directMatches); else the verb's. */
function bucketStatementCounts(tenant: number, f: StatementFilter, p: Params, c: DriverCounting): string[] {
  if (f.registration !== undefined) {
    const conds = [`tenant = ${p.add(tenant)}`, `${bucketOf('seq')} IN ${bucketsIn()}`, `registration = ${p.add(p.dialect.uuid(f.registration))}`];
    return [c.count('statements', conds, `${bucketOf('seq')} DESC, seq DESC`)];
  }
  return f.verb === undefined ? [] : [verbCount(tenant, f.verb, p, c)];
}

const oneColumnJson = (json: string, bytes: string, inline: () => string): string => `CASE WHEN ${bytes} <= ${inline()} THEN ${json} ELSE ${bytes} END AS page_json`;

/**
 * SQLite, the key's range bucket by bucket. The other link table is probed by the driving row's
 * seq before the statement row is read (a probe of a small index against a row read, for every
 * entry of the range; docs/decisions.md, "Reads"), which SQLite does in the order written when the row is an EXISTS after the probes.
 */
function bucketLinkMatches(tenant: number, q: StatementQuery, w: SeqWindow, p: Params, _order: string, byAgent: boolean, m: MatchParts): string {
  const f = q.filter;
  const head = [...linkRange('d', byAgent, tenant, f, p, w), ...windowConds('d', w, p)];
  const table = byAgent ? 'statement_agents' : 'statement_activities';
  const probes = linkProbes(tenant, f, p, 'd.seq', byAgent ? 'agent' : 'activity');
  const row = `EXISTS (SELECT 1 FROM statements s WHERE ${['s.seq = d.seq', ...m.own()].join(' AND ')})`;
  return `SELECT d.seq FROM ${table} d ${m.tail([...head, ...probes, row], 'd.seq', 'd.bucket')}`;
}

/**
 * SQLite, not knowing how common the value is, read a verb within since/until through the seq
 * range, row by row; its own index holds the same window in order. A
 * registration (rarer than a verb) is read from its own index, bucket by bucket.
 */
function bucketStatementRange(tenant: number, f: StatementFilter, w: SeqWindow, p: Params): { head: string[]; indexed: string; bucket?: string } {
  if (f.registration !== undefined) {
    const head = [`s.tenant = ${p.add(tenant)}`, `${bucketOf('s.seq')} IN ${bucketsIn(w, p)}`, ...windowConds('s', w, p)];
    return { head, indexed: ' INDEXED BY statements_registration', bucket: bucketOf('s.seq') };
  }
  return { head: [`s.tenant = ${p.add(tenant)}`, ...windowConds('s', w, p)], indexed: f.verb !== undefined ? ' INDEXED BY statements_verb' : '' };
}

/** SQLite's SQL: 16-byte UUIDs, link tables and the registration index in seq buckets. */
export const SQLITE: QueryDialect = {
  uuid: uuidBytes,
  least: (exprs) => `min(${exprs.join(', ')})`,
  probeJoin: 'CROSS JOIN',
  sizedJson: oneColumnJson,
  linkProbes: bucketLinkProbes,
  linkCounts: bucketLinkCounts,
  linkMatches: bucketLinkMatches,
  statementCounts: bucketStatementCounts,
  statementRange: bucketStatementRange,
  fullBytes: (a) => `octet_length(${a}.full)`,
};
