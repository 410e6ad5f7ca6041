/**
 * PostgreSQL's dialect (../dialect.ts), everything its SQL does differently: the statement
 * queries' fragments (POSTGRES, which src/store/sql.ts writes the queries with: `uuid` columns,
 * link tables keyed by key and role (LINK_ROLES), the statements table's plain indexes, the
 * page's JSON in two columns), and the steps of the documents, the forwarding outbox and the reach
 * rows for processes sharing one database: advisory locks, the database clock, and arrays (each
 * statement is a round trip).
 */
import type { StatementFilter, StatementQuery } from '../../xapi/query.ts';
import { AGENT_ROLE, AGENT_ROLES } from '../../xapi/statement.ts';
import type { StoreDialect } from '../dialect.ts';
import { type DocumentDialect, DOCUMENT_SQL, documentValues, toDocument } from '../documents.ts';
import { OLDEST_QUEUED_SQL, type OutboxDialect, toDeadLetter } from '../outbox.ts';
import { row, rows, run } from '../program.ts';
import type { ReachDialect } from '../reach.ts';
import type { DocumentKey } from '../types.ts';
import { type QueryDialect, type DriverCounting, type MatchParts, type Params, type SeqWindow, verbCount, windowConds, linkProbes } from '../sql.ts';
import { LOCK_DOCUMENT, lockKey } from './locks.ts';
import { NOW_MS, resolveKeys } from './write.ts';

/**
 * PostgreSQL's link tables (migration 10): `statement_agents (agent, role, seq)` and
 * `statement_activities (activity, direct, seq)`, each its primary key and nothing more. Key ids
 * are dictionary ids of one tenant's keys (resolved by tenant and key), never shared between
 * tenants, so the key names the tenant. Without the tenant and with the role in the key, an entry
 * is 28 bytes, which lets PostgreSQL split a page where a key's newest entries keep arriving at
 * the full point rather than in the middle (nbtsplitloc.c, for entries of at most two 8-byte
 * columns): the keys' B-trees came out 76 % full against 52 %, and the heaps 15 % smaller
 * (docs/performance.md, "Disk"). The plain agent and activity filters read exactly their
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
  return byRoles(AGENT_ROLES, (r) => `SELECT seq FROM ${t.table} WHERE ${t.key} = ${key} AND ${t.role} = ${r} ORDER BY seq DESC LIMIT ${limit}`, 'DESC', () => limit);
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
 * the others are read only as far back as that page. (Chained, a plain related_agents page was
 * 10–20 % slower: a plan and a sort per role.)
 */
function byRoles(roles: readonly number[], branch: (role: number, bound?: SeqBound) => string, order: string, limit: () => string, sparse = false): string {
  if (roles.length === 1) return branch(roles[0]);
  if (!sparse) return `SELECT seq FROM (${roles.map((r) => `(${branch(r)})`).join(' UNION ALL ')}) u ORDER BY seq ${order} LIMIT ${limit()}`;
  const names = roles.map((r) => `role_${r}`);
  const union = (upTo: number) => names.slice(0, upTo).map((n) => `SELECT seq FROM ${n}`).join(' UNION ALL ');
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
 * tenant, so joined freely the planner walked the tenant's statements newest first and probed
 * the link key per row, 4,211 probes for a course's page at 200k). With a probe of the other
 * link table too, the probe and then the row, in that order (a CASE: it orders subplans by
 * estimated cost, and took the row first, 3,422 row reads for a busy learner's 100 matches
 * among the question's entries at 1M, 19 ms). The key names the tenant.
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

function* lock(tenant: string, key: DocumentKey) {
  yield* row({ name: 'lock_document', text: 'SELECT pg_advisory_xact_lock($1, $2)', values: [LOCK_DOCUMENT, lockKey(tenant, key.kind, key.activityId, key.agent, key.registration, key.docId)] });
}

/**
 * Processes share the database, so a document write locks its key (present or not: a row lock
 * could not cover a missing document) with a transaction-level advisory lock, and stamps it with
 * the database clock, which every process agrees on.
 */
const POSTGRES_DOCUMENTS: DocumentDialect = {
  lock,
  *current(tenant, key) {
    yield* lock(tenant, key);
    const r = yield* row({
      name: 'current_document',
      text: `SELECT ${NOW_MS} AS now_ms, d.* FROM (SELECT 1) one LEFT JOIN (${DOCUMENT_SQL}) d ON true`,
      values: documentValues(tenant, key),
    });
    const current = r!.etag === null ? undefined : toDocument(r!);
    return { current, etag: current?.etag, nowMs: Number(r!.now_ms) };
  },
  scanOrder: 'ORDER BY tenant, kind, activity_id, agent_key, registration, doc_id',
  names: { get: 'get_document', put: 'put_document', delete: 'delete_document', scan: 'scan_documents', scanAfter: 'scan_documents_after' },
};

const UNLEASE = 'lease_owner = NULL, lease_until_ms = 0';

/**
 * Shared by every process on the database: a claim locks candidate rows with FOR UPDATE SKIP
 * LOCKED and stamps a lease on them in one statement, so two processes never claim the same row;
 * leases, due times and settlements use the database clock, so hosts with skewed clocks agree.
 */
const POSTGRES_OUTBOX: OutboxDialect = {
  *claim(target, owner, limit, leaseMs) {
    const r = yield* rows({
      text:
        `WITH now AS (SELECT ${NOW_MS} AS ms), ` +
        `c AS (UPDATE forward_outbox SET lease_owner = $2, lease_until_ms = (SELECT ms FROM now) + $4 WHERE id IN (` +
        'SELECT id FROM forward_outbox WHERE target = $1 AND state = 0 AND due_ms <= (SELECT ms FROM now) AND lease_until_ms <= (SELECT ms FROM now) ' +
        'ORDER BY due_ms, id LIMIT $3 FOR UPDATE SKIP LOCKED) RETURNING id, seq, attempts, due_ms) ' +
        'SELECT c.id, c.attempts, t.name AS tenant, s."full" FROM c JOIN statements s ON s.seq = c.seq JOIN tenants t ON t.id = s.tenant ORDER BY c.due_ms, c.id',
      values: [target, owner, limit, Math.round(leaseMs)],
      name: 'forward_claim',
    });
    return r.map((row) => ({ id: row.id as string, attempts: row.attempts as number, tenant: row.tenant as string, json: row.full as string }));
  },
  *renew(owner, ids, leaseMs) {
    yield* run({ text: `UPDATE forward_outbox SET lease_until_ms = ${NOW_MS} + $3 WHERE lease_owner = $1 AND id = ANY($2::bigint[])`, values: [owner, ids, Math.round(leaseMs)], name: 'forward_renew' });
  },
  *delivered(owner, ids) {
    return yield* run({ text: 'DELETE FROM forward_outbox WHERE lease_owner = $1 AND id = ANY($2::bigint[])', values: [owner, ids] });
  },
  *retry(owner, items) {
    return yield* run({
      text:
        `UPDATE forward_outbox o SET attempts = attempts + 1, due_ms = ${NOW_MS} + t.delay, last_error = t.error, ${UNLEASE} ` +
        'FROM unnest($2::bigint[], $3::bigint[], $4::text[]) AS t(id, delay, error) WHERE o.id = t.id AND o.lease_owner = $1',
      values: [owner, items.map((x) => x.id), items.map((x) => Math.round(x.delayMs)), items.map((x) => x.error)],
    });
  },
  *dead(owner, items) {
    yield* run({
      text:
        `UPDATE forward_outbox o SET state = 1, attempts = attempts + 1, last_error = t.error, ${UNLEASE} ` +
        'FROM unnest($2::bigint[], $3::text[]) AS t(id, error) WHERE o.id = t.id AND o.lease_owner = $1',
      values: [owner, items.map((x) => x.id), items.map((x) => x.error)],
    });
  },
  *release(owner, ids) {
    yield* run({ text: `UPDATE forward_outbox SET ${UNLEASE} WHERE lease_owner = $1 AND id = ANY($2::bigint[])`, values: [owner, ids] });
  },
  *count(target, delivered, retried) {
    yield* run({
      text:
        'INSERT INTO forward_counters AS f (target, delivered, retried) VALUES ($1, $2, $3) ' +
        'ON CONFLICT (target) DO UPDATE SET delivered = f.delivered + excluded.delivered, retried = f.retried + excluded.retried',
      values: [target, delivered, retried],
    });
  },
  *requeueDead(target) {
    return yield* run({ text: 'UPDATE forward_outbox SET state = 0, attempts = 0, due_ms = 0, last_error = NULL WHERE state = 1 AND ($1::text IS NULL OR target = $1)', values: [target ?? null] });
  },
  *deadLetters({ target, after, limit }) {
    const found = yield* rows({
      text:
        'SELECT o.id, o.target, t.name AS tenant, s.id AS statement_id, o.attempts, o.last_error FROM forward_outbox o ' +
        'JOIN statements s ON s.seq = o.seq JOIN tenants t ON t.id = s.tenant ' +
        'WHERE o.state = 1 AND ($1::text IS NULL OR o.target = $1) AND o.id > $2 ORDER BY o.id LIMIT $3',
      values: [target ?? null, after ?? 0, limit],
    });
    return found.map((r) => toDeadLetter(r, String(r.statement_id)));
  },
  *oldestQueued() {
    return yield* rows({ text: OLDEST_QUEUED_SQL, values: [] });
  },
  *stats() {
    return [
      yield* rows({ text: 'SELECT target, count(*) FILTER (WHERE state = 0) AS queued, count(*) FILTER (WHERE state = 1) AS dead FROM forward_outbox GROUP BY target', values: [] }),
      yield* rows({ text: 'SELECT target, delivered, retried FROM forward_counters', values: [] }),
      yield* rows({ text: 'SELECT DISTINCT ON (target) target, last_error FROM forward_outbox WHERE state = 1 ORDER BY target, id DESC', values: [] }),
    ];
  },
  // One snapshot: read apart, a settlement committing in between showed an empty queue with the
  // delivered counter not yet raised.
  statsBegin: 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY',
};

/** The reach rows (../reach.ts): each step one statement over arrays. */
const POSTGRES_REACH: ReachDialect = {
  *forget(tenant, stored) {
    // The StatementRefs among them by one primary-key probe each (LIMIT 1 keeps it a nested
    // loop): joined by seq, the planner read every StatementRef of the tenant through
    // statements_ref (its estimate for a tenant is a guess: no statistics on tenant), a cost that
    // grows with the store for every prune batch.
    const r = yield* rows({
      name: 'reach_rebuild',
      text: `WITH q AS (SELECT unnest($2::bigint[]) AS seq UNION SELECT seq FROM statement_reach WHERE tenant = $1 AND via = ANY($2::bigint[])),
d1 AS (DELETE FROM statement_reach WHERE tenant = $1 AND seq IN (SELECT seq FROM q)),
d2 AS (DELETE FROM reach_agents WHERE tenant = $1 AND seq IN (SELECT seq FROM q)),
d3 AS (DELETE FROM reach_activities WHERE tenant = $1 AND seq IN (SELECT seq FROM q))
SELECT s.seq, s.ref_id, s.authority FROM q CROSS JOIN LATERAL (SELECT seq, ref_id, authority, tenant FROM statements WHERE seq = q.seq LIMIT 1) s
WHERE s.tenant = $1 AND s.ref_id IS NOT NULL`,
      values: [tenant, stored],
    });
    return r.map((row) => ({ seq: Number(row.seq), refId: row.ref_id as string, authority: row.authority as number | null }));
  },
  *targets(tenant, ids) {
    const r = yield* rows({ name: 'reach_targets', text: 'SELECT seq, id, ref_id, verb, registration, authority, "full" FROM statements WHERE tenant = $1 AND id = ANY($2::uuid[])', values: [tenant, ids] });
    return r.map((row) => ({
      seq: Number(row.seq),
      id: row.id as string,
      refId: row.ref_id as string | null,
      verb: row.verb as number,
      registration: row.registration,
      authority: row.authority as number | null,
      full: row.full as string,
    }));
  },
  *keyIds(tenant, keys, known) {
    const ids = new Map(known);
    const missing = new Set(keys.filter((k) => !ids.has(k)));
    if (missing.size) for (const [k, id] of (yield* resolveKeys(tenant, missing, false)).ids) ids.set(k, id);
    return ids;
  },
  *write(tenant, out) {
    yield* run({
      name: 'reach_insert',
      text: `WITH
r AS (INSERT INTO statement_reach (tenant, seq, via, verb, registration, authority)
  SELECT $1, s, v, b, g, a FROM unnest($2::bigint[], $3::bigint[], $4::int[], $5::uuid[], $6::int[]) AS t(s, v, b, g, a)),
ag AS (INSERT INTO reach_agents (tenant, agent, seq, via, role) SELECT $1, k, s, v, d FROM unnest($7::int[], $8::bigint[], $9::bigint[], $10::smallint[]) AS t(k, s, v, d))
INSERT INTO reach_activities (tenant, activity, seq, via, direct) SELECT $1, k, s, v, d FROM unnest($11::int[], $12::bigint[], $13::bigint[], $14::smallint[]) AS t(k, s, v, d)`,
      values: [
        tenant,
        out.reach.map((r) => r.seq),
        out.reach.map((r) => r.via),
        out.reach.map((r) => r.verb),
        out.reach.map((r) => r.registration),
        out.reach.map((r) => r.authority),
        out.agents.map((a) => a.agent),
        out.agents.map((a) => a.seq),
        out.agents.map((a) => a.via),
        out.agents.map((a) => a.role),
        out.activities.map((a) => a.activity),
        out.activities.map((a) => a.seq),
        out.activities.map((a) => a.via),
        out.activities.map((a) => a.direct),
      ],
    });
  },
};

/** PostgreSQL's dialect. */
export const POSTGRES_DIALECT: StoreDialect = { query: POSTGRES, documents: POSTGRES_DOCUMENTS, outbox: POSTGRES_OUTBOX, reach: POSTGRES_REACH };
