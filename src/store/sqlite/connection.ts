/**
 * The SQLite backend's connection (node:sqlite, no native addon): the database opened in WAL mode
 * with Lectern's pragmas, the prepared-statement cache, transactions (a write the disk refuses
 * becomes a 503, logged once a minute), versioned migrations, and the dictionaries (`tenants`,
 * `keys`) whose ids this process caches. Ids are never reused; erasure, the only thing that
 * deletes keys, bumps `keys_epoch` (as does every write of an activity definition, which a writer
 * also caches), and a writer that sees it changed by another forgets its caches. It runs the
 * shared programs (../shared.ts, which it extends); the reads (./readers.ts), the maintenance
 * writes (./maintenance.ts) and the statement writes (./store.ts) build on it.
 */
import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import type { Worker } from 'node:worker_threads';
import { type Clock, systemClock } from '../../clock.ts';
import { LrsError } from '../../errors.ts';
import { KeyCache } from '../pipeline.ts';
import type { Program } from '../program.ts';
import { SharedStore } from '../shared.ts';
import { bucketsIn } from '../sql.ts';
import { sqliteDialect } from './dialect.ts';
import { runProgram, type SqliteHandle } from './runner.ts';
import { cacheSize, MIGRATIONS, PAGE_SIZE, WAL_AUTOCHECKPOINT } from './migrations.ts';
import { type PageSource, prepared, ReaderThreads } from './pages.ts';

export interface SqliteOptions {
  path: string;
  synchronous?: 'FULL' | 'NORMAL';
  /** Urls of the active forwarding targets: each new statement is queued for each. */
  forwardTargets?: string[];
  /** Where a long migration announces itself, and a write the disk refuses is reported (the writer thread relays both to the server's log). */
  logger?: StoreLog;
  /** Threads that read statement pages off the event loop (0: on it; always 0 for `:memory:`). */
  readers?: number;
  /** WAL pages after which a commit checkpoints (SQLite's `wal_autocheckpoint`). */
  walAutocheckpoint?: number;
  /** MiB of pages each connection caches (SQLite's `cache_size`); by default CACHE_MIB, and writerCacheMiB for the connection that writes. */
  cacheMiB?: number;
  /** What `stored`, document times, forwarding due times and leases are read from (default: the system clock). */
  clock?: Clock;
}

/** What the store logs (long migrations, a disk that refuses writes): a pino Logger, or the writer thread's relay of it. */
export interface StoreLog {
  info(fields: object, msg: string): void;
  error(fields: object, msg: string): void;
}

/**
 * A write the storage refused: SQLITE_FULL (no room on the disk) or SQLITE_IOERR (the file could
 * not be written: EFBIG past a file size limit, EIO, ENOSPC seen as an I/O error). node:sqlite
 * puts the extended result code in `errcode`; the primary code is its low byte.
 */
export function isStorageFailure(err: unknown): boolean {
  const code = (err as { errcode?: unknown } | null)?.errcode;
  return typeof code === 'number' && ((code & 0xff) === 13 || (code & 0xff) === 10);
}

/** An SQLite error in one line for the log: its message and result code. */
export function describeSqlite(err: unknown): string {
  const e = err as { message?: unknown; errcode?: unknown } | null;
  const code = typeof e?.errcode === 'number' ? e.errcode : undefined;
  const primary = code === undefined ? undefined : ({ 10: 'SQLITE_IOERR', 13: 'SQLITE_FULL' } as Record<number, string>)[code & 0xff];
  const message = String(e?.message ?? err);
  return code === undefined ? message : `${message} (${primary ?? 'SQLite result code'} ${code})`;
}

/** What a client is told while the storage refuses writes (503: it heals once there is room). */
const STORAGE_FAILED = 'the LRS cannot write to its database right now (its disk is full or failing): nothing of this request was stored; try again later';

/** Least time between two log lines about the same outage. */
const STORAGE_LOG_INTERVAL_MS = 60_000;

type Row = Record<string, unknown>;

/** Key ids cached at most (then the cache starts again): bounded memory with many agents. */
const KEY_CACHE_MAX = 200_000;

/** A request of a group failed after it began writing: the group is rolled back and written again with savepoints. */
export class WriteFailed extends Error {
  constructor(failure: unknown) {
    super('a write failed mid-request', { cause: failure });
  }
}

/**
 * Runs `fn` unless `job` runs already in this process (`running`). Processes sharing a SQLite file
 * may both run it: each batch of a job is its own short write transaction and idempotent.
 */
export async function exclusiveInProcess<T>(running: Set<string>, job: string, fn: () => Promise<T>): Promise<T | undefined> {
  if (running.has(job)) return undefined;
  running.add(job);
  try {
    return await fn();
  } finally {
    running.delete(job);
  }
}

export abstract class SqliteConnection extends SharedStore {
  readonly backend = 'sqlite';
  protected readonly db: DatabaseSync;
  protected readonly cache = new Map<string, StatementSync>();
  protected readonly logger?: StoreLog;
  protected readonly clock: Clock;
  /** While the storage refuses writes: since when, how many writes were refused, when that was last logged. */
  protected storageDown?: { sinceMs: number; refused: number; loggedMs: number };
  /** The reader threads of statement pages, when the options ask for some. */
  protected readonly threads?: ReaderThreads;
  /** Statement pages read on this thread's connection (no reader threads). */
  protected readonly source: PageSource = { q: (sql) => this.q(sql), tenantId: (name) => this.tenantId(name) };
  /** Tenant name → tenants.id (tenants are never deleted; only known tenants are cached). */
  protected readonly tenantIds = new Map<string, number>();
  /** keys.id by tenant and key, valid while keys_epoch is `epoch` (checkEpoch forgets them all, so no epoch per tenant). */
  protected readonly keyIds = new KeyCache<null>(KEY_CACHE_MAX);
  protected epoch = -1;
  private readonly jobs = new Set<string>();
  /**
   * The activity IRI's key id → the canonical definition kept (`kept`) and the last definition
   * merged into it (`input`): a statement repeating that definition leaves it as it is (merging is
   * idempotent), so it costs no read, parse or merge. Valid while keys_epoch is `epoch`: every
   * writer that changes a definition bumps it. The write's `staged` entries (./store.ts) join it
   * once their request is stored.
   */
  protected readonly definitions = new Map<number, { input: string; kept: string }>();
  /** What the dialect and the outbox borrow: the statement cache, the transaction helper, the clock, the key ids. */
  protected readonly handle: SqliteHandle = {
    q: (sql) => this.q(sql),
    tx: (fn) => this.tx(fn),
    now: () => this.clock.now(),
    keyIds: (tenant, keys) => this.keyIdsOf(tenant, keys),
  };
  protected readonly dialect = sqliteDialect(this.handle);

  constructor(opts: SqliteOptions) {
    super();
    const path = opts.path === ':memory:' ? opts.path : resolve(opts.path);
    if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
    this.db = new DatabaseSync(path);
    // No foreign keys: a check costs a parent probe per link row (erasure deletes link rows itself).
    // 8 KB pages for a new database (an existing one keeps its size): a statement row leaves much
    // less of an 8 KB page unused than of a 4 KB one (docs/decisions.md, "Storage on SQLite").
    // A checkpoint copies every page the WAL holds back into the database file: the fewer there
    // are, the more commits' writes to one page it merges (each random index entry dirties a whole
    // page; bench: bytes written per statement). The WAL is truncated back to that size after a reset.
    const wal = opts.walAutocheckpoint ?? WAL_AUTOCHECKPOINT;
    this.db.exec(
      `PRAGMA page_size = ${PAGE_SIZE}; PRAGMA journal_mode = WAL; PRAGMA synchronous = ${opts.synchronous ?? 'FULL'}; PRAGMA busy_timeout = 5000; ` +
        `PRAGMA wal_autocheckpoint = ${wal}; PRAGMA journal_size_limit = ${wal * PAGE_SIZE}; PRAGMA cache_size = ${cacheSize(opts.cacheMiB)};`,
    );
    this.logger = opts.logger;
    this.clock = opts.clock ?? systemClock;
    if (path !== ':memory:' && (opts.readers ?? 0) > 0) this.threads = new ReaderThreads(path, opts.readers!, opts.cacheMiB);
  }

  protected q(sql: string): StatementSync {
    return prepared(this.db, this.cache, sql);
  }

  protected async runProgram<T>(program: Program<T>): Promise<T> {
    return runProgram(this.handle, program);
  }

  /** Always BEGIN IMMEDIATE: the write lock first, so no other writer comes between the program's reads and writes. */
  protected async runTransaction<T>(program: Program<T>): Promise<T> {
    return this.tx(() => runProgram(this.handle, program));
  }

  protected tx<T>(fn: () => T): T {
    this.db.exec('BEGIN IMMEDIATE');
    try {
      const out = fn();
      this.db.exec('COMMIT');
      if (this.storageDown) this.storageBack();
      return out;
    } catch (err) {
      // After a full disk or an I/O error SQLite may have rolled back already: a second ROLLBACK
      // would fail ("no transaction is active") and hide why the write failed.
      if (this.db.isTransaction) {
        try {
          this.db.exec('ROLLBACK');
        } catch (rollback) {
          this.logger?.error({ err: describeSqlite(rollback), cause: describeSqlite(err) }, 'SQLite could not roll back a failed transaction');
        }
      }
      // Ids it created are gone again: forget every cached one (they are cheap to look up).
      this.tenantIds.clear();
      this.keyIds.forget();
      this.definitions.clear();
      throw this.storageRefused(err);
    }
  }

  /** A write the storage refused becomes a 503 (logged here, once per minute of an outage); any other error passes. */
  protected storageRefused(err: unknown): unknown {
    const cause = err instanceof WriteFailed ? err.cause : err;
    if (!isStorageFailure(cause)) return err;
    const now = this.clock.now();
    const down = (this.storageDown ??= { sinceMs: now, refused: 0, loggedMs: 0 });
    down.refused++;
    if (now - down.loggedMs >= STORAGE_LOG_INTERVAL_MS) {
      down.loggedMs = now;
      this.logger?.error(
        { err: describeSqlite(cause), since: new Date(down.sinceMs).toISOString(), refused: down.refused },
        'SQLite cannot write (disk full or failing): writes are answered 503 until it can',
      );
    }
    return new LrsError('unavailable', STORAGE_FAILED);
  }

  protected storageBack(): void {
    const down = this.storageDown!;
    this.storageDown = undefined;
    this.logger?.info({ since: new Date(down.sinceMs).toISOString(), refused: down.refused }, 'SQLite writes again');
  }

  async migrate(): Promise<void> {
    this.db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)');
    const applied = new Set((this.db.prepare('SELECT version FROM schema_migrations').all() as Row[]).map((r) => Number(r.version)));
    for (const m of MIGRATIONS) {
      if (applied.has(m.version)) continue;
      if (m.rebuilds) {
        const n = Number((this.db.prepare(m.rebuilds.count).get() as Row).n);
        if (n > 0) this.logger?.info({ version: m.version, statements: n }, `${m.rebuilds.message}: ${n} statements`);
      }
      this.tx(() => {
        this.db.exec(m.sql);
        this.db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(m.version, m.name, new Date(this.clock.now()).toISOString());
      });
    }
  }

  exclusively<T>(job: string, fn: () => Promise<T>): Promise<T | undefined> {
    return exclusiveInProcess(this.jobs, job, fn);
  }

  async ping(): Promise<void> {
    this.q('SELECT count(*) AS n FROM schema_migrations').get();
  }

  async close(): Promise<void> {
    await this.threads?.close();
    if (this.db.isOpen) this.db.close();
  }

  /** The reader threads started so far (tests stop one). */
  get readerThreads(): Worker[] {
    return this.threads?.workers ?? [];
  }

  // ----- the dictionaries (tenants, keys) -----------------------------------------------------

  /** The tenant's id; undefined for a tenant that never stored a statement (nothing to read). */
  protected tenantId(name: string): number | undefined {
    let id = this.tenantIds.get(name);
    if (id === undefined) {
      const r = this.q('SELECT id FROM tenants WHERE name = ?').get(name) as Row | undefined;
      if (!r) return undefined;
      id = Number(r.id);
      this.tenantIds.set(name, id);
    }
    return id;
  }

  /** In a write transaction: the tenant's id, created when new. */
  protected ensureTenant(name: string): number {
    const known = this.tenantId(name);
    if (known !== undefined) return known;
    const id = Number(this.q('INSERT INTO tenants (name) VALUES (?)').run(name).lastInsertRowid);
    this.tenantIds.set(name, id);
    return id;
  }

  /** In a write transaction, before keyIdsOf: forget cached key ids once an erasure (in any process) deleted keys. */
  protected checkEpoch(): void {
    const epoch = Number((this.q('SELECT epoch FROM keys_epoch').get() as Row).epoch);
    if (epoch !== this.epoch) {
      this.keyIds.forget();
      this.definitions.clear();
      this.epoch = epoch;
    }
  }

  /** In a write transaction, after checkEpoch: the ids of a tenant's keys, created when new (their ids into `created`). */
  protected keyIdsOf(tenant: number, keys: Iterable<string>, created: number[] = []): Map<string, number> {
    const out = new Map<string, number>();
    const find = this.q('SELECT id FROM keys WHERE tenant = ? AND key = ?');
    const add = this.q('INSERT INTO keys (tenant, key) VALUES (?, ?)');
    for (const key of keys) {
      if (out.has(key)) continue;
      let id = this.keyIds.get(tenant, key);
      if (id === undefined) {
        const r = find.get(tenant, key) as Row | undefined;
        if (r) id = Number(r.id);
        else created.push((id = Number(add.run(tenant, key).lastInsertRowid)));
        this.keyIds.set(tenant, null, key, id);
      }
      out.set(key, id);
    }
    return out;
  }

  /**
   * After erasure removed statements naming these keys (or a rejected request brought them):
   * deletes the ones no statement of the tenant names any more (in any role, or as a verb or
   * activity, should an IRI equal an agent key), so no personal data stays in `keys`, and tells
   * every writer to forget its cached ids.
   */
  protected dropUnusedKeys(tenant: number, ids: Iterable<number>): void {
    const drop = this.q(
      'DELETE FROM keys WHERE tenant = ? AND id = ? ' +
        `AND NOT EXISTS (SELECT 1 FROM statement_agents WHERE tenant = ? AND bucket IN ${bucketsIn()} AND agent = ?) ` +
        'AND NOT EXISTS (SELECT 1 FROM statements WHERE tenant = ? AND authority = ?) ' +
        `AND NOT EXISTS (SELECT 1 FROM statement_activities WHERE tenant = ? AND bucket IN ${bucketsIn()} AND activity = ?) ` +
        'AND NOT EXISTS (SELECT 1 FROM statements WHERE tenant = ? AND verb = ?) ' +
        'AND NOT EXISTS (SELECT 1 FROM definitions WHERE key = ?)',
    );
    let dropped = 0;
    for (const id of ids) dropped += Number(drop.run(tenant, id, tenant, id, tenant, id, tenant, id, tenant, id, id).changes);
    if (dropped) this.q('UPDATE keys_epoch SET epoch = epoch + 1').run();
    this.keyIds.forget();
  }

  /** The id of one of the tenant's keys, if it has it. */
  protected keyId(tenant: number, key: string): number | undefined {
    const r = this.q('SELECT id FROM keys WHERE tenant = ? AND key = ?').get(tenant, key) as Row | undefined;
    return r ? Number(r.id) : undefined;
  }
}
