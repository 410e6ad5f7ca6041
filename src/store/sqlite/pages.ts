/**
 * Statement pages (readPage), read on the store's connection or off the event loop. `GET
 * /statements` with filters is the heaviest read (index ranges, the StatementRef walk, 100 rows
 * of JSON): on the event loop it delays every other request, ingest commits included, and leaves
 * the second core idle. Reader threads (ReaderThreads) each own a read-only connection (WAL:
 * they never wait for the writer, and a query started after a commit sees it, so a write
 * acknowledged before the GET is in its page) and run the same SQL the single-thread store runs
 * (built by src/store/sql.ts).
 *
 * A reader that dies fails only its own queries (503) and is replaced on the next query. This
 * file is also the reader's entry point; it imports nothing heavier than node:sqlite and the
 * query builder. The store's other reads: ./readers.ts.
 */
import { DatabaseSync, type SQLInputValue, type StatementSync } from 'node:sqlite';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { LrsError, type LrsErrorKind, ValidationFailed, type ValidationIssue } from '../../errors.ts';
import { type StatementQuery, unknownCursor } from '../../xapi/query.ts';
import {
  type Driver,
  DRIVER_COUNT_CAP,
  DriverChoices,
  driverCountsSql,
  drivers,
  pageRowsKept,
  rarestDriver,
  type SeqWindow,
  statementPageSql,
  storedSeqSql,
  uuidBytes,
  uuidText,
} from '../sql.ts';
import type { QueryPage, StoredRow } from '../types.ts';
import { cacheSize } from './migrations.ts';
import { SQLITE, sqliteSql } from './query.ts';

type Row = Record<string, unknown>;

/** What a page read needs of a connection: its prepared statements and the tenants' ids. */
export interface PageSource {
  q(sql: string): StatementSync;
  tenantId(name: string): number | undefined;
}

/** A statement of `db` prepared once per SQL text (integers as numbers; `$n` as SQLite's `?n`): the query builder emits few distinct shapes. */
export function prepared(db: DatabaseSync, cache: Map<string, StatementSync>, sql: string): StatementSync {
  let st = cache.get(sql);
  if (!st) {
    st = db.prepare(sqliteSql(sql));
    st.setReadBigInts(false);
    cache.set(sql, st);
  }
  return st;
}

export function toRow(r: Row): StoredRow {
  return { json: String(r.full), storedMs: Number(r.stored_ms), position: String(r.seq) };
}

/** A page row read as an array (pageCols in src/store/sql.ts): no object per row (≈ 50 µs of a 100-row page). */
const pageRow = (r: unknown[]): StoredRow => ({ json: String(r[2]), storedMs: Number(r[1]), position: String(r[0]) });

/** A statement's JSON by seq (one a page keeps that was too large to come with the page query). */
export function fullOf(src: PageSource, tenant: number, seq: number): string | undefined {
  const r = src.q('SELECT full FROM statements WHERE seq = ? AND tenant = ?').get(seq, tenant) as Row | undefined;
  return r ? String(r.full) : undefined;
}

/** Times a page is read again when a statement it kept was erased before its JSON was read. */
const PAGE_ATTEMPTS = 5;

/**
 * How many of a page query's rows (arrays, in order: the seq first, at `json` the JSON or else its
 * bytes, see sizedJson, at `data` the bytes of its attachment data) the page keeps (pageRowsKept),
 * the JSON of those too large to come with the query read by seq into their rows. Fewer when a
 * kept statement was erased since the query (by another connection): the page ends before it.
 */
export function keptRows(src: PageSource, tenant: number, raw: unknown[][], q: Pick<StatementQuery, 'limit' | 'maxBytes' | 'attachments'>, json: number, data?: number): number {
  const allInline = raw.every((r) => typeof r[json] === 'string');
  const bytes = (i: number) => {
    const j = raw[i][json];
    return (typeof j === 'string' ? Buffer.byteLength(j, 'utf8') : Number(j)) + (data === undefined ? 0 : Number(raw[i][data]));
  };
  const kept = pageRowsKept(raw.length, q, allInline, bytes);
  for (let i = 0; i < kept; i++) {
    if (typeof raw[i][json] === 'string') continue;
    const full = fullOf(src, tenant, raw[i][0] as number);
    if (full === undefined) return i;
    raw[i][json] = full;
  }
  return kept;
}

/** since/until as a seq bound (see storedSeqSql). */
export function storedSeq(src: PageSource, tenant: number, ms: number, bound: 'since' | 'until'): Row | undefined {
  const { sql, params } = storedSeqSql(tenant, ms, bound, SQLITE);
  return src.q(sql).get(...(params as SQLInputValue[])) as Row | undefined;
}

/** Drivers chosen on this thread (see DriverChoices). */
const choices = new DriverChoices();

/** For a filter on several indexed values, the one with the fewest entries (see driverCountsSql). */
function driver(src: PageSource, tenant: number, query: StatementQuery): Driver | undefined {
  if (drivers(query.filter).length < 2) return undefined;
  const kept = choices.get(tenant, query.filter);
  if (kept) return kept;
  const { sql, params } = driverCountsSql(tenant, query.filter, DRIVER_COUNT_CAP, SQLITE);
  const chosen = rarestDriver(src.q(sql).get(...(params as SQLInputValue[])) as Row);
  choices.set(tenant, query.filter, chosen);
  return chosen;
}

/**
 * The seq of the statement a `more` cursor names: one of the tenant's (through both id levels),
 * of the filter's authority under `mine`; a 400 otherwise (unknownCursor).
 */
function cursorSeq(src: PageSource, tenant: number, query: StatementQuery, id: string): bigint {
  const sql = 'SELECT s.seq FROM statements s WHERE s.seq = (SELECT seq FROM statement_seqs WHERE tenant = ? AND id = ?)';
  const authority = query.filter.authority;
  const r = (
    authority === undefined
      ? src.q(sql).get(tenant, uuidBytes(id))
      : src.q(`${sql} AND s.authority = (SELECT id FROM keys WHERE tenant = ? AND key = ?)`).get(tenant, uuidBytes(id), tenant, authority)
  ) as Row | undefined;
  if (!r) throw unknownCursor();
  return BigInt(r.seq as number);
}

/** One page of a statement query (GET /statements with filters), on whichever thread holds `src`. */
export function readPage(src: PageSource, tenant: string, query: StatementQuery, attempt = 1): QueryPage {
  const tid = src.tenantId(tenant);
  if (tid === undefined) {
    if (query.after !== undefined) throw unknownCursor();
    return { rows: [] };
  }
  // The cursor first: a bad one is a 400 whatever since/until find.
  const after = query.after === undefined ? undefined : cursorSeq(src, tid, query, query.after);
  const w: SeqWindow = {};
  if (query.since !== undefined) {
    const r = storedSeq(src, tid, query.since, 'since');
    if (!r) return { rows: [] };
    w.from = BigInt(r.seq as number);
  }
  if (query.until !== undefined) {
    const r = storedSeq(src, tid, query.until, 'until');
    if (!r) return { rows: [] };
    w.to = BigInt(r.seq as number);
  }
  if (after !== undefined) {
    if (query.ascending) w.after = after;
    else w.before = after;
  }
  const { sql, params } = statementPageSql(tid, query, w, SQLITE, { driver: driver(src, tid, query), attachmentsOf: query.attachments ? tenant : undefined });
  const page = src.q(sql);
  page.setReturnArrays(true);
  const raw = page.all(...(params as SQLInputValue[])) as unknown as unknown[][];
  // Columns: seq, stored_ms, the JSON or its bytes, id, [data bytes] (pageCols).
  const kept = keptRows(src, tid, raw, query, 2, query.attachments ? 4 : undefined);
  if (kept === 0 && raw.length) {
    if (attempt >= PAGE_ATTEMPTS) throw new LrsError('unavailable', 'the statements of this page were erased while it was read; try again');
    return readPage(src, tenant, query, attempt + 1);
  }
  const rows = raw.slice(0, kept).map(pageRow);
  return kept < raw.length ? { rows, next: uuidText(raw[kept - 1][3] as Uint8Array) } : { rows };
}

/** A reader's young generation: what it allocates lives for one page (V8's default is far larger). A --max-semi-space-size flag, as runserver gives, wins over it (see thread.ts). */
const READER_YOUNG_GENERATION_MB = 8;

/** A failed query's error as it crosses the thread: an LrsError (a bad cursor's 400) keeps its kind and issues. */
type Answer = { id: number; ok: true; page: QueryPage } | { id: number; ok: false; message: string; code?: unknown; kind?: LrsErrorKind; issues?: ValidationIssue[] };

function answeredError(a: Extract<Answer, { ok: false }>): Error {
  if (a.kind) return a.issues ? new ValidationFailed(a.issues) : new LrsError(a.kind, a.message);
  return Object.assign(new Error(a.message), { code: a.code });
}

interface Reader {
  worker: Worker;
  waiting: Map<number, { resolve: (p: QueryPage) => void; reject: (e: unknown) => void }>;
}

/** The reader threads of one SQLite file; each query goes to the least busy one. */
export class ReaderThreads {
  private readonly path: string;
  private readonly readers: (Reader | undefined)[];
  private nextId = 1;
  private closed = false;

  private readonly cacheMiB?: number;

  constructor(path: string, count: number, cacheMiB?: number) {
    this.path = path;
    this.cacheMiB = cacheMiB;
    this.readers = Array.from({ length: count }, () => undefined);
  }

  query(tenant: string, query: StatementQuery): Promise<QueryPage> {
    if (this.closed) return Promise.reject(new LrsError('unavailable', 'the store is shutting down'));
    let slot = 0;
    for (let i = 1; i < this.readers.length; i++) if ((this.readers[i]?.waiting.size ?? 0) < (this.readers[slot]?.waiting.size ?? 0)) slot = i;
    const reader = (this.readers[slot] ??= this.start(slot));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      reader.waiting.set(id, { resolve, reject });
      // A thread keeps the process alive only while it has a query to answer.
      if (reader.waiting.size === 1) reader.worker.ref();
      reader.worker.postMessage({ id, tenant, query });
    });
  }

  private start(slot: number): Reader {
    const worker = new Worker(new URL(import.meta.url), {
      workerData: { lecternSqliteReader: { path: this.path, cacheMiB: this.cacheMiB } },
      resourceLimits: { maxYoungGenerationSizeMb: READER_YOUNG_GENERATION_MB },
    });
    worker.unref();
    const reader: Reader = { worker, waiting: new Map() };
    worker.on('message', (a: Answer) => {
      const w = reader.waiting.get(a.id);
      if (!w) return;
      reader.waiting.delete(a.id);
      if (!reader.waiting.size) worker.unref();
      if (a.ok) w.resolve(a.page);
      else w.reject(answeredError(a));
    });
    const stopped = (why: string) => {
      if (this.readers[slot] === reader) this.readers[slot] = undefined; // the next query starts a new one
      if (this.closed) return;
      const err = new LrsError('unavailable', `a SQLite reader thread stopped (${why}); try again`);
      for (const w of reader.waiting.values()) w.reject(err);
      reader.waiting.clear();
    };
    worker.on('error', (err) => {
      stopped(err.message);
      void worker.terminate();
    });
    worker.on('exit', (code) => stopped(`exited with code ${code}`));
    return reader;
  }

  /** The reader threads started so far (tests stop one to show the next query still works). */
  get workers(): Worker[] {
    return this.readers.flatMap((r) => (r ? [r.worker] : []));
  }

  /** Called once the server stopped taking requests; a query still running is answered 503. */
  async close(): Promise<void> {
    this.closed = true;
    const closing = new LrsError('unavailable', 'the store is shutting down');
    for (const r of this.readers) {
      for (const w of r?.waiting.values() ?? []) w.reject(closing); // past the shutdown timeout: answered, not left hanging
      r?.waiting.clear();
    }
    await Promise.all(this.readers.map((r) => r?.worker.terminate()));
  }
}

// ----- the reader thread ----------------------------------------------------------------------

class ReaderConnection implements PageSource {
  private readonly db: DatabaseSync;
  private readonly cache = new Map<string, StatementSync>();
  private readonly tenants = new Map<string, number>();

  constructor(path: string, cacheMiB?: number) {
    this.db = new DatabaseSync(path, { readOnly: true });
    this.db.exec(`PRAGMA busy_timeout = 5000; PRAGMA cache_size = ${cacheSize(cacheMiB)}`);
  }

  q(sql: string): StatementSync {
    return prepared(this.db, this.cache, sql);
  }

  tenantId(name: string): number | undefined {
    let id = this.tenants.get(name);
    if (id === undefined) {
      const r = this.q('SELECT id FROM tenants WHERE name = ?').get(name) as Row | undefined;
      if (!r) return undefined; // not cached: the tenant may store its first statement later
      this.tenants.set(name, (id = Number(r.id)));
    }
    return id;
  }
}

const started = isMainThread ? undefined : (workerData as { lecternSqliteReader?: { path: string; cacheMiB?: number } } | null)?.lecternSqliteReader;
if (started && parentPort) {
  const port = parentPort;
  const conn = new ReaderConnection(started.path, started.cacheMiB);
  port.on('message', (m: { id: number; tenant: string; query: StatementQuery }) => {
    let answer: Answer;
    try {
      answer = { id: m.id, ok: true, page: readPage(conn, m.tenant, m.query) };
    } catch (e) {
      const err = e as { message?: unknown; code?: unknown };
      answer = { id: m.id, ok: false, message: String(err?.message ?? e), code: err?.code };
      if (e instanceof LrsError) Object.assign(answer, { kind: e.kind, issues: e.issues });
    }
    port.postMessage(answer);
  });
}
