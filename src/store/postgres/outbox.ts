/**
 * The PostgreSQL forwarding outbox (see Outbox in ../types.ts), shared by every process on the
 * database. A claim locks candidate rows with FOR UPDATE SKIP LOCKED and stamps a lease on them
 * in one statement, so two processes never claim the same row; leases, due times and settlements
 * use the database clock, so hosts with skewed clocks agree.
 */
import type pg from 'pg';
import type { ForwardingStats, Outbox, OutboxItem, OutboxSettlement } from '../types.ts';
import { mergeStats } from '../sql.ts';

/** What the PostgresStore lends: its guarded query and transaction helpers. */
export interface PgHandle {
  query<R extends pg.QueryResultRow>(text: string, values: unknown[], name?: string): Promise<pg.QueryResult<R>>;
  tx<T>(fn: (c: pg.PoolClient) => Promise<T>, begin?: string): Promise<T>;
}

const DB_NOW = 'floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint';
const UNLEASE = 'lease_owner = NULL, lease_until_ms = 0';

export class PostgresOutbox implements Outbox {
  private readonly h: PgHandle;
  readonly targets: string[];

  constructor(h: PgHandle, targets: string[]) {
    this.h = h;
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

  async claim(target: string, owner: string, limit: number, leaseMs: number): Promise<OutboxItem[]> {
    const r = await this.h.query<{ id: string; attempts: number; tenant: string; full: string }>(
      `WITH now AS (SELECT ${DB_NOW} AS ms), ` +
        `c AS (UPDATE forward_outbox SET lease_owner = $2, lease_until_ms = (SELECT ms FROM now) + $4 WHERE id IN (` +
        'SELECT id FROM forward_outbox WHERE target = $1 AND state = 0 AND due_ms <= (SELECT ms FROM now) AND lease_until_ms <= (SELECT ms FROM now) ' +
        'ORDER BY due_ms, id LIMIT $3 FOR UPDATE SKIP LOCKED) RETURNING id, seq, attempts, due_ms) ' +
        'SELECT c.id, c.attempts, t.name AS tenant, s."full" FROM c JOIN statements s ON s.seq = c.seq JOIN tenants t ON t.id = s.tenant ORDER BY c.due_ms, c.id',
      [target, owner, limit, Math.round(leaseMs)],
      'forward_claim',
    );
    return r.rows.map((row) => ({ id: row.id, attempts: row.attempts, tenant: row.tenant, json: row.full }));
  }

  async renew(owner: string, ids: string[], leaseMs: number): Promise<void> {
    if (!ids.length) return;
    await this.h.query(`UPDATE forward_outbox SET lease_until_ms = ${DB_NOW} + $3 WHERE lease_owner = $1 AND id = ANY($2::bigint[])`, [owner, ids, Math.round(leaseMs)], 'forward_renew');
  }

  async settle(target: string, owner: string, s: OutboxSettlement): Promise<void> {
    await this.h.tx(async (c) => {
      let delivered = 0;
      let retried = 0;
      if (s.delivered?.length) {
        delivered = (await c.query('DELETE FROM forward_outbox WHERE lease_owner = $1 AND id = ANY($2::bigint[])', [owner, s.delivered])).rowCount ?? 0;
      }
      if (s.retry?.length) {
        const r = await c.query(
          `UPDATE forward_outbox o SET attempts = attempts + 1, due_ms = ${DB_NOW} + t.delay, last_error = t.error, ${UNLEASE} ` +
            'FROM unnest($2::bigint[], $3::bigint[], $4::text[]) AS t(id, delay, error) WHERE o.id = t.id AND o.lease_owner = $1',
          [owner, s.retry.map((x) => x.id), s.retry.map((x) => Math.round(x.delayMs)), s.retry.map((x) => x.error)],
        );
        retried = r.rowCount ?? 0;
      }
      if (s.dead?.length) {
        await c.query(
          `UPDATE forward_outbox o SET state = 1, attempts = attempts + 1, last_error = t.error, ${UNLEASE} ` +
            'FROM unnest($2::bigint[], $3::text[]) AS t(id, error) WHERE o.id = t.id AND o.lease_owner = $1',
          [owner, s.dead.map((x) => x.id), s.dead.map((x) => x.error)],
        );
      }
      if (s.release?.length) await c.query(`UPDATE forward_outbox SET ${UNLEASE} WHERE lease_owner = $1 AND id = ANY($2::bigint[])`, [owner, s.release]);
      if (delivered || retried) {
        await c.query(
          'INSERT INTO forward_counters AS f (target, delivered, retried) VALUES ($1, $2, $3) ' +
            'ON CONFLICT (target) DO UPDATE SET delivered = f.delivered + excluded.delivered, retried = f.retried + excluded.retried',
          [target, delivered, retried],
        );
      }
    });
  }

  async requeueDead(target?: string): Promise<number> {
    const r = await this.h.query(
      'UPDATE forward_outbox SET state = 0, attempts = 0, due_ms = 0, last_error = NULL WHERE state = 1 AND ($1::text IS NULL OR target = $1)',
      [target ?? null],
    );
    return r.rowCount ?? 0;
  }

  async stats(): Promise<ForwardingStats[]> {
    // One snapshot: read apart, a settlement committing in between showed an empty queue with the
    // delivered counter not yet raised.
    return this.h.tx(async (c) => {
      const counts = await c.query('SELECT target, count(*) FILTER (WHERE state = 0) AS queued, count(*) FILTER (WHERE state = 1) AS dead FROM forward_outbox GROUP BY target');
      const counters = await c.query('SELECT target, delivered, retried FROM forward_counters');
      const errors = await c.query('SELECT DISTINCT ON (target) target, last_error FROM forward_outbox WHERE state = 1 ORDER BY target, id DESC');
      return mergeStats(counts.rows, counters.rows, errors.rows);
    }, 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
  }
}
