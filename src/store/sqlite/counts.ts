/**
 * SQLite's writes of the Overview's counts (../overview.ts), inside the transaction of the
 * statements they count: a group's, or a deletion's.
 */
import type { StatementSync } from 'node:sqlite';
import { dayOf, type GroupCounts, MINUTES_KEPT, minuteOf } from '../overview.ts';

export class SqliteCounts {
  private readonly q: (sql: string) => StatementSync;
  /** The minute whose older statement_minutes this connection last deleted. */
  private minutesPruned = -1;

  constructor(q: (sql: string) => StatementSync) {
    this.q = q;
  }

  /** A group's statements (they share one `stored`): one update per tenant and verb, one per tenant's minute. */
  write(counts: GroupCounts, storedMs: number): void {
    if (!counts.byTenant.size) return;
    const day = dayOf(storedMs);
    const minute = minuteOf(storedMs);
    // An UPDATE first, as the row is there but for a day's or minute's first group: one seek, where
    // an upsert tries the insert first (a single-statement commit paid ≈ 22 µs for two upserts, 15 so).
    const addDay = this.q('UPDATE statement_counts SET n = n + ? WHERE tenant = ? AND day = ? AND verb = ?');
    const newDay = this.q('INSERT INTO statement_counts (tenant, day, verb, n) VALUES (?, ?, ?, ?)');
    const addMinute = this.q('UPDATE statement_minutes SET n = n + ? WHERE tenant = ? AND minute = ?');
    const newMinute = this.q('INSERT INTO statement_minutes (tenant, minute, n) VALUES (?, ?, ?)');
    for (const [tenant, verbs] of counts.byTenant) {
      let n = 0;
      for (const [verb, k] of verbs) {
        if (!Number(addDay.run(k, tenant, day, verb).changes)) newDay.run(tenant, day, verb, k);
        n += k;
      }
      if (!Number(addMinute.run(n, tenant, minute).changes)) newMinute.run(tenant, minute, n);
    }
    // The minutes gone by: once a minute (every tenant's), not per group.
    if (minute !== this.minutesPruned) {
      this.q('DELETE FROM statement_minutes WHERE minute < ?').run(minute - MINUTES_KEPT);
      this.minutesPruned = minute;
    }
  }

  /** Takes deleted statements (counted by `${day} ${verb}`) off the counts; a count at zero goes. */
  uncount(tenant: number, deleted: Map<string, number>): void {
    const less = this.q('UPDATE statement_counts SET n = n - ? WHERE tenant = ? AND day = ? AND verb = ?');
    const none = this.q('DELETE FROM statement_counts WHERE tenant = ? AND day = ? AND verb = ? AND n <= 0');
    for (const [k, n] of deleted) {
      const [day, verb] = k.split(' ').map(Number);
      less.run(n, tenant, day, verb);
      none.run(tenant, day, verb);
    }
  }
}
