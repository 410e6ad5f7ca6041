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
 * PostgreSQL returns (./connection.ts). Reads: ./readers.ts; this module: the writes.
 */
import pg from 'pg';
import { LrsError } from '../../errors.ts';
import type { EarlierVoiding, InsertPlan, KnownStatement } from '../../xapi/insert.ts';
import { AGENT_ROLES, indexRows, type PreparedStatement } from '../../xapi/statement.ts';
import type { ActivityDefinition, Statement } from '../../xapi/types.ts';
import { GroupPlanner, type GroupRequest, GroupQueue, KeyCache, statementKeys, voidedBy } from '../pipeline.ts';
import { type ReachSeed, rebuildReach } from '../reach.ts';
import type { AttachmentBlob, InsertOutcome, ReplicaStatus, StatementReads, StatementRewrite, Store } from '../types.ts';
import type { PostgresOptions } from './connection.ts';
import { LOCK_INTENT, LOCK_STATEMENTS, tenantLockKey } from './locks.ts';
import { describe, toLrsError } from './errors.ts';
import { PostgresOutbox } from './outbox.ts';
import { KEY_CACHE_MAX, PostgresReaders } from './readers.ts';
import { primaryMark, Replicas } from './replicas.ts';
import { changedDefinitions, type DefinitionsInFlight, INSERT_READ, INSERT_WRITE, resolveKeys, type ResolvedKeys, writeValues } from './write.ts';

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

/**
 * The link rows of removed statements ($2/$3: agent keys and seqs; $4/$5: activity IRIs and
 * seqs), each probed by its whole primary key (key id, role, seq), every role tried (rows as
 * older versions wrote them go too). Given only the key id and seq, with the roles as a list, the
 * planner filtered on the role and walked every entry of the key — and the authority's key is in
 * every statement: a prune batch of 200 statements took 3 s at 300,000 statements. Key ids by one
 * probe each (LIMIT 1: a nested loop, not a hash of the whole dictionary); OFFSET 0 keeps the
 * (id, role, seq) rows whole for the join.
 */
const unlinkProbes = (keys: string, seqs: string, roles: readonly number[]): string =>
  `(SELECT k.id, t.seq, r.role FROM unnest(${keys}::text[], ${seqs}::bigint[]) AS t(key, seq) ` +
  'CROSS JOIN LATERAL (SELECT id FROM keys WHERE tenant = $1 AND key = t.key LIMIT 1) k ' +
  `CROSS JOIN unnest('{${roles.join(',')}}'::smallint[]) AS r(role) OFFSET 0) d`;
const UNLINK = `WITH
ag AS (DELETE FROM statement_agents x USING ${unlinkProbes('$2', '$3', AGENT_ROLES)} WHERE x.agent = d.id AND x.role = d.role AND x.seq = d.seq),
ac AS (DELETE FROM statement_activities x USING ${unlinkProbes('$4', '$5', [0, 1])} WHERE x.activity = d.id AND x.direct = d.role AND x.seq = d.seq)
SELECT 1`;

/** A tenant's drain (its requests wait in the store's GroupQueue). */
interface InsertQueue {
  /** Set while the drain waits for work or for its last group. */
  wake?: () => void;
  /** What the group decided last, until it has committed or failed (see DefinitionsInFlight). */
  inFlight?: DefinitionsInFlight;
}

/** A group stops growing here (a single larger request still goes, alone). */
const GROUP_MAX_STATEMENTS = 2000;

export class PostgresStore extends PostgresReaders implements Store {
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
  /** Per tenant id: dictionary ids known at `keys_epoch` = epoch (see resolveKeys). */
  private readonly keyCache = new KeyCache<string>(KEY_CACHE_MAX);

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

  /**
   * The dictionary ids of `keys` (creating missing ones), on `c` or, committed at once, on the
   * pool. On the pool, ids already known at the cached `keys_epoch` cost no round trip: the write
   * checks that epoch under the tenant lock, so an erasure since (which bumps it) sends the group
   * back to resolve its keys again inside its transaction, as without the cache.
   */
  private async resolveKeys(c: pg.PoolClient | undefined, tenantId: number, keys: Set<string>): Promise<ResolvedKeys> {
    if (c) return this.queryKeys(c, tenantId, keys);
    const cached = this.keyCache.lookup(tenantId, keys);
    if (cached) {
      const { ids, missing, epoch } = cached;
      if (!missing.size) return { ids, epoch };
      const found = await this.queryKeys(undefined, tenantId, missing);
      if (found.epoch === epoch) {
        for (const [k, id] of found.ids) ids.set(k, id);
        this.keyCache.add(tenantId, epoch, found.ids);
        return { ids, epoch };
      }
    }
    // Nothing cached, or an erasure since: every id again, at one epoch.
    const all = await this.queryKeys(undefined, tenantId, keys);
    this.keyCache.forget(tenantId);
    this.keyCache.add(tenantId, all.epoch, all.ids);
    return all;
  }

  private queryKeys(c: pg.PoolClient | undefined, tenantId: number, keys: Set<string>): Promise<ResolvedKeys> {
    return c ? this.runProgram(resolveKeys(tenantId, keys, false), c) : this.runProgram(resolveKeys(tenantId, keys, true));
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

  /**
   * Writes the reach rows (src/store/reach.ts) of new StatementRefs (`seeds`), and rebuilds those
   * of the statements in `stored` and of every statement reaching one of them: a statement they
   * target has arrived, or a statement of their chains was erased or rewritten. `known`: key ids
   * at hand (the group's), so only the others are read.
   */
  private updateReach(c: pg.PoolClient, tenantId: number, seeds: ReachSeed[], stored: number[], known?: ReadonlyMap<string, number>): Promise<void> {
    return this.runProgram(rebuildReach(this.dialect.reach, tenantId, seeds, stored, known), c);
  }

  /** Erasure and pseudonymisation take the tenant's statement lock: no insert decides on rows they change. */
  private lockTenant(c: pg.PoolClient, tenant: string): Promise<unknown> {
    return c.query({ name: 'lock_statements', text: 'SELECT pg_advisory_xact_lock($1, $2)', values: [LOCK_STATEMENTS, tenantLockKey(tenant)] });
  }

  /**
   * Deletes the link rows (agents; activities too unless `agentsOnly`) of removed statement
   * versions by primary key (UNLINK), computed from their stored JSON (indexRows: as they were
   * written; the link tables have no index on seq). Returns the agent keys unlinked.
   */
  private async unlink(c: pg.PoolClient, tenantId: number, removed: { seq: string; statement: Statement }[], agentsOnly = false): Promise<string[]> {
    const agents: [string[], string[]] = [[], []];
    const activities: [string[], string[]] = [[], []];
    for (const { seq, statement } of removed) {
      const rows = indexRows(statement);
      for (const a of rows.agents) agents[0].push(a.key), agents[1].push(seq);
      if (!agentsOnly) for (const a of rows.activities) activities[0].push(a.id), activities[1].push(seq);
    }
    await c.query({ name: 'unlink_statements', text: UNLINK, values: [tenantId, ...agents, ...activities] });
    return [...new Set(agents[0])];
  }

  /**
   * Deletes the dictionary keys (of agents whose rows were unlinked) that nothing of the tenant
   * refers to any more: after an erasure no personal data stays in `keys`. Every use is checked
   * (an agent key could equal an IRI). A statement of its own, after the deletions (a CTE's
   * deletions are not visible to its own reads).
   *
   * Each key is found and checked by probes of its own: `key = ANY(…)` was planned as a walk of
   * the tenant's whole dictionary. `BETWEEN id AND id` is `= id` for the two statements
   * columns, but estimated as a narrow range: where one authority (or verb) wrote everything,
   * its statistics say any id matches every row, and the planner walked the tenant's whole
   * index for a key that is no authority (180 ms a key at 300,000 statements).
   */
  private async dropUnusedKeys(c: pg.PoolClient, tenantId: number, keys: string[]): Promise<void> {
    const dropped = await c.query({
      name: 'delete_orphan_keys',
      text:
        'DELETE FROM keys WHERE id = ANY(ARRAY(SELECT k.id FROM unnest($2::text[]) AS t(key) ' +
        'CROSS JOIN LATERAL (SELECT id FROM keys WHERE tenant = $1 AND key = t.key LIMIT 1) k ' +
        'WHERE NOT EXISTS (SELECT 1 FROM statement_agents x WHERE x.agent = k.id) ' +
        'AND NOT EXISTS (SELECT 1 FROM statement_activities x WHERE x.activity = k.id) ' +
        'AND NOT EXISTS (SELECT 1 FROM statements s WHERE s.tenant = $1 AND s.authority BETWEEN k.id AND k.id) ' +
        'AND NOT EXISTS (SELECT 1 FROM statements s WHERE s.tenant = $1 AND s.verb BETWEEN k.id AND k.id)))',
      values: [tenantId, keys],
    });
    // Writers resolve ids before their transaction: this tells them to resolve again.
    if (dropped.rowCount) {
      await c.query({ name: 'bump_keys_epoch', text: 'UPDATE keys_epoch SET n = n + 1', values: [] });
      this.keyCache.forget(tenantId);
    }
  }

  async deleteStatements(tenant: string, ids: string[]): Promise<{ statements: number; attachments: number }> {
    const tid = await this.tenantId(tenant);
    if (!ids.length || tid === undefined) return { statements: 0, attachments: 0 };
    return this.tx(async (c) => {
      // The tenant's statement lock, first and for the whole (short) transaction, though old
      // statements do not bear on the order of new ones (seq comes from a sequence, stored never
      // goes back): a writer resolved its key ids before its transaction and checks keys_epoch
      // under this lock, so keys dropped here without it could be written in new link rows;
      // a writer voiding or reaching a statement deleted here relies on its row, checked under
      // the lock, and its reach rows would outlive it. Taken after the deletions instead, a
      // writer holding the lock and waiting for a row deleted here would deadlock with it.
      await this.lockTenant(c, tenant);
      const r = await c.query<{ rows: string | null; hashes: string[]; none_days: number[]; none_verbs: number[] }>({
        name: 'delete_statements',
        text: `WITH
s AS (DELETE FROM statements WHERE tenant = $1 AND id = ANY($2::uuid[]) RETURNING seq, "full", stored_ms, verb),
-- Taken off the Overview's counts (src/store/overview.ts); a count at zero goes below.
cn AS (UPDATE statement_counts c SET n = c.n - d.n FROM (SELECT (stored_ms / 86400000)::int AS day, verb, count(*) AS n FROM s GROUP BY 1, 2) d
  WHERE c.tenant = $1 AND c.day = d.day AND c.verb = d.verb RETURNING c.day, c.verb, c.n),
ob AS (DELETE FROM forward_outbox WHERE seq IN (SELECT seq FROM s)),
vi AS (DELETE FROM statement_violations WHERE seq IN (SELECT seq FROM s)),
sa AS (DELETE FROM statement_attachments WHERE seq IN (SELECT seq FROM s) RETURNING sha2)
SELECT (SELECT json_agg(json_build_array(seq::text, "full")) FROM s) AS rows, ARRAY(SELECT DISTINCT sha2 FROM sa) AS hashes,
  ARRAY(SELECT day FROM cn WHERE n <= 0) AS none_days, ARRAY(SELECT verb FROM cn WHERE n <= 0) AS none_verbs`,
        values: [tid, ids],
      });
      const head = r.rows[0];
      if (head.none_days.length) {
        await c.query({
          name: 'delete_zero_counts',
          text: 'DELETE FROM statement_counts c USING unnest($2::int[], $3::int[]) AS z(day, verb) WHERE c.tenant = $1 AND c.day = z.day AND c.verb = z.verb AND c.n <= 0',
          values: [tid, head.none_days, head.none_verbs],
        });
      }
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
        // The key ids are the tenant's own (src/store/postgres/dialect.ts, LINK_ROLES).
        text: 'INSERT INTO statement_agents (agent, role, seq) SELECT k, d, s FROM unnest($1::int[], $2::bigint[], $3::smallint[]) AS t(k, s, d)',
        values: [agents.map((a) => a[0]), agents.map((a) => a[1]), agents.map((a) => a[2])],
      });
      // What reaches a rewritten statement copied its agents and authority: rebuilt.
      await this.updateReach(c, tid, [], found.map((r) => Number(seqOf.get(r.id))), keyIds);
      // The old agents' keys, once nothing uses them (the new rows are in place).
      await this.dropUnusedKeys(c, tid, unlinked);
    });
  }
}
