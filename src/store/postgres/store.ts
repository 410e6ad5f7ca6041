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
 * PostgreSQL returns (./connection.ts). Reads: ./readers.ts; erasure and the dictionary's keys:
 * ./maintenance.ts; the shared programs' members: ../shared.ts; this module: the statement writes.
 */
import type pg from 'pg';
import { LrsError } from '../../errors.ts';
import type { EarlierVoiding, InsertPlan, KnownStatement } from '../../xapi/insert.ts';
import type { PreparedStatement } from '../../xapi/statement.ts';
import type { ActivityDefinition, Statement } from '../../xapi/types.ts';
import { GroupPlanner, type GroupRequest, GroupQueue, statementKeys, voidedBy } from '../pipeline.ts';
import type { ReachSeed } from '../reach.ts';
import type { AttachmentBlob, InsertOutcome, ReplicaStatus, StatementReads, Store } from '../types.ts';
import type { PostgresOptions } from './connection.ts';
import { LOCK_INTENT, LOCK_STATEMENTS, tenantLockKey } from './locks.ts';
import { describe, toLrsError } from './errors.ts';
import { PostgresOutbox } from './outbox.ts';
import { PostgresMaintenance } from './maintenance.ts';
import { primaryMark, Replicas } from './replicas.ts';
import { changedDefinitions, type DefinitionsInFlight, INSERT_READ, INSERT_WRITE, type ResolvedKeys, writeValues } from './write.ts';

export { filterKeyIds } from './readers.ts';
export { type PostgresOptions, SESSION_OPTIONS } from './connection.ts';

/** Statements inserted before the first ANALYZE of a process (see noteInserted). */
const ANALYZE_MIN_ROWS = 1000;
/**
 * How long that ANALYZE waits for a lock a VACUUM holds before it gives way: under PostgreSQL's
 * deadlock_timeout (1 s), after which the server would cancel an autovacuum for it, and short
 * enough that an operator's long VACUUM does not keep a pooled connection.
 */
const ANALYZE_LOCK_WAIT_MS = 200;
/** After giving way to a VACUUM (which analyzes too when due), the next try. */
const ANALYZE_RETRY_MS = 30_000;

/**
 * How a statement group's transaction opens, in one round trip: its tenant's intent lock (before
 * the group's first read, whose clock must run after it is granted), and generic plans for its
 * reads and write (INSERT_READ, INSERT_WRITE, the keys), planned once per connection. The
 * session's force_custom_plan is for page reads over skewed filter values; planned afresh, a
 * group spent ≈ 0.8 ms of server time planning, 0.55 ms of it under the tenant lock.
 */
const groupBegin = (tenant: string): string =>
  `BEGIN; SET LOCAL plan_cache_mode = force_generic_plan; SELECT pg_advisory_xact_lock_shared(${LOCK_INTENT}, ${tenantLockKey(tenant)})`;

/** A tenant's drain (its requests wait in the store's GroupQueue). */
interface InsertQueue {
  /** Set while the drain waits for work or for its last group. */
  wake?: () => void;
  /** What the group decided last, until it has committed or failed (see DefinitionsInFlight). */
  inFlight?: DefinitionsInFlight;
}

/** A group stops growing here (a single larger request still goes, alone). */
const GROUP_MAX_STATEMENTS = 2000;

export class PostgresStore extends PostgresMaintenance implements Store {
  readonly outbox: PostgresOutbox;
  private readonly outboxListeners: (() => void)[] = [];
  private readonly queues = new Map<string, InsertQueue>();
  /** Per tenant; a tenant without a drain starts one, a waiting drain is woken. */
  private readonly pending = new GroupQueue(GROUP_MAX_STATEMENTS, (tenant) => {
    const q = this.queues.get(tenant);
    if (!q) void this.drain(tenant);
    else q.wake?.();
  });
  /** Statements inserted by this process since its last ANALYZE, and the count that ANALYZE saw (see noteInserted). */
  private sinceAnalyze = 0;
  private analyzing = false;
  private analyzeNotBefore = -Infinity;

  /** The read replicas, when LECTERN_POSTGRES_READ_URLS names some (./replicas.ts). */
  private readonly readReplicas?: Replicas;

  constructor(opts: PostgresOptions) {
    super(opts);
    this.outbox = new PostgresOutbox(this.runner, this.dialect.outbox, opts.forwardTargets ?? []);
    if (opts.readUrls?.length) {
      const replicas = (this.readReplicas = new Replicas({ ...opts, readUrls: opts.readUrls }, () => primaryMark((sql) => this.query(sql, []))));
      this.readView = () => replicas.view(this);
      this.replicas = () => replicas.status();
      replicas.start();
    }
  }

  // ----- read replicas (./replicas.ts) -----------------------------------------------------
  /** Only with replicas (without, requests read from the store itself). */
  readonly readView?: () => StatementReads;
  readonly replicas?: () => ReplicaStatus[];

  override async close(): Promise<void> {
    await this.readReplicas?.close();
    await super.close();
  }

  onOutboxWrite(listener: () => void): void {
    this.outboxListeners.push(listener);
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
    return this.pending.add(tenant, tenant, batch, attachments);
  }

  /**
   * Two groups of a tenant are in flight at once: while one holds the tenant lock (its write and
   * commit), the next reads, decides and builds its parameters on another connection, then waits
   * for the lock. A third gathers meanwhile.
   */
  private async drain(tenant: string): Promise<void> {
    const q: InsertQueue = {};
    this.queues.set(tenant, q);
    let previous: Promise<void> = Promise.resolve();
    for (;;) {
      if (!this.pending.has(tenant)) {
        // Requests that arrive while the last group writes form the next group at once.
        await Promise.race([previous, new Promise<void>((resolve) => (q.wake = resolve))]);
        q.wake = undefined;
        if (!this.pending.has(tenant)) break;
      }
      const group = this.pending.take(tenant);
      let markPrepared!: () => void;
      const prepared = new Promise<void>((resolve) => (markPrepared = resolve));
      const done = this.runGroup(tenant, group, previous, markPrepared, q).finally(markPrepared);
      await prepared;
      await previous;
      previous = done;
      // Let the callers just answered send their next requests before deciding the queue is empty.
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    this.queues.delete(tenant);
  }

  /** Never rejects: each job is answered. `q`: its tenant's queue, where it shows the next group what it writes. */
  private async runGroup(
    tenant: string,
    group: GroupRequest[],
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
    for (const [i, r] of results.entries()) {
      if (r instanceof LrsError) group[i].reject(r);
      else group[i].resolve(r);
    }
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
    group: GroupRequest[],
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
      this.keyCache.forget(tenant.id);
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
   * and took 112 ms instead of 0.8 ms, docs/performance.md, "PostgreSQL"). So once this process has inserted
   * half as many statements as the last ANALYZE saw (at least 1,000), it analyzes the statement
   * tables in the background: ≈ 17 times from empty to 1M, each a sample of 30,000 rows, which
   * blocks no write. A VACUUM of those tables (autovacuum's takes minutes at 10M) is not waited
   * for nor cancelled: the ANALYZE gives way and tries again later.
   */
  private noteInserted(n: number): void {
    this.sinceAnalyze += n;
    if (this.analyzing || this.closed || this.sinceAnalyze < Math.max(ANALYZE_MIN_ROWS, this.analyzedRows / 2)) return;
    if (this.clock.now() < this.analyzeNotBefore) return;
    this.analyzing = true;
    const counted = this.sinceAnalyze;
    this.analyzedRows += counted;
    this.sinceAnalyze = 0;
    this.tx(async (c) => {
      await c.query(`SET LOCAL lock_timeout = ${ANALYZE_LOCK_WAIT_MS}`);
      await c.query('ANALYZE statements, statement_agents, statement_activities, keys');
    })
      .catch((err: unknown) => {
        if ((err as { code?: string }).code === '55P03') {
          // lock_not_available: a VACUUM holds a table. The statements stay counted for the next try.
          this.analyzedRows -= counted;
          this.sinceAnalyze += counted;
          this.analyzeNotBefore = this.clock.now() + ANALYZE_RETRY_MS;
        } else {
          this.opts.logger?.warn({ err: describe(err) }, 'ANALYZE of the statement tables failed');
        }
      })
      .finally(() => (this.analyzing = false));
  }

  /**
   * Rejected requests keep none of the keys they brought (an agent key may name a person): those
   * no stored statement uses are deleted, under the tenant lock like an erasure (writers that
   * resolved one meanwhile see `keys_epoch` move and resolve again). Before the rejection is
   * answered; a failure here is logged, not the request's.
   */
  private async dropRejectedKeys(tenant: string, tenantId: number, jobs: GroupRequest[]): Promise<void> {
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

  /** Reads what a group's decisions need, decides each request in order, and builds the write. */
  private async decideGroup(
    c: pg.PoolClient,
    tenant: { id: number; name: string },
    group: GroupRequest[],
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
    for (const [target, seq, xmin, isVoiding, authorityKey] of JSON.parse(head.voided_earlier ?? '[]') as [string, string, string, number, string | null][]) {
      relied.push([seq, xmin]);
      voidedBy(voidedEarlier, target, { authorityKey, mineOnly: isVoiding === 2 });
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
    const planner = new GroupPlanner({ known, voidedEarlier }, storedIso);
    const plans: InsertPlan[] = [];
    const results = group.map((job): InsertOutcome | LrsError => {
      let plan: InsertPlan;
      try {
        plan = planner.plan(job);
      } catch (err) {
        if (err instanceof LrsError) return err;
        throw err;
      }
      // The group is written whole or not at all: later requests see this one's statements.
      planner.stored(plan);
      plans.push(plan);
      return plan.outcome;
    });
    const basis = { snapSeq: head.snap_seq, checkIds, relied, defIds, keptDefs, flightDefs };
    const changed = changedDefinitions(plans, kept);
    return { results, values: (keys) => writeValues(tenant, plans, storedMs, changed, basis, keys), fresh: () => plans.flatMap((plan) => plan.fresh.map((f) => f.p)), changed };
  }
}
