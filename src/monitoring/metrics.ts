/**
 * Prometheus metrics (prom-client) of a running LRS: HTTP requests, statements, documents,
 * authentication failures, storage latency and connection pool, process metrics, and the
 * forwarding queues of whichever module registers a stats provider (see `registerForwarding`).
 *
 * Three registries, by how a server of several worker processes (./cluster.ts) reports them:
 * `counted`, what each process counts, added up over the workers; `own`, a process's own state
 * (memory, event loop, its request-body budget, its view of the replicas), one series per worker
 * (a `worker` label); `database`, figures read from the database, the same in every process,
 * read once per scrape by the worker that answers it. A single process serves all three as they are.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { ForwardingStats, PoolStats, ReplicaStatus, Store } from '../store/types.ts';
import type { PreparedStatement } from '../xapi/statement.ts';
import { type WorkerFigures, WorkerScrapes } from './cluster.ts';
import { IngestRate } from './ingest.ts';

export interface MetricsOptions {
  /** This process is worker `worker` (its cluster id) of a server of several: /metrics answers for all of them. */
  worker?: number;
}

/** Called at each scrape; may be async (e.g. a queue kept in the database). */
export type ForwardingStatsProvider = () => ForwardingStats[] | Promise<ForwardingStats[]>;

/** Why a statement write was refused, from the response status. */
const REJECTION: Record<number, string> = {
  400: 'invalid',
  401: 'unauthenticated',
  403: 'forbidden',
  409: 'conflict',
  412: 'precondition_failed',
  413: 'too_large',
  415: 'unsupported_media_type',
  429: 'throttled',
  503: 'unavailable',
};

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Store methods that are not queries. */
const NOT_TIMED = new Set(['migrate', 'close', 'waitForServer', 'poolStats', 'replicas', 'exclusively']);
const REPLICA_STATES = ['starting', 'up', 'lagging', 'down', 'promoted'] as const;

export class Metrics {
  private readonly counted = new Registry();
  private readonly own = new Registry();
  private readonly database = new Registry();
  readonly contentType = this.counted.contentType;
  private readonly cluster: WorkerScrapes | undefined;
  private readonly forwarding: ForwardingStatsProvider[] = [];
  /** Statements newly stored per minute, the last minutes (the admin API's status). */
  readonly ingest = new IngestRate();

  private readonly requests = new Counter({
    name: 'lectern_http_requests_total',
    help: 'HTTP requests answered, by route template, method and status',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [this.counted],
  });
  private readonly requestDuration = new Histogram({
    name: 'lectern_http_request_duration_seconds',
    help: 'Time from request received to response sent, by route template, method and status',
    labelNames: ['route', 'method', 'status'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.counted],
  });
  private readonly statementsStored = new Counter({
    name: 'lectern_statements_stored_total',
    help: 'Statements newly stored (a repeated identical statement is not counted again)',
    registers: [this.counted],
  });
  private readonly violations = new Counter({
    name: 'lectern_statement_violations_total',
    help: "Rules broken by statements accepted under lax validation (docs/validation.md), by rule (the validator's type, e.g. value_error.iri)",
    labelNames: ['rule'] as const,
    registers: [this.counted],
  });
  private readonly statementsRejected = new Counter({
    name: 'lectern_statements_rejected_total',
    help: 'Statement write requests (PUT/POST) refused, by reason',
    labelNames: ['reason'] as const,
    registers: [this.counted],
  });
  private readonly rejections = new Counter({
    name: 'lectern_rejections_total',
    help: 'Writes refused with 400, 409 or 413, by what became of them: kept (for `lectern rejections`), dropped (the queue was full) or failed (the database refused the write)',
    labelNames: ['outcome'] as const,
    registers: [this.counted],
  });
  private readonly documents = new Counter({
    name: 'lectern_documents_total',
    help: 'Successful document operations, by resource (state, activity_profile, agent_profile) and operation (read, write, delete)',
    labelNames: ['resource', 'operation'] as const,
    registers: [this.counted],
  });
  private readonly authFailures = new Counter({
    name: 'lectern_auth_failures_total',
    help: 'Requests refused for their credentials: 401 (missing or wrong), 403 (not allowed) or 429 (too many failed or concurrent checks from the address)',
    labelNames: ['status'] as const,
    registers: [this.counted],
  });
  private readonly dbDuration = new Histogram({
    name: 'lectern_db_query_duration_seconds',
    help: 'Storage operations (each one or a few SQL statements), by operation and outcome',
    labelNames: ['backend', 'operation', 'outcome'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.counted],
  });

  constructor(opts: MetricsOptions = {}) {
    collectDefaultMetrics({ register: this.own });
    if (opts.worker !== undefined) {
      this.own.setDefaultLabels({ worker: String(opts.worker) });
      this.cluster = new WorkerScrapes(() => this.collectForCluster());
    }
    // Forwarding figures are read from the providers once per scrape, then spread over the metrics.
    let scrape: Promise<ForwardingStats[]> | undefined;
    // A provider that fails (the database is down) leaves its figures out of this scrape: the rest
    // of /metrics still renders, when it matters most.
    const read = () =>
      (scrape ??= Promise.all(
        this.forwarding.map((p) =>
          Promise.resolve()
            .then(p)
            .catch(() => []),
        ),
      )
        .then((lists) => lists.flat())
        .finally(() => setImmediate(() => (scrape = undefined))));
    // queued and dead are levels (dead letters go back to the queue with `lectern forwarding retry`);
    // delivered and retried only grow.
    for (const [field, help] of [
      ['queued', 'Statements waiting to be forwarded, by target'],
      ['dead', 'Dead letters (given up on until `lectern forwarding retry`), by target'],
    ] as const) {
      new Gauge({
        name: `lectern_forwarding_${field}`,
        help,
        labelNames: ['target'] as const,
        registers: [this.database],
        async collect() {
          this.reset();
          for (const s of await read()) this.set({ target: s.target }, s[field]);
        },
      });
    }
    for (const field of ['delivered', 'retried'] as const) {
      new Counter({
        name: `lectern_forwarding_${field}_total`,
        help: `Statements ${field === 'retried' ? 'sent again after a failure' : 'accepted by the target'}, by target`,
        labelNames: ['target'] as const,
        registers: [this.database],
        async collect() {
          this.reset();
          for (const s of await read()) this.inc({ target: s.target }, s[field]);
        },
      });
    }
  }

  /**
   * Registers a source of forwarding figures, read at each scrape. The forwarding module (or
   * whoever starts it) calls this once per forwarder: `lrs.metrics.registerForwarding(() => forwarder.stats())`.
   * Returns a function that unregisters it.
   */
  registerForwarding(provider: ForwardingStatsProvider): () => void {
    this.forwarding.push(provider);
    return () => {
      const i = this.forwarding.indexOf(provider);
      if (i >= 0) this.forwarding.splice(i, 1);
    };
  }

  /** Records one answered request. `route` is the route template ('unmatched' for a 404 outside any route). */
  observeRequest(route: string, method: string, status: number, seconds: number, xapiMethod: string): void {
    const labels = { route, method, status: String(status) };
    this.requests.inc(labels);
    this.requestDuration.observe(labels, seconds);
    if (status === 401 || status === 403 || status === 429) this.authFailures.inc({ status: String(status) });
    if (route === '/xAPI/statements' && (xapiMethod === 'PUT' || xapiMethod === 'POST') && status >= 400) {
      this.statementsRejected.inc({ reason: REJECTION[status] ?? (status >= 500 ? 'error' : 'other') });
    }
    const resource = DOCUMENT_ROUTES[route];
    if (resource && status < 300) {
      const operation = xapiMethod === 'GET' || xapiMethod === 'HEAD' ? 'read' : xapiMethod === 'DELETE' ? 'delete' : 'write';
      this.documents.inc({ resource, operation });
    }
  }

  /**
   * The store, with every query method timed and newly stored statements counted. Methods the
   * store calls on itself are not seen (they run on the unwrapped object).
   */
  instrument(store: Store): Store {
    if (store.poolStats) this.poolGauges(() => store.poolStats!());
    if (store.replicas) this.replicaGauges(() => store.replicas!());
    return this.timed(store, store.backend);
  }

  /** `obj` with every query method timed; a read view (a replica's reads of one request) is timed too. */
  private timed<T extends object>(obj: T, backend: string): T {
    const wrapped = new Map<PropertyKey, unknown>();
    const proxy: T = new Proxy(obj, {
      get: (target, prop) => {
        const value: unknown = Reflect.get(target, prop, target);
        if (typeof value !== 'function' || typeof prop !== 'string' || NOT_TIMED.has(prop) || prop === 'constructor') return value;
        let fn = wrapped.get(prop);
        if (!fn) {
          const method = value as (...args: unknown[]) => unknown;
          fn =
            prop === 'readView'
              ? () => {
                  const view = method.apply(target, []) as object;
                  return view === target ? proxy : this.timed(view, backend);
                }
              : (...args: unknown[]) => {
                  const end = this.dbDuration.startTimer({ backend, operation: prop });
                  const result = method.apply(target, args);
                  if (!(result instanceof Promise)) {
                    end({ outcome: 'ok' });
                    return result;
                  }
                  return result.then(
                    (v: unknown) => {
                      end({ outcome: 'ok' });
                      if (prop === 'insertStatements') {
                        const inserted = (v as { inserted: number }).inserted;
                        this.statementsStored.inc(inserted);
                        this.ingest.add(inserted);
                        for (const p of args[1] as PreparedStatement[]) if (p.violations) for (const x of p.violations) this.violations.inc({ rule: x.type });
                      }
                      return v;
                    },
                    (err: unknown) => {
                      end({ outcome: 'error' });
                      throw err;
                    },
                  );
                };
          wrapped.set(prop, fn);
        }
        return fn;
      },
    });
    return proxy;
  }

  /**
   * Each read replica's state (1 for the one it is in) and lag, as its process last checked;
   * labelled by its place in LECTERN_POSTGRES_READ_URLS and host:port/database (no credentials).
   */
  private replicaGauges(read: () => ReplicaStatus[]): void {
    new Gauge({
      name: 'lectern_db_replica_state',
      help: 'Read replicas by state (1 for the state each is in): up (read from), lagging, down, promoted, starting',
      labelNames: ['replica', 'server', 'state'] as const,
      registers: [this.own],
      collect() {
        this.reset();
        for (const r of read()) for (const state of REPLICA_STATES) this.set({ replica: String(r.replica), server: r.server, state }, r.state === state ? 1 : 0);
      },
    });
    new Gauge({
      name: 'lectern_db_replica_lag_seconds',
      help: 'How far each read replica was behind the primary at its last check (absent while unknown)',
      labelNames: ['replica', 'server'] as const,
      registers: [this.own],
      collect() {
        this.reset();
        for (const r of read()) if (r.lagMs !== null) this.set({ replica: String(r.replica), server: r.server }, r.lagMs / 1000);
      },
    });
    new Gauge({
      name: 'lectern_db_replica_fallbacks',
      help: 'Reads each read replica failed since the process started (the primary answered them)',
      labelNames: ['replica', 'server'] as const,
      registers: [this.own],
      collect() {
        this.reset();
        for (const r of read()) this.set({ replica: String(r.replica), server: r.server }, r.fallbacks);
      },
    });
  }

  /** Gauges of a backend's connection pool (PostgreSQL; SQLite has none). */
  private poolGauges(read: () => PoolStats): void {
    for (const [field, help] of [
      ['total', 'Connections open to the database (busy and idle; with workers, of them all)'],
      ['idle', 'Idle connections in the pool (with workers, in their pools)'],
      ['waiting', 'Requests waiting for a free connection (with workers, in them all)'],
      ['max', 'Largest number of connections the pool opens (with workers, their pools together)'],
    ] as const) {
      new Gauge({
        name: `lectern_db_pool_${field === 'total' ? 'connections' : field}`,
        help,
        registers: [this.counted],
        collect() {
          this.set(read()[field]);
        },
      });
    }
  }

  /**
   * Gauges of the request bodies held in memory against LECTERN_MAX_BODIES_IN_FLIGHT, read at each
   * scrape: the bytes bodies hold as they arrive, and the estimated parsed size of their JSON.
   */
  watchBodies(read: () => { body: number; parsed: number; total: number }): void {
    new Gauge({
      name: 'lectern_request_bodies_held_bytes',
      help: 'Bytes held against LECTERN_MAX_BODIES_IN_FLIGHT: request bodies as they arrive (kind="body") and the estimated parsed size of their JSON (kind="parsed")',
      labelNames: ['kind'] as const,
      registers: [this.own],
      collect() {
        const now = read();
        this.set({ kind: 'body' }, now.body);
        this.set({ kind: 'parsed' }, now.parsed);
      },
    });
    new Gauge({
      name: 'lectern_request_bodies_max_bytes',
      help: 'LECTERN_MAX_BODIES_IN_FLIGHT: the most bytes request bodies (and their parsed estimates) may hold at once',
      registers: [this.own],
      collect() {
        this.set(read().total);
      },
    });
  }

  /** What became of refused writes handed to the keeper (src/ops/rejections.ts). */
  countRejections(outcome: 'kept' | 'dropped' | 'failed', n: number): void {
    this.rejections.inc({ outcome }, n);
  }

  /** The exposition text: this process's, or with workers the whole server's (a worker that does not answer fails it). */
  async render(): Promise<string> {
    if (!this.cluster) return Registry.merge([this.counted, this.own, this.database]).metrics();
    const [server, database] = await Promise.all([this.cluster.scrape(), this.database.metrics()]);
    return `${server}\n${database}`;
  }

  /** This worker's part of the server's figures. */
  private async collectForCluster(): Promise<WorkerFigures> {
    const [counted, own] = await Promise.all([this.counted.getMetricsAsJSON(), this.own.getMetricsAsJSON()]);
    return { counted, own };
  }

  /** Stops answering the cluster's collections (a worker's LRS closing). */
  close(): void {
    this.cluster?.close();
  }
}

const DOCUMENT_ROUTES: Record<string, string> = {
  '/xAPI/activities/state': 'state',
  '/xAPI/activities/profile': 'activity_profile',
  '/xAPI/agents/profile': 'agent_profile',
};
