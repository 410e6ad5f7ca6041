/**
 * PostgreSQL's dialect (../dialect.ts), everything its SQL does differently: the statement
 * queries' fragments (./query.ts), and the steps of the documents, the forwarding outbox and the
 * reach rows for processes sharing one database: advisory locks, the database clock, and arrays
 * (a statement is a round trip).
 */
import type { StoreDialect } from '../dialect.ts';
import { type DocumentDialect, DOCUMENT_SQL, documentValues, toDocument } from '../documents.ts';
import { OLDEST_QUEUED_SQL, type OutboxDialect, toDeadLetter } from '../outbox.ts';
import { row, rows, run } from '../program.ts';
import type { KeysDialect } from '../keys.ts';
import type { ReachDialect } from '../reach.ts';
import type { DocumentKey } from '../types.ts';
import { LOCK_DOCUMENT, lockKey } from './locks.ts';
import { POSTGRES } from './query.ts';
import { NOW_MS, resolveKeys } from './write.ts';

function* lock(tenant: string, key: DocumentKey) {
  yield* row({
    name: 'lock_document',
    text: 'SELECT pg_advisory_xact_lock($1, $2)',
    values: [LOCK_DOCUMENT, lockKey(tenant, key.kind, key.activityId, key.agent, key.registration, key.docId)],
  });
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
 * The clock read once for a whole statement (an uncorrelated subquery: one InitPlan): NOW_MS is
 * clock_timestamp(), read again for each row, so the items of one batch would come due (or
 * their leases end) a millisecond apart, and a claim between them would split the batch.
 */
const ONCE_NOW_MS = `(SELECT ${NOW_MS})`;

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
    yield* run({
      text: `UPDATE forward_outbox SET lease_until_ms = ${ONCE_NOW_MS} + $3 WHERE lease_owner = $1 AND id = ANY($2::bigint[])`,
      values: [owner, ids, Math.round(leaseMs)],
      name: 'forward_renew',
    });
  },
  *delivered(owner, ids) {
    return yield* run({ text: 'DELETE FROM forward_outbox WHERE lease_owner = $1 AND id = ANY($2::bigint[])', values: [owner, ids] });
  },
  *retry(owner, items) {
    return yield* run({
      text:
        `UPDATE forward_outbox o SET attempts = attempts + 1, due_ms = ${ONCE_NOW_MS} + t.delay, last_error = t.error, ${UNLEASE} ` +
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
    return yield* run({
      text: 'UPDATE forward_outbox SET state = 0, attempts = 0, due_ms = 0, last_error = NULL WHERE state = 1 AND ($1::text IS NULL OR target = $1)',
      values: [target ?? null],
    });
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
      yield* rows({
        text: 'SELECT target, count(*) FILTER (WHERE state = 0) AS queued, count(*) FILTER (WHERE state = 1) AS dead FROM forward_outbox GROUP BY target',
        values: [],
      }),
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
    const r = yield* rows({
      name: 'reach_targets',
      text: 'SELECT seq, id, ref_id, verb, registration, authority, "full" FROM statements WHERE tenant = $1 AND id = ANY($2::uuid[])',
      values: [tenant, ids],
    });
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
/**
 * The keys' names: an agent's newest statement is the end of its (agent, role, seq) range; the
 * canonical definitions are kept by the tenant's name and the activity's IRI.
 */
const POSTGRES_KEYS: KeysDialect = {
  fullBytes: POSTGRES.fullBytes,
  likeIgnoringCase: (k, pattern) => `${k}.key ILIKE ${pattern} ESCAPE '\\'`,
  newestWithAgent: (k) => `(SELECT a.seq FROM statement_agents a WHERE a.agent = ${k}.id AND a.role = 1 ORDER BY a.seq DESC LIMIT 1)`,
  activityName: (k, tenantName) => `(SELECT CAST(d.definition -> 'name' AS text) FROM activities d WHERE d.tenant = ${tenantName()} AND d.id = ${k}.key)`,
};

export const POSTGRES_DIALECT: StoreDialect = { query: POSTGRES, documents: POSTGRES_DOCUMENTS, outbox: POSTGRES_OUTBOX, reach: POSTGRES_REACH, keys: POSTGRES_KEYS };
