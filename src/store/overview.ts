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
 *
 * A (tenant, day) holds at most VERBS_PER_DAY verb rows and one "other" row (verb OTHER_VERB),
 * so that neither a write nor the Overview's read grows with the distinct verbs a writer sends
 * (SQLite migration 22, PostgreSQL 23, folded the rows stored before). A day's new verb gets a
 * row while there is room; when a group brings more new verbs than there is room for, the day is
 * folded: the FOLD_TO heaviest of its rows and the group's new verbs keep (or get) a row, the rest
 * are added to "other" (ties: the older key, the verb known longer, keeps its row). A verb's row
 * thus counts its statements since it got the row, the others being in "other": a deletion takes
 * a verb's statements off its row as far as it holds them, the rest off "other".
 */
import { type Program, row, rows } from './program.ts';
import type { OverviewQuery, StoreOverview, StoreTotals } from './types.ts';

export const DAY_MS = 86_400_000;
export const MINUTE_MS = 60_000;
/** Minutes of `statement_minutes` kept: older ones are deleted as new ones arrive. */
export const MINUTES_KEPT = 60;

/** Verb rows per (tenant, day) at most; the rest counted in the "other" row. */
export const VERBS_PER_DAY = 100;
/** The rows a day keeps when a new verb finds no room: half, so that a fold is rare (once per FOLD_TO new verbs at most). */
export const FOLD_TO = VERBS_PER_DAY / 2;
/** The `verb` of a day's "other" row: no key's id (key ids start at 1). */
export const OTHER_VERB = 0;

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

/** A count row of a day to fold: `held` when it is stored (else a new verb of the group). */
export interface FoldCandidate {
  verb: number;
  n: number;
  held: boolean;
}

/** A day's fold (see above): the FOLD_TO heaviest keep a row, the rest go to "other". */
export function fold(candidates: FoldCandidate[]): { keep: FoldCandidate[]; other: FoldCandidate[] } {
  const ranked = [...candidates].sort((a, b) => b.n - a.n || a.verb - b.verb);
  return { keep: ranked.slice(0, FOLD_TO), other: ranked.slice(FOLD_TO) };
}

const empty = (): StoreOverview => ({ statements: 0, days: [], topVerbs: [], otherVerbs: 0, minutes: [], lastStoredMs: null, rejections: 0 });

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
  // The top verbs and, in the same snapshot, the statements of every other verb (the row whose verb is NULL).
  const verbs = yield* rows({
    name: 'overview_verbs',
    text:
      `WITH c AS (SELECT verb, sum(n) AS n FROM statement_counts WHERE tenant = $1 AND day >= $2 GROUP BY verb HAVING sum(n) > 0), ` +
      `top AS (SELECT k.key AS verb, c.n FROM c JOIN keys k ON k.id = c.verb ORDER BY c.n DESC, k.key LIMIT $3) ` +
      `SELECT verb, n FROM (SELECT verb, n FROM top UNION ALL SELECT NULL, (SELECT coalesce(sum(n), 0) FROM c) - (SELECT coalesce(sum(n), 0) FROM top)) u ` +
      `ORDER BY verb IS NULL, n DESC, verb`,
    values: [id, q.sinceDay, q.topVerbs],
  });
  for (const r of verbs) {
    if (r.verb === null) out.otherVerbs = Number(r.n);
    else out.topVerbs.push({ verb: String(r.verb), statements: Number(r.n) });
  }
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
