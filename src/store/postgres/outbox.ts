/**
 * PostgreSQL's forwarding outbox (../outbox.ts; its SQL is the `outbox` part of ./dialect.ts):
 * rows are queued inside the statement group's transaction by `enqueue`.
 */
import type pg from 'pg';
import { type OutboxDialect, StoreOutbox } from '../outbox.ts';
import type { ProgramRunner } from '../program.ts';

export class PostgresOutbox extends StoreOutbox {
  readonly targets: string[];

  constructor(runner: ProgramRunner, dialect: OutboxDialect, targets: string[]) {
    super(runner, dialect);
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
