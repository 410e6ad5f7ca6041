/**
 * The SQLite backend on `node:sqlite` (no native addon): WAL mode, group-committed statement
 * writes, versioned migrations. The driver is synchronous, so a transaction never interleaves
 * with another request's in this process.
 *
 * Lean storage (see src/store/sql.ts): tenants, verbs, activity IRIs and agent keys are stored
 * once, in `tenants` and `keys`; statements and link rows hold their integer ids, and UUIDs are
 * 16 bytes. The connection, transactions, migrations and the dictionaries: ./connection.ts;
 * the reads: ./readers.ts and ./pages.ts; the shared programs' members: ../shared.ts; this
 * module: the statement writes.
 */
import { mergeDefinition } from '../../xapi/activity.ts';
import { type EarlierVoiding, type InsertPlan, type KnownStatement, rowsToRead } from '../../xapi/insert.ts';
import type { PreparedStatement } from '../../xapi/statement.ts';
import type { ActivityDefinition, Statement } from '../../xapi/types.ts';
import type { ReachSeed } from '../reach.ts';
import { GroupPlanner, type GroupRequest, GroupQueue, statementKeys } from '../pipeline.ts';
import { GroupCounts } from '../overview.ts';
import { isVoidingValue, seqBucket, uuidBytes } from '../sql.ts';
import type { AttachmentBlob, InsertOutcome, Store } from '../types.ts';
import { SqliteOutbox } from './outbox.ts';
import { describeSqlite, isStorageFailure, type SqliteOptions, WriteFailed } from './connection.ts';
import { SqliteMaintenance } from './maintenance.ts';
import { cacheSize, writerCacheMiB } from './migrations.ts';
import { BY_ID, BY_RECENT_ID, StatementIds } from './ids.ts';

export type { SqliteOptions, StoreLog } from './connection.ts';

type Row = Record<string, unknown>;

/** Canonical definitions cached at most (then the cache starts again). */
const DEFINITION_CACHE_MAX = 50_000;

/** A tenant's requests of a group: their planner, and by new id the stored statements targeting it (their reach is rebuilt when it arrives). */
interface TenantPlan {
  planner: GroupPlanner;
  referrers: Map<string, number[]>;
}

interface GroupResult {
  outcomes: ({ ok: true; value: InsertOutcome } | { ok: false; error: unknown })[];
  /** Statements queued for forwarding. */
  queued: number;
}

export class SqliteStore extends SqliteMaintenance implements Store {
  readonly outbox: SqliteOutbox;
  private readonly outboxListeners: (() => void)[] = [];
  private readonly staged = new Map<number, { input: string; kept: string }>();
  private definitionsChanged = false;
  /** One queue for the connection, every tenant's requests in it, written whole on the next turn of the event loop. */
  private readonly pending = new GroupQueue(Infinity, (_, first) => {
    if (first) setImmediate(() => this.flush());
  });

  /** The page cache follows the store's size (writerCacheMiB) unless LECTERN_SQLITE_CACHE_SIZE fixes it. */
  private readonly cacheFollowsSize: boolean;
  /** The id levels: their merges, and the filter that spares most lookups the two merged ones (./ids.ts). */
  private readonly ids = new StatementIds((sql) => this.q(sql));
  /** The next step of the id filter's build, between transactions. */
  private buildStep?: NodeJS.Immediate;

  constructor(opts: SqliteOptions) {
    super(opts);
    this.outbox = new SqliteOutbox(this.runner, this.dialect.outbox, this.handle, opts.forwardTargets ?? []);
    this.cacheFollowsSize = opts.cacheMiB === undefined;
  }

  override async migrate(): Promise<void> {
    await super.migrate();
    this.sizeCache();
  }

  /** Sizes this connection's page cache for the statements the store has held (its AUTOINCREMENT counter). */
  private sizeCache(): void {
    if (!this.cacheFollowsSize) return;
    const r = this.q("SELECT seq FROM sqlite_sequence WHERE name = 'statements'").get() as Row | undefined;
    this.db.exec(`PRAGMA cache_size = ${cacheSize(writerCacheMiB(Number(r?.seq ?? 0)))}`);
  }

  onOutboxWrite(listener: () => void): void {
    this.outboxListeners.push(listener);
  }

  /**
   * Group commit: batches that arrive while the event loop is busy are written in one
   * transaction (one WAL sync for all of them). Every caller is answered after the COMMIT.
   */
  insertStatements(tenant: string, batch: PreparedStatement[], attachments: AttachmentBlob[]): Promise<InsertOutcome> {
    return this.pending.add('', tenant, batch, attachments);
  }

  private flush(): void {
    const jobs = this.pending.take('');
    let written: GroupResult;
    try {
      try {
        written = this.writeGroup(jobs, false);
      } catch (error) {
        if (!(error instanceof WriteFailed)) throw error;
        // A request failed after it began writing (an SQLite error, not an xAPI rule): the whole
        // group was rolled back; written again with each request inside a SAVEPOINT, only that
        // request fails.
        written = this.writeGroup(jobs, true);
      }
    } catch (error) {
      for (const job of jobs) job.reject(error);
      return;
    }
    jobs.forEach((job, i) => {
      const o = written.outcomes[i];
      if (o.ok) job.resolve(o.value);
      else job.reject(o.error);
    });
    if (written.queued) for (const listener of this.outboxListeners) listener();
    this.buildIdFilter();
  }

  /** Reads the merged id levels into the filter a step at a time, each on a turn of the event loop of its own, once a write started it (StatementIds.check). */
  private buildIdFilter(): void {
    if (this.buildStep || !this.ids.building) return;
    this.buildStep = setImmediate(() => {
      this.buildStep = undefined;
      if (!this.db.isOpen) return;
      try {
        if (this.ids.buildStep()) this.buildIdFilter();
      } catch (err) {
        // Lookups keep reading every level; the next write's check starts the build again.
        this.logger?.error({ err: describeSqlite(err) }, 'SQLite: the statement id filter could not be built');
        this.ids.abandon();
      }
    });
  }

  override async close(): Promise<void> {
    if (this.buildStep) clearImmediate(this.buildStep);
    this.buildStep = undefined;
    await super.close();
  }

  /**
   * One group's transaction. A request the insert rules reject (a conflict, a bad voiding) is
   * rejected before it writes anything (planBatch), so requests need no SAVEPOINT of their own:
   * a savepoint makes SQLite copy every page a request first touches into a statement journal,
   * which doubled the database work of single-statement writes. With `savepoints` (after a
   * WriteFailed), each request gets one, so a failure while writing rolls back that request only.
   */
  private writeGroup(jobs: GroupRequest[], savepoints: boolean): GroupResult {
    const outcomes: GroupResult['outcomes'] = [];
    let queued = 0;
    this.tx(() => {
      const seqBefore = this.outbox.enabled ? this.outbox.lastSeq() : 0;
      const last = this.q('SELECT stored_ms FROM statements ORDER BY seq DESC LIMIT 1').get() as Row | undefined;
      this.ids.check();
      // stored never goes backwards, so stored order and seq order agree (since/until use seq ranges).
      const storedMs = Math.max(this.clock.now(), Number(last?.stored_ms ?? 0));
      const storedIso = new Date(storedMs).toISOString();
      // Dictionary ids for the whole group, before any request writes: a request rejected never
      // takes a key row that a cached id or a later request of the group relies on.
      this.checkEpoch();
      const dicts = jobs.map((job) => {
        const tenant = this.ensureTenant(job.tenant);
        const created: number[] = [];
        return { tenant, ids: this.keyIdsOf(tenant, statementKeys(job.batch), created), created };
      });
      let changed = false;
      // Each tenant's requests, in order, and the plan of those read.
      const byTenant = new Map<number, GroupRequest[]>();
      jobs.forEach((job, i) => {
        const mine = byTenant.get(dicts[i].tenant);
        if (mine) mine.push(job);
        else byTenant.set(dicts[i].tenant, [job]);
      });
      const tenants = new Map<number, TenantPlan>();
      const counts = new GroupCounts();
      jobs.forEach((job, i) => {
        this.staged.clear();
        this.definitionsChanged = false;
        const tenant = dicts[i].tenant;
        let planned: TenantPlan | undefined;
        let plan: InsertPlan;
        try {
          planned = tenants.get(tenant);
          if (!planned) {
            // Read for the tenant's requests from this one on (their planner sees what the earlier ones store).
            const mine = byTenant.get(tenant)!;
            planned = this.readBasis(tenant, mine.slice(mine.indexOf(job)), storedIso);
            tenants.set(tenant, planned);
          }
          plan = planned.planner.plan(job);
        } catch (error) {
          outcomes.push({ ok: false, error });
          return;
        }
        let refs: ReachSeed[];
        if (savepoints) this.db.exec('SAVEPOINT request');
        try {
          refs = this.writeBatch(job.tenant, dicts[i], plan, planned.referrers, storedMs);
          outcomes.push({ ok: true, value: plan.outcome });
        } catch (error) {
          if (!savepoints) throw new WriteFailed(error);
          // SQLite ended the transaction itself, or the disk refuses writes: the group fails as a whole.
          if (!this.db.isTransaction || isStorageFailure(error)) throw error;
          this.db.exec('ROLLBACK TO request; RELEASE request');
          outcomes.push({ ok: false, error });
          return;
        }
        if (savepoints) this.db.exec('RELEASE request');
        planned.planner.stored(plan);
        for (const f of plan.fresh) counts.add(tenant, dicts[i].ids.get(f.p.verb)!);
        for (const r of refs) {
          const referrers = planned.referrers.get(r.refId);
          if (referrers) referrers.push(r.seq);
          else planned.referrers.set(r.refId, [r.seq]);
        }
        for (const [k, v] of this.staged) this.definitions.set(k, v);
        changed ||= this.definitionsChanged;
      });
      if (this.definitions.size > DEFINITION_CACHE_MAX) this.definitions.clear();
      // Other writers (another process on this file) forget their cached definitions; this one
      // knows its own change.
      if (changed) this.epoch = Number((this.q('UPDATE keys_epoch SET epoch = epoch + 1 RETURNING epoch').get() as Row).epoch);
      // A rejected request keeps none of the keys it brought (they may name a person) unless
      // a stored statement uses them.
      dicts.forEach((d, i) => {
        if (!outcomes[i].ok && d.created.length) this.dropUnusedKeys(d.tenant, d.created);
      });
      this.overviewCounts.write(counts, storedMs);
      // Forwarding: the statements this transaction stored (rejected requests left none).
      if (this.outbox.enabled) queued = this.outbox.enqueueAfter(seqBefore);
      if (this.ids.merge()) this.sizeCache();
    });
    return { outcomes, queued };
  }

  // ----- statements ---------------------------------------------------------------------------

  /**
   * Reads what the insert rules need for a tenant's requests of the group (GroupPlanner decides
   * them in order). Writes nothing: a request rejected by its plan has nothing to roll back.
   */
  private readBasis(tenant: number, requests: GroupRequest[], storedIso: string): TenantPlan {
    const byId = this.q(`SELECT full, is_voiding FROM statements WHERE ${BY_ID}`);
    const byRecentId = this.q(`SELECT full, is_voiding FROM statements WHERE ${BY_RECENT_ID}`);
    const known = new Map<string, KnownStatement>();
    const batch = requests.length === 1 ? requests[0].batch : requests.flatMap((r) => r.batch);
    for (const id of rowsToRead(batch)) {
      const bytes = uuidBytes(id);
      const r = (this.ids.mergedMayHave(tenant, bytes) ? byId : byRecentId).get(tenant, bytes) as Row | undefined;
      if (r) known.set(id, { isVoiding: Number(r.is_voiding) !== 0, statement: JSON.parse(String(r.full)) as Statement });
    }
    // Statements stored earlier that target a new one: a voiding one may void it on arrival
    // (planInsert decides, by its writer), and every one of them now reaches it (their reach rows
    // are rebuilt by writeBatch).
    const referredBy = this.q('SELECT s.seq, s.is_voiding, (SELECT key FROM keys WHERE id = s.authority) AS authority FROM statements s WHERE s.tenant = ? AND s.ref_id = ?');
    const voidedEarlier = new Map<string, EarlierVoiding[]>();
    const referrers = new Map<string, number[]>();
    for (const p of batch) {
      if (known.has(p.id) || referrers.has(p.id)) continue;
      const rows = referredBy.all(tenant, uuidBytes(p.id)) as Row[];
      if (!rows.length) continue;
      referrers.set(
        p.id,
        rows.map((r) => Number(r.seq)),
      );
      const voiding = rows.filter((r) => Number(r.is_voiding) !== 0);
      if (voiding.length) {
        voidedEarlier.set(
          p.id,
          voiding.map((r) => ({ authorityKey: r.authority === null ? null : String(r.authority), mineOnly: Number(r.is_voiding) === 2 })),
        );
      }
    }
    return { planner: new GroupPlanner({ known, voidedEarlier }, storedIso), referrers };
  }

  /** Writes a request's plan: the new statements, their reach rows, voidings, attachments. Returns its new StatementRefs. */
  private writeBatch(
    tenantName: string,
    dict: { tenant: number; ids: Map<string, number> },
    plan: InsertPlan,
    referrers: ReadonlyMap<string, number[]>,
    storedMs: number,
  ): ReachSeed[] {
    const { tenant } = dict;
    const seeds: ReachSeed[] = [];
    const reached: number[] = [];
    for (const f of plan.fresh) {
      const seq = this.insertOne(dict, f.p, JSON.stringify(f.full), f.voided, storedMs);
      if (f.p.refId !== null) seeds.push({ seq, refId: f.p.refId, authority: seedAuthority(f.p, dict.ids) });
      reached.push(...(referrers.get(f.p.id) ?? []));
    }
    this.updateReach(tenant, seeds, reached);
    const voids = this.q(`UPDATE statements SET voided = 1 WHERE ${BY_ID} AND is_voiding = 0`);
    for (const id of plan.voids) voids.run(tenant, uuidBytes(id));
    const put = this.q('INSERT OR IGNORE INTO attachments (tenant, sha2, content_type, length, content) VALUES (?, ?, ?, ?, ?)');
    for (const a of plan.attachments) put.run(tenantName, a.sha2, a.contentType, a.content.length, a.content);
    return seeds;
  }

  /** Stores one statement with its link rows and definitions; returns its seq. */
  private insertOne(dict: { tenant: number; ids: Map<string, number> }, p: PreparedStatement, full: string, voided: boolean, storedMs: number): number {
    const { tenant, ids } = dict;
    const id = (key: string) => ids.get(key)!; // keysOf(p) were all resolved for the group
    const authority = p.authorityKey;
    const idBytes = uuidBytes(p.id);
    const r = this.q('INSERT INTO statements (tenant, id, stored_ms, verb, registration, ref_id, is_voiding, voided, authority, full) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)').run(
      tenant,
      idBytes,
      storedMs,
      id(p.verb),
      p.registration === null ? null : uuidBytes(p.registration),
      p.refId === null ? null : uuidBytes(p.refId),
      isVoidingValue(p),
      voided ? 1 : 0,
      authority === null ? null : id(authority),
      full,
    );
    const seq = Number(r.lastInsertRowid);
    this.q('INSERT INTO statement_ids_new (tenant, id, seq) VALUES (?, ?, ?)').run(tenant, idBytes, seq);
    if (p.violations) this.q('INSERT INTO statement_violations (seq, violations) VALUES (?, ?)').run(seq, JSON.stringify(p.violations));
    const bucket = seqBucket(seq);
    const agent = this.q('INSERT INTO statement_agents (tenant, bucket, agent, seq, role) VALUES (?, ?, ?, ?, ?)');
    for (const a of p.agents) agent.run(tenant, bucket, id(a.key), seq, a.role);
    const activity = this.q('INSERT INTO statement_activities (tenant, bucket, activity, seq, direct) VALUES (?, ?, ?, ?, ?)');
    for (const a of p.activities) activity.run(tenant, bucket, id(a.id), seq, a.direct ? 1 : 0);
    // carrier: the authority's key id (0 without one) when the statement brought the data, else NULL (migration 11).
    const link = this.q('INSERT OR IGNORE INTO statement_attachments (seq, sha2, carrier) VALUES (?, ?, ?)');
    const carrier = authority === null ? 0 : id(authority);
    for (const h of p.attachmentHashes) link.run(seq, h, p.carried.includes(h) ? carrier : null);
    for (const d of p.definitions) {
      const k = id(d.id); // the activity IRI's key id (the tenant's own)
      const input = JSON.stringify(d.definition);
      const cached = this.staged.get(k) ?? this.definitions.get(k);
      if (cached?.input === input) continue;
      let keptText = cached?.kept;
      if (keptText === undefined) {
        const kept = this.q('SELECT definition FROM definitions WHERE key = ?').get(k) as Row | undefined;
        keptText = kept ? String(kept.definition) : undefined;
      }
      const merged = JSON.stringify(mergeDefinition(keptText ? (JSON.parse(keptText) as ActivityDefinition) : undefined, d.definition));
      this.staged.set(k, { input, kept: merged });
      // Most statements repeat a definition the LRS already has: skip the write then.
      if (merged === keptText) continue;
      this.q('INSERT INTO definitions (key, definition) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET definition = excluded.definition').run(k, merged);
      this.definitionsChanged = true;
    }
    return seq;
  }
}

/** statements.authority of a new statement: its key's id. */
const seedAuthority = (p: PreparedStatement, ids: ReadonlyMap<string, number>): number | null => (p.authorityKey === null ? null : (ids.get(p.authorityKey) ?? null));
