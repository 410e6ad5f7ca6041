/**
 * The SQLite forwarding outbox (see Outbox in ../types.ts). Rows are queued inside the statement
 * insert transaction by `enqueueAfter`; claims, renewals and settlements are short transactions
 * of their own. Times are this process's clock (one process owns a SQLite file).
 */
import type { ForwardingStats, Outbox, OutboxItem, OutboxSettlement } from '../types.ts';
import { mergeStats } from '../sql.ts';
import type { SqliteHandle } from './documents.ts';

type Row = Record<string, unknown>;

const QUEUED = 0;
const DEAD = 1;

export class SqliteOutbox implements Outbox {
  private readonly h: SqliteHandle;
  private readonly targets: string;

  constructor(h: SqliteHandle, targets: string[]) {
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

  async claim(target: string, owner: string, limit: number, leaseMs: number): Promise<OutboxItem[]> {
    const now = this.h.now();
    return this.h.tx(() => {
      const ids = (
        this.h
          .q(
            'UPDATE forward_outbox SET lease_owner = ?, lease_until_ms = ? WHERE id IN (SELECT id FROM forward_outbox ' +
              'WHERE target = ? AND state = 0 AND due_ms <= ? AND lease_until_ms <= ? ORDER BY due_ms, id LIMIT ?) RETURNING id',
          )
          .all(owner, now + leaseMs, target, now, now, limit) as Row[]
      ).map((r) => Number(r.id));
      if (!ids.length) return [];
      const rows = this.h
        .q(
          'SELECT o.id, o.attempts, t.name AS tenant, s.full FROM forward_outbox o JOIN statements s ON s.seq = o.seq JOIN tenants t ON t.id = s.tenant ' +
            'WHERE o.id IN (SELECT value FROM json_each(?)) ORDER BY o.due_ms, o.id',
        )
        .all(JSON.stringify(ids)) as Row[];
      return rows.map((r) => ({ id: String(r.id), attempts: Number(r.attempts), tenant: String(r.tenant), json: String(r.full) }));
    });
  }

  async renew(owner: string, ids: string[], leaseMs: number): Promise<void> {
    if (!ids.length) return;
    this.h.q('UPDATE forward_outbox SET lease_until_ms = ? WHERE lease_owner = ? AND id IN (SELECT value FROM json_each(?))').run(this.h.now() + leaseMs, owner, JSON.stringify(ids.map(Number)));
  }

  async settle(target: string, owner: string, s: OutboxSettlement): Promise<void> {
    const now = this.h.now();
    this.h.tx(() => {
      let delivered = 0;
      let retried = 0;
      if (s.delivered?.length) {
        delivered = Number(
          this.h.q('DELETE FROM forward_outbox WHERE lease_owner = ? AND id IN (SELECT value FROM json_each(?))').run(owner, JSON.stringify(s.delivered.map(Number))).changes,
        );
      }
      const unlease = 'lease_owner = NULL, lease_until_ms = 0';
      const retry = this.h.q(`UPDATE forward_outbox SET attempts = attempts + 1, due_ms = ?, last_error = ?, ${unlease} WHERE id = ? AND lease_owner = ?`);
      for (const r of s.retry ?? []) retried += Number(retry.run(now + r.delayMs, r.error, Number(r.id), owner).changes);
      const dead = this.h.q(`UPDATE forward_outbox SET state = ${DEAD}, attempts = attempts + 1, last_error = ?, ${unlease} WHERE id = ? AND lease_owner = ?`);
      for (const d of s.dead ?? []) dead.run(d.error, Number(d.id), owner);
      const release = this.h.q(`UPDATE forward_outbox SET ${unlease} WHERE id = ? AND lease_owner = ?`);
      for (const id of s.release ?? []) release.run(Number(id), owner);
      if (delivered || retried) {
        this.h
          .q(
            'INSERT INTO forward_counters (target, delivered, retried) VALUES (?, ?, ?) ' +
              'ON CONFLICT (target) DO UPDATE SET delivered = delivered + excluded.delivered, retried = retried + excluded.retried',
          )
          .run(target, delivered, retried);
      }
    });
  }

  async requeueDead(target?: string): Promise<number> {
    const where = target === undefined ? '' : ' AND target = ?';
    const st = this.h.q(`UPDATE forward_outbox SET state = ${QUEUED}, attempts = 0, due_ms = 0, last_error = NULL WHERE state = ${DEAD}${where}`);
    return Number((target === undefined ? st.run() : st.run(target)).changes);
  }

  async stats(): Promise<ForwardingStats[]> {
    return mergeStats(
      this.h.q('SELECT target, sum(state = 0) AS queued, sum(state = 1) AS dead FROM forward_outbox GROUP BY target').all() as Row[],
      this.h.q('SELECT target, delivered, retried FROM forward_counters').all() as Row[],
      this.h.q('SELECT target, last_error FROM forward_outbox WHERE id IN (SELECT max(id) FROM forward_outbox WHERE state = 1 GROUP BY target)').all() as Row[],
    );
  }
}
