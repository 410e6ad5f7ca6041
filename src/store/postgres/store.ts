/**
 * The PostgreSQL backend on `pg`: a connection pool per process, versioned migrations under an
 * advisory lock (many processes may start at once), one transaction per write request (statement
 * requests of one tenant arriving together share one, each still all-or-nothing).
 *
 * Ordering across processes: every statement insert takes its tenant's transaction-level advisory
 * lock before it assigns `seq` and checks `stored` against the tenant's last, so within a tenant
 * seq order is commit order and `stored` never goes backwards. Keyset paging on seq therefore
 * never skips a row committed later by another process, and consistent-through can be "now"
 * except while an insert is in flight (from its first read: a shared intent lock shows it).
 *
 * Lean storage (migration 7): tenants and keys (verbs, activity IRIs, agent keys) are integer
 * ids of the `tenants` and `keys` dictionaries. Tenant ids are cached (never deleted nor
 * reused); key ids are resolved per statement group before its transaction and per query before
 * the page query, never cached (erasure deletes keys: `keys_epoch`).
 *
 * Connection failures become LrsError 'unavailable' (503); the pool reconnects by itself when
 * PostgreSQL returns.
 */
import type { Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { type Clock, systemClock } from '../../clock.ts';
import { LrsError } from '../../errors.ts';
import { redactUrl } from '../../redact.ts';
import type { Logger } from '../../log.ts';
import { type StatementFilter, type StatementQuery, unknownCursor } from '../../xapi/query.ts';
import { type EarlierVoiding, type InsertPlan, type KnownStatement, planInsert } from '../../xapi/insert.ts';
import { AGENT_ROLES, indexRows, type PreparedStatement } from '../../xapi/statement.ts';
import type { ActivityDefinition, Statement } from '../../xapi/types.ts';
import { type ReachSeed, ReachWalk } from '../reach.ts';
import {
  agentSeqsSql,
  DEFINITIONS_PER_QUERY,
  type Driver,
  DRIVER_COUNT_CAP,
  DriverChoices,
  driverCountsSql,
  drivers,
  inlineBytes,
  pageRowsKept,
  POSTGRES,
  rarestDriver,
  type SeqWindow,
  sizedJson,
  statementPageSql,
  storedSeqSql,
} from '../sql.ts';
import type {
  AttachmentBlob,
  DocumentKey,
  DocumentPrecondition,
  DocumentWriteOptions,
  InsertOutcome,
  KeyedDocument,
  QueryPage,
  PoolStats,
  StatementRewrite,
  Store,
  StoredDocument,
  StoredRow,
} from '../types.ts';
import { describe, isDiskFull, isRetryable, isUnavailable, toLrsError } from './errors.ts';
import { MIGRATIONS } from './migrations.ts';
import * as docs from '../documents.ts';
import { type Program, runAsync } from '../program.ts';
import { LOCK_INTENT, LOCK_MIGRATE, LOCK_STATEMENTS, lockKey, POSTGRES_DOCUMENTS } from './documents.ts';
import { PostgresOutbox } from './outbox.ts';
import { changedDefinitions, type DefinitionsInFlight, INSERT_READ, INSERT_WRITE, NOW_MS, RESOLVE_KEYS, RESOLVE_KEYS_OWN, type ResolvedKeys, statementKeys, writeValues } from './write.ts';

export interface PostgresOptions {
  url: string;
  poolSize: number;
  /** Server-side statement_timeout in ms (lock waits included); 0: none. */
  statementTimeoutMs: number;
  /** Wait for a connection (new, or free in the pool) in ms. */
  connectTimeoutMs: number;
  /** Start-up only: attempts after the first while the server cannot be reached. */
  connectRetries: number;
  /** Start-up only: first wait between attempts in ms; doubles, capped at 30 s. */
  connectBackoffMs: number;
  logger?: Logger;
  /** Urls of the active forwarding targets: each new statement is queued for each. */
  forwardTargets?: string[];
  /**
   * This process's clock (default: the system clock): only for its own bookkeeping (log
   * intervals, kept driver choices). `stored`, document times and forwarding leases are the
   * database's clock, which every process sharing the database agrees on.
   */
  clock?: Clock;
}

/** Statements inserted before the first ANALYZE of a process (see noteInserted). */
const ANALYZE_MIN_ROWS = 1000;
/** Dictionary ids a process caches per tenant at most (then the cache starts again): bounded memory with many agents. */
const KEY_CACHE_MAX = 200_000;
/**
 * The settings of every connection. Plan every execution for its parameters: one tenant may hold
 * most rows and another a few, and a generic plan picked for "any tenant" can walk the whole table
 * for a small one. No JIT: every query is a short index walk, but the cost estimates of recursive
 * queries pass jit_above_cost, and compiling took 70-170 ms of a 2 ms query. No bitmap scans:
 * they cannot return rows in index order, and with no statistics on `tenant` (migration 2) a
 * tenant's since/until window of 6,000 statements was estimated at 30 rows, read whole and
 * sorted for a page of 100 (4.7 ms at 100k, against 0.2 ms walking the index to the page).
 */
export const SESSION_OPTIONS = '-c plan_cache_mode=force_custom_plan -c jit=off -c enable_bitmapscan=off';

/**
 * Now, and per tenant (its lock key) the start of the oldest transaction holding its intent or
 * statement lock: the inserts in flight. Without parameters, so a prepared statement keeps its
 * plan (with plan_cache_mode=force_custom_plan PostgreSQL planned it at every call: 0.4 ms of
 * its 0.6). The status of each lock holder only (pg_stat_get_activity(pid), the function behind
 * pg_stat_activity): the view builds every backend's row, 0.29 against 0.09 ms with no insert in
 * flight. xact_start shows only for the role's own sessions: the LRS processes share one role.
 */
const CONSISTENT_THROUGH =
  'SELECT n.now_ms, b.objid, b.busy_ms FROM (SELECT floor(extract(epoch FROM now()) * 1000)::bigint AS now_ms) n LEFT JOIN (' +
  'SELECT l.objid, floor(extract(epoch FROM min(a.xact_start)) * 1000)::bigint AS busy_ms FROM pg_locks l CROSS JOIN LATERAL pg_stat_get_activity(l.pid) a ' +
  `WHERE l.locktype = 'advisory' AND l.granted AND l.classid IN (${LOCK_STATEMENTS}, ${LOCK_INTENT}) AND l.objsubid = 2 ` +
  'AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) GROUP BY l.objid) b ON true';

/** since/until answers kept (see storedSeq); all are forgotten when it is reached. */
const SEQ_BOUNDS_MAX = 10_000;

/** A tenant's statement lock key, asked by every statement request (Consistent-Through) and write. */
const tenantKeys = new Map<string, number>();
const tenantLockKey = (tenant: string): number => {
  let key = tenantKeys.get(tenant);
  if (key === undefined) {
    if (tenantKeys.size >= 10_000) tenantKeys.clear();
    tenantKeys.set(tenant, (key = lockKey(tenant)));
  }
  return key;
};

/**
 * How a statement group's transaction opens, in one round trip: its tenant's intent lock (before
 * the group's first read, whose clock must run after it is granted), and generic plans for its
 * reads and write (INSERT_READ, INSERT_WRITE, the keys), planned once per connection. The
 * session's force_custom_plan is for page reads over skewed filter values; planned afresh, a
 * group spent ≈ 0.8 ms of server time planning, 0.55 ms of it under the tenant lock.
 */
const groupBegin = (tenant: string): string =>
  `BEGIN; SET LOCAL plan_cache_mode = force_generic_plan; SELECT pg_advisory_xact_lock_shared(${LOCK_INTENT}, ${tenantLockKey(tenant)})`;

/**
 * A connection checked out of the pool whose socket has been silent for `limitMs` (longer than
 * statement_timeout, after which the server itself answers) lost its server: it is destroyed,
 * which fails its query (503) and takes it out of the pool. One inactivity timer per socket,
 * which Node re-arms on every read and write. Not pg's query_timeout (a timer per query): with
 * it, measured, every statement page's rows outlived young-generation collections (4–7 MB
 * promoted per scavenge instead of ≈ 10 KB), a third of a PostgreSQL page's CPU
 * (docs/benchmarks.md, session 10).
 */
function watchSilence(pool: pg.Pool, limitMs: number): void {
  const checkedOut = new Set<pg.PoolClient>();
  pool.on('acquire', (client) => checkedOut.add(client));
  pool.on('release', (_err, client) => checkedOut.delete(client));
  pool.on('remove', (client) => checkedOut.delete(client as pg.PoolClient));
  pool.on('connect', (client) => {
    const socket = client.connection.stream as Socket;
    socket.setTimeout(limitMs);
    socket.on('timeout', () => {
      // Idle in the pool: nothing is awaited from the server.
      if (checkedOut.has(client)) socket.destroy(Object.assign(new Error(`PostgreSQL did not answer for ${limitMs} ms`), { code: 'ETIMEDOUT' }));
    });
  });
}

/** json/jsonb come back as text (served as is, or parsed where needed); int8 stays a string. */
const RAW = (v: string): string => v;
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === 114 || oid === 3802 ? RAW : pg.types.getTypeParser(oid, format ?? 'text')) as pg.CustomTypesConfig['getTypeParser'],
};

const STMT_COLS = 'seq, stored_ms, "full"';

interface StatementRow {
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

const toRow = (r: StatementRow): StoredRow => ({ json: r.full, storedMs: Number(r.stored_ms), position: r.seq });
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
 * costs no `filter_keys` round trip (0.14 ms of planning and a round trip per GET; the verb filter
 * +30 % req/s with them kept). Safe without checking `keys_epoch`: ids are never reused and no key
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

interface InsertJob {
  batch: PreparedStatement[];
  attachments: AttachmentBlob[];
  resolve(outcome: InsertOutcome): void;
  reject(err: unknown): void;
}

interface InsertQueue {
  pending: InsertJob[];
  running: boolean;
  /** Set while the drain waits for work or for its last group. */
  wake?: () => void;
  /** What the group decided last, until it has committed or failed (see DefinitionsInFlight). */
  inFlight?: DefinitionsInFlight;
}

/** A group stops growing here (a single larger request still goes, alone). */
const GROUP_MAX_STATEMENTS = 2000;

/** Least time between two log lines about the same outage (each refused request is not a line of its own). */
const OUTAGE_LOG_INTERVAL_MS = 60_000;

export class PostgresStore implements Store {
  readonly backend = 'postgres';
  readonly outbox: PostgresOutbox;
  private readonly outboxListeners: (() => void)[] = [];
  private readonly pool: pg.Pool;
  /** Combined filters' drivers chosen (see DriverChoices). */
  private readonly driverChoices: DriverChoices;
  /** Filter values' dictionary ids, as queries resolved them (see FilterIds). */
  private readonly filterIds = new FilterIds();
  private readonly opts: PostgresOptions;
  private readonly clock: Clock;
  private readonly queues = new Map<string, InsertQueue>();
  private readonly tenants = new Map<string, number>();
  /** Statements inserted by this process since its last ANALYZE, and the count that ANALYZE saw (see noteInserted). */
  private sinceAnalyze = 0;
  private analyzedRows = 0;
  private analyzing = false;
  /** Per tenant id: dictionary ids known at `keys_epoch` = epoch (see resolveKeys). */
  private readonly keyCache = new Map<number, { epoch: string; ids: Map<string, number> }>();
  /** The consistent-through query in flight (see consistentThrough). */
  private throughQuery?: Promise<{ now: number; busy: Map<number, number> }>;
  /** since/until → seq answers that can no longer change, by tenant id, bound and time (see storedSeq). */
  private readonly seqBounds = new Map<string, string>();
  private closed = false;

  constructor(opts: PostgresOptions) {
    this.opts = opts;
    this.clock = opts.clock ?? systemClock;
    this.driverChoices = new DriverChoices(undefined, undefined, this.clock);
    this.pool = new pg.Pool({
      connectionString: opts.url,
      max: opts.poolSize,
      connectionTimeoutMillis: opts.connectTimeoutMs,
      idleTimeoutMillis: 30_000,
      ...(opts.statementTimeoutMs > 0 && {
        statement_timeout: opts.statementTimeoutMs,
      }),
      keepAlive: true,
      application_name: 'lectern',
      options: SESSION_OPTIONS,
      types,
    });
    // An idle connection that dies (server restart, fail-over) is dropped by the pool; the next
    // request opens a fresh one. Without a listener the error would crash the process.
    this.pool.on('error', (err) => opts.logger?.warn({ err: describe(err) }, 'an idle PostgreSQL connection was lost'));
    // pg also emits 'error' on a checked-out connection with no query in flight when the server
    // ends the session (a restart: 57P01); the pool and each query listen only part of the time,
    // and one unheard would crash the process (seen once per few test runs of a PostgreSQL
    // restart). The query, transaction or pool that owns the connection still gets the error.
    this.pool.on('connect', (client) => client.on('error', () => undefined));
    // A server that stops answering without closing the socket: give up a little after it would have.
    if (opts.statementTimeoutMs > 0) watchSilence(this.pool, opts.statementTimeoutMs + opts.connectTimeoutMs);
    this.outbox = new PostgresOutbox({ run: (p) => this.documents(p), tx: (p, begin) => this.tx((c) => this.documents(p, c), begin) }, opts.forwardTargets ?? []);
  }

  onOutboxWrite(listener: () => void): void {
    this.outboxListeners.push(listener);
  }

  poolStats(): PoolStats {
    return { total: this.pool.totalCount, idle: this.pool.idleCount, waiting: this.pool.waitingCount, max: this.opts.poolSize };
  }

  /**
   * Runs `fn`, turning connection failures and a full disk into 503s. Their cause is logged here,
   * at most once a minute for each kind (not once per refused request), with how many requests
   * the failure refused since it was last logged.
   */
  private async guard<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      const mapped = toLrsError(err);
      if (mapped !== err) this.outageSeen(err);
      throw mapped;
    }
  }

  /** Per kind of failure: when it was last logged, and the requests it refused since. */
  private readonly outages = new Map<'disk full' | 'unavailable', { loggedMs: number; refused: number }>();

  private outageSeen(err: unknown): void {
    const kind = isDiskFull(err) ? 'disk full' : 'unavailable';
    let o = this.outages.get(kind);
    if (!o) this.outages.set(kind, (o = { loggedMs: -Infinity, refused: 0 }));
    o.refused++;
    const now = this.clock.now();
    if (now - o.loggedMs < OUTAGE_LOG_INTERVAL_MS) return;
    const fields = { err: describe(err), refused: o.refused };
    o.loggedMs = now;
    o.refused = 0;
    if (kind === 'disk full') this.opts.logger?.error(fields, 'PostgreSQL cannot write (disk full): writes are answered 503 until it can');
    else this.opts.logger?.warn(fields, 'PostgreSQL is unavailable');
  }

  private query<R extends pg.QueryResultRow>(text: string, values: unknown[], name?: string): Promise<pg.QueryResult<R>> {
    return this.guard(() => this.pool.query<R>(name ? { name, text, values } : { text, values }));
  }

  /**
   * One transaction on one connection. Serialization failures, deadlocks and a unique violation
   * from a racing writer run the whole transaction again (it re-reads what it depends on).
   * `begin` opens it (one simple query: what follows BEGIN costs no round trip of its own).
   */
  private tx<T>(fn: (c: pg.PoolClient) => Promise<T>, begin = 'BEGIN'): Promise<T> {
    return this.guard(async () => {
      for (let attempt = 1; ; attempt++) {
        const c = await this.pool.connect();
        let broken: Error | undefined;
        // A checked-out client whose connection dies between queries emits 'error' (the pool
        // only listens while it is idle): unhandled, that would crash the process.
        const onError = (err: Error) => {
          broken = err;
        };
        c.on('error', onError);
        try {
          await c.query(begin);
          const out = await fn(c);
          await c.query('COMMIT');
          return out;
        } catch (err) {
          // A connection that failed, or that reached a server unable to take writes (a demoted
          // primary after a fail-over), is not given back to the pool: the next one is fresh.
          if (isUnavailable(err)) broken ??= err as Error;
          await c.query('ROLLBACK').catch((e: Error) => {
            broken ??= e;
          });
          if (!broken && attempt < 3 && isRetryable(err)) continue;
          throw err;
        } finally {
          c.off('error', onError);
          c.release(broken);
        }
      }
    });
  }

  // ----- lifecycle -------------------------------------------------------------------------

  /**
   * Start-up: waits for the server (retrying with backoff while it cannot be reached), creates the
   * database when it does not exist, then fails with one clear line if it never answers.
   */
  async waitForServer(): Promise<void> {
    const where = redactUrl(this.opts.url);
    let createdDb = false;
    for (let attempt = 0; ; attempt++) {
      try {
        await this.pool.query('SELECT 1');
        return;
      } catch (err) {
        const code = (err as { code?: string }).code;
        if (code === '3D000' && !createdDb) {
          createdDb = true;
          await this.createDatabase();
          attempt--;
          continue;
        }
        if (!isUnavailable(err)) throw new Error(`PostgreSQL at ${where} refused the connection: ${describe(err)}`);
        if (attempt >= this.opts.connectRetries) {
          throw new Error(`cannot reach PostgreSQL at ${where}: ${describe(err)} (gave up after ${attempt + 1} attempt${attempt ? 's' : ''})`);
        }
        const wait = Math.min(this.opts.connectBackoffMs * 2 ** attempt, 30_000);
        this.opts.logger?.warn(
          { attempt: attempt + 1, retries: this.opts.connectRetries, waitMs: wait, err: describe(err) },
          `cannot reach PostgreSQL at ${where}; retrying in ${wait} ms`,
        );
        await sleep(wait);
      }
    }
  }

  /** Creates the configured database through the `postgres` maintenance database. */
  private async createDatabase(): Promise<void> {
    const url = new URL(this.opts.url);
    const name = decodeURIComponent(url.pathname.slice(1));
    url.pathname = '/postgres';
    const c = new pg.Client({ connectionString: url.toString(), connectionTimeoutMillis: this.opts.connectTimeoutMs });
    try {
      await c.connect();
      await c.query(`CREATE DATABASE "${name.replaceAll('"', '""')}"`);
      this.opts.logger?.info({ database: name }, 'created the PostgreSQL database');
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (code === '42P04' || code === '23505') return; // another process created it first
      throw new Error(`PostgreSQL database ${JSON.stringify(name)} does not exist and cannot be created: ${describe(err)}`);
    } finally {
      await c.end().catch(() => undefined);
    }
  }

  /** Applies missing migrations; a session advisory lock makes concurrent start-ups take turns. */
  async migrate(): Promise<void> {
    const c = await this.guard(() => this.pool.connect());
    let broken: Error | undefined;
    const onError = (err: Error) => {
      broken = err;
    };
    c.on('error', onError);
    // Waiting for another process's migration, and a long one, is fine: neither the server's
    // statement_timeout nor the silence watch applies (the connection is not reused).
    (c.connection.stream as Socket).setTimeout(0);
    try {
      await c.query('SET statement_timeout = 0');
      await c.query('SELECT pg_advisory_lock($1, 0)', [LOCK_MIGRATE]);
      await c.query(
        'CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())',
      );
      const applied = new Set((await c.query<{ version: number }>('SELECT version FROM schema_migrations')).rows.map((r) => r.version));
      for (const m of MIGRATIONS) {
        if (applied.has(m.version)) continue;
        // An operator sees why start-up takes time.
        const note = m.announce ? (await c.query<{ message: string }>(m.announce)).rows[0] : undefined;
        if (note) this.opts.logger?.info({ version: m.version }, note.message);
        await c.query('BEGIN');
        try {
          await c.query(m.sql);
          await c.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [m.version, m.name]);
          await c.query('COMMIT');
        } catch (err) {
          await c.query('ROLLBACK');
          throw new Error(`PostgreSQL migration ${m.version} (${m.name}) failed: ${describe(err)}`);
        }
        this.opts.logger?.info({ version: m.version, migration: m.name }, 'applied PostgreSQL migration');
      }
      // What the planner last counted (-1: never analyzed): the base noteInserted grows from.
      this.analyzedRows = Math.max(0, Number((await c.query<{ n: number }>("SELECT reltuples AS n FROM pg_class WHERE oid = 'statements'::regclass")).rows[0].n));
    } catch (err) {
      broken = err as Error;
      throw /^PostgreSQL migration \d/.test(broken.message) ? err : new Error(`cannot migrate the PostgreSQL schema: ${describe(err)}`);
    } finally {
      // The session lock and the SET go away with the connection.
      c.off('error', onError);
      c.release(broken ?? true);
    }
  }

  async ping(): Promise<void> {
    await this.query('SELECT count(*) FROM schema_migrations', [], 'ping');
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.pool.end();
  }

  // ----- statements ------------------------------------------------------------------------

  /**
   * Requests for one tenant are queued and written as groups: while one transaction holds the
   * tenant lock (until its commit is flushed), the requests that arrive meanwhile gather and then
   * go in one transaction: one lock wait and one WAL flush for all of them, each request still
   * all-or-nothing. The first request of an idle tenant goes at once.
   */
  async insertStatements(tenant: string, batch: PreparedStatement[], attachments: AttachmentBlob[]): Promise<InsertOutcome> {
    if (batch.length === 0 && attachments.length === 0) return { ids: [], inserted: 0 };
    return new Promise<InsertOutcome>((resolve, reject) => {
      let q = this.queues.get(tenant);
      if (!q) this.queues.set(tenant, (q = { pending: [], running: false }));
      q.pending.push({ batch, attachments, resolve, reject });
      if (!q.running) void this.drain(tenant, q);
      else q.wake?.();
    });
  }

  /**
   * Two groups of a tenant are in flight at once: while one holds the tenant lock (its write and
   * commit), the next reads, decides and builds its parameters on another connection, then waits
   * for the lock. A third gathers meanwhile.
   */
  private async drain(tenant: string, q: InsertQueue): Promise<void> {
    q.running = true;
    let previous: Promise<void> = Promise.resolve();
    for (;;) {
      if (!q.pending.length) {
        // Requests that arrive while the last group writes form the next group at once.
        await Promise.race([previous, new Promise<void>((resolve) => (q.wake = resolve))]);
        q.wake = undefined;
        if (!q.pending.length) break;
      }
      const group: InsertJob[] = [];
      let size = 0;
      while (q.pending.length && (group.length === 0 || size + q.pending[0].batch.length <= GROUP_MAX_STATEMENTS)) {
        const job = q.pending.shift()!;
        size += job.batch.length;
        group.push(job);
      }
      let markPrepared!: () => void;
      const prepared = new Promise<void>((resolve) => (markPrepared = resolve));
      const done = this.runGroup(tenant, group, previous, markPrepared, q).finally(markPrepared);
      await prepared;
      await previous;
      previous = done;
      // Let the callers just answered send their next requests before deciding the queue is empty.
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    q.running = false;
    this.queues.delete(tenant);
  }

  /** Never rejects: each job is answered. `q`: its tenant's queue, where it shows the next group what it writes. */
  private async runGroup(
    tenant: string,
    group: InsertJob[],
    previous: Promise<void> = Promise.resolve(),
    prepared: () => void = () => undefined,
    q?: InsertQueue,
  ): Promise<void> {
    let results: (InsertOutcome | LrsError)[];
    let tenantId: number | undefined;
    const flight: { defs?: DefinitionsInFlight } = {};
    try {
      // Before the group's transaction, each committed at once: the tenant, and the ids of every
      // key the group's statements refer to. A transaction creating keys would hold their rows
      // until its commit, and the next group, preparing meanwhile, would wait for it on any key
      // the two share. (A rejected request's keys are deleted again below.)
      tenantId = await this.tenantId(tenant, true);
      const t = { id: tenantId, name: tenant };
      const keys = await this.resolveKeys(undefined, t.id, statementKeys(group.flatMap((j) => j.batch)));
      results = await this.tx((c) => this.insertGroup(c, t, group, keys, prepared, q, flight), groupBegin(tenant));
    } catch (err) {
      prepared();
      await previous;
      if (tenantId !== undefined && (group.length === 1 || toLrsError(err) instanceof LrsError)) await this.dropRejectedKeys(tenant, tenantId, group);
      // An unexpected failure of a group must not fail its other requests: retry them one by one.
      if (group.length > 1 && !(toLrsError(err) instanceof LrsError)) {
        for (const job of group) await this.runGroup(tenant, [job]);
        return;
      }
      for (const job of group) job.reject(err);
      return;
    } finally {
      // Committed or failed: the next group's read sees (or must not rely on) what it wrote.
      if (q && flight.defs && q.inFlight === flight.defs) q.inFlight = undefined;
    }
    this.noteInserted(results.reduce((n, r) => n + (r instanceof LrsError ? 0 : r.inserted), 0));
    const rejected = group.filter((_, i) => results[i] instanceof LrsError);
    if (rejected.length) await this.dropRejectedKeys(tenant, tenantId, rejected);
    results.forEach((r, i) => (r instanceof LrsError ? group[i].reject(r) : group[i].resolve(r)));
    if (this.outbox.enabled && results.some((r) => !(r instanceof LrsError) && r.inserted > 0)) for (const listener of this.outboxListeners) listener();
  }

  /**
   * One transaction for a group of requests. Outside the tenant lock (while the previous group
   * writes): the tenant's shared "intent" lock, which holds Consistent-Through back to this
   * transaction's start from here on; one read of everything the decisions need (and the clock
   * for `stored`); the decisions and the write's parameters. Under the lock: one write, which
   * first checks that its basis still holds (else the group is read and decided again, now under
   * the lock), the outbox rows, COMMIT. Requests are decided in order, each seeing the
   * statements the earlier ones of the group store.
   */
  private async insertGroup(
    c: pg.PoolClient,
    tenant: { id: number; name: string },
    group: InsertJob[],
    keys: ResolvedKeys,
    prepared: () => void,
    q: InsertQueue | undefined,
    flight: { defs?: DefinitionsInFlight },
  ): Promise<(InsertOutcome | LrsError)[]> {
    const key = tenantLockKey(tenant.name);
    // The transaction holds the intent lock already (groupBegin).
    // The group before this one (if still in flight) commits before this one writes, or this one is decided again.
    let decided = await this.decideGroup(c, tenant, group, q?.inFlight);
    if (q) q.inFlight = flight.defs = decided.changed;
    prepared();
    await c.query({ name: 'lock_statements', text: 'SELECT pg_advisory_xact_lock($1, $2)', values: [LOCK_STATEMENTS, key] });
    let written = await c.query<{ ok: boolean; seqs: string[]; referrers: string[] }>({ name: 'insert_write', text: INSERT_WRITE, values: decided.values(keys) });
    if (!written.rows[0].ok) {
      // Its snapshot predates the lock (this read's snapshot does not): decided again, and the
      // keys resolved again (an erasure may have deleted some), the check passes.
      decided = await this.decideGroup(c, tenant, group);
      if (q && q.inFlight === flight.defs) q.inFlight = flight.defs = decided.changed;
      this.keyCache.delete(tenant.id);
      keys = await this.resolveKeys(c, tenant.id, statementKeys(group.flatMap((j) => j.batch)));
      written = await c.query({ name: 'insert_write', text: INSERT_WRITE, values: decided.values(keys) });
      if (!written.rows[0].ok) throw new Error('a statement group decided under the tenant lock failed its check');
    }
    const { seqs, referrers } = written.rows[0];
    const seeds = decided.fresh().flatMap((p, i): ReachSeed[] => {
      if (p.refId === null) return [];
      return [{ seq: Number(seqs[i]), refId: p.refId, authority: p.authorityKey === null ? null : (keys.ids.get(p.authorityKey) ?? null) }];
    });
    if (seeds.length || referrers.length) {
      // The reach walk's queries (rare: StatementRefs) keep the session's custom plans.
      await c.query('SET LOCAL plan_cache_mode = force_custom_plan');
      await this.updateReach(c, tenant.id, seeds, referrers.map(Number), keys.ids);
    }
    // Forwarding: the new statements (in plan order they took these seqs) are queued in this transaction.
    await this.outbox.enqueue(c, seqs);
    return decided.results;
  }

  /**
   * Planner statistics that keep up with a fast-growing store. Autovacuum analyzes a table about
   * once a minute at best; a store loaded faster than that is planned from statistics of a much
   * smaller one (100,000 statements loaded in 30 s: the plain page query was estimated at 28 rows
   * and took 112 ms instead of 0.8 ms, docs/benchmarks.md). So once this process has inserted
   * half as many statements as the last ANALYZE saw (at least 1,000), it analyzes the statement
   * tables in the background: ≈ 17 times from empty to 1M, each a sample of 30,000 rows, which
   * blocks no write.
   */
  private noteInserted(n: number): void {
    this.sinceAnalyze += n;
    if (this.analyzing || this.closed || this.sinceAnalyze < Math.max(ANALYZE_MIN_ROWS, this.analyzedRows / 2)) return;
    this.analyzing = true;
    this.analyzedRows += this.sinceAnalyze;
    this.sinceAnalyze = 0;
    this.query('ANALYZE statements, statement_agents, statement_activities, keys', [], undefined)
      .catch((err: unknown) => this.opts.logger?.warn({ err: describe(err) }, 'ANALYZE of the statement tables failed'))
      .finally(() => (this.analyzing = false));
  }

  /**
   * Rejected requests keep none of the keys they brought (an agent key may name a person): those
   * no stored statement uses are deleted, under the tenant lock like an erasure (writers that
   * resolved one meanwhile see `keys_epoch` move and resolve again). Before the rejection is
   * answered; a failure here is logged, not the request's.
   */
  private async dropRejectedKeys(tenant: string, tenantId: number, jobs: InsertJob[]): Promise<void> {
    const keys = [...statementKeys(jobs.flatMap((j) => j.batch))];
    try {
      await this.tx(async (c) => {
        await this.lockTenant(c, tenant);
        await this.dropUnusedKeys(c, tenantId, keys);
      });
    } catch (err) {
      this.opts.logger?.warn({ err: describe(err), keys: keys.length }, 'the keys of a rejected request could not be deleted');
    }
  }

  /**
   * The dictionary ids of `keys` (creating missing ones), on `c` or, committed at once, on the
   * pool. On the pool, ids already known at the cached `keys_epoch` cost no round trip: the write
   * checks that epoch under the tenant lock, so an erasure since (which bumps it) sends the group
   * back to resolve its keys again inside its transaction, as without the cache.
   */
  private async resolveKeys(c: pg.PoolClient | undefined, tenantId: number, keys: Set<string>): Promise<ResolvedKeys> {
    if (c) return this.queryKeys(c, tenantId, keys);
    const cached = this.keyCache.get(tenantId);
    if (cached) {
      const ids = new Map<string, number>();
      const missing = new Set<string>();
      for (const k of keys) {
        const id = cached.ids.get(k);
        if (id === undefined) missing.add(k);
        else ids.set(k, id);
      }
      if (!missing.size) return { ids, epoch: cached.epoch };
      const found = await this.queryKeys(undefined, tenantId, missing);
      if (found.epoch === cached.epoch) {
        for (const [k, id] of found.ids) {
          ids.set(k, id);
          cached.ids.set(k, id);
        }
        if (cached.ids.size > KEY_CACHE_MAX) this.keyCache.delete(tenantId);
        return { ids, epoch: cached.epoch };
      }
    }
    // Nothing cached, or an erasure since: every id again, at one epoch.
    const all = await this.queryKeys(undefined, tenantId, keys);
    this.keyCache.set(tenantId, { epoch: all.epoch, ids: new Map(all.ids) });
    return all;
  }

  private async queryKeys(c: pg.PoolClient | undefined, tenantId: number, keys: Set<string>): Promise<ResolvedKeys> {
    const ids = new Map<string, number>();
    for (let attempt = 1; ; attempt++) {
      const missing = [...keys].filter((k) => !ids.has(k)).sort();
      const r = c
        ? await c.query<{ epoch: string; ids: string | null }>({ name: 'resolve_keys', text: RESOLVE_KEYS, values: [tenantId, missing] })
        : await this.query<{ epoch: string; ids: string | null }>(RESOLVE_KEYS_OWN, [tenantId, missing], 'resolve_keys_own');
      for (const [id, key] of JSON.parse(r.rows[0].ids ?? '[]') as [number, string][]) ids.set(key, id);
      if (ids.size === keys.size) return { ids, epoch: r.rows[0].epoch };
      if (attempt >= 3) throw new Error('dictionary keys could not be resolved');
    }
  }

  /** A tenant's id (cached: tenants are never deleted, ids never reused); undefined if unknown and not `create`. */
  private async tenantId(name: string, create: true): Promise<number>;
  private async tenantId(name: string, create?: boolean): Promise<number | undefined>;
  private async tenantId(name: string, create = false): Promise<number | undefined> {
    const cached = this.tenants.get(name);
    if (cached !== undefined) return cached;
    for (let attempt = 0; attempt < 3; attempt++) {
      const found = await this.query<{ id: number }>('SELECT id FROM tenants WHERE name = $1', [name], 'tenant_id');
      let id = found.rows[0]?.id;
      if (id === undefined && create) {
        id = (await this.query<{ id: number }>('INSERT INTO tenants (name) VALUES ($1) ON CONFLICT DO NOTHING RETURNING id', [name], 'tenant_create')).rows[0]?.id;
      }
      if (id !== undefined) this.tenants.set(name, id);
      if (id !== undefined || !create) return id;
      // Another process created it since the SELECT: read it again.
    }
    throw new Error('the tenant could not be created');
  }

  /** Reads what a group's decisions need, decides each request in order, and builds the write. */
  private async decideGroup(
    c: pg.PoolClient,
    tenant: { id: number; name: string },
    group: InsertJob[],
    inFlight?: DefinitionsInFlight,
  ): Promise<{ results: (InsertOutcome | LrsError)[]; values: (keys: ResolvedKeys) => unknown[]; fresh: () => PreparedStatement[]; changed: DefinitionsInFlight }> {
    const all = group.flatMap((j) => j.batch);
    const ids = [...new Set(all.map((p) => p.id))];
    const voidTargets = all.flatMap((p) => (p.voids ? [p.voids] : []));
    const checkIds = [...new Set([...ids, ...voidTargets])];
    const defIds = [...new Set(all.flatMap((p) => p.definitions.map((d) => d.id)))];
    const read = await c.query<{ stored_ms: string; snap_seq: string; voided_earlier: string | null; known: string | null; definitions: string | null }>({
      name: 'insert_read',
      text: INSERT_READ,
      values: [tenant.id, ids, checkIds, defIds, tenant.name],
    });
    const head = read.rows[0];
    const storedMs = Number(head.stored_ms);
    const storedIso = new Date(storedMs).toISOString();
    const relied: [string, string][] = [];
    const known = new Map(
      (JSON.parse(head.known ?? '[]') as [string, number, Statement, string, string][]).map(([id, isVoiding, full, seq, xmin]): [string, KnownStatement] => {
        relied.push([seq, xmin]);
        return [id, { isVoiding: isVoiding !== 0, statement: full }];
      }),
    );
    const voidedEarlier = new Map<string, EarlierVoiding[]>();
    const voidedBy = (target: string, v: EarlierVoiding) => voidedEarlier.set(target, [...(voidedEarlier.get(target) ?? []), v]);
    for (const [target, seq, xmin, isVoiding, authorityKey] of JSON.parse(head.voided_earlier ?? '[]') as [string, string, string, number, string | null][]) {
      relied.push([seq, xmin]);
      voidedBy(target, { authorityKey, mineOnly: isVoiding === 2 });
    }
    // What the group in flight writes replaces what this snapshot holds, and is checked by its text.
    const keptDefs: [string, string][] = [];
    const flightDefs: [string, string][] = [];
    const kept = new Map<string, ActivityDefinition>();
    for (const [id, d, xmin] of JSON.parse(head.definitions ?? '[]') as [string, ActivityDefinition, string][]) {
      if (inFlight?.has(id)) continue;
      keptDefs.push([id, xmin]);
      kept.set(id, d);
    }
    for (const id of defIds) {
      const f = inFlight?.get(id);
      if (!f) continue;
      flightDefs.push([id, f.text]);
      kept.set(id, f.definition);
    }
    const plans: InsertPlan[] = [];
    const results = group.map((job): InsertOutcome | LrsError => {
      let plan: InsertPlan;
      try {
        plan = planInsert(job.batch, job.attachments, known, voidedEarlier, storedIso);
      } catch (err) {
        if (err instanceof LrsError) return err;
        throw err;
      }
      // Accepted: later requests of the group see these as stored, and their voiding statements as stored earlier.
      for (const f of plan.fresh) {
        known.set(f.p.id, { isVoiding: f.p.voids !== null, statement: f.full });
        if (f.p.voids) voidedBy(f.p.voids, { authorityKey: f.p.authorityKey, mineOnly: f.p.mineOnly });
      }
      plans.push(plan);
      return plan.outcome;
    });
    const basis = { snapSeq: head.snap_seq, checkIds, relied, defIds, keptDefs, flightDefs };
    const changed = changedDefinitions(plans, kept);
    return { results, values: (keys) => writeValues(tenant, plans, storedMs, changed, basis, keys), fresh: () => plans.flatMap((plan) => plan.fresh.map((f) => f.p)), changed };
  }

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

  /**
   * The seq of the statement a `more` cursor names, by the (tenant, id) index: one of the tenant's,
   * of the filter's authority under `mine`; a 400 otherwise (unknownCursor).
   */
  private async cursorSeq(tid: number, query: StatementQuery, id: string): Promise<bigint> {
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
  private async keptPage(tenant: string, tid: number, raw: PageRow[], query: StatementQuery, attempt: number): Promise<QueryPage> {
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
  private async keptRows<R extends SizedRow>(tid: number, raw: R[], q: Pick<StatementQuery, 'limit' | 'maxBytes' | 'attachments'>, data: (r: R) => number): Promise<number> {
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
  private async attachmentRows<R extends { sha2: string }>(tenant: string, sha2s: string[], cols: string, name: string, carrier?: string): Promise<Map<string, R>> {
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
  private async fullsBySeq(tid: number, seqs: string[]): Promise<Map<string, string>> {
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
   * pg_locks and pg_stat_activity on the server (0.38 ms each, the largest server time under
   * single writes). Only a query in flight is shared, not a settled answer reused for a while: an
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
  private async queryConsistentThrough(): Promise<{ now: number; busy: Map<number, number> }> {
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

  // ----- documents (../documents.ts, ./documents.ts) ------------------------------------------

  /** A program (../program.ts: documents, the outbox) on a pooled connection, or on a transaction's client. */
  private documents<T>(program: Program<T>, c?: pg.PoolClient): Promise<T> {
    return runAsync(program, async (step) => {
      const r = c ? await c.query(step.name ? { name: step.name, text: step.text, values: step.values } : { text: step.text, values: step.values }) : await this.query(step.text, step.values, step.name);
      return step.want === 'rows' ? r.rows : step.want === 'row' ? r.rows[0] : (r.rowCount ?? 0);
    });
  }

  getDocument(tenant: string, key: DocumentKey): Promise<StoredDocument | undefined> {
    return this.documents(docs.getDocument(POSTGRES_DOCUMENTS, tenant, key));
  }

  putDocument(tenant: string, key: DocumentKey, doc: { content: Buffer; contentType: string }, opts: DocumentWriteOptions): Promise<StoredDocument> {
    return this.tx((c) => this.documents(docs.putDocument(POSTGRES_DOCUMENTS, tenant, key, doc, opts), c));
  }

  deleteDocument(tenant: string, key: DocumentKey, pre: DocumentPrecondition): Promise<void> {
    return this.tx((c) => this.documents(docs.deleteDocument(POSTGRES_DOCUMENTS, tenant, key, pre), c));
  }

  listDocumentIds(tenant: string, key: Omit<DocumentKey, 'docId'>, sinceMs?: number): Promise<string[]> {
    return this.documents(docs.listDocumentIds(POSTGRES_DOCUMENTS, tenant, key, sinceMs));
  }

  deleteDocuments(tenant: string, key: Omit<DocumentKey, 'docId'>): Promise<void> {
    return this.documents(docs.deleteDocuments(POSTGRES_DOCUMENTS, tenant, key));
  }

  /**
   * since/until as a seq (storedSeqSql); undefined when no statement is on that side. An answer
   * that can no longer change is kept (a client paging through a window, or polling from the same
   * `since`, asks the same again; the bisection costs the server ≈ 1.4 ms, most of it planning):
   * `since` once found, as later statements take later seqs; `until` once every statement stored
   * at or before it is visible (it is older than consistent-through: later ones are stored after
   * that). Erasure deletes statements, which a kept bound still bounds correctly.
   */
  private async storedSeq(tenant: { id: number; name: string }, ms: number, bound: 'since' | 'until'): Promise<string | undefined> {
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
  private async seqWindow(tenant: { id: number; name: string }, opts: { sinceMs?: number; untilMs?: number }): Promise<{ from: string; to: string } | undefined> {
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

  /**
   * Writes the reach rows (src/store/reach.ts) of new StatementRefs (`seeds`), and rebuilds those
   * of the statements in `stored` and of every statement reaching one of them: a statement they
   * target has arrived, or a statement of their chains was erased or rewritten. `known`: key ids
   * at hand (the group's), so only the others are read.
   */
  private async updateReach(c: pg.PoolClient, tenantId: number, seeds: ReachSeed[], stored: number[], known?: ReadonlyMap<string, number>): Promise<void> {
    const all = new Map(seeds.map((s) => [s.seq, s]));
    if (stored.length) {
      const r = await c.query<{ seq: string; ref_id: string; authority: number | null }>({
        name: 'reach_rebuild',
        text: `WITH q AS (SELECT unnest($2::bigint[]) AS seq UNION SELECT seq FROM statement_reach WHERE tenant = $1 AND via = ANY($2::bigint[])),
d1 AS (DELETE FROM statement_reach WHERE tenant = $1 AND seq IN (SELECT seq FROM q)),
d2 AS (DELETE FROM reach_agents WHERE tenant = $1 AND seq IN (SELECT seq FROM q)),
d3 AS (DELETE FROM reach_activities WHERE tenant = $1 AND seq IN (SELECT seq FROM q))
SELECT seq, ref_id, authority FROM statements WHERE tenant = $1 AND seq IN (SELECT seq FROM q) AND ref_id IS NOT NULL`,
        values: [tenantId, stored],
      });
      for (const row of r.rows) all.set(Number(row.seq), { seq: Number(row.seq), refId: row.ref_id, authority: row.authority });
    }
    if (!all.size) return;
    const walk = new ReachWalk(all.values());
    for (let ids = walk.wanted(); ids.length; ids = walk.wanted()) {
      const r = await c.query<{ seq: string; id: string; ref_id: string | null; verb: number; registration: string | null; authority: number | null; full: string }>({
        name: 'reach_targets',
        text: 'SELECT seq, id, ref_id, verb, registration, authority, "full" FROM statements WHERE tenant = $1 AND id = ANY($2::uuid[])',
        values: [tenantId, ids],
      });
      walk.found(r.rows.map((row) => ({ seq: Number(row.seq), id: row.id, refId: row.ref_id, verb: row.verb, registration: row.registration, authority: row.authority, full: row.full })));
    }
    const ids = new Map(known);
    const missing = new Set(walk.keys().filter((k) => !ids.has(k)));
    if (missing.size) for (const [k, id] of (await this.queryKeys(c, tenantId, missing)).ids) ids.set(k, id);
    const rows = walk.rows(ids);
    await c.query({
      name: 'reach_insert',
      text: `WITH
r AS (INSERT INTO statement_reach (tenant, seq, via, verb, registration, authority)
  SELECT $1, s, v, b, g, a FROM unnest($2::bigint[], $3::bigint[], $4::int[], $5::uuid[], $6::int[]) AS t(s, v, b, g, a)),
ag AS (INSERT INTO reach_agents (tenant, agent, seq, via, role) SELECT $1, k, s, v, d FROM unnest($7::int[], $8::bigint[], $9::bigint[], $10::smallint[]) AS t(k, s, v, d))
INSERT INTO reach_activities (tenant, activity, seq, via, direct) SELECT $1, k, s, v, d FROM unnest($11::int[], $12::bigint[], $13::bigint[], $14::smallint[]) AS t(k, s, v, d)`,
      values: [
        tenantId,
        rows.reach.map((r) => r.seq),
        rows.reach.map((r) => r.via),
        rows.reach.map((r) => r.verb),
        rows.reach.map((r) => r.registration),
        rows.reach.map((r) => r.authority),
        rows.agents.map((a) => a.agent),
        rows.agents.map((a) => a.seq),
        rows.agents.map((a) => a.via),
        rows.agents.map((a) => a.role),
        rows.activities.map((a) => a.activity),
        rows.activities.map((a) => a.seq),
        rows.activities.map((a) => a.via),
        rows.activities.map((a) => a.direct),
      ],
    });
  }

  /** Erasure and pseudonymisation take the tenant's statement lock: no insert decides on rows they change. */
  private lockTenant(c: pg.PoolClient, tenant: string): Promise<unknown> {
    return c.query({ name: 'lock_statements', text: 'SELECT pg_advisory_xact_lock($1, $2)', values: [LOCK_STATEMENTS, tenantLockKey(tenant)] });
  }

  /**
   * Deletes the link rows (agents; activities too unless `agentsOnly`) of removed statement
   * versions by primary key, computed from their stored JSON (indexRows: as they were written; the
   * link tables have no index on seq). Returns the agent keys unlinked.
   */
  private async unlink(c: pg.PoolClient, tenantId: number, removed: { seq: string; statement: Statement }[], agentsOnly = false): Promise<string[]> {
    const agents: [string[], string[]] = [[], []];
    const activities: [string[], string[]] = [[], []];
    for (const { seq, statement } of removed) {
      const rows = indexRows(statement);
      for (const a of rows.agents) agents[0].push(a.key), agents[1].push(seq);
      if (!agentsOnly) for (const a of rows.activities) activities[0].push(a.id), activities[1].push(seq);
    }
    await c.query({
      name: 'unlink_statements',
      text: `WITH
ag AS (DELETE FROM statement_agents x USING unnest($2::text[], $3::bigint[]) AS t(key, seq) JOIN keys k ON k.tenant = $1 AND k.key = t.key
  WHERE x.agent = k.id AND x.role IN (${AGENT_ROLES.join(', ')}) AND x.seq = t.seq),
ac AS (DELETE FROM statement_activities x USING unnest($4::text[], $5::bigint[]) AS t(key, seq) JOIN keys k ON k.tenant = $1 AND k.key = t.key
  WHERE x.activity = k.id AND x.direct IN (0, 1) AND x.seq = t.seq)
SELECT 1`,
      values: [tenantId, ...agents, ...activities],
    });
    return [...new Set(agents[0])];
  }

  /**
   * Deletes the dictionary keys (of agents whose rows were unlinked) that nothing of the tenant
   * refers to any more: after an erasure no personal data stays in `keys`. Every use is checked
   * (an agent key could equal an IRI). A statement of its own, after the deletions (a CTE's
   * deletions are not visible to its own reads).
   */
  private async dropUnusedKeys(c: pg.PoolClient, tenantId: number, keys: string[]): Promise<void> {
    const dropped = await c.query({
      name: 'delete_orphan_keys',
      text:
        'DELETE FROM keys k WHERE k.tenant = $1 AND k.key = ANY($2::text[]) ' +
        'AND NOT EXISTS (SELECT 1 FROM statement_agents x WHERE x.agent = k.id) ' +
        'AND NOT EXISTS (SELECT 1 FROM statements s WHERE s.tenant = $1 AND s.authority = k.id) ' +
        'AND NOT EXISTS (SELECT 1 FROM statements s WHERE s.tenant = $1 AND s.verb = k.id) ' +
        'AND NOT EXISTS (SELECT 1 FROM statement_activities x WHERE x.activity = k.id)',
      values: [tenantId, keys],
    });
    // Writers resolve ids before their transaction: this tells them to resolve again.
    if (dropped.rowCount) {
      await c.query({ name: 'bump_keys_epoch', text: 'UPDATE keys_epoch SET n = n + 1', values: [] });
      this.keyCache.delete(tenantId);
    }
  }

  async deleteStatements(tenant: string, ids: string[]): Promise<{ statements: number; attachments: number }> {
    const tid = await this.tenantId(tenant);
    if (!ids.length || tid === undefined) return { statements: 0, attachments: 0 };
    return this.tx(async (c) => {
      await this.lockTenant(c, tenant);
      const r = await c.query<{ rows: string | null; hashes: string[] }>({
        name: 'delete_statements',
        text: `WITH
s AS (DELETE FROM statements WHERE tenant = $1 AND id = ANY($2::uuid[]) RETURNING seq, "full"),
ob AS (DELETE FROM forward_outbox WHERE seq IN (SELECT seq FROM s)),
sa AS (DELETE FROM statement_attachments WHERE seq IN (SELECT seq FROM s) RETURNING sha2)
SELECT (SELECT json_agg(json_build_array(seq::text, "full")) FROM s) AS rows, ARRAY(SELECT DISTINCT sha2 FROM sa) AS hashes`,
        values: [tid, ids],
      });
      const head = r.rows[0];
      const removed = (JSON.parse(head.rows ?? '[]') as [string, Statement][]).map(([seq, statement]) => ({ seq, statement }));
      const unlinked = await this.unlink(c, tid, removed);
      // Their own reach rows go, and the chains through them end there now.
      await this.updateReach(c, tid, [], removed.map((r) => Number(r.seq)));
      await this.dropUnusedKeys(c, tid, unlinked);
      // The CTE's deletions are not visible to its own reads: the orphan check runs after it.
      const orphans = await c.query({
        name: 'delete_orphan_attachments',
        text:
          'DELETE FROM attachments a WHERE a.tenant = $1 AND a.sha2 = ANY($2::text[]) AND NOT EXISTS ' +
          '(SELECT 1 FROM statement_attachments sa JOIN statements s ON s.seq = sa.seq WHERE sa.sha2 = a.sha2 AND sa.carrier IS NOT NULL AND s.tenant = $3)',
        values: [tenant, head.hashes, tid],
      });
      return { statements: removed.length, attachments: orphans.rowCount ?? 0 };
    });
  }

  async rewriteStatements(tenant: string, rows: StatementRewrite[]): Promise<void> {
    const tid = await this.tenantId(tenant);
    if (!rows.length || tid === undefined) return;
    await this.tx(async (c) => {
      await this.lockTenant(c, tenant);
      const old = await c.query<{ id: string; seq: string; full: string }>({
        name: 'rewrite_old',
        text: 'SELECT id::text AS id, seq, "full" FROM statements WHERE tenant = $1 AND id = ANY($2::uuid[])',
        values: [tid, rows.map((r) => r.id)],
      });
      const seqOf = new Map(old.rows.map((r) => [r.id, r.seq]));
      const found = rows.filter((r) => seqOf.has(r.id));
      // The new keys get their ids first (under the locks: no writer races for them).
      const { ids: keyIds } = await this.resolveKeys(c, tid, new Set(found.flatMap((r) => [...r.agents.map((a) => a.key), ...(r.authorityKey === null ? [] : [r.authorityKey])])));
      const agents = found.flatMap((r) => r.agents.map((a) => [keyIds.get(a.key)!, seqOf.get(r.id)!, a.role] as const));
      const unlinked = await this.unlink(
        c,
        tid,
        old.rows.map((r) => ({ seq: r.seq, statement: JSON.parse(r.full) as Statement })),
        true,
      );
      await c.query({
        name: 'rewrite_statements',
        // toast_pad = DEFAULT: the new row is compressed like an inserted one (migration 9).
        text:
          'UPDATE statements s SET "full" = t.f, full_bytes = octet_length(t.f::text), authority = t.a, toast_pad = DEFAULT ' +
          'FROM unnest($2::bigint[], $3::json[], $4::int[]) AS t(q, f, a) WHERE s.seq = t.q AND s.tenant = $1',
        values: [tid, found.map((r) => seqOf.get(r.id)), found.map((r) => r.json), found.map((r) => (r.authorityKey === null ? null : keyIds.get(r.authorityKey)))],
      });
      await c.query({
        name: 'rewrite_carriers',
        // The data a statement's request carried stays its authority's (now the new one).
        text: 'UPDATE statement_attachments l SET carrier = coalesce(s.authority, 0) FROM statements s WHERE s.seq = l.seq AND l.seq = ANY($1::bigint[]) AND l.carrier IS NOT NULL AND s.tenant = $2',
        values: [found.map((r) => seqOf.get(r.id)), tid],
      });
      await c.query({
        name: 'rewrite_agents',
        // The key ids are the tenant's own (src/store/sql.ts, LINK_ROLES).
        text: 'INSERT INTO statement_agents (agent, role, seq) SELECT k, d, s FROM unnest($1::int[], $2::bigint[], $3::smallint[]) AS t(k, s, d)',
        values: [agents.map((a) => a[0]), agents.map((a) => a[1]), agents.map((a) => a[2])],
      });
      // What reaches a rewritten statement copied its agents and authority: rebuilt.
      await this.updateReach(c, tid, [], found.map((r) => Number(seqOf.get(r.id))), keyIds);
      // The old agents' keys, once nothing uses them (the new rows are in place).
      await this.dropUnusedKeys(c, tid, unlinked);
    });
  }

  scanDocuments(tenant: string, opts: { after?: DocumentKey; limit: number }): Promise<KeyedDocument[]> {
    return this.documents(docs.scanDocuments(POSTGRES_DOCUMENTS, tenant, opts));
  }

  async moveDocuments(tenant: string, keys: DocumentKey[], agentKey: string): Promise<void> {
    if (!keys.length) return;
    await this.tx((c) => this.documents(docs.moveDocuments(POSTGRES_DOCUMENTS, tenant, keys, agentKey), c));
  }
}
