/**
 * The PostgreSQL backend's connection: a pool per process, failures turned into LrsError
 * 'unavailable' (503) and logged once per outage, transactions retried on serialization
 * failures, start-up (waiting for the server, creating the database) and versioned migrations
 * under an advisory lock (many processes may start at once). It runs the shared programs
 * (../shared.ts, which it extends); the reads (./readers.ts), the maintenance writes
 * (./maintenance.ts) and the statement writes (./store.ts) build on it.
 */
import type { Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { type Clock, systemClock } from '../../clock.ts';
import { redactUrl } from '../../redact.ts';
import type { Logger } from '../../log.ts';
import { type Program, runAsync } from '../program.ts';
import { SharedStore } from '../shared.ts';
import { type PoolStats, StoreRefusedError, StoreUnreachableError } from '../types.ts';
import { POSTGRES_DIALECT } from './dialect.ts';
import { describe, isDiskFull, isRetryable, isUnavailable, isUnknownHost, refusal, serverOf, toLrsError, waitReason } from './errors.ts';
import { LOCK_JOB, LOCK_MIGRATE } from './locks.ts';
import { MIGRATIONS } from './migrations.ts';

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
  /** Start-up only: give up once the next retry would end later than this (ms) after the first attempt (a one-shot command's short wait). */
  connectWaitMs?: number;
  /** What the URL is called in start-up errors (the setting that holds it). */
  urlName?: string;
  logger?: Logger;
  /** Streaming standbys that answer the reads of StatementStore.readView (./replicas.ts). */
  readUrls?: string[];
  /** A replica further behind than this (ms) is not read from (default 30 s). */
  replicaMaxLagMs?: number;
  /** Between two checks of the replicas (ms; default CHECK_INTERVAL_MS). */
  replicaCheckMs?: number;
  /** Urls of the active forwarding targets: each new statement is queued for each. */
  forwardTargets?: string[];
  /**
   * This process's clock (default: the system clock): only for its own bookkeeping (log
   * intervals, kept driver choices). `stored`, document times and forwarding leases are the
   * database's clock, which every process sharing the database agrees on.
   */
  clock?: Clock;
}

/**
 * The settings of every connection. Plan every execution for its parameters: one tenant may hold
 * most rows and another a few, and a generic plan picked for "any tenant" can walk the whole table
 * for a small one. No JIT: every query is a short index walk, but the cost estimates of recursive
 * queries pass jit_above_cost, and compiling costs many times the query. No bitmap scans: they
 * cannot return rows in index order, and with no statistics on the store column (migration 2) a
 * store's since/until window was underestimated, read whole and sorted for a page instead of
 * walking the index to the page (docs/decisions.md, "Reads").
 */
export const SESSION_OPTIONS = '-c plan_cache_mode=force_custom_plan -c jit=off -c enable_bitmapscan=off';

/**
 * A connection checked out of the pool whose socket has been silent for `limitMs` (longer than
 * statement_timeout, after which the server itself answers) lost its server: it is destroyed,
 * which fails its query (503) and takes it out of the pool. One inactivity timer per socket,
 * which Node re-arms on every read and write. Not pg's query_timeout (a timer per query): with
 * it, every statement page's rows outlived young-generation collections and were promoted, a
 * large share of a PostgreSQL page's CPU (docs/decisions.md, "HTTP and the server process").
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

/** Least time between two log lines about the same outage (each refused request is not a line of its own). */
const OUTAGE_LOG_INTERVAL_MS = 60_000;

export abstract class PostgresConnection extends SharedStore {
  readonly backend = 'postgres';
  protected readonly dialect = POSTGRES_DIALECT;
  protected readonly pool: pg.Pool;
  protected readonly opts: PostgresOptions;
  protected readonly clock: Clock;
  protected readonly tenants = new Map<string, number>();
  /** What the planner last counted at migrate (see PostgresStore.noteInserted). */
  protected analyzedRows = 0;
  protected closed = false;

  constructor(opts: PostgresOptions) {
    super();
    this.opts = opts;
    this.clock = opts.clock ?? systemClock;
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
  }

  poolStats(): PoolStats {
    return { total: this.pool.totalCount, idle: this.pool.idleCount, waiting: this.pool.waitingCount, max: this.opts.poolSize };
  }

  /**
   * Runs `fn`, turning connection failures and a full disk into 503s. Their cause is logged here,
   * at most once a minute for each kind (not once per refused request), with how many requests
   * the failure refused since it was last logged.
   */
  protected async guard<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      const mapped = toLrsError(err);
      if (mapped !== err) this.outageSeen(err);
      throw mapped;
    }
  }

  /** Per kind of failure: when it was last logged, and the requests it refused since. */
  protected readonly outages = new Map<'disk full' | 'unavailable', { loggedMs: number; refused: number }>();
  protected outageSeen(err: unknown): void {
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

  protected query<R extends pg.QueryResultRow>(text: string, values: unknown[], name?: string): Promise<pg.QueryResult<R>> {
    return this.guard(() => this.pool.query<R>(name ? { name, text, values } : { text, values }));
  }

  /**
   * One transaction on one connection. Serialization failures, deadlocks and a unique violation
   * from a racing writer run the whole transaction again (it re-reads what it depends on).
   * `begin` opens it (one simple query: what follows BEGIN costs no round trip of its own).
   */
  protected tx<T>(fn: (c: pg.PoolClient) => Promise<T>, begin = 'BEGIN'): Promise<T> {
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
   * Start-up: waits for the server while it cannot be reached (a refused connection, a timeout: it
   * may be starting), saying so before each retry; creates the database when it does not exist.
   * What retrying cannot mend fails at once (StoreRefusedError): an unknown host, a refused
   * password or TLS, a database that cannot be created. Gives up with StoreUnreachableError after
   * connectRetries, or once the next retry would end past connectWaitMs.
   */
  async waitForServer(): Promise<void> {
    const name = this.opts.urlName ?? 'the URL';
    const where = `${redactUrl(this.opts.url)} (${name})`;
    const server = serverOf(this.opts.url);
    const startedMs = this.clock.now();
    const retries = this.plannedRetries();
    let createdDb = false;
    for (let attempt = 0; ; attempt++) {
      try {
        await this.pool.query('SELECT 1');
        return;
      } catch (err) {
        if ((err as { code?: string }).code === '3D000' && !createdDb) {
          createdDb = true;
          await this.createDatabase(where);
          attempt--;
          continue;
        }
        if (!isUnavailable(err) || isUnknownHost(err)) throw new StoreRefusedError(refusal(err, where, name));
        const wait = this.retryWait(attempt);
        // Attempts that take their connect timeout use up a short wait sooner.
        const overBudget = this.opts.connectWaitMs !== undefined && this.clock.now() - startedMs + wait > this.opts.connectWaitMs;
        if (attempt >= retries || overBudget) {
          const tries = `gave up after ${attempt + 1} attempt${attempt ? 's' : ''}`;
          throw new StoreUnreachableError(`cannot reach PostgreSQL at ${where}: ${waitReason(err, this.opts.connectTimeoutMs)} (${describe(err)}; ${tries})`);
        }
        // What is left if the server stays away: this wait and the later ones (each attempt may also take up to the connect timeout).
        let leftMs = 0;
        for (let a = attempt; a < retries; a++) leftMs += this.retryWait(a);
        this.opts.logger?.warn(
          { attempt: attempt + 1, retries, waitMs: wait, leftMs, err: describe(err) },
          `waiting for PostgreSQL at ${server}: ${waitReason(err, this.opts.connectTimeoutMs)}, retrying in ${wait} ms (attempt ${attempt + 2} of ${retries + 1}; giving up in about ${Math.ceil(leftMs / 1000)} s)`,
        );
        await sleep(wait);
      }
    }
  }

  /** connectRetries, or fewer: as many as fit their waits in connectWaitMs. */
  private plannedRetries(): number {
    const budget = this.opts.connectWaitMs;
    if (budget === undefined) return this.opts.connectRetries;
    let n = 0;
    for (let waited = 0; n < this.opts.connectRetries && (waited += this.retryWait(n)) <= budget; ) n++;
    return n;
  }

  /** The wait before start-up attempt `attempt + 2`: the backoff doubling from connectBackoffMs, at most 30 s. */
  private retryWait(attempt: number): number {
    return Math.min(this.opts.connectBackoffMs * 2 ** attempt, 30_000);
  }

  /** Creates the configured database through the `postgres` maintenance database. */
  protected async createDatabase(where: string): Promise<void> {
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
      throw new StoreRefusedError(
        `PostgreSQL at ${where}: the database ${JSON.stringify(name)} does not exist and cannot be created: ${describe(err)}; create it, or let the user create databases (CREATEDB)`,
      );
    } finally {
      await c.end().catch(() => undefined);
    }
  }

  /**
   * A session advisory lock held on a connection of its own while `fn` runs: another process
   * trying the same job skips it. A lost connection frees the lock (the job's batches are each
   * idempotent, so a second runner then only repeats finished work).
   */
  async exclusively<T>(job: string, fn: () => Promise<T>): Promise<T | undefined> {
    const c = await this.guard(() => this.pool.connect());
    const onError = () => undefined;
    c.on('error', onError);
    try {
      const r = await c.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1, hashtext($2)) AS ok', [LOCK_JOB, job]);
      if (!r.rows[0].ok) return undefined;
      try {
        return await fn();
      } finally {
        await c.query('SELECT pg_advisory_unlock($1, hashtext($2))', [LOCK_JOB, job]).catch(() => undefined);
      }
    } finally {
      c.off('error', onError);
      c.release();
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
      await c.query('CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())');
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

  /** A tenant's id (cached: tenants are never deleted, ids never reused); undefined if unknown and not `create`. */
  protected async tenantId(name: string, create: true): Promise<number>;
  protected async tenantId(name: string, create?: boolean): Promise<number | undefined>;
  protected async tenantId(name: string, create = false): Promise<number | undefined> {
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

  protected runTransaction<T>(program: Program<T>, begin?: string): Promise<T> {
    return this.tx((c) => this.runProgram(program, c), begin);
  }

  /** A statement commits alone: no BEGIN and COMMIT round trips around it. */
  protected override runWrite<T>(program: Program<T>): Promise<T> {
    return this.runProgram(program);
  }

  /** A program (../program.ts: the shared ones, the reach rows, key ids) on a pooled connection, or on a transaction's client. */
  protected runProgram<T>(program: Program<T>, c?: pg.PoolClient): Promise<T> {
    return runAsync(program, async (step) => {
      const r = c
        ? await c.query(step.name ? { name: step.name, text: step.text, values: step.values } : { text: step.text, values: step.values })
        : await this.query(step.text, step.values, step.name);
      return step.want === 'rows' ? r.rows : step.want === 'row' ? r.rows[0] : (r.rowCount ?? 0);
    });
  }
}
