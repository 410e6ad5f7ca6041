/**
 * The counts the console's Overview reads (docs/console.md, "Overview"), kept as statements are
 * written so that the Overview never scans the statements: `statement_counts` holds statements
 * per (tenant, UTC day of `stored`, verb) and `statement_minutes` statements per (tenant, minute
 * of `stored`) for the last hour (SQLite migration 16, PostgreSQL 17).
 *
 * Each backend writes them in the transaction that writes the statements, one upsert per distinct
 * (day, verb) of a group (a group's statements share one `stored`): SQLite from a GroupCounts
 * filled as its requests are written, PostgreSQL in the group's one INSERT_WRITE statement
 * (GROUP BY over its verbs). Deleting statements (erasure, prune) takes them off in the same
 * transaction; the minutes count arrivals and are not taken off. The reads are written once here.
 */
import { type Program, row, rows } from './program.ts';
import type { OverviewQuery, StoreOverview, StoreTotals } from './types.ts';

export const DAY_MS = 86_400_000;
export const MINUTE_MS = 60_000;
/** Minutes of `statement_minutes` kept: older ones are deleted as new ones arrive. */
export const MINUTES_KEPT = 60;

export const dayOf = (ms: number): number => Math.floor(ms / DAY_MS);
export const minuteOf = (ms: number): number => Math.floor(ms / MINUTE_MS);

/**
 * A group's statements per tenant and verb (key ids), added as each request's write succeeds:
 * a map update per statement, then one upsert per entry at the end of the transaction.
 */
export class GroupCounts {
  readonly byTenant = new Map<number, Map<number, number>>();

  add(tenant: number, verb: number): void {
    let verbs = this.byTenant.get(tenant);
    if (!verbs) this.byTenant.set(tenant, (verbs = new Map()));
    verbs.set(verb, (verbs.get(verb) ?? 0) + 1);
  }
}

const empty = (): StoreOverview => ({ statements: 0, days: [], topVerbs: [], minutes: [], lastStoredMs: null, rejections: 0 });

/**
 * A store's Overview figures: a handful of index reads of small tables, and one probe of the
 * newest statement. Named: PostgreSQL plans each once per connection (planning was most of their
 * time).
 */
export function* storeOverview(tenant: string, q: OverviewQuery): Program<StoreOverview> {
  const out = empty();
  const kept = yield* row({ name: 'overview_rejections', text: `SELECT count(*) AS n FROM rejections WHERE tenant = $1 AND at_ms >= $2`, values: [tenant, q.rejectionsSinceMs] });
  out.rejections = Number(kept?.n ?? 0);
  const t = yield* row({ name: 'overview_tenant', text: `SELECT id FROM tenants WHERE name = $1`, values: [tenant] });
  if (!t) return out;
  const id = t.id;
  const total = yield* row({ name: 'overview_total', text: `SELECT sum(n) AS n FROM statement_counts WHERE tenant = $1`, values: [id] });
  out.statements = Number(total?.n ?? 0);
  out.days = (yield* rows({
    name: 'overview_days',
    text: `SELECT day, sum(n) AS n FROM statement_counts WHERE tenant = $1 AND day >= $2 GROUP BY day ORDER BY day`,
    values: [id, q.sinceDay],
  }))
    .map((r) => ({ day: Number(r.day), statements: Number(r.n) }))
    .filter((r) => r.statements > 0);
  out.topVerbs = (yield* rows({
    name: 'overview_verbs',
    text:
      `SELECT k.key AS verb, c.n FROM (SELECT verb, sum(n) AS n FROM statement_counts WHERE tenant = $1 AND day >= $2 GROUP BY verb) c ` +
      `JOIN keys k ON k.id = c.verb WHERE c.n > 0 ORDER BY c.n DESC, k.key LIMIT $3`,
    values: [id, q.sinceDay, q.topVerbs],
  })).map((r) => ({ verb: String(r.verb), statements: Number(r.n) }));
  out.minutes = (yield* rows({
    name: 'overview_minutes',
    text: `SELECT minute, n FROM statement_minutes WHERE tenant = $1 AND minute >= $2 ORDER BY minute`,
    values: [id, q.sinceMinute],
  })).map((r) => ({ minute: Number(r.minute), statements: Number(r.n) }));
  const last = yield* row({ name: 'overview_last', text: `SELECT stored_ms FROM statements WHERE tenant = $1 ORDER BY tenant DESC, seq DESC LIMIT 1`, values: [id] });
  out.lastStoredMs = last ? Number(last.stored_ms) : null;
  return out;
}

/** Every store with statements: its total and those since `sinceDay` (reads every count row: days × verbs of each store). */
export function* storeTotals(sinceDay: number): Program<StoreTotals[]> {
  const found = yield* rows({
    name: 'overview_totals',
    text:
      `SELECT t.name, c.n, c.recent FROM (SELECT tenant, sum(n) AS n, sum(CASE WHEN day >= $1 THEN n ELSE 0 END) AS recent FROM statement_counts GROUP BY tenant) c ` +
      'JOIN tenants t ON t.id = c.tenant WHERE c.n > 0 ORDER BY t.name',
    values: [sinceDay],
  });
  return found.map((r) => ({ target: String(r.name), statements: Number(r.n), recent: Number(r.recent) }));
}
