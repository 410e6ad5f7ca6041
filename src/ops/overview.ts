/**
 * The Overview of a store (docs/console.md, "Overview"; the admin API's GET /admin/api/overview):
 * statements in total and per UTC day for the last 30 days, the top verbs of those days and the
 * statements of every other verb, the
 * ingest rate now, the newest statement's time, the rejections of the last day; for the operator,
 * forwarding (server-wide: lag, queued, dead letters) and every store's totals. Everything comes
 * from counts kept as statements are written (src/store/overview.ts) and a few small reads, never
 * from a scan of the statements.
 */
import type { AdminRole } from '../auth/scopes.ts';
import type { Clock } from '../clock.ts';
import { DAY_MS, dayOf, MINUTE_MS, minuteOf } from '../store/overview.ts';
import type { Store, StoreTotals } from '../store/types.ts';
import { reachableStore } from './admin/roles.ts';
import { forwardingLags, forwardingStatus } from './forwarding.ts';

/** Days the Overview charts, today included. */
export const OVERVIEW_DAYS = 30;
/** Verbs it lists. */
export const TOP_VERBS = 10;
/** Minutes of its ingest series, the current one included (as the status route's). */
export const INGEST_MINUTES = 15;
/** Complete minutes the ingest rate is the mean of. */
export const RATE_MINUTES = 5;

export interface OverviewForwarding {
  target: string;
  active: boolean;
  queued: number;
  dead: number;
  /** How long its oldest queued statement has waited since stored (ms); null when nothing is queued. */
  lagMs: number | null;
}

export interface Overview {
  target: string;
  /** When it was read (ISO 8601). */
  now: string;
  /** Statements kept, voided ones included (as /admin/api/stores counts them). */
  statements: number;
  /** The newest statement's `stored`, or null. */
  lastStored: string | null;
  /** The last OVERVIEW_DAYS UTC days, oldest first, today last: statements by their `stored` day. */
  days: { date: string; statements: number }[];
  /** The verbs of the most statements in those days, most first. */
  topVerbs: { verb: string; statements: number }[];
  /**
   * The statements of those days whose verb is not in `topVerbs`: the verbs beyond TOP_VERBS,
   * and those a day counted together once it had VERBS_PER_DAY verbs (src/store/overview.ts).
   */
  otherVerbs: number;
  ingest: {
    /** Statements per minute: the mean of the last RATE_MINUTES complete minutes, every process of the deployment counted. */
    perMinute: number;
    /** The last INGEST_MINUTES minutes, oldest first, the current one (so far) last. */
    minutes: { minute: string; statements: number }[];
  };
  /** Writes refused in the last 24 hours and still kept (LECTERN_REJECTIONS_MAX per store bounds them). */
  rejectionsLastDay: number;
  /** The operator's only: forwarding is every store's. */
  forwarding?: { targets: OverviewForwarding[]; queued: number; dead: number; lagMs: number | null };
  /** The operator's only: every store with statements, its total and those of the charted days. */
  stores?: StoreTotals[];
}

const isoDay = (day: number): string => new Date(day * DAY_MS).toISOString().slice(0, 10);

/** The Overview of `asked` (a store administrator: its own; another store is a not_found), as `role` sees it. */
export async function storeOverview(store: Store, role: AdminRole, asked: string | undefined, opts: { clock: Clock; activeTargets: readonly string[] }): Promise<Overview> {
  const target = reachableStore(role, asked);
  const nowMs = opts.clock.now();
  const today = dayOf(nowMs);
  const thisMinute = minuteOf(nowMs);
  const firstDay = today - OVERVIEW_DAYS + 1;
  const firstMinute = thisMinute - INGEST_MINUTES + 1;
  const o = await store.storeOverview(target, { sinceDay: firstDay, sinceMinute: firstMinute, topVerbs: TOP_VERBS, rejectionsSinceMs: nowMs - DAY_MS });
  const perDay = new Map(o.days.map((d) => [d.day, d.statements]));
  const perMinute = new Map(o.minutes.map((m) => [m.minute, m.statements]));
  const minutes = Array.from({ length: INGEST_MINUTES }, (_, i) => firstMinute + i);
  let recent = 0;
  for (let m = thisMinute - RATE_MINUTES; m < thisMinute; m++) recent += perMinute.get(m) ?? 0;
  const out: Overview = {
    target,
    now: new Date(nowMs).toISOString(),
    statements: o.statements,
    lastStored: o.lastStoredMs === null ? null : new Date(o.lastStoredMs).toISOString(),
    days: Array.from({ length: OVERVIEW_DAYS }, (_, i) => ({ date: isoDay(firstDay + i), statements: perDay.get(firstDay + i) ?? 0 })),
    topVerbs: o.topVerbs,
    otherVerbs: o.otherVerbs,
    ingest: {
      perMinute: Math.round((recent / RATE_MINUTES) * 10) / 10,
      minutes: minutes.map((m) => ({ minute: new Date(m * MINUTE_MS).toISOString(), statements: perMinute.get(m) ?? 0 })),
    },
    rejectionsLastDay: o.rejections,
  };
  if (role.kind === 'operator') {
    const lags = await forwardingLags(store, nowMs);
    const targets = (await forwardingStatus(store, opts.activeTargets)).map((t) => ({
      target: t.target,
      active: t.active,
      queued: t.queued,
      dead: t.dead,
      lagMs: lags.get(t.target) ?? null,
    }));
    const withLag = targets.flatMap((t) => (t.lagMs === null ? [] : [t.lagMs]));
    out.forwarding = {
      targets,
      queued: targets.reduce((n, t) => n + t.queued, 0),
      dead: targets.reduce((n, t) => n + t.dead, 0),
      lagMs: withLag.length ? Math.max(...withLag) : null,
    };
    out.stores = await store.storeTotals(firstDay);
  }
  return out;
}
