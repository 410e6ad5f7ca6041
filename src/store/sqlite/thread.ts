/**
 * SQLite on two threads: the one connection that writes lives on a worker thread of its own, so
 * the event loop (HTTP, JSON, validation) and the database writes — inserts under several
 * B-trees and the commit's fsync — run on two cores at once. Reads stay on a connection of this
 * thread (WAL: readers never wait for the writer, and see every committed write).
 *
 * The worker runs an ordinary SqliteStore: every write of the Store interface (ROUTES below:
 * statements, documents, forwarding outbox, data lifecycle, credentials, kept rejections, the
 * audit log) is sent to it as a call and answered after its COMMIT. Calls that arrive while the writer is busy queue on its port and are written as one
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
import type { Outbox, Store } from '../types.ts';
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

/**
 * Where each member of the Store runs: `write`, sent to the writer thread and answered after its
 * COMMIT; `read`, on this thread's connection (WAL: it sees every committed write, so a write
 * answered before a read is in what the read finds). The members not listed are the class's own.
 * The methods are made from this list (the class's static block), and so is the calls' type.
 */
const ROUTES = {
  // statements, their attachments and lifecycle
  insertStatements: 'write',
  deleteStatements: 'write',
  rewriteStatements: 'write',
  getStatement: 'read',
  queryStatements: 'read',
  getAttachments: 'read',
  attachmentSizes: 'read',
  attachmentsNotCarried: 'read',
  attachmentCarrierCounts: 'read',
  consistentThrough: 'read',
  statementsWithAgent: 'read',
  getActivityDefinitions: 'read',
  statementViolations: 'read',
  violationsAt: 'read',
  statementsWithViolations: 'read',
  scanStatements: 'read',
  countStatements: 'read',
  referringStatements: 'read',
  // documents
  putDocument: 'write',
  deleteDocument: 'write',
  deleteDocuments: 'write',
  moveDocuments: 'write',
  getDocument: 'read',
  listDocumentIds: 'read',
  scanDocuments: 'read',
  // kept rejections, credentials, the admin API
  keepRejections: 'write',
  updateRejection: 'write',
  deleteRejections: 'write',
  clearRejections: 'write',
  claimRejections: 'write',
  renewRejectionClaim: 'write',
  releaseRejections: 'write',
  listRejections: 'read',
  getRejection: 'read',
  createCredential: 'write',
  revokeCredential: 'write',
  rotateCredential: 'write',
  touchCredentials: 'write',
  getCredential: 'read',
  listCredentials: 'read',
  credentialsVersion: 'read',
  appendAudit: 'write',
  listAudit: 'read',
  storeNames: 'read',
  storeSummaries: 'read',
  storeOverview: 'read',
  storeTotals: 'read',
  // the console's ended sessions
  endSession: 'write',
  sessionEnded: 'read',
  findKeys: 'read',
} as const satisfies Partial<Record<keyof Store, 'write' | 'read'>>;

/** The same for the forwarding outbox (its writes cross as `outbox.<member>`). */
const OUTBOX_ROUTES = {
  claim: 'write',
  renew: 'write',
  settle: 'write',
  requeueDead: 'write',
  stats: 'read',
  deadLetters: 'read',
  oldestQueued: 'read',
} as const satisfies Record<keyof Outbox, 'write' | 'read'>;

type Routed = keyof typeof ROUTES;
type Write = { [K in Routed]: (typeof ROUTES)[K] extends 'write' ? K : never }[Routed];
type OutboxWrite = { [K in keyof Outbox]: (typeof OUTBOX_ROUTES)[K] extends 'write' ? K : never }[keyof Outbox];

/** The store's writes: what the worker runs (outbox members prefixed `outbox.`). */
type WriteCall =
  | { [K in Write]: { op: K; args: Parameters<Store[K]> } }[Write]
  | { [K in OutboxWrite]: { op: `outbox.${K}`; args: Parameters<Outbox[K]> } }[OutboxWrite]
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

/**
 * What a write's Buffers become on the way: `send` (this thread) moves them into `transfer`,
 * `receive` (the writer) makes Buffers of them again; `answer` and `answered` do the same for
 * what the write returns.
 */
interface Codec<A extends unknown[], R> {
  send?(args: A, transfer: ArrayBuffer[]): A;
  receive?(args: A): A;
  answer?(value: R, transfer: ArrayBuffer[]): R;
  answered?(value: R): R;
}

type AnyCodec = Codec<unknown[], unknown>;

const CODECS: { [K in Write]?: Codec<Parameters<Store[K]>, Awaited<ReturnType<Store[K]>>> } = {
  insertStatements: {
    send: ([tenant, batch, attachments], transfer) => [tenant, batch, attachments.map((a) => ({ ...a, content: moved(a.content, transfer) }))],
    receive: ([tenant, batch, attachments]) => [tenant, batch, attachments.map((a) => ({ ...a, content: asBuffer(a.content) }))],
  },
  putDocument: {
    send: ([tenant, key, doc, opts], transfer) => [tenant, key, { ...doc, content: moved(doc.content, transfer) }, opts],
    receive: ([tenant, key, doc, opts]) => [tenant, key, { ...doc, content: asBuffer(doc.content) }, opts],
    answer: (d, transfer) => ({ ...d, content: moved(d.content, transfer) }),
    answered: (d) => ({ ...d, content: asBuffer(d.content) }),
  },
  keepRejections: {
    send: ([items, bounds], transfer) => [items.map((r) => (r.body ? { ...r, body: moved(r.body, transfer) } : r)), bounds],
    receive: ([items, bounds]) => [items.map((r) => (r.body ? { ...r, body: asBuffer(r.body) } : r)), bounds],
  },
};

const codecOf = (op: string): AnyCodec | undefined => (CODECS as Record<string, AnyCodec | undefined>)[op];

type Member = (...args: unknown[]) => Promise<unknown>;

/** The members ROUTES sends or reads (made by the class's static block). */
export interface ThreadedSqliteStore extends Pick<Store, Routed> {}

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
    const outbox: Record<string, Member> = {};
    for (const [op, route] of Object.entries(OUTBOX_ROUTES)) {
      outbox[op] =
        route === 'write'
          ? (...args) => this.write(`outbox.${op}`, args)
          : (...args) => {
              const reader = this.read().outbox;
              return (reader[op as keyof Outbox] as Member).apply(reader, args);
            };
    }
    this.outbox = outbox as unknown as Outbox;
  }

  static {
    for (const [op, route] of Object.entries(ROUTES)) {
      const member: Member =
        route === 'write'
          ? function (this: ThreadedSqliteStore, ...args) {
              return this.write(op, args);
            }
          : function (this: ThreadedSqliteStore, ...args) {
              const reader = this.read();
              return (reader[op as Routed] as Member).apply(reader, args);
            };
      Object.defineProperty(ThreadedSqliteStore.prototype, op, { value: member, writable: true, configurable: true });
    }
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

  /** A write sent to the writer thread, its Buffers moved (CODECS). */
  private write(op: string, args: unknown[]): Promise<unknown> {
    const codec = codecOf(op);
    const transfer: ArrayBuffer[] = [];
    const sent = this.send({ op, args: codec?.send ? codec.send(args, transfer) : args } as WriteCall, transfer);
    return codec?.answered ? sent.then(codec.answered) : sent;
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
}

// ----- the writer thread ----------------------------------------------------------------------

/** Runs one job on the writer's store: its arguments and answer through the op's codec (Buffers again, and a document's bytes moved back). */
async function run(store: SqliteStore, job: Job, transfer: ArrayBuffer[]): Promise<unknown> {
  if (job.op === 'close') return undefined;
  const outbox = job.op.startsWith('outbox.');
  const target = (outbox ? store.outbox : store) as unknown as Record<string, Member>;
  const codec = codecOf(job.op);
  const value = await target[outbox ? job.op.slice('outbox.'.length) : job.op].apply(target, codec?.receive ? codec.receive(job.args) : job.args);
  return codec?.answer ? codec.answer(value, transfer) : value;
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
