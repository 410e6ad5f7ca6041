/**
 * SQLite on two threads: the one connection that writes lives on a worker thread of its own, so
 * the event loop (HTTP, JSON, validation) and the database writes — inserts under several
 * B-trees and the commit's fsync — run on two cores at once. Reads stay on a connection of this
 * thread (WAL: readers never wait for the writer, and see every committed write).
 *
 * The worker runs an ordinary SqliteStore: every write of the Store interface (statements,
 * documents, forwarding outbox, data lifecycle, credentials) is sent to it as a call and answered after its
 * COMMIT. Calls that arrive while the writer is busy queue on its port and are written as one
 * group commit (SqliteStore.insertStatements: one transaction, each request all or nothing), so
 * every guarantee of the single-thread store holds: an answer only after the commit, all or
 * nothing per request, conflicts per request, seq order = stored order = commit order.
 *
 * A writer that dies turns every write into a 503 (never a hang) and fails the heartbeat; reads
 * go on. This file is also the worker's entry point.
 */
import { isMainThread, MessageChannel, type MessagePort, Worker, workerData } from 'node:worker_threads';
import { ManualClock } from '../../clock.ts';
import { LrsError, type LrsErrorKind, ValidationFailed, type ValidationIssue } from '../../errors.ts';
import type { PreparedStatement } from '../../xapi/statement.ts';
import type { StatementQuery } from '../../xapi/query.ts';
import type {
  AttachmentBlob,
  AuditEntry,
  AuditFilter,
  AuditRecord,
  CredentialRow,
  DocumentKey,
  DocumentPrecondition,
  DocumentWriteOptions,
  ForwardingStats,
  InsertOutcome,
  KeptRejection,
  KeyedDocument,
  NewRejection,
  Outbox,
  OutboxItem,
  OutboxSettlement,
  QueryPage,
  RejectionFilter,
  RejectionReason,
  StatementRewrite,
  Store,
  StoredDocument,
  StoredRow,
  StoreSummary,
  StoreOverview,
  StoreTotals,
  OverviewQuery,
} from '../types.ts';
import { type SqliteOptions, SqliteStore } from './store.ts';
import { exclusiveInProcess } from './connection.ts';

/**
 * The threaded store's options. A clock is a function and cannot cross to the writer thread, so
 * instead of SqliteOptions.clock it takes `manualClock`, plain data from which the writer builds a
 * ManualClock (src/clock.ts) of its own: `stored`, document times and forwarding leases are all
 * read on the writer, so that one clock orders them as the single-thread store's would. Reads on
 * this thread (consistent-through) keep the system clock. Without it, the system clock.
 */
export type ThreadedSqliteOptions = Omit<SqliteOptions, 'clock'> & { manualClock?: { startMs: number; stepMs?: number } };

/** The store's writes: what the worker runs (outbox methods prefixed `outbox.`). */
type WriteCall =
  | { op: 'insertStatements'; args: Parameters<Store['insertStatements']> }
  | { op: 'putDocument'; args: Parameters<Store['putDocument']> }
  | { op: 'deleteDocument'; args: Parameters<Store['deleteDocument']> }
  | { op: 'deleteDocuments'; args: Parameters<Store['deleteDocuments']> }
  | { op: 'deleteStatements'; args: Parameters<Store['deleteStatements']> }
  | { op: 'rewriteStatements'; args: Parameters<Store['rewriteStatements']> }
  | { op: 'moveDocuments'; args: Parameters<Store['moveDocuments']> }
  | { op: 'appendAudit'; args: Parameters<Store['appendAudit']> }
  | { op: 'keepRejections'; args: Parameters<Store['keepRejections']> }
  | { op: 'updateRejection'; args: Parameters<Store['updateRejection']> }
  | { op: 'deleteRejections'; args: Parameters<Store['deleteRejections']> }
  | { op: 'clearRejections'; args: Parameters<Store['clearRejections']> }
  | { op: 'outbox.claim'; args: Parameters<Outbox['claim']> }
  | { op: 'outbox.renew'; args: Parameters<Outbox['renew']> }
  | { op: 'outbox.settle'; args: Parameters<Outbox['settle']> }
  | { op: 'outbox.requeueDead'; args: Parameters<Outbox['requeueDead']> }
  | { op: 'createCredential'; args: Parameters<Store['createCredential']> }
  | { op: 'revokeCredential'; args: Parameters<Store['revokeCredential']> }
  | { op: 'rotateCredential'; args: Parameters<Store['rotateCredential']> }
  | { op: 'touchCredentials'; args: Parameters<Store['touchCredentials']> }
  | { op: 'close'; args: [] };

type Job = WriteCall & { id: number };

/** An error as it crosses the thread boundary: an LrsError keeps its kind, message and issues. */
interface WireError {
  name: string;
  message: string;
  kind?: LrsErrorKind;
  issues?: ValidationIssue[];
  code?: unknown;
  errcode?: unknown;
  errstr?: unknown;
}

/** What the worker posts: an answer to a job, that it is ready (or could not start), or that forwarding items were queued. */
type Message =
  | { id: number; ok: true; value: unknown }
  | { id: number; ok: false; error: WireError }
  | { ready: true }
  | { ready: false; error: WireError }
  | { queued: true }
  | { log: { level: 'info' | 'error'; fields: object; msg: string } };

function toWire(e: unknown): WireError {
  if (e instanceof LrsError) return { name: e.name, message: e.message, kind: e.kind, issues: e.issues };
  const err = e as Partial<WireError> | undefined;
  return { name: String(err?.name ?? 'Error'), message: String(err?.message ?? e), code: err?.code, errcode: err?.errcode, errstr: err?.errstr };
}

function fromWire(w: WireError): Error {
  if (w.kind) return w.name === 'ValidationFailed' && w.issues ? new ValidationFailed(w.issues) : new LrsError(w.kind, w.message, w.issues);
  return Object.assign(new Error(w.message), { name: w.name, code: w.code, errcode: w.errcode, errstr: w.errstr });
}

/** The writer thread's young generation where no --max-semi-space-size is given (V8 default: up to 3 × 64 MB on this machine). */
const WRITER_YOUNG_GENERATION_MB = 12;

/** A Buffer again: the structured clone of a Buffer is a plain Uint8Array. */
const asBuffer = (u: Uint8Array): Buffer => (Buffer.isBuffer(u) ? u : Buffer.from(u.buffer, u.byteOffset, u.byteLength));

/**
 * Bytes to send to the other thread: a copy of just these bytes, whose memory is moved (listed
 * in the transfer list), not cloned. Cloning a Buffer copies its whole backing memory, and a
 * request's body is a view into a 64 KB read buffer (or an 8 KB pool slab): a 100-byte State
 * document crossed as 64 KB, twice (measured: the process grew by 120 MB under the bench's
 * document writes).
 */
function moved(u: Uint8Array, transfer: ArrayBuffer[]): Buffer {
  const copy = new Uint8Array(u); // exactly these bytes, in memory of their own
  transfer.push(copy.buffer);
  return Buffer.from(copy.buffer);
}

/** The Store on this thread: reads on its own connection, writes sent to the writer thread. */
export class ThreadedSqliteStore implements Store {
  readonly backend = 'sqlite';
  readonly outbox: Outbox;
  private readonly opts: ThreadedSqliteOptions;
  private readonly listeners: (() => void)[] = [];
  private readonly waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: unknown) => void }>();
  private nextId = 1;
  private worker: Worker | undefined;
  private port: MessagePort | undefined;
  private reader: SqliteStore | undefined;
  private failure: LrsError | undefined;
  private closing: Promise<void> | undefined;
  private readonly jobs = new Set<string>();

  constructor(opts: ThreadedSqliteOptions) {
    this.opts = opts;
    const call = <T>(op: WriteCall['op'], args: unknown[]) => this.send({ op, args } as WriteCall) as Promise<T>;
    this.outbox = {
      claim: (...a) => call<OutboxItem[]>('outbox.claim', a),
      renew: (...a) => call<void>('outbox.renew', a),
      settle: (...a) => call<void>('outbox.settle', a),
      requeueDead: (...a) => call<number>('outbox.requeueDead', a),
      stats: (): Promise<ForwardingStats[]> => this.read().outbox.stats(),
      deadLetters: (opts) => this.read().outbox.deadLetters(opts),
      oldestQueued: () => this.read().outbox.oldestQueued(),
    };
  }

  /** The writer thread (tests stop it to prove a dead writer gives 503s). */
  get writerThread(): Worker | undefined {
    return this.worker;
  }

  onOutboxWrite(listener: () => void): void {
    this.listeners.push(listener);
  }

  /** Starts the writer, which migrates the schema; reads open once the schema is there. */
  async migrate(): Promise<void> {
    if (this.worker) return;
    const { port1, port2 } = new MessageChannel();
    this.port = port1;
    const { logger, ...options } = this.opts; // a logger cannot cross threads: its lines are relayed
    this.worker = new Worker(new URL(import.meta.url), {
      workerData: { lecternSqliteWriter: { port: port2, options: { ...options, readers: 0 } } },
      transferList: [port2],
      // What the writer allocates lives for one group (the batches it is given, the rows it
      // writes): a small young generation is enough. V8 flags apply to every thread and win over
      // this, so under runserver's --max-semi-space-size (src/cli/program.ts) the writer's young
      // generation is the main thread's size (measured: 2 × 16 MB), and only that flag sizes it.
      resourceLimits: { maxYoungGenerationSizeMb: WRITER_YOUNG_GENERATION_MB },
    });
    const ready = new Promise<void>((resolve, reject) => {
      port1.on('message', (m: Message) => {
        if ('ready' in m) {
          if (m.ready) resolve();
          else reject(fromWire(m.error));
        } else if ('queued' in m) for (const l of this.listeners) l();
        else if ('log' in m) logger?.[m.log.level](m.log.fields, m.log.msg);
        else this.settle(m);
      });
      this.worker!.once('exit', (code) => reject(new Error(`the SQLite writer thread exited with code ${code} before it was ready`)));
    });
    this.worker.on('error', (err) => this.fail(err.message));
    this.worker.on('exit', (code) => this.fail(`exited with code ${code}`));
    await ready;
    const { manualClock: _, ...readerOptions } = options;
    this.reader = new SqliteStore({ ...readerOptions, forwardTargets: [] });
    this.hold(false);
  }

  private read(): SqliteStore {
    if (!this.reader) throw new LrsError('unavailable', 'the SQLite store is not open');
    return this.reader;
  }

  private send(call: WriteCall, transfer: ArrayBuffer[] = []): Promise<unknown> {
    if (this.failure) return Promise.reject(this.failure);
    if (!this.port) return Promise.reject(new LrsError('unavailable', 'the SQLite store is not open'));
    if (this.closing && call.op !== 'close') return Promise.reject(new LrsError('unavailable', 'the store is shutting down'));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      if (this.waiting.size === 1) this.hold(true);
      this.port!.postMessage({ id, ...call } as Job, transfer);
    });
  }

  private settle(m: Extract<Message, { id: number }>): void {
    const w = this.waiting.get(m.id);
    if (!w) return;
    this.waiting.delete(m.id);
    if (m.ok) w.resolve(m.value);
    else w.reject(fromWire(m.error));
    if (!this.waiting.size && !this.closing) this.hold(false);
  }

  /** The writer stopped unexpectedly: every waiting and later write gets a 503. */
  private fail(why: string): void {
    if (this.failure || this.closing) return;
    this.failure = new LrsError('unavailable', `the SQLite writer thread stopped (${why}): no write can be stored until the server restarts`);
    process.emitWarning(this.failure.message, 'LecternSqliteWriter');
    for (const w of this.waiting.values()) w.reject(this.failure);
    this.waiting.clear();
    this.hold(false);
  }

  /** The thread keeps the process alive only while a write is outstanding. */
  private hold(on: boolean): void {
    if (on) {
      this.worker?.ref();
      this.port?.ref();
    } else {
      this.worker?.unref();
      this.port?.unref();
    }
  }

  exclusively<T>(job: string, fn: () => Promise<T>): Promise<T | undefined> {
    return exclusiveInProcess(this.jobs, job, fn);
  }

  async ping(): Promise<void> {
    if (this.failure) throw this.failure;
    await this.read().ping();
  }

  /** Writes everything already sent, then ends the writer and closes both connections. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      if (this.worker && !this.failure) {
        const exited = new Promise((resolve) => this.worker!.once('exit', resolve));
        const { port } = this;
        const id = this.nextId++;
        const done = new Promise((resolve) => this.waiting.set(id, { resolve, reject: resolve }));
        this.hold(true);
        port!.postMessage({ id, op: 'close', args: [] } satisfies Job);
        await done;
        await exited;
        port!.close();
      } else await this.worker?.terminate();
      await this.reader?.close();
    })();
    return this.closing;
  }

  // ----- writes: on the writer thread ---------------------------------------------------------

  insertStatements(tenant: string, batch: PreparedStatement[], attachments: AttachmentBlob[]): Promise<InsertOutcome> {
    const transfer: ArrayBuffer[] = [];
    const sent = attachments.map((a) => ({ ...a, content: moved(a.content, transfer) }));
    return this.send({ op: 'insertStatements', args: [tenant, batch, sent] }, transfer) as Promise<InsertOutcome>;
  }

  async putDocument(
    tenant: string,
    key: DocumentKey,
    doc: { content: Buffer; contentType: string },
    opts: DocumentWriteOptions,
  ): Promise<StoredDocument> {
    const transfer: ArrayBuffer[] = [];
    const sent = { ...doc, content: moved(doc.content, transfer) };
    const stored = (await this.send({ op: 'putDocument', args: [tenant, key, sent, opts] }, transfer)) as StoredDocument;
    return { ...stored, content: asBuffer(stored.content) };
  }

  async deleteDocument(tenant: string, key: DocumentKey, pre: DocumentPrecondition): Promise<void> {
    await this.send({ op: 'deleteDocument', args: [tenant, key, pre] });
  }

  async deleteDocuments(tenant: string, key: Omit<DocumentKey, 'docId'>): Promise<void> {
    await this.send({ op: 'deleteDocuments', args: [tenant, key] });
  }

  deleteStatements(tenant: string, ids: string[]): Promise<{ statements: number; attachments: number }> {
    return this.send({ op: 'deleteStatements', args: [tenant, ids] }) as Promise<{ statements: number; attachments: number }>;
  }

  async rewriteStatements(tenant: string, rows: StatementRewrite[]): Promise<void> {
    await this.send({ op: 'rewriteStatements', args: [tenant, rows] });
  }

  async moveDocuments(tenant: string, keys: DocumentKey[], agentKey: string): Promise<void> {
    await this.send({ op: 'moveDocuments', args: [tenant, keys, agentKey] });
  }

  async keepRejections(items: NewRejection[], bounds: { max: number; keepSinceMs: number }): Promise<void> {
    const transfer: ArrayBuffer[] = [];
    const sent = items.map((r) => (r.body ? { ...r, body: moved(r.body, transfer) } : r));
    await this.send({ op: 'keepRejections', args: [sent, bounds] }, transfer);
  }

  async updateRejection(id: string, change: { status: number; reasons: RejectionReason[]; atMs: number }): Promise<void> {
    await this.send({ op: 'updateRejection', args: [id, change] });
  }

  deleteRejections(ids: string[]): Promise<number> {
    return this.send({ op: 'deleteRejections', args: [ids] }) as Promise<number>;
  }

  clearRejections(tenant?: string): Promise<number> {
    return this.send({ op: 'clearRejections', args: [tenant] }) as Promise<number>;
  }

  async createCredential(row: CredentialRow): Promise<void> {
    await this.send({ op: 'createCredential', args: [row] });
  }

  revokeCredential(key: string, atMs: number): Promise<boolean> {
    return this.send({ op: 'revokeCredential', args: [key, atMs] }) as Promise<boolean>;
  }

  rotateCredential(key: string, secretHash: string, previousUntilMs?: number): Promise<boolean> {
    return this.send({ op: 'rotateCredential', args: [key, secretHash, previousUntilMs] }) as Promise<boolean>;
  }

  async touchCredentials(uses: { key: string; atMs: number }[]): Promise<void> {
    await this.send({ op: 'touchCredentials', args: [uses] });
  }

  appendAudit(record: AuditRecord): Promise<AuditEntry> {
    return this.send({ op: 'appendAudit', args: [record] }) as Promise<AuditEntry>;
  }

  // ----- reads: on this thread's connection ---------------------------------------------------

  storeNames(): Promise<string[]> {
    return this.read().storeNames();
  }
  storeSummaries(only?: string): Promise<StoreSummary[]> {
    return this.read().storeSummaries(only);
  }
  storeOverview(tenant: string, query: OverviewQuery): Promise<StoreOverview> {
    return this.read().storeOverview(tenant, query);
  }
  storeTotals(sinceDay: number): Promise<StoreTotals[]> {
    return this.read().storeTotals(sinceDay);
  }
  listAudit(filter: AuditFilter): Promise<AuditEntry[]> {
    return this.read().listAudit(filter);
  }
  listRejections(filter: RejectionFilter): Promise<KeptRejection[]> {
    return this.read().listRejections(filter);
  }
  getRejection(id: string): Promise<KeptRejection | undefined> {
    return this.read().getRejection(id);
  }

  getStatement(tenant: string, id: string, voided: boolean, authority?: string): Promise<StoredRow | undefined> {
    return this.read().getStatement(tenant, id, voided, authority);
  }
  statementViolations(tenant: string, id: string): Promise<ValidationIssue[] | undefined> {
    return this.read().statementViolations(tenant, id);
  }
  queryStatements(tenant: string, query: StatementQuery): Promise<QueryPage> {
    return this.read().queryStatements(tenant, query);
  }
  getAttachments(tenant: string, sha2s: string[], carrier?: string): Promise<AttachmentBlob[]> {
    return this.read().getAttachments(tenant, sha2s, carrier);
  }
  attachmentSizes(tenant: string, sha2s: string[], carrier?: string): Promise<Map<string, number>> {
    return this.read().attachmentSizes(tenant, sha2s, carrier);
  }
  attachmentsNotCarried(tenant: string, positions: string[]): Promise<Map<string, string[]>> {
    return this.read().attachmentsNotCarried(tenant, positions);
  }
  attachmentCarrierCounts(tenant: string, sha2s: string[]): Promise<Map<string, number>> {
    return this.read().attachmentCarrierCounts(tenant, sha2s);
  }
  consistentThrough(): Promise<Date> {
    // Writes are answered after their commit, and this connection sees every committed write.
    return this.read().consistentThrough();
  }
  statementsWithAgent(tenant: string, agentKey: string, limit: number, maxBytes: number): Promise<string[]> {
    return this.read().statementsWithAgent(tenant, agentKey, limit, maxBytes);
  }
  getActivityDefinitions(tenant: string, activityIds: string[]): ReturnType<Store['getActivityDefinitions']> {
    return this.read().getActivityDefinitions(tenant, activityIds);
  }
  getDocument(tenant: string, key: DocumentKey): Promise<StoredDocument | undefined> {
    return this.read().getDocument(tenant, key);
  }
  listDocumentIds(tenant: string, key: Omit<DocumentKey, 'docId'>, sinceMs?: number): Promise<string[]> {
    return this.read().listDocumentIds(tenant, key, sinceMs);
  }
  scanStatements(tenant: string, opts: { after?: string; limit: number; sinceMs?: number; untilMs?: number }): Promise<QueryPage> {
    return this.read().scanStatements(tenant, opts);
  }
  countStatements(tenant: string, opts: { sinceMs?: number; untilMs?: number }): Promise<number> {
    return this.read().countStatements(tenant, opts);
  }
  referringStatements(tenant: string, ids: string[]): Promise<string[]> {
    return this.read().referringStatements(tenant, ids);
  }
  scanDocuments(tenant: string, opts: { after?: DocumentKey; limit: number }): Promise<KeyedDocument[]> {
    return this.read().scanDocuments(tenant, opts);
  }
  getCredential(key: string): Promise<CredentialRow | undefined> {
    return this.read().getCredential(key);
  }
  listCredentials(target?: string): Promise<CredentialRow[]> {
    return this.read().listCredentials(target);
  }
  credentialsVersion(): Promise<number> {
    return this.read().credentialsVersion();
  }
}

// ----- the writer thread ----------------------------------------------------------------------

/** Runs one job on the writer's store; Buffers that became Uint8Arrays in transit become Buffers again, and a document's bytes go back moved. */
function run(store: SqliteStore, job: Job, transfer: ArrayBuffer[]): Promise<unknown> {
  switch (job.op) {
    case 'insertStatements': {
      const [tenant, batch, attachments] = job.args;
      return store.insertStatements(tenant, batch, attachments.map((a) => ({ ...a, content: asBuffer(a.content) })));
    }
    case 'putDocument': {
      const [tenant, key, doc, opts] = job.args;
      return store.putDocument(tenant, key, { ...doc, content: asBuffer(doc.content) }, opts).then((d) => ({ ...d, content: moved(d.content, transfer) }));
    }
    case 'deleteDocument':
      return store.deleteDocument(...job.args);
    case 'deleteDocuments':
      return store.deleteDocuments(...job.args);
    case 'deleteStatements':
      return store.deleteStatements(...job.args);
    case 'rewriteStatements':
      return store.rewriteStatements(...job.args);
    case 'moveDocuments':
      return store.moveDocuments(...job.args);
    case 'appendAudit':
      return store.appendAudit(...job.args);
    case 'keepRejections': {
      const [items, bounds] = job.args;
      return store.keepRejections(items.map((r) => (r.body ? { ...r, body: asBuffer(r.body) } : r)), bounds);
    }
    case 'updateRejection':
      return store.updateRejection(...job.args);
    case 'deleteRejections':
      return store.deleteRejections(...job.args);
    case 'clearRejections':
      return store.clearRejections(...job.args);
    case 'outbox.claim':
      return store.outbox.claim(...job.args);
    case 'outbox.renew':
      return store.outbox.renew(...job.args);
    case 'outbox.settle':
      return store.outbox.settle(...job.args);
    case 'outbox.requeueDead':
      return store.outbox.requeueDead(...job.args);
    case 'createCredential':
      return store.createCredential(...job.args);
    case 'revokeCredential':
      return store.revokeCredential(...job.args);
    case 'rotateCredential':
      return store.rotateCredential(...job.args);
    case 'touchCredentials':
      return store.touchCredentials(...job.args);
    case 'close':
      return Promise.resolve();
  }
}

/**
 * The worker: migrates, then runs each job as it arrives. Statement inserts that arrive together
 * (the port delivers every queued message before the next turn of the loop) form one group commit.
 */
async function serve(port: MessagePort, { manualClock, ...opts }: ThreadedSqliteOptions): Promise<void> {
  let store: SqliteStore;
  try {
    const relay = (level: 'info' | 'error') => (fields: object, msg: string) => port.postMessage({ log: { level, fields, msg } } satisfies Message);
    const clock = manualClock && new ManualClock(manualClock.startMs, manualClock.stepMs);
    store = new SqliteStore({ ...opts, clock, logger: { info: relay('info'), error: relay('error') } });
    await store.migrate();
  } catch (e) {
    port.postMessage({ ready: false, error: toWire(e) } satisfies Message);
    port.close();
    return;
  }
  store.onOutboxWrite(() => port.postMessage({ queued: true } satisfies Message));
  port.on('message', (job: Job) => {
    if (job.op === 'close') {
      // Let the writes already taken commit (their group is flushed on the next turn), then stop.
      setImmediate(() =>
        setImmediate(async () => {
          await store.close();
          port.postMessage({ id: job.id, ok: true, value: undefined } satisfies Message);
          port.close();
        }),
      );
      return;
    }
    const transfer: ArrayBuffer[] = [];
    run(store, job, transfer).then(
      (value) => port.postMessage({ id: job.id, ok: true, value } satisfies Message, transfer),
      (error: unknown) => port.postMessage({ id: job.id, ok: false, error: toWire(error) } satisfies Message),
    );
  });
  port.postMessage({ ready: true } satisfies Message);
}

const started = isMainThread ? undefined : (workerData as { lecternSqliteWriter?: { port: MessagePort; options: ThreadedSqliteOptions } } | null)?.lecternSqliteWriter;
if (started) void serve(started.port, started.options);
