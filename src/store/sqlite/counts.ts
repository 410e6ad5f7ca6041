/**
 * SQLite's writes of the Overview's counts (../overview.ts), inside the transaction of the
 * statements they count: a group's, or a deletion's.
 */
import type { StatementSync } from 'node:sqlite';
import { dayOf, fold, type GroupCounts, MINUTES_KEPT, minuteOf, OTHER_VERB, VERBS_PER_DAY } from '../overview.ts';

type Row = Record<string, unknown>;

export class SqliteCounts {
  private readonly q: (sql: string) => StatementSync;
  /** The minute whose older statement_minutes this connection last deleted. */
  private minutesPruned = -1;

  constructor(q: (sql: string) => StatementSync) {
    this.q = q;
  }

  /**
   * A group's statements (they share one `stored`): one update per tenant and verb, one per
   * tenant's minute; a verb new to the day gets its row while the day has room (../overview.ts).
   */
  write(counts: GroupCounts, storedMs: number): void {
    if (!counts.byTenant.size) return;
    const day = dayOf(storedMs);
    const minute = minuteOf(storedMs);
    // An UPDATE first, as the row is there but for a day's or minute's first group: one seek, where
    // an upsert tries the insert first (a single-statement commit paid ≈ 22 µs for two upserts, 15 so).
    const addDay = this.q('UPDATE statement_counts SET n = n + ? WHERE tenant = ? AND day = ? AND verb = ?');
    const addMinute = this.q('UPDATE statement_minutes SET n = n + ? WHERE tenant = ? AND minute = ?');
    const newMinute = this.q('INSERT INTO statement_minutes (tenant, minute, n) VALUES (?, ?, ?)');
    for (const [tenant, verbs] of counts.byTenant) {
      let n = 0;
      const fresh: [number, number][] = [];
      for (const [verb, k] of verbs) {
        if (!Number(addDay.run(k, tenant, day, verb).changes)) fresh.push([verb, k]);
        n += k;
      }
      if (fresh.length) this.place(tenant, day, fresh);
      if (!Number(addMinute.run(n, tenant, minute).changes)) newMinute.run(tenant, minute, n);
    }
    // The minutes gone by: once a minute (every tenant's), not per group.
    if (minute !== this.minutesPruned) {
      this.q('DELETE FROM statement_minutes WHERE minute < ?').run(minute - MINUTES_KEPT);
      this.minutesPruned = minute;
    }
  }

  /** Rows for a day's new verbs (`fresh`: verb, count) while the day has room; otherwise the day is folded. */
  private place(tenant: number, day: number, fresh: [number, number][]): void {
    const newDay = this.q('INSERT INTO statement_counts (tenant, day, verb, n) VALUES (?, ?, ?, ?)');
    const held = Number((this.q('SELECT count(*) AS n FROM statement_counts WHERE tenant = ? AND day = ? AND verb > 0').get(tenant, day) as Row).n);
    if (held + fresh.length <= VERBS_PER_DAY) {
      for (const [verb, k] of fresh) newDay.run(tenant, day, verb, k);
      return;
    }
    const stored = this.q('SELECT verb, n FROM statement_counts WHERE tenant = ? AND day = ? AND verb > 0').all(tenant, day) as Row[];
    const { keep, other } = fold([...stored.map((r) => ({ verb: Number(r.verb), n: Number(r.n), held: true })), ...fresh.map(([verb, n]) => ({ verb, n, held: false }))]);
    for (const c of keep) if (!c.held) newDay.run(tenant, day, c.verb, c.n);
    const drop = this.q('DELETE FROM statement_counts WHERE tenant = ? AND day = ? AND verb = ?');
    let rest = 0;
    for (const c of other) {
      if (c.held) drop.run(tenant, day, c.verb);
      rest += c.n;
    }
    if (!Number(this.q('UPDATE statement_counts SET n = n + ? WHERE tenant = ? AND day = ? AND verb = ?').run(rest, tenant, day, OTHER_VERB).changes)) {
      newDay.run(tenant, day, OTHER_VERB, rest);
    }
  }

  /**
   * Takes deleted statements (counted by `${day} ${verb}`) off the counts: off the verb's row as
   * far as it holds them, the rest off the day's "other" row; a count at zero goes.
   */
  uncount(tenant: number, deleted: Map<string, number>): void {
    const have = this.q('SELECT n FROM statement_counts WHERE tenant = ? AND day = ? AND verb = ?');
    const less = this.q('UPDATE statement_counts SET n = n - ? WHERE tenant = ? AND day = ? AND verb = ?');
    const none = this.q('DELETE FROM statement_counts WHERE tenant = ? AND day = ? AND verb = ? AND n <= 0');
    const toOther = new Map<number, number>();
    const takeOff = (day: number, verb: number, n: number) => {
      less.run(n, tenant, day, verb);
      none.run(tenant, day, verb);
    };
    for (const [k, n] of deleted) {
      const [day, verb] = k.split(' ').map(Number);
      const off = Math.min(n, Number((have.get(tenant, day, verb) as Row | undefined)?.n ?? 0));
      if (off) takeOff(day, verb, off);
      if (n > off) toOther.set(day, (toOther.get(day) ?? 0) + n - off);
    }
    for (const [day, n] of toOther) takeOff(day, OTHER_VERB, n);
  }
}
