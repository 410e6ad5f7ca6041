/**
 * PostgreSQL's forwarding outbox SQL (the outbox itself: ../outbox.ts), shared by every process
 * on the database. A claim locks candidate rows with FOR UPDATE SKIP LOCKED and stamps a lease on
 * them in one statement, so two processes never claim the same row; leases, due times and
 * settlements use the database clock, so hosts with skewed clocks agree.
 */
import type pg from 'pg';
import { OLDEST_QUEUED_SQL, type OutboxDialect, type OutboxPort, StoreOutbox, toDeadLetter } from '../outbox.ts';
import { rows, run } from '../program.ts';
import { NOW_MS } from './write.ts';

const UNLEASE = 'lease_owner = NULL, lease_until_ms = 0';
/**
 * The clock read once for a whole statement (an uncorrelated subquery: one InitPlan): NOW_MS is
 * clock_timestamp(), read again for each row, so the items of one batch would come due (or
 * their leases end) a millisecond apart, and a claim between them would split the batch.
 */
const ONCE_NOW_MS = `(SELECT ${NOW_MS})`;

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
    yield* run({ text: `UPDATE forward_outbox SET lease_until_ms = ${ONCE_NOW_MS} + $3 WHERE lease_owner = $1 AND id = ANY($2::bigint[])`, values: [owner, ids, Math.round(leaseMs)], name: 'forward_renew' });
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

export class PostgresOutbox extends StoreOutbox {
  readonly targets: string[];

  constructor(port: OutboxPort, targets: string[]) {
    super(port, POSTGRES_OUTBOX);
    this.targets = targets;
  }

  get enabled(): boolean {
    return this.targets.length > 0;
  }

  /** Inside the insert transaction: one row per active target for each newly stored statement. */
  async enqueue(c: pg.PoolClient, seqs: string[]): Promise<void> {
    if (!this.enabled || !seqs.length) return;
    await c.query({
      name: 'forward_enqueue',
      text: 'INSERT INTO forward_outbox (target, seq) SELECT t, s FROM unnest($1::text[]) WITH ORDINALITY AS a(t, n) CROSS JOIN unnest($2::bigint[]) AS s ORDER BY n, s',
      values: [this.targets, seqs],
    });
  }
}
