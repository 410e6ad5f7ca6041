/**
 * SQLite's forwarding outbox SQL (the outbox itself: ../outbox.ts). Rows are queued inside the
 * statement insert transaction by `enqueueAfter`; claims, renewals and settlements are short
 * transactions of their own. Times are the store's clock (one process owns a SQLite file).
 */
import { OLDEST_QUEUED_SQL, type OutboxDialect, StoreOutbox, toDeadLetter } from '../outbox.ts';
import { uuidText } from '../sql.ts';
import { rows, run } from '../program.ts';
import { runProgram, type SqliteHandle } from './runner.ts';

type Row = Record<string, unknown>;

const QUEUED = 0;
const DEAD = 1;
const UNLEASE = 'lease_owner = NULL, lease_until_ms = 0';

function dialect(h: SqliteHandle): OutboxDialect {
  return {
    *claim(target, owner, limit, leaseMs) {
      const now = h.now();
      const ids = (
        yield* rows({
          text:
            'UPDATE forward_outbox SET lease_owner = ?, lease_until_ms = ? WHERE id IN (SELECT id FROM forward_outbox ' +
            'WHERE target = ? AND state = 0 AND due_ms <= ? AND lease_until_ms <= ? ORDER BY due_ms, id LIMIT ?) RETURNING id',
          values: [owner, now + leaseMs, target, now, now, limit],
        })
      ).map((r) => Number(r.id));
      if (!ids.length) return [];
      const claimed = yield* rows({
        text:
          'SELECT o.id, o.attempts, t.name AS tenant, s.full FROM forward_outbox o JOIN statements s ON s.seq = o.seq JOIN tenants t ON t.id = s.tenant ' +
          'WHERE o.id IN (SELECT value FROM json_each(?)) ORDER BY o.due_ms, o.id',
        values: [JSON.stringify(ids)],
      });
      return claimed.map((r) => ({ id: String(r.id), attempts: Number(r.attempts), tenant: String(r.tenant), json: String(r.full) }));
    },
    claimBegin: 'BEGIN IMMEDIATE',
    *renew(owner, ids, leaseMs) {
      yield* run({ text: 'UPDATE forward_outbox SET lease_until_ms = ? WHERE lease_owner = ? AND id IN (SELECT value FROM json_each(?))', values: [h.now() + leaseMs, owner, JSON.stringify(ids.map(Number))] });
    },
    *delivered(owner, ids) {
      return yield* run({ text: 'DELETE FROM forward_outbox WHERE lease_owner = ? AND id IN (SELECT value FROM json_each(?))', values: [owner, JSON.stringify(ids.map(Number))] });
    },
    *retry(owner, items) {
      const now = h.now();
      let n = 0;
      for (const r of items) {
        n += yield* run({ text: `UPDATE forward_outbox SET attempts = attempts + 1, due_ms = ?, last_error = ?, ${UNLEASE} WHERE id = ? AND lease_owner = ?`, values: [now + r.delayMs, r.error, Number(r.id), owner] });
      }
      return n;
    },
    *dead(owner, items) {
      for (const d of items) {
        yield* run({ text: `UPDATE forward_outbox SET state = ${DEAD}, attempts = attempts + 1, last_error = ?, ${UNLEASE} WHERE id = ? AND lease_owner = ?`, values: [d.error, Number(d.id), owner] });
      }
    },
    *release(owner, ids) {
      for (const id of ids) yield* run({ text: `UPDATE forward_outbox SET ${UNLEASE} WHERE id = ? AND lease_owner = ?`, values: [Number(id), owner] });
    },
    *count(target, delivered, retried) {
      yield* run({
        text:
          'INSERT INTO forward_counters (target, delivered, retried) VALUES (?, ?, ?) ' +
          'ON CONFLICT (target) DO UPDATE SET delivered = delivered + excluded.delivered, retried = retried + excluded.retried',
        values: [target, delivered, retried],
      });
    },
    *requeueDead(target) {
      const where = target === undefined ? '' : ' AND target = ?';
      return yield* run({ text: `UPDATE forward_outbox SET state = ${QUEUED}, attempts = 0, due_ms = 0, last_error = NULL WHERE state = ${DEAD}${where}`, values: target === undefined ? [] : [target] });
    },
    *deadLetters({ target, after, limit }) {
      const found = yield* rows({
        text:
          'SELECT o.id, o.target, t.name AS tenant, s.id AS statement_id, o.attempts, o.last_error FROM forward_outbox o ' +
          'JOIN statements s ON s.seq = o.seq JOIN tenants t ON t.id = s.tenant ' +
          `WHERE o.state = ${DEAD} AND (? IS NULL OR o.target = ?) AND o.id > ? ORDER BY o.id LIMIT ?`,
        values: [target ?? null, target ?? null, after ?? 0, limit],
      });
      return found.map((r) => toDeadLetter(r, uuidText(r.statement_id as Uint8Array)));
    },
    *oldestQueued() {
      return yield* rows({ text: OLDEST_QUEUED_SQL, values: [] });
    },
    *stats() {
      // One connection, read synchronously: the three reads agree without a transaction.
      return [
        yield* rows({ text: 'SELECT target, sum(state = 0) AS queued, sum(state = 1) AS dead FROM forward_outbox GROUP BY target', values: [] }),
        yield* rows({ text: 'SELECT target, delivered, retried FROM forward_counters', values: [] }),
        yield* rows({ text: 'SELECT target, last_error FROM forward_outbox WHERE id IN (SELECT max(id) FROM forward_outbox WHERE state = 1 GROUP BY target)', values: [] }),
      ] as [Row[], Row[], Row[]];
    },
  };
}

export class SqliteOutbox extends StoreOutbox {
  private readonly h: SqliteHandle;
  private readonly targets: string;

  constructor(h: SqliteHandle, targets: string[]) {
    super({ run: async (p) => runProgram(h, p), tx: async (p) => h.tx(() => runProgram(h, p)) }, dialect(h));
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
      this.h.q('INSERT INTO forward_outbox (target, seq) SELECT t.value, s.seq FROM json_each(?) t CROSS JOIN statements s WHERE s.seq > ? ORDER BY t.key, s.seq').run(this.targets, seq)
        .changes,
    );
  }
}
