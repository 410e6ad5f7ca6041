/**
 * PostgreSQL's statement queries' fragments (the `query` part of its dialect, ./dialect.ts; the
 * QueryDialect that src/store/sql.ts writes the queries with): `uuid` columns, link tables keyed
 * by key and role (LINK_ROLES), the statements table's plain indexes, and the page's JSON in two
 * columns.
 */
import type { StatementFilter, StatementQuery } from '../../xapi/query.ts';
import { AGENT_ROLE, AGENT_ROLES } from '../../xapi/statement.ts';
import { type QueryDialect, type DriverCounting, type MatchParts, type Params, type SeqWindow, verbCount, windowConds, linkProbes } from '../sql.ts';

/**
 * PostgreSQL's link tables (migration 10): `statement_agents (agent, role, seq)` and
 * `statement_activities (activity, direct, seq)`, each its primary key and nothing more. Key ids
 * are dictionary ids of one tenant's keys (resolved by tenant and key), never shared between
 * tenants, so the key names the tenant. Without the tenant and with the role in the key, an entry
 * is 28 bytes, which lets PostgreSQL split a page where a key's newest entries keep arriving at
 * the full point rather than in the middle (nbtsplitloc.c, for entries of at most two 8-byte
 * columns), so the keys' B-trees come out much fuller (docs/decisions.md, "Storage on
 * PostgreSQL"). The plain agent and activity filters read exactly their
 * role's range; related_agents and related_activities merge one range per role.
 */
const LINK_ROLES = {
  agent: { table: 'statement_agents', key: 'agent', role: 'role' },
  activity: { table: 'statement_activities', key: 'activity', role: 'direct' },
} as const;

/**
 * The link roles a filter matches: the direct one, or every one with related_agents /
 * related_activities, the likely densest first (see byRoles): an agent's own statements, an
 * activity's context (courses and modules are what related_activities is asked for).
 */
function linkRoles(byAgent: boolean, f: StatementFilter): readonly number[] {
  if (byAgent) return f.relatedAgents ? [AGENT_ROLE.direct, ...AGENT_ROLES.filter((r) => r !== AGENT_ROLE.direct)] : [AGENT_ROLE.direct];
  return f.relatedActivities ? [0, 1] : [1];
}

/**
 * PostgreSQL: the newest `limit` seqs an agent (its key id, an SQL expression) is linked to in
 * any role, newest first (the Person object's statements).
 */
export function agentSeqsSql(key: string, limit: string): string {
  const t = LINK_ROLES.agent;
  return byRoles(
    AGENT_ROLES,
    (r) => `SELECT seq FROM ${t.table} WHERE ${t.key} = ${key} AND ${t.role} = ${r} ORDER BY seq DESC LIMIT ${limit}`,
    'DESC',
    () => limit,
  );
}

/** The link filters of `f` on PostgreSQL's layout: each link table it filters by, its key value and roles. */
function roleLinks(f: StatementFilter, skip?: 'agent' | 'activity'): { table: (typeof LINK_ROLES)[keyof typeof LINK_ROLES]; value: string; roles: readonly number[] }[] {
  const out = [];
  for (const by of ['agent', 'activity'] as const) {
    const value = by === 'agent' ? f.agent : f.activity;
    if (value !== undefined && skip !== by) out.push({ table: LINK_ROLES[by], value, roles: linkRoles(by === 'agent', f) });
  }
  return out;
}

/** `= r`, or `IN (…)` for several roles (PostgreSQL probes each value of the list through the key). */
const roleIn = (roles: readonly number[]): string => (roles.length === 1 ? `= ${roles[0]}` : `IN (${roles.join(', ')})`);

/** A condition on a seq column, given that column. */
type SeqBound = (seq: string) => string;

/**
 * Per-role ranges merged in seq order (a key has one row per statement, so no statement comes
 * twice). `branch(role, bound)` is a `SELECT seq … ORDER BY seq LIMIT` of one role's range, with
 * `bound` to add to its conditions. Merged by the planner (a Merge Append, which reads each range
 * until its first match), unless `sparse`: a combined filter, whose entries in one role's range
 * may match rarely or never, so that range would be read to its end. Then the roles are read in
 * turn, each only past the limit-th seq the ones before it found: when the first filled the page,
 * the others are read only as far back as that page. (Chained for plain filters too, they were
 * slower: a plan and a sort per role; docs/decisions.md, "Reads".)
 */
function byRoles(roles: readonly number[], branch: (role: number, bound?: SeqBound) => string, order: string, limit: () => string, sparse = false): string {
  if (roles.length === 1) return branch(roles[0]);
  if (!sparse) return `SELECT seq FROM (${roles.map((r) => `(${branch(r)})`).join(' UNION ALL ')}) u ORDER BY seq ${order} LIMIT ${limit()}`;
  const names = roles.map((r) => `role_${r}`);
  const union = (upTo: number) =>
    names
      .slice(0, upTo)
      .map((n) => `SELECT seq FROM ${n}`)
      .join(' UNION ALL ');
  const ctes = roles.map((r, i) => {
    if (i === 0) return `${names[i]} AS (${branch(r)})`;
    const nth = `(SELECT seq FROM (${union(i)}) p ORDER BY seq ${order} OFFSET ${limit()} - 1 LIMIT 1)`;
    const bound: SeqBound = (seq) => (order === 'DESC' ? `${seq} > coalesce(${nth}, -1)` : `${seq} < coalesce(${nth}, 9223372036854775807)`);
    return `${names[i]} AS (${branch(r, bound)})`;
  });
  return `WITH ${ctes.join(', ')} SELECT seq FROM (${union(names.length)}) u ORDER BY seq ${order} LIMIT ${limit()}`;
}

/** PostgreSQL: the key names the tenant (LINK_ROLES); one probe of (key, role, seq) per role. */
function roleLinkProbes(tenant: number, f: StatementFilter, p: Params, seq: string, skip?: 'agent' | 'activity', fence = false): string[] {
  const limit = fence ? ' LIMIT 1 OFFSET 0' : '';
  return roleLinks(f, skip).map(
    ({ table: t, value, roles }) => `EXISTS (SELECT 1 FROM ${t.table} x WHERE x.${t.key} = ${p.key(tenant, value)} AND x.${t.role} ${roleIn(roles)} AND x.seq = ${seq}${limit})`,
  );
}

/** PostgreSQL: the newest entries of the key's roles, merged (LINK_ROLES). */
function roleLinkCounts(tenant: number, f: StatementFilter, p: Params, c: DriverCounting): string[] {
  const cols: string[] = [];
  for (const { table: t, value, roles } of roleLinks(f)) {
    const key = p.key(tenant, value);
    const branch = (r: number, bound?: SeqBound) => c.newest(t.table, [`${t.key} = ${key}`, `${t.role} = ${r}`, ...(bound ? [bound('seq')] : [])], 'seq DESC');
    cols.push(`${c.countOf(byRoles(roles, branch, 'DESC', () => String(c.limit)))} AS ${t.key}`);
  }
  return cols;
}

/** PostgreSQL: the verb's and the registration's index ranges. */
function plainStatementCounts(tenant: number, f: StatementFilter, p: Params, c: DriverCounting): string[] {
  const out: string[] = [];
  if (f.verb !== undefined) out.push(verbCount(tenant, f.verb, p, c));
  if (f.registration !== undefined) out.push(c.count('statements', [`tenant = ${p.add(tenant)}`, `registration = ${p.add(p.dialect.uuid(f.registration))}`], 'seq DESC'));
  return out;
}

function twoColumnJson(json: string, bytes: string, inline: () => string): string {
  const n = inline(); // a numbered placeholder, used twice
  return `CASE WHEN ${bytes} <= ${n} THEN ${json} END AS page_json, CASE WHEN ${bytes} > ${n} THEN ${bytes} END AS json_bytes`;
}

/**
 * PostgreSQL, one range per role (LINK_ROLES), each read in seq order with the statement row
 * probed per entry (fenced: the link table has statistics per key, `statements` none on the
 * store, so joined freely the planner walked the store's statements newest first and probed
 * the link key per row). With a probe of the other link table too, the probe and then the row,
 * in that order (a CASE: it orders subplans by estimated cost, and took the row first, reading
 * a row for every entry of the range). The key names the store.
 */
function roleLinkMatches(tenant: number, q: StatementQuery, w: SeqWindow, p: Params, order: string, byAgent: boolean, m: MatchParts): string {
  const f = q.filter;
  const skip = byAgent ? 'agent' : 'activity';
  const otherLink = byAgent ? f.activity !== undefined : f.agent !== undefined;
  const t = LINK_ROLES[skip];
  const key = p.key(tenant, byAgent ? f.agent! : f.activity!);
  const branch = (role: number, bound?: SeqBound) => {
    const head = [`d.${t.key} = ${key}`, `d.${t.role} = ${role}`, ...windowConds('d', w, p), ...(bound ? [bound('d.seq')] : [])];
    const row = `EXISTS (SELECT 1 FROM statements s WHERE ${['s.seq = d.seq', ...m.own()].join(' AND ')} LIMIT 1 OFFSET 0)`;
    const probes = otherLink ? linkProbes(tenant, f, p, 'd.seq', skip, true) : [];
    return `SELECT d.seq FROM ${t.table} d ${m.tail([...head, probes.length ? `CASE WHEN ${probes.join(' AND ')} THEN ${row} ELSE false END` : row], 'd.seq')}`;
  };
  // Sparse: the other link table or the row's own columns (verb, registration, `mine`) decide.
  const sparse = otherLink || f.verb !== undefined || f.registration !== undefined || f.authority !== undefined;
  return byRoles(linkRoles(byAgent, f), branch, order, () => p.add(q.limit + 1), sparse);
}

/** PostgreSQL: the statements table's own range; the planner picks the index. */
const plainStatementRange = (tenant: number, _f: StatementFilter, w: SeqWindow, p: Params) => ({ head: [`s.tenant = ${p.add(tenant)}`, ...windowConds('s', w, p)], indexed: '' });

/** PostgreSQL's SQL: `uuid` columns, link tables keyed by role (LINK_ROLES). */
export const POSTGRES: QueryDialect = {
  uuid: (id) => id,
  least: (exprs) => `least(${exprs.join(', ')})`,
  probeJoin: 'JOIN',
  sizedJson: twoColumnJson,
  linkProbes: roleLinkProbes,
  linkCounts: roleLinkCounts,
  linkMatches: roleLinkMatches,
  statementCounts: plainStatementCounts,
  statementRange: plainStatementRange,
  fullBytes: (a) => `${a}.full_bytes`,
};
