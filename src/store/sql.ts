/**
 * SQL shared by the backends: the statement query (filters, StatementRef targeting, keyset
 * paging, since/until as seq bounds). Both schemas use the same table
 * and column names; the UUID encoding differs (see QueryDialect), and one join that
 * each planner must take as a per-row probe is spelled per backend (CROSS JOIN for SQLite,
 * LATERAL for PostgreSQL).
 *
 * Lean storage: the tenant, verbs, activity IRIs and agent keys are stored once, in `tenants`
 * (name → id) and `keys` ((tenant, key) → id); `statements`, the link tables and their indexes
 * hold the integer ids. The store resolves the tenant's id before building a query (a tenant it
 * does not know has no statements). Filter values are resolved inside the query by a scalar
 * subquery on `keys`, which SQLite evaluates once and uses as an index bound (an unknown key
 * matches nothing), or bound as the ids the store resolved first (PostgreSQL, whose planner then
 * sees each value's statistics). A filter on several indexed values is read from the rarest
 * (driverCountsSql).
 */
import { type Clock, systemClock } from '../clock.ts';
import type { StatementFilter, StatementQuery } from '../xapi/query.ts';
import type { PreparedStatement } from '../xapi/statement.ts';

/**
 * Canonical definitions read per query (getActivityDefinitions): a `format=canonical` page asks
 * for at most CANONICAL_DEFINITIONS_MAX (src/xapi/formats.ts), so a few queries, one after the
 * other, each one connection (PostgreSQL) or one turn of the event loop (SQLite).
 */
export const DEFINITIONS_PER_QUERY = 500;

/**
 * statements.is_voiding of a new statement: 0 when it voids nothing, 1 for a voiding statement, 2
 * for one whose writer may read only its own authority's statements (it voids only those: see
 * EarlierVoiding in src/xapi/insert.ts). Anything but 0 is a voiding statement.
 */
export const isVoidingValue = (p: PreparedStatement): number => (p.voids ? (p.mineOnly ? 2 : 1) : 0);

/**
 * What differs between the backends' statement queries, as the fragments each one writes: how a
 * UUID is stored, the layout of the link tables (SQLite: keyed by tenant and seq bucket;
 * PostgreSQL: by key and role, see LINK_ROLES) and of the statements table's registration index
 * (bucketed on SQLite), and a few spellings. The `query` part of each backend's dialect
 * (./dialect.ts): SQLITE (sqlite/dialect.ts) and POSTGRES (postgres/dialect.ts).
 */
export interface QueryDialect {
  /** A lower-case UUID as the column stores it: 16 bytes on SQLite, `uuid` on PostgreSQL. */
  readonly uuid: (id: string) => unknown;
  /** The smaller of two or more scalar expressions. */
  readonly least: (exprs: string[]) => string;
  /** The join a per-row probe of a small table is written with (SQLite joins in the order written with CROSS JOIN). */
  readonly probeJoin: string;
  /** The page row's JSON column(s) (see sizedJson). */
  readonly sizedJson: (json: string, bytes: string, inline: () => string) => string;
  /** The filter's agent and activity (but `skip`) as probes of the link tables for the statement whose seq is `seq` (see linkProbes). */
  readonly linkProbes: (tenant: number, f: StatementFilter, p: Params, seq: string, skip?: 'agent' | 'activity', fence?: boolean) => string[];
  /** driverCountsSql's columns for the link tables (`agent`, `activity`). */
  readonly linkCounts: (tenant: number, f: StatementFilter, p: Params, c: DriverCounting) => string[];
  /** directMatches driven by a link table (see directMatches). */
  readonly linkMatches: (tenant: number, q: StatementQuery, w: SeqWindow, p: Params, order: string, byAgent: boolean, m: MatchParts) => string;
  /** driverCountsSql's counts of the statements table's indexes the filter may be read from (verb, registration). */
  readonly statementCounts: (tenant: number, f: StatementFilter, p: Params, c: DriverCounting) => string[];
  /** directMatches from the statements table: the range's leading conditions, the index it is read by, its bucket order. */
  readonly statementRange: (tenant: number, f: StatementFilter, w: SeqWindow, p: Params) => { head: string[]; indexed: string; bucket?: string };
  /**
   * The bytes of a statement row's JSON (`alias`.full), found without reading the JSON: SQLite's
   * octet_length() of a TEXT column reads only the record header (length() reads the whole
   * value); PostgreSQL keeps the figure in `full_bytes` (migration 12), as
   * its octet_length(full::text) decompresses and copies the whole value.
   */
  readonly fullBytes: (alias: string) => string;
}

/**
 * SQLite keeps the link tables (`statement_agents`, `statement_activities`: primary key (tenant,
 * bucket, key, seq)) and the registration index ((tenant, seq >> 16, registration, seq)) in
 * buckets of 2^16 consecutive seqs: a write then dirties pages of the newest bucket only, not a
 * random page of the key's whole range per entry (bytes written per statement grew with the store,
 * and ingest slowed with it). A key's range is read bucket by bucket, newest first for a
 * descending page (the same order as seq), each one index descent. PostgreSQL, whose ingest keeps
 * its pace as the store grows, keeps one range per key. Stored in the rows (SQLite migration 8):
 * changing it needs a migration.
 */
export const SEQ_BUCKET_BITS = 16;

/** The bucket of a seq (an SQL expression). */
export const bucketOf = (seq: string): string => `(${seq} >> ${SEQ_BUCKET_BITS})`;

/** The bucket of a seq, as the store writes it. */
export const seqBucket = (seq: number): number => Math.floor(seq / 2 ** SEQ_BUCKET_BITS);

/** A UUID's 16 bytes (SQLite stores statement ids, registrations and StatementRef targets so). */
export const uuidBytes = (id: string): Buffer => Buffer.from(id.replaceAll('-', ''), 'hex');

/** The lower-case text form of a UUID's 16 bytes. */
export function uuidText(b: Uint8Array): string {
  const h = Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** Collects parameters and hands out their placeholders, `$1`, `$2`, … (the one spelling: ./program.ts). */
export class Params {
  readonly values: unknown[] = [];
  readonly dialect: QueryDialect;
  /** Dictionary ids the store resolved before the query (see statementPageSql). */
  private readonly ids?: ReadonlyMap<string, number>;
  constructor(dialect: QueryDialect, ids?: ReadonlyMap<string, number>) {
    this.dialect = dialect;
    this.ids = ids;
  }
  add(v: unknown): string {
    return `$${this.values.push(v)}`;
  }
  /** The dictionary id of a tenant's key (verb, activity IRI, agent key); NULL when unknown. */
  key(tenant: number, key: string): string {
    const id = this.ids?.get(key);
    if (id !== undefined) return this.add(id);
    return `(SELECT id FROM keys WHERE tenant = ${this.add(tenant)} AND key = ${this.add(key)})`;
  }
}

/** Inclusive/exclusive bounds on `seq`, from since/until (translated by the backend) and the cursor. */
export interface SeqWindow {
  /** seq > after */
  after?: bigint;
  /** seq < before */
  before?: bigint;
  /** seq >= from */
  from?: bigint;
  /** seq <= to */
  to?: bigint;
}

/**
 * since/until as a seq bound: the tenant's first statement stored after `ms` (`since`) or its last
 * stored at or before it (`until`), as one row `seq`, none if there is no such statement. Found by
 * bisecting `seq` through `statements (tenant, seq)`, ≈ 2·log2(seq range) probes: `stored` never
 * decreases with `seq` within a tenant on both backends (each write takes the greater of now and
 * the last `stored`, in seq order), so no index on `stored` is needed.
 */
export function storedSeqSql(tenant: number, ms: number, bound: 'since' | 'until', dialect: QueryDialect): { sql: string; params: unknown[] } {
  const p = new Params(dialect);
  // The stored time of the tenant's first statement at or after seq `x`: never decreases with x.
  const storedAt = (x: () => string) => {
    return `(SELECT stored_ms FROM statements WHERE tenant = ${p.add(tenant)} AND seq >= ${x()} ORDER BY seq LIMIT 1)`;
  };
  // Invariant: the first x in [lo, hi] with storedAt(x) > ms is the answer (hi = max + 1: none);
  // v = storedAt((lo + hi) / 2), probed once per step (a column, as a subquery cannot read `b`).
  const init =
    `SELECT lo, hi, ${storedAt(() => '(lo + hi) / 2')} FROM (SELECT (SELECT min(seq) FROM statements WHERE tenant = ${p.add(tenant)}) AS lo, ` +
    `(SELECT max(seq) FROM statements WHERE tenant = ${p.add(tenant)}) + 1 AS hi) i`;
  const over = () => `v > ${p.add(ms)}`;
  const lo = () => `CASE WHEN ${over()} THEN lo ELSE (lo + hi) / 2 + 1 END`;
  const hi = () => `CASE WHEN ${over()} THEN (lo + hi) / 2 ELSE hi END`;
  const step = `SELECT ${lo()}, ${hi()}, ${storedAt(() => `(${lo()} + ${hi()}) / 2`)} FROM b WHERE lo < hi`;
  const pick =
    bound === 'since'
      ? `SELECT seq FROM statements WHERE tenant = ${p.add(tenant)} AND seq >= (SELECT max(lo) FROM b) ORDER BY seq LIMIT 1`
      : `SELECT seq FROM statements WHERE tenant = ${p.add(tenant)} AND seq < (SELECT max(lo) FROM b) ORDER BY seq DESC LIMIT 1`;
  return { sql: `WITH RECURSIVE b(lo, hi, v) AS (${init} UNION ALL ${step}) ${pick}`, params: p.values };
}

/** True when the filter has conditions that StatementRef targeting applies to. */
export const hasTargetableFilter = (f: StatementFilter): boolean => f.agent !== undefined || f.verb !== undefined || f.activity !== undefined || f.registration !== undefined;

export function windowConds(alias: string, w: SeqWindow, p: Params): string[] {
  const c: string[] = [];
  if (w.after !== undefined) c.push(`${alias}.seq > ${p.add(w.after)}`);
  if (w.before !== undefined) c.push(`${alias}.seq < ${p.add(w.before)}`);
  if (w.from !== undefined) c.push(`${alias}.seq >= ${p.add(w.from)}`);
  if (w.to !== undefined) c.push(`${alias}.seq <= ${p.add(w.to)}`);
  return c;
}

/**
 * The buckets that may hold a seq of the window, as an IN list (a subquery SQLite materialises
 * once, in order, so a range read bucket by bucket needs no sort): from the newest statement's
 * (or the window's upper bound's) down to the window's lower bound's. None on an empty store.
 */
export function bucketsIn(w: SeqWindow = {}, p?: Params): string {
  const shift = BigInt(SEQ_BUCKET_BITS);
  const uppers = [w.before !== undefined ? w.before - 1n : undefined, w.to].filter((x) => x !== undefined);
  const lowers = [w.after !== undefined ? w.after + 1n : undefined, w.from].filter((x) => x !== undefined);
  const bound = (x: bigint) => (p ? p.add(x >> shift) : String(x >> shift));
  let top = `(SELECT max(seq) FROM statements) >> ${SEQ_BUCKET_BITS}`;
  // biome-ignore lint/complexity/useMathMinMax: bigints (Math.min takes numbers)
  if (uppers.length) top = `min(${top}, ${bound(uppers.reduce((a, b) => (a < b ? a : b)))})`;
  // biome-ignore lint/complexity/useMathMinMax: bigints (Math.max takes numbers)
  const bottom = lowers.length ? bound(lowers.reduce((a, b) => (a > b ? a : b))) : '0';
  return `(WITH RECURSIVE b(x) AS (SELECT ${top} UNION ALL SELECT x - 1 FROM b WHERE x > ${bottom}) SELECT x FROM b)`;
}

/**
 * The filter's conditions on one statement's own columns (`alias`): verb, registration, and with
 * `mine` its authority (on a `statement_reach` row: the reached statement's verb and registration,
 * the authority its chain shares).
 */
function rowConds(alias: string, tenant: number, f: StatementFilter, p: Params): string[] {
  const c: string[] = [];
  if (f.verb !== undefined) c.push(`${alias}.verb = ${p.key(tenant, f.verb)}`);
  if (f.registration !== undefined) c.push(`${alias}.registration = ${p.add(p.dialect.uuid(f.registration))}`);
  if (f.authority !== undefined) c.push(`${alias}.authority = ${p.key(tenant, f.authority)}`);
  return c;
}

/**
 * The filter's agent and activity (but the driving range's, `skip`) as probes of the link tables
 * for the statement whose seq is `seq`; they carry the tenant, so the primary keys (tenant, key,
 * seq) answer them. `fence`: keep each one probe (OFFSET: PostgreSQL ignores a LIMIT alone in
 * EXISTS), as PostgreSQL otherwise may join the key's whole range to it; unfenced it is left to
 * plan (it may rightly drive from the rarer key's range).
 */
export const linkProbes = (tenant: number, f: StatementFilter, p: Params, seq: string, skip?: 'agent' | 'activity', fence = false): string[] =>
  p.dialect.linkProbes(tenant, f, p, seq, skip, fence);

/**
 * The index a filter's matches are read from: the agent or the activity link table, or the
 * statements table (by verb, registration or seq); the other conditions are checked per statement.
 */
export type Driver = 'agent' | 'activity' | 'statements';

/** The driver when the store has not chosen one: agent, else activity, else the statements table. */
const defaultDriver = (f: StatementFilter): Driver => (f.agent !== undefined ? 'agent' : f.activity !== undefined ? 'activity' : 'statements');

/** The drivers a filter can use; the store counts them (driverCountsSql) when there is a choice. */
export function drivers(f: StatementFilter): Driver[] {
  const out: Driver[] = [];
  if (f.agent !== undefined) out.push('agent');
  if (f.activity !== undefined) out.push('activity');
  if (f.verb !== undefined || f.registration !== undefined) out.push('statements');
  return out;
}

/** Entries counted per index when choosing a combined filter's driver: enough to tell rare from busy. */
export const DRIVER_COUNT_CAP = 2000;

/**
 * One row with, per driver of the filter, how common the filter's value is in its index, read
 * from the index alone (the newest `cap` entries at most): the store drives a combined filter
 * (agent + verb + activity) from the rarest, as neither planner knows which one that is (a busy
 * learner's range walked for a rare activity costs many times the activity's range;
 * docs/decisions.md, "Reads").
 * The figure is the count of entries when under `cap`; else `cap` plus `cap` times their density
 * (entries per seq over the span of those `cap`), so that of two values both past the cap the
 * sparser one is still told apart (at 1M a busy learner and a question both had more than 2,000
 * entries: the learner's 10,000-odd were walked for a page the question's 3,422 held).
 */
export function driverCountsSql(tenant: number, f: StatementFilter, cap: number, dialect: QueryDialect): { sql: string; params: unknown[] } {
  const p = new Params(dialect);
  const limit = Math.trunc(cap); // a literal: the planner sizes each count's range by it
  // `order`: the index's own order, newest first (bucket by bucket where it is bucketed).
  const newest = (from: string, conds: string[], order: string) => `SELECT seq FROM ${from} WHERE ${conds.join(' AND ')} ORDER BY ${order} LIMIT ${limit}`;
  const countOf = (entries: string) =>
    `(SELECT CASE WHEN count(*) < ${limit} THEN count(*) * 1.0 ELSE count(*) * (1.0 + count(*) * 1.0 / (max(seq) - min(seq) + 1)) END FROM (${entries}) c)`;
  const count = (from: string, conds: string[], order: string) => countOf(newest(from, conds, order));
  const c: DriverCounting = { limit, newest, countOf, count };
  const cols = dialect.linkCounts(tenant, f, p, c);
  // The statements table is read by whichever of its indexes the planner takes: count the rarer.
  const byStatements = dialect.statementCounts(tenant, f, p, c);
  if (byStatements.length === 1) cols.push(`${byStatements[0]} AS statements`);
  if (byStatements.length === 2) cols.push(`${dialect.least(byStatements)} AS statements`);
  return { sql: `SELECT ${cols.join(', ')}`, params: p.values };
}

/** What driverCountsSql lends the dialect's counts: the newest `limit` entries of an index range, and their count (see driverCountsSql). */
export interface DriverCounting {
  limit: number;
  newest(from: string, conds: string[], order: string): string;
  countOf(entries: string): string;
  count(from: string, conds: string[], order: string): string;
}

export const verbCount = (tenant: number, verb: string, p: Params, c: DriverCounting): string =>
  c.count('statements', [`tenant = ${p.add(tenant)}`, `verb = ${p.key(tenant, verb)}`], 'seq DESC');

/** The driver with the rarest value of a driverCountsSql row (ties: the default order). */
export function rarestDriver(row: Record<string, unknown>): Driver {
  let best: Driver | undefined;
  for (const d of ['agent', 'activity', 'statements'] as const) {
    if (row[d] === undefined || row[d] === null) continue;
    if (best === undefined || Number(row[d]) < Number(row[best])) best = d;
  }
  return best ?? 'statements';
}

/**
 * Drivers chosen, kept per tenant and filter values for `ttlMs`: the counts cost about as much as
 * the page itself (SQLite, agent + verb + activity at 1M: 1.5 of 3.5 ms), and every page of a
 * `more` walk asks again for the same values. A choice gone stale only costs speed, never a row.
 * The counts ignore since/until, so the key does too.
 */
export class DriverChoices {
  private readonly kept = new Map<string, { driver: Driver; until: number }>();
  private readonly ttlMs: number;
  private readonly max: number;
  private readonly clock: Clock;

  constructor(ttlMs = 10_000, max = 1_000, clock: Clock = systemClock) {
    this.ttlMs = ttlMs;
    this.max = max;
    this.clock = clock;
  }

  private static key(tenant: number, f: StatementFilter): string {
    return JSON.stringify([tenant, f.agent, f.activity, f.verb, f.registration, f.authority, f.relatedAgents, f.relatedActivities]);
  }

  get(tenant: number, f: StatementFilter, now = this.clock.now()): Driver | undefined {
    const k = DriverChoices.key(tenant, f);
    const hit = this.kept.get(k);
    if (hit && hit.until > now) return hit.driver;
    if (hit) this.kept.delete(k);
    return undefined;
  }

  set(tenant: number, f: StatementFilter, driver: Driver, now = this.clock.now()): void {
    if (this.kept.size >= this.max) this.kept.clear();
    this.kept.set(DriverChoices.key(tenant, f), { driver, until: now + this.ttlMs });
  }
}

/**
 * The driving range of a link table: the filter's agent (role 1 unless related_agents) or activity
 * (the object unless related_activities). `buckets`: the window, on a bucketed table (the link
 * tables on SQLite; not the reach tables).
 */
export function linkRange(alias: string, byAgent: boolean, tenant: number, f: StatementFilter, p: Params, buckets?: SeqWindow): string[] {
  const c = [`${alias}.tenant = ${p.add(tenant)}`];
  if (buckets) c.push(`${alias}.bucket IN ${bucketsIn(buckets, p)}`);
  if (byAgent) {
    c.push(`${alias}.agent = ${p.key(tenant, f.agent!)}`);
    if (!f.relatedAgents) c.push(`${alias}.role = 1`);
  } else {
    c.push(`${alias}.activity = ${p.key(tenant, f.activity!)}`);
    if (!f.relatedActivities) c.push(`${alias}.direct = 1`);
  }
  return c;
}

/**
 * A statement's JSON when it is at most `inline` bytes (a placeholder), else NULL, and what the
 * page cut needs to know of it (pageRowsKept): its bytes when its JSON does not come. SQLite gives
 * both in one column, the JSON or else its bytes (an integer), so a row converts as many values as
 * before the cut existed (with a column for the bytes, a plain page's query took 18 µs more, in
 * one 8 µs). A PostgreSQL CASE has one type: the JSON or NULL (`page_json`), then its bytes or
 * NULL (`json_bytes`). `json` and `bytes`: the column and its bytes (QueryDialect.fullBytes).
 */
export const sizedJson = (dialect: QueryDialect, json: string, bytes: string, inline: () => string): string => dialect.sizedJson(json, bytes, inline);

/**
 * The columns of a page row: seq, stored_ms, the JSON or its bytes (sizedJson: one column on
 * SQLite, two on PostgreSQL), the id (the `more` cursor of the page's last row), and with
 * `attachmentsOf` (the tenant's name, as `attachments` keys it) `data_bytes`, the bytes of the
 * attachment data the statement links (every declared hash whose data the store has: at least
 * what a reader is served).
 */
function pageCols(q: StatementQuery, p: Params, attachmentsOf?: string): string {
  const json = sizedJson(p.dialect, 's.full', p.dialect.fullBytes('s'), () => p.add(inlineBytes(q)));
  const data =
    attachmentsOf === undefined
      ? ''
      : `, (SELECT coalesce(sum(a.length), 0) FROM statement_attachments l JOIN attachments a ON a.tenant = ${p.add(attachmentsOf)} AND a.sha2 = l.sha2 WHERE l.seq = s.seq) AS data_bytes`;
  return `s.seq, s.stored_ms, ${json}, s.id${data}`;
}

/**
 * The largest statement the page query returns with its JSON: a page of `limit + 1` such rows
 * holds at most `maxBytes`, whatever the plan (a sort above the rows holds them all at once), so a
 * query never reads more than one page's worth. A typical statement (1–2 KB) is far below it (4 MiB
 * over 101 rows: 41 KB); a larger one that the page keeps is read on its own.
 */
export const inlineBytes = (q: Pick<StatementQuery, 'limit' | 'maxBytes'>): number => Math.floor(q.maxBytes / (q.limit + 1));

/**
 * How many of a page query's `rows` (in order, `limit + 1` at most) the page returns: up to
 * `limit`, ending before the row that would take the page's bytes past `maxBytes`, but at least
 * the first (a statement is never larger than a request may be). Fewer than the rows read: the
 * page has a `more` link, continued after the last row kept (xAPI lets the LRS return fewer than
 * `limit`). `bytes(i)`: row i's JSON and (with attachments) data bytes; not asked when every row
 * came with its JSON (`allInline`) and the page carries no data: their total is within the bound
 * (inlineBytes), so only the limit ends the page.
 */
export function pageRowsKept(rows: number, q: Pick<StatementQuery, 'limit' | 'maxBytes' | 'attachments'>, allInline: boolean, bytes: (i: number) => number): number {
  if (allInline && !q.attachments) return Math.min(rows, q.limit);
  let total = 0;
  let n = 0;
  for (; n < rows; n++) {
    total += bytes(n);
    if (n === q.limit || (n > 0 && total > q.maxBytes)) break;
  }
  return n;
}

/**
 * Seqs of statements matching the filter directly, read from the driver's index (see Driver);
 * `cols` instead of the seq, from the statements table's own range.
 */
function directMatches(tenant: number, q: StatementQuery, w: SeqWindow, p: Params, order: string, by: Driver, cols = (): string => 's.seq'): string {
  const f = q.filter;
  // In seq order; on a bucketed index, bucket by bucket (the same order, read without a sort).
  const tail = (conds: string[], seqCol: string, bucket?: string) =>
    `WHERE ${conds.join(' AND ')} ORDER BY ${bucket ? `${bucket} ${order}, ` : ''}${seqCol} ${order} LIMIT ${p.add(q.limit + 1)}`;
  // The statement row's own conditions (not voided, verb, registration, `mine`).
  const own = () => ['s.voided = 0', ...rowConds('s', tenant, f, p)];
  if ((by === 'agent' && f.agent !== undefined) || (by === 'activity' && f.activity !== undefined)) {
    return p.dialect.linkMatches(tenant, q, w, p, order, by === 'agent', { tail, own });
  }
  const range = p.dialect.statementRange(tenant, f, w, p);
  const conds = [...range.head, ...own(), ...linkProbes(tenant, f, p, 's.seq')];
  return `SELECT ${cols()} FROM statements s${range.indexed} ${tail(conds, 's.seq', range.bucket)}`;
}

/** What directMatches lends the dialect's link matches: the range's ORDER BY and LIMIT, and the statement row's own conditions. */
export interface MatchParts {
  tail(conds: string[], seqCol: string, bucket?: string): string;
  own(): string[];
}

/**
 * StatementRef targeting (xAPI-Communication 2.1.3.s3): statements whose StatementRef points,
 * directly or through other StatementRefs, at a statement matching the filter are results too.
 * Time bounds and "not voided" apply to the targeting statement; the other filters apply to the
 * targeted one as a whole, which may itself be voided; `mine` applies to every statement of the
 * chain (another authority's statement is invisible to a user restricted to its own, even as a
 * target).
 *
 * The store writes what each StatementRef reaches when it stores it (src/store/reach.ts): a
 * `statement_reach` row per statement reached (its verb, registration, and the authority the
 * chain shares) and that statement's link rows under the StatementRef's seq (`reach_agents`,
 * `reach_activities`). So the targeting statements are read like the direct matches: one range of
 * the driver's index, in seq order up to the page, the other conditions checked on the statement
 * reached (`via`) — never a walk over the StatementRefs of the store.
 */
function reachMatches(tenant: number, q: StatementQuery, w: SeqWindow, p: Params, order: string, by: Driver): string {
  const f = q.filter;
  // The reached statement's own link rows (probed by its seq, as for a direct match).
  // One probe per entry of the (small) reach range, fenced: PostgreSQL, estimating a busy
  // activity at 2 rows, otherwise drove from its 3,389 link rows into the reach table (15 ms at 1M).
  const links = (skip?: 'agent' | 'activity') => linkProbes(tenant, f, p, 'r.via', skip, true);
  const tail = (conds: string[]) => `WHERE ${conds.join(' AND ')} ORDER BY r.seq ${order} LIMIT ${p.add(q.limit + 1)}`;
  const from = (table: string) => `SELECT DISTINCT r.seq FROM ${table} r JOIN statements s ON s.seq = r.seq`;
  if (by === 'statements') {
    const head = [`r.tenant = ${p.add(tenant)}`, ...rowConds('r', tenant, f, p), ...windowConds('r', w, p), 's.voided = 0'];
    return `${from('statement_reach')} ${tail([...head, ...links()])}`;
  }
  const byAgent = by === 'agent';
  const conds = [...linkRange('r', byAgent, tenant, f, p), ...windowConds('r', w, p), 's.voided = 0'];
  if (f.verb !== undefined || f.registration !== undefined || f.authority !== undefined) {
    const t = [`t.tenant = ${p.add(tenant)}`, 't.seq = r.seq', 't.via = r.via'];
    conds.push(`EXISTS (SELECT 1 FROM statement_reach t WHERE ${[...t, ...rowConds('t', tenant, f, p)].join(' AND ')} LIMIT 1 OFFSET 0)`);
  }
  conds.push(...links(byAgent ? 'agent' : 'activity'));
  return `${from(byAgent ? 'reach_agents' : 'reach_activities')} ${tail(conds)}`;
}

/**
 * The page query: `limit + 1` rows (see pageCols) in the requested order, so the caller
 * knows whether more exist without a short page; the caller keeps those within the page's bytes
 * (pageRowsKept). `attachmentsOf`: the tenant's name, for a page with attachment data (its bytes
 * count). `driver`: the index to read the matches from
 * (see driverCountsSql; by default agent, activity, statements). `ids`: the filter values'
 * dictionary ids, when the store resolved them first; bound as values, so the planner estimates the filter by the
 * value's statistics (PostgreSQL, not knowing the subquery's result, took a verb on a third of
 * the statements for a rare one and sorted all its rows instead of walking the index to the page).
 */
export function statementPageSql(
  tenant: number,
  q: StatementQuery,
  w: SeqWindow,
  dialect: QueryDialect,
  opts: { ids?: ReadonlyMap<string, number>; driver?: Driver; attachmentsOf?: string } = {},
): { sql: string; params: unknown[] } {
  const p = new Params(dialect, opts.ids);
  const by = opts.driver ?? defaultDriver(q.filter);
  const order = q.ascending ? 'ASC' : 'DESC';
  const cols = () => pageCols(q, p, opts.attachmentsOf);
  // No StatementRef targeting: the statements table's own range is the page (its rows read as
  // the index walks, not probed again by seq: PostgreSQL's plain page 0.57 → 0.22 ms).
  if (!hasTargetableFilter(q.filter)) return { sql: directMatches(tenant, q, w, p, order, 'statements', cols), params: p.values };
  const direct = directMatches(tenant, q, w, p, order, by);
  const reached = reachMatches(tenant, q, w, p, order, by);
  const sql =
    `WITH da AS (${direct}), dr AS (${reached}) ` +
    `SELECT ${cols()} FROM statements s WHERE s.seq IN (SELECT seq FROM ` +
    `(SELECT seq FROM da UNION SELECT seq FROM dr) u ` +
    // The page's seqs first: a known small set, which PostgreSQL then probes by primary key
    // (estimating the union large, it merge-joined the whole table).
    `ORDER BY seq ${order} LIMIT ${p.add(q.limit + 1)}) ORDER BY s.seq ${order} LIMIT ${p.add(q.limit + 1)}`;
  return { sql, params: p.values };
}

/**
 * The reach rows of every stored StatementRef, built in SQL (the migration that brings the reach
 * tables; the same rows src/store/reach.ts writes, the link rows copied from the reached
 * statements' own). A chain is followed through the unique index on (tenant, id) one step per
 * round (on SQLite that index exists until migration 10, which runs later); UNION ends a cycle of
 * ids. The authority of a pair is the one its first (shortest) path shares: later
 * visits of a cycle can only have lost it (NULL), so max() keeps it.
 */
export function reachBuildSql(dialect: QueryDialect): string[] {
  const shared = (a: string, b: string) => `CASE WHEN ${a} = ${b} THEN ${a} END`;
  // SQLite joins in the order written with CROSS JOIN: the link table scanned once, the small
  // reach table probed by (tenant, via); PostgreSQL plans the join itself.
  const join = dialect.probeJoin;
  return [
    'WITH RECURSIVE c(tenant, seq, via, authority) AS (' +
      `SELECT s.tenant, s.seq, t.seq, ${shared('s.authority', 't.authority')} FROM statements s JOIN statements t ON t.tenant = s.tenant AND t.id = s.ref_id ` +
      'WHERE s.ref_id IS NOT NULL AND t.seq <> s.seq ' +
      `UNION SELECT c.tenant, c.seq, t.seq, ${shared('c.authority', 't.authority')} FROM c JOIN statements v ON v.seq = c.via ` +
      'JOIN statements t ON t.tenant = v.tenant AND t.id = v.ref_id WHERE v.ref_id IS NOT NULL AND t.seq <> c.seq) ' +
      'INSERT INTO statement_reach (tenant, seq, via, verb, registration, authority) ' +
      'SELECT c.tenant, c.seq, c.via, t.verb, t.registration, max(c.authority) FROM c JOIN statements t ON t.seq = c.via GROUP BY c.tenant, c.seq, c.via, t.verb, t.registration',
    `INSERT INTO reach_agents (tenant, agent, seq, via, role) SELECT a.tenant, a.agent, r.seq, r.via, a.role FROM statement_agents a ${join} statement_reach r ON r.tenant = a.tenant AND r.via = a.seq`,
    `INSERT INTO reach_activities (tenant, activity, seq, via, direct) SELECT a.tenant, a.activity, r.seq, r.via, a.direct FROM statement_activities a ${join} statement_reach r ON r.tenant = a.tenant AND r.via = a.seq`,
  ];
}
