/**
 * The PostgreSQL backend's reads: statement pages (the shared query of ../sql.ts, its driver chosen
 * by counts and its filter values' ids resolved first), single statements, attachments,
 * consistent-through, the Agents resource, canonical definitions, and the bulk scans of export
 * (documents and the admin figures are shared programs: ../shared.ts). Key ids are resolved per query before the page query (erasure deletes keys:
 * `keys_epoch`).
 */
import type pg from 'pg';
import { LrsError, type ValidationIssue } from '../../errors.ts';
import { type StatementFilter, type StatementQuery, unknownCursor } from '../../xapi/query.ts';
import type { ActivityDefinition } from '../../xapi/types.ts';
import { agentSeqsSql, POSTGRES } from './query.ts';
import {
  DEFINITIONS_PER_QUERY,
  type Driver,
  DRIVER_COUNT_CAP,
  DriverChoices,
  driverCountsSql,
  drivers,
  inlineBytes,
  pageRowsKept,
  rarestDriver,
  type SeqWindow,
  sizedJson,
  statementPageSql,
  storedSeqSql,
} from '../sql.ts';
import type { AttachmentBlob, QueryPage, StoredRow } from '../types.ts';
import { PostgresConnection } from './connection.ts';
import { LOCK_INTENT, LOCK_STATEMENTS, tenantLockKey } from './locks.ts';

/**
 * Now, and per tenant (its lock key) the start of the oldest transaction holding its intent or
 * statement lock: the inserts in flight. Without parameters, so a prepared statement keeps its
 * plan (with plan_cache_mode=force_custom_plan PostgreSQL planned it at every call, most of its
 * cost). The status of each lock holder only (pg_stat_get_activity(pid), the function behind
 * pg_stat_activity): the view builds every backend's row (docs/decisions.md, "Reads").
 * xact_start shows only for the role's own sessions: the LRS processes share one role.
 */
export const CONSISTENT_THROUGH =
  'SELECT n.now_ms, b.objid, b.busy_ms FROM (SELECT floor(extract(epoch FROM now()) * 1000)::bigint AS now_ms) n LEFT JOIN (' +
  'SELECT l.objid, floor(extract(epoch FROM min(a.xact_start)) * 1000)::bigint AS busy_ms FROM pg_locks l CROSS JOIN LATERAL pg_stat_get_activity(l.pid) a ' +
  `WHERE l.locktype = 'advisory' AND l.granted AND l.classid IN (${LOCK_STATEMENTS}, ${LOCK_INTENT}) AND l.objsubid = 2 ` +
  'AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) GROUP BY l.objid) b ON true';

/** since/until answers kept (see storedSeq); all are forgotten when it is reached. */
const SEQ_BOUNDS_MAX = 10_000;

/** Dictionary ids a process caches per tenant at most (then the cache starts again): bounded memory with many agents. */
export const KEY_CACHE_MAX = 200_000;

export const STMT_COLS = 'seq, stored_ms, "full"';

export interface StatementRow {
  seq: string;
  stored_ms: string;
  full: string;
}

/** The JSON of a statement too large to come with its query (page_json null): its bytes (sizedJson in src/store/sql.ts). */
interface SizedRow {
  seq: string;
  page_json: string | null;
  json_bytes: number | null;
}

/** A row of the page query (pageCols in src/store/sql.ts). */
interface PageRow extends SizedRow {
  stored_ms: string;
  id: string;
  /** With attachments: the bytes of the attachment data (numeric, a sum of bigint). */
  data_bytes?: string;
}

/** Times a page is read again when a statement it kept was erased before its JSON was read. */
const PAGE_ATTEMPTS = 5;

export const toRow = (r: StatementRow): StoredRow => ({ json: r.full, storedMs: Number(r.stored_ms), position: r.seq });
/** The dictionary keys a query's filter names. */
const filterKeys = (f: StatementFilter): string[] => [...new Set([f.verb, f.agent, f.activity, f.authority].filter((k): k is string => k !== undefined))];

/**
 * The dictionary ids of a query's filter values (verb, agent, activity, authority), for
 * statementPageSql; undefined when one is unknown: every condition must hold (of a targeted
 * statement too), so nothing matches.
 */
export async function filterKeyIds(
  run: (text: string, values: unknown[]) => Promise<{ rows: { id: number; key: string }[] }>,
  tenantId: number,
  f: StatementFilter,
): Promise<Map<string, number> | undefined> {
  const wanted = filterKeys(f);
  const ids = new Map<string, number>();
  if (!wanted.length) return ids;
  const sql = 'SELECT k.id, k.key FROM unnest($2::text[]) AS q(key) CROSS JOIN LATERAL (SELECT id, key FROM keys WHERE tenant = $1 AND key = q.key LIMIT 1) k';
  for (const row of (await run(sql, [tenantId, wanted])).rows) ids.set(row.key, row.id);
  return ids.size < wanted.length ? undefined : ids;
}

/**
 * The dictionary ids of filter values, kept per tenant so that a query whose values are known
 * costs no `filter_keys` round trip (its planning and a round trip per GET; docs/decisions.md,
 * "Reads"). Safe without checking `keys_epoch`: ids are never reused and no key
 * is renamed, so a kept id is either the key's id or a deleted key's, which no row refers to any
 * more: a page read with it is empty, and queryStatements asks again when a page is empty.
 * Apart from `keyCache`, whose ids a write checks against `keys_epoch` in its own statement: a
 * page read has no such check, and the two are valid by different rules.
 */
class FilterIds {
  private readonly kept = new Map<number, Map<string, number>>();

  lookup(tenant: number, f: StatementFilter): Map<string, number> | undefined {
    const known = this.kept.get(tenant);
    const wanted = filterKeys(f);
    // No values: nothing to look up (filterKeyIds answers without a query).
    if (!wanted.length || !known) return undefined;
    const ids = new Map<string, number>();
    for (const k of wanted) {
      const id = known.get(k);
      if (id === undefined) return undefined;
      ids.set(k, id);
    }
    return ids;
  }

  remember(tenant: number, ids: ReadonlyMap<string, number>): void {
    let known = this.kept.get(tenant);
    if (!known || known.size > KEY_CACHE_MAX) this.kept.set(tenant, (known = new Map()));
    for (const [k, id] of ids) known.set(k, id);
  }

  forget(tenant: number, f: StatementFilter): void {
    const known = this.kept.get(tenant);
    for (const k of filterKeys(f)) known?.delete(k);
  }
}

export abstract class PostgresReaders extends PostgresConnection {
  /** Combined filters' drivers chosen (see DriverChoices). */
  protected readonly driverChoices = new DriverChoices(undefined, undefined, this.clock);
  /** Filter values' dictionary ids, as queries resolved them (see FilterIds). */
  protected readonly filterIds = new FilterIds();
  /** The consistent-through query in flight (see consistentThrough). */
  protected throughQuery?: Promise<{ now: number; busy: Map<number, number> }>;
  /** since/until → seq answers that can no longer change, by tenant id, bound and time (see storedSeq). */
  protected readonly seqBounds = new Map<string, string>();

  async getStatement(tenant: string, id: string, voided: boolean, authority?: string): Promise<StoredRow | undefined> {
    const tid = await this.tenantId(tenant);
    if (tid === undefined) return undefined;
    const r = await this.query<StatementRow & { authority_key: string | null }>(
      `SELECT ${STMT_COLS}, (SELECT key FROM keys WHERE id = s.authority) AS authority_key FROM statements s WHERE tenant = $1 AND id = $2::uuid AND voided = $3`,
      [tid, id, voided ? 1 : 0],
      'get_statement',
    );
    const row = r.rows[0];
    return row && (authority === undefined || row.authority_key === authority) ? toRow(row) : undefined;
  }

  async statementViolations(tenant: string, id: string): Promise<ValidationIssue[] | undefined> {
    const tid = await this.tenantId(tenant);
    if (tid === undefined) return undefined;
    const r = await this.query<{ violations: string | null }>(
      'SELECT (SELECT violations::text FROM statement_violations v WHERE v.seq = s.seq) AS violations FROM statements s WHERE tenant = $1 AND id = $2::uuid',
      [tid, id],
      'statement_violations',
    );
    const row = r.rows[0];
    if (!row) return undefined;
    return row.violations === null ? [] : (JSON.parse(row.violations) as ValidationIssue[]);
  }

  async violationsAt(tenant: string, positions: string[]): Promise<Map<string, ValidationIssue[]>> {
    const out = new Map<string, ValidationIssue[]>();
    const tid = await this.tenantId(tenant);
    if (tid === undefined || !positions.length) return out;
    const r = await this.query<{ seq: string; violations: string }>(
      'SELECT v.seq::text AS seq, v.violations::text AS violations FROM unnest($2::bigint[]) AS q(seq) JOIN statement_violations v ON v.seq = q.seq ' +
        'JOIN statements s ON s.seq = v.seq WHERE s.tenant = $1',
      [tid, positions],
      'violations_at',
    );
    for (const row of r.rows) out.set(row.seq, JSON.parse(row.violations) as ValidationIssue[]);
    return out;
  }

  async statementsWithViolations(tenant: string, ids: readonly string[]): Promise<Set<string>> {
    const tid = await this.tenantId(tenant);
    if (tid === undefined || ids.length === 0) return new Set();
    const r = await this.query<{ id: string }>(
      'SELECT s.id::text AS id FROM statements s JOIN statement_violations v ON v.seq = s.seq WHERE s.tenant = $1 AND s.id = ANY($2::uuid[])',
      [tid, ids],
      'statements_with_violations',
    );
    return new Set(r.rows.map((row) => row.id));
  }

  /**
   * The seq of the statement a `more` cursor names, by the (tenant, id) index: one of the tenant's,
   * of the filter's authority under `mine`; a 400 otherwise (unknownCursor).
   */
  protected async cursorSeq(tid: number, query: StatementQuery, id: string): Promise<bigint> {
    const authority = query.filter.authority;
    const sql = 'SELECT seq FROM statements WHERE tenant = $1 AND id = $2::uuid';
    const r =
      authority === undefined
        ? await this.query<{ seq: string }>(sql, [tid, id], 'cursor_seq')
        : await this.query<{ seq: string }>(`${sql} AND authority = (SELECT id FROM keys WHERE tenant = $1 AND key = $3)`, [tid, id, authority], 'cursor_seq_mine');
    if (!r.rows.length) throw unknownCursor();
    return BigInt(r.rows[0].seq);
  }

  async queryStatements(tenant: string, query: StatementQuery, attempt = 1): Promise<QueryPage> {
    const tid = await this.tenantId(tenant);
    if (tid === undefined) {
      if (query.after !== undefined) throw unknownCursor();
      return { rows: [] };
    }
    // The cursor first: a bad one is a 400 whatever since/until find.
    const after = query.after === undefined ? undefined : await this.cursorSeq(tid, query, query.after);
    const w: SeqWindow = {};
    if (query.since !== undefined || query.until !== undefined) {
      const bounds = await this.seqWindow({ id: tid, name: tenant }, { sinceMs: query.since, untilMs: query.until });
      if (!bounds) return { rows: [] };
      if (query.since !== undefined) w.from = BigInt(bounds.from);
      if (query.until !== undefined) w.to = BigInt(bounds.to);
    }
    if (after !== undefined) {
      if (query.ascending) w.after = after;
      else w.before = after;
    }
    // The filter values' ids first: the planner then knows how common each is (see statementPageSql).
    const resolve = () => filterKeyIds((text, values) => this.query<{ id: number; key: string }>(text, values, 'filter_keys'), tid, query.filter);
    const cached = this.filterIds.lookup(tid, query.filter);
    const ids = cached ?? (await resolve());
    if (!ids) return { rows: [] };
    if (!cached) this.filterIds.remember(tid, ids);
    // A filter on several indexed values is read from the rarest (see driverCountsSql).
    let driver: Driver | undefined;
    if (drivers(query.filter).length > 1) {
      driver = this.driverChoices.get(tid, query.filter);
      if (!driver) {
        const counts = driverCountsSql(tid, query.filter, DRIVER_COUNT_CAP, POSTGRES);
        driver = rarestDriver((await this.query<Record<string, unknown>>(counts.sql, counts.params)).rows[0]);
        this.driverChoices.set(tid, query.filter, driver);
      }
    }
    const page = async (known: ReadonlyMap<string, number>) => {
      const { sql, params } = statementPageSql(tid, query, w, POSTGRES, { ids: known, driver, attachmentsOf: query.attachments ? tenant : undefined });
      return (await this.query<PageRow>(sql, params)).rows;
    };
    let rows = await page(ids);
    if (cached && !rows.length) {
      // A kept id can only be stale one way: its key was deleted (erasure, a rejected request's
      // keys), so no row refers to it any more and the page is empty. Asked again.
      this.filterIds.forget(tid, query.filter);
      const fresh = await resolve();
      if (!fresh) return { rows: [] };
      this.filterIds.remember(tid, fresh);
      if ([...fresh].some(([k, id]) => ids.get(k) !== id)) rows = await page(fresh);
    }
    return this.keptPage(tenant, tid, rows, query, attempt);
  }

  /** The page a page query's rows make (keptRows); one whose first statement was erased meanwhile is read again. */
  protected async keptPage(tenant: string, tid: number, raw: PageRow[], query: StatementQuery, attempt: number): Promise<QueryPage> {
    const kept = await this.keptRows(tid, raw, query, (r) => Number(r.data_bytes ?? 0));
    if (kept === 0 && raw.length) {
      if (attempt >= PAGE_ATTEMPTS) throw new LrsError('unavailable', 'the statements of this page were erased while it was read; try again');
      return this.queryStatements(tenant, query, attempt + 1);
    }
    const rows = raw.slice(0, kept).map((r): StoredRow => ({ json: r.page_json!, storedMs: Number(r.stored_ms), position: r.seq }));
    return kept < raw.length ? { rows, next: raw[kept - 1].id } : { rows };
  }

  /**
   * How many of a query's rows (in order) a page keeps (pageRowsKept), the JSON of those too large
   * to come with the query read by seq into their rows. Fewer when a kept statement was erased
   * since the query: the page ends before it.
   */
  protected async keptRows<R extends SizedRow>(tid: number, raw: R[], q: Pick<StatementQuery, 'limit' | 'maxBytes' | 'attachments'>, data: (r: R) => number): Promise<number> {
    const allInline = raw.every((r) => r.page_json !== null);
    const bytes = (i: number) => (raw[i].json_bytes ?? Buffer.byteLength(raw[i].page_json!, 'utf8')) + data(raw[i]);
    const kept = pageRowsKept(raw.length, q, allInline, bytes);
    const large = await this.fullsBySeq(
      tid,
      raw.slice(0, kept).flatMap((r) => (r.page_json === null ? [r.seq] : [])),
    );
    for (let i = 0; i < kept; i++) {
      if (raw[i].page_json !== null) continue;
      const full = large.get(raw[i].seq);
      if (full === undefined) return i;
      raw[i].page_json = full;
    }
    return kept;
  }

  /** The attachments rows (`cols`, named `name`) of these hashes, with `carrier` only if a statement of that authority carried their data. */
  protected async attachmentRows<R extends { sha2: string }>(tenant: string, sha2s: string[], cols: string, name: string, carrier?: string): Promise<Map<string, R>> {
    if (!sha2s.length) return new Map();
    const sql = `SELECT ${cols} FROM attachments a WHERE tenant = $1 AND sha2 = ANY($2::text[])`;
    let r: pg.QueryResult<R>;
    if (carrier === undefined) r = await this.query<R>(sql, [tenant, [...new Set(sha2s)]], name);
    else {
      const tid = await this.tenantId(tenant);
      if (tid === undefined) return new Map();
      // One probe of the carriers' index (migration 11) per hash.
      r = await this.query<R>(
        `${sql} AND EXISTS (SELECT 1 FROM statement_attachments l WHERE l.sha2 = a.sha2 AND l.carrier = (SELECT id FROM keys WHERE tenant = $3 AND key = $4))`,
        [tenant, [...new Set(sha2s)], tid, carrier],
        `${name}_carried`,
      );
    }
    return new Map(r.rows.map((row) => [row.sha2, row]));
  }

  /** Statements' JSON by seq (those a page keeps that were too large to come with its query), in one query. */
  protected async fullsBySeq(tid: number, seqs: string[]): Promise<Map<string, string>> {
    if (!seqs.length) return new Map();
    const r = await this.query<{ seq: string; full: string }>('SELECT seq, "full" FROM statements WHERE tenant = $1 AND seq = ANY($2::bigint[])', [tid, seqs], 'statements_by_seq');
    return new Map(r.rows.map((row) => [row.seq, row.full]));
  }

  async getAttachments(tenant: string, sha2s: string[], carrier?: string): Promise<AttachmentBlob[]> {
    const found = await this.attachmentRows<{ sha2: string; content_type: string; content: Buffer }>(tenant, sha2s, 'sha2, content_type, content', 'get_attachments', carrier);
    return [...new Set(sha2s)].flatMap((h) => {
      const row = found.get(h);
      return row ? [{ sha2: row.sha2, contentType: row.content_type, content: row.content }] : [];
    });
  }

  async attachmentSizes(tenant: string, sha2s: string[], carrier?: string): Promise<Map<string, number>> {
    const found = await this.attachmentRows<{ sha2: string; length: string }>(tenant, sha2s, 'sha2, length', 'attachment_sizes', carrier);
    return new Map([...found.values()].map((r) => [r.sha2, Number(r.length)]));
  }

  /**
   * "Now", unless an insert of this tenant is in flight (it holds the tenant's intent or statement
   * lock): then just before the oldest such transaction began, since its statements will carry a
   * `stored` no earlier than that. Inserts that take the intent lock after this query read the
   * clock later than now(). Needs the LRS processes to share one database role (pg_stat_activity
   * shows xact_start only for one's own role).
   *
   * One query at a time, shared by every request that asks meanwhile, of any tenant (it answers
   * for all): the instant it finds is a lower bound on what is visible, and visibility only
   * grows, so it stays true for a request that arrived after the query started (at most one round
   * trip older than its own would be). Without this, every statement request cost a scan of
   * pg_locks and pg_stat_activity on the server, the largest server time under single writes
   * (docs/decisions.md, "Reads"). Only a query in flight is shared, not a settled answer reused for a while: an
   * answer older than another process's fresh one would take Consistent-Through back across
   * servers, and a client reading (previous through, through] windows would read some statements
   * twice.
   */
  async consistentThrough(tenant: string): Promise<Date> {
    if (!this.throughQuery) this.throughQuery = this.queryConsistentThrough().finally(() => (this.throughQuery = undefined));
    const { now, busy } = await this.throughQuery;
    // One millisecond back: `since` is exclusive and stored has millisecond precision.
    return new Date(Math.min(now, busy.get(tenantLockKey(tenant)) ?? now) - 1);
  }

  /** Now, and per tenant lock key the start of its oldest insert in flight. */
  protected async queryConsistentThrough(): Promise<{ now: number; busy: Map<number, number> }> {
    const r = await this.query<{ now_ms: string; objid: string | null; busy_ms: string | null }>(CONSISTENT_THROUGH, [], 'consistent_through');
    const busy = new Map<number, number>();
    for (const row of r.rows) if (row.objid !== null && row.busy_ms !== null) busy.set(Number(row.objid), Number(row.busy_ms));
    return { now: Number(r.rows[0].now_ms), busy };
  }

  async statementsWithAgent(tenant: string, agentKey: string, limit: number, maxBytes: number): Promise<string[]> {
    const tid = await this.tenantId(tenant);
    if (tid === undefined) return [];
    // Read as a statement page is: the JSON of small rows with the query, the others once kept.
    const r = await this.query<SizedRow>(
      `WITH a AS (${agentSeqsSql('(SELECT id FROM keys WHERE tenant = $1 AND key = $2)', '$3')}) ` +
        `SELECT s.seq, ${sizedJson(POSTGRES, 's."full"', POSTGRES.fullBytes('s'), () => '$4')} ` +
        'FROM a JOIN statements s ON s.seq = a.seq AND s.tenant = $1 ORDER BY a.seq DESC',
      [tid, agentKey, limit, inlineBytes({ limit, maxBytes })],
      'statements_with_agent',
    );
    const kept = await this.keptRows(tid, r.rows, { limit, maxBytes, attachments: false }, () => 0);
    return r.rows.slice(0, kept).map((row) => row.page_json!);
  }

  async getActivityDefinitions(tenant: string, activityIds: string[]): Promise<Map<string, ActivityDefinition>> {
    const out = new Map<string, ActivityDefinition>();
    // One query per chunk, one after the other: a request holds one connection at a time.
    for (let i = 0; i < activityIds.length; i += DEFINITIONS_PER_QUERY) {
      const r = await this.query<{ id: string; definition: string }>(
        'SELECT a.id, a.definition FROM unnest($2::text[]) AS q(id) CROSS JOIN LATERAL (SELECT id, definition FROM activities WHERE tenant = $1 AND id = q.id LIMIT 1) a',
        [tenant, activityIds.slice(i, i + DEFINITIONS_PER_QUERY)],
        'get_activities',
      );
      for (const row of r.rows) out.set(row.id, JSON.parse(row.definition) as ActivityDefinition);
    }
    return out;
  }

  async attachmentsNotCarried(tenant: string, positions: string[]): Promise<Map<string, string[]>> {
    const out = new Map<string, string[]>();
    if (!positions.length) return out;
    const r = await this.query<{ seq: string; sha2: string }>(
      'SELECT l.seq::text AS seq, l.sha2 FROM unnest($2::bigint[]) AS q(seq) JOIN statement_attachments l ON l.seq = q.seq ' +
        'WHERE l.carrier IS NULL AND EXISTS (SELECT 1 FROM attachments a WHERE a.tenant = $1 AND a.sha2 = l.sha2)',
      [tenant, positions],
      'attachments_not_carried',
    );
    for (const row of r.rows) out.set(row.seq, [...(out.get(row.seq) ?? []), row.sha2]);
    return out;
  }

  async attachmentCarrierCounts(tenant: string, sha2s: string[]): Promise<Map<string, number>> {
    const tid = await this.tenantId(tenant);
    if (tid === undefined || !sha2s.length) return new Map();
    const r = await this.query<{ sha2: string; n: string }>(
      'SELECT l.sha2, count(*) AS n FROM statement_attachments l JOIN statements s ON s.seq = l.seq ' +
        'WHERE l.sha2 = ANY($2::text[]) AND l.carrier IS NOT NULL AND s.tenant = $1 GROUP BY l.sha2',
      [tid, [...new Set(sha2s)]],
      'attachment_carrier_counts',
    );
    return new Map(r.rows.map((row) => [row.sha2, Number(row.n)]));
  }

  /**
   * since/until as a seq (storedSeqSql); undefined when no statement is on that side. An answer
   * that can no longer change is kept (a client paging through a window, or polling from the same
   * `since`, asks the same again; the bisection costs the server more than the page, mostly planning):
   * `since` once found, as later statements take later seqs; `until` once every statement stored
   * at or before it is visible (it is older than consistent-through: later ones are stored after
   * that). Erasure deletes statements, which a kept bound still bounds correctly.
   */
  protected async storedSeq(tenant: { id: number; name: string }, ms: number, bound: 'since' | 'until'): Promise<string | undefined> {
    const key = `${tenant.id}|${bound}|${ms}`;
    const kept = this.seqBounds.get(key);
    if (kept !== undefined) return kept;
    const through = bound === 'until' ? await this.consistentThrough(tenant.name) : undefined;
    const { sql, params } = storedSeqSql(tenant.id, ms, bound, POSTGRES);
    const seq = (await this.query<{ seq: string }>(sql, params, `${bound}_seq`)).rows[0]?.seq;
    if (seq !== undefined && (bound === 'since' || ms < through!.getTime())) {
      if (this.seqBounds.size >= SEQ_BOUNDS_MAX) this.seqBounds.clear();
      this.seqBounds.set(key, seq);
    }
    return seq;
  }

  // ----- data lifecycle ----------------------------------------------------------------------
  /** The seq range of a stored-time window: within a tenant stored order and seq order agree. */
  protected async seqWindow(tenant: { id: number; name: string }, opts: { sinceMs?: number; untilMs?: number }): Promise<{ from: string; to: string } | undefined> {
    let from = '0';
    let to = '9223372036854775807';
    if (opts.sinceMs !== undefined) {
      const seq = await this.storedSeq(tenant, opts.sinceMs, 'since');
      if (seq === undefined) return undefined;
      from = seq;
    }
    if (opts.untilMs !== undefined) {
      const seq = await this.storedSeq(tenant, opts.untilMs, 'until');
      if (seq === undefined) return undefined;
      to = seq;
    }
    return { from, to };
  }

  async scanStatements(tenant: string, opts: { after?: string; limit: number; sinceMs?: number; untilMs?: number }): Promise<QueryPage> {
    const tid = await this.tenantId(tenant);
    if (tid === undefined) return { rows: [] };
    const w = await this.seqWindow({ id: tid, name: tenant }, opts);
    if (!w) return { rows: [] };
    const from = opts.after === undefined ? BigInt(w.from) : [BigInt(w.from), BigInt(opts.after) + 1n].reduce((x, y) => (x > y ? x : y));
    const r = await this.query<StatementRow>(
      `SELECT ${STMT_COLS} FROM statements WHERE tenant = $1 AND seq >= $2 AND seq <= $3 ORDER BY tenant, seq LIMIT $4`,
      [tid, String(from), w.to, opts.limit + 1],
      'scan_statements',
    );
    const rows = r.rows.map(toRow);
    if (rows.length <= opts.limit) return { rows };
    rows.length = opts.limit;
    return { rows, next: rows[rows.length - 1].position };
  }

  async countStatements(tenant: string, opts: { sinceMs?: number; untilMs?: number }): Promise<number> {
    const tid = await this.tenantId(tenant);
    const w = tid === undefined ? undefined : await this.seqWindow({ id: tid, name: tenant }, opts);
    if (!w) return 0;
    const r = await this.query<{ n: string }>('SELECT count(*) AS n FROM statements WHERE tenant = $1 AND seq >= $2 AND seq <= $3', [tid, w.from, w.to]);
    return Number(r.rows[0].n);
  }

  async referringStatements(tenant: string, ids: string[]): Promise<string[]> {
    const tid = await this.tenantId(tenant);
    if (!ids.length || tid === undefined) return [];
    const r = await this.query<{ id: string }>('SELECT id FROM statements WHERE tenant = $1 AND ref_id = ANY($2::uuid[])', [tid, ids], 'referring_statements');
    return r.rows.map((row) => row.id);
  }
}
