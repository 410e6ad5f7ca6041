/**
 * SQLite's forwarding outbox (../outbox.ts; its SQL is the `outbox` part of ./dialect.ts): rows are
 * queued inside the statement insert transaction by `enqueueAfter`.
 */
import { type OutboxDialect, StoreOutbox } from '../outbox.ts';
import type { ProgramRunner } from '../program.ts';
import type { SqliteHandle } from './runner.ts';

type Row = Record<string, unknown>;

export class SqliteOutbox extends StoreOutbox {
  private readonly h: SqliteHandle;
  private readonly targets: string;

  constructor(runner: ProgramRunner, dialect: OutboxDialect, h: SqliteHandle, targets: string[]) {
    super(runner, dialect);
    this.h = h;
    this.targets = JSON.stringify(targets);
  }

  get enabled(): boolean {
    return this.targets !== '[]';
  }

  /** The highest statement seq: statements inserted later in this transaction have a greater one. */
  lastSeq(): number {
    return Number((this.h.q('SELECT coalesce(max(seq), 0) AS seq FROM statements').get() as Row).seq);
  }

  /** Inside the insert transaction: one row per active target for each statement stored after `seq`. */
  enqueueAfter(seq: number): number {
    return Number(
      this.h
        .q('INSERT INTO forward_outbox (target, seq) SELECT t.value, s.seq FROM json_each(?) t CROSS JOIN statements s WHERE s.seq > ? ORDER BY t.key, s.seq')
        .run(this.targets, seq).changes,
    );
  }
}
