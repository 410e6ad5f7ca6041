/**
 * The SQLite backend on `node:sqlite` (no native addon): WAL mode, group-committed statement
 * writes, versioned migrations. The driver is synchronous, so a transaction never interleaves
 * with another request's in this process.
 */
import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { mergeDefinition } from '../../xapi/activity.ts';
import type { StatementQuery } from '../../xapi/query.ts';
import { type KnownStatement, planInsert, rowsToRead } from '../../xapi/insert.ts';
import type { PreparedStatement } from '../../xapi/statement.ts';
import type { ActivityDefinition, Statement } from '../../xapi/types.ts';
import { actorKeys } from '../../xapi/agents.ts';
import { type SeqWindow, sqlitePlaceholder, statementPageSql, storedSeqSql } from '../sql.ts';
import type {
  AttachmentBlob,
  DocumentKey,
  DocumentPrecondition,
  InsertOutcome,
  KeyedDocument,
  QueryPage,
  StatementRewrite,
  Store,
  StoredDocument,
  StoredRow,
} from '../types.ts';
import * as docs from './documents.ts';
import { MIGRATIONS } from './migrations.ts';
import { SqliteOutbox } from './outbox.ts';

export interface SqliteOptions {
  path: string;
  synchronous?: 'FULL' | 'NORMAL';
  /** Urls of the active forwarding targets: each new statement is queued for each. */
  forwardTargets?: string[];
}

type Row = Record<string, unknown>;

export class SqliteStore implements Store {
  readonly backend = 'sqlite';
  readonly outbox: SqliteOutbox;
  private readonly outboxListeners: (() => void)[] = [];
  private readonly db: DatabaseSync;
  private readonly cache = new Map<string, StatementSync>();
  private pending: {
    tenant: string;
    batch: PreparedStatement[];
    attachments: AttachmentBlob[];
    resolve: (o: InsertOutcome) => void;
    reject: (e: unknown) => void;
  }[] = [];

  constructor(opts: SqliteOptions) {
    const path = opts.path === ':memory:' ? opts.path : resolve(opts.path);
    if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
    this.db = new DatabaseSync(path);
    this.db.exec(`PRAGMA journal_mode = WAL; PRAGMA synchronous = ${opts.synchronous ?? 'FULL'}; PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 5000;`);
    this.outbox = new SqliteOutbox({ q: (sql) => this.q(sql), tx: (fn) => this.tx(fn) }, opts.forwardTargets ?? []);
  }

  onOutboxWrite(listener: () => void): void {
    this.outboxListeners.push(listener);
  }

  /** Prepared statements are cached by SQL text: the query builder emits few distinct shapes. */
  private q(sql: string): StatementSync {
    let st = this.cache.get(sql);
    if (!st) {
      st = this.db.prepare(sql);
      st.setReadBigInts(false);
      this.cache.set(sql, st);
    }
    return st;
  }

  private tx<T>(fn: () => T): T {
    this.db.exec('BEGIN IMMEDIATE');
    try {
      const out = fn();
      this.db.exec('COMMIT');
      return out;
    } catch (err) {
      this.db.exec('ROLLBACK');
      throw err;
    }
  }

  async migrate(): Promise<void> {
    this.db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)');
    const applied = new Set((this.db.prepare('SELECT version FROM schema_migrations').all() as Row[]).map((r) => Number(r.version)));
    for (const m of MIGRATIONS) {
      if (applied.has(m.version)) continue;
      this.tx(() => {
        this.db.exec(m.sql);
        this.db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(m.version, m.name, new Date().toISOString());
      });
    }
  }

  async ping(): Promise<void> {
    this.q('SELECT count(*) AS n FROM schema_migrations').get();
  }

  async close(): Promise<void> {
    if (this.db.isOpen) this.db.close();
  }

  /**
   * Group commit: batches that arrive while the event loop is busy are written in one
   * transaction (one WAL sync for all of them), each inside its own SAVEPOINT so one request's
   * conflict rolls back that request only. Every caller is answered after the COMMIT.
   */
  insertStatements(tenant: string, batch: PreparedStatement[], attachments: AttachmentBlob[]): Promise<InsertOutcome> {
    return new Promise((resolve, reject) => {
      this.pending.push({ tenant, batch, attachments, resolve, reject });
      if (this.pending.length === 1) setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    const jobs = this.pending;
    this.pending = [];
    const outcomes: ({ ok: true; value: InsertOutcome } | { ok: false; error: unknown })[] = [];
    let queued = 0;
    try {
      this.tx(() => {
        const seqBefore = this.outbox.enabled ? this.outbox.lastSeq() : 0;
        const last = this.q('SELECT stored_ms FROM statements ORDER BY seq DESC LIMIT 1').get() as Row | undefined;
        // stored never goes backwards, so stored order and seq order agree (since/until use seq ranges).
        const storedMs = Math.max(Date.now(), Number(last?.stored_ms ?? 0));
        const storedIso = new Date(storedMs).toISOString();
        for (const job of jobs) {
          this.db.exec('SAVEPOINT request');
          try {
            outcomes.push({ ok: true, value: this.insertBatch(job.tenant, job.batch, job.attachments, storedMs, storedIso) });
            this.db.exec('RELEASE request');
          } catch (error) {
            this.db.exec('ROLLBACK TO request; RELEASE request');
            outcomes.push({ ok: false, error });
          }
        }
        // Forwarding: the statements this transaction stored (rolled-back requests left none).
        if (this.outbox.enabled) queued = this.outbox.enqueueAfter(seqBefore);
      });
    } catch (error) {
      for (const job of jobs) job.reject(error);
      return;
    }
    jobs.forEach((job, i) => {
      const o = outcomes[i];
      if (o.ok) job.resolve(o.value);
      else job.reject(o.error);
    });
    if (queued) for (const listener of this.outboxListeners) listener();
  }

  private insertBatch(tenant: string, batch: PreparedStatement[], attachments: AttachmentBlob[], storedMs: number, storedIso: string): InsertOutcome {
    // Read what the rules need, then write what they decide (earlier requests of this group are visible).
    const byId = this.q('SELECT full, is_voiding FROM statements WHERE tenant = ? AND id = ?');
    const known = new Map<string, KnownStatement>();
    for (const id of rowsToRead(batch)) {
      const r = byId.get(tenant, id) as Row | undefined;
      if (r) known.set(id, { isVoiding: Number(r.is_voiding) === 1, statement: JSON.parse(String(r.full)) as Statement });
    }
    const voidedBy = this.q('SELECT 1 FROM statements WHERE tenant = ? AND ref_id = ? AND is_voiding = 1 LIMIT 1');
    const voidedEarlier = new Set(batch.filter((p) => !known.has(p.id) && voidedBy.get(tenant, p.id) !== undefined).map((p) => p.id));
    const plan = planInsert(batch, attachments, known, voidedEarlier, storedIso);
    for (const f of plan.fresh) this.insertOne(tenant, f.p, JSON.stringify(f.full), f.voided, storedMs);
    const voids = this.q('UPDATE statements SET voided = 1 WHERE tenant = ? AND id = ? AND is_voiding = 0');
    for (const id of plan.voids) voids.run(tenant, id);
    const put = this.q('INSERT OR IGNORE INTO attachments (tenant, sha2, content_type, length, content) VALUES (?, ?, ?, ?, ?)');
    for (const a of plan.attachments) put.run(tenant, a.sha2, a.contentType, a.content.length, a.content);
    return plan.outcome;
  }

  private insertOne(tenant: string, p: PreparedStatement, full: string, voided: boolean, storedMs: number): void {
    const authority = p.statement.authority ? (actorKeys(p.statement.authority)[0] ?? null) : null;
    const r = this.q(
      'INSERT INTO statements (tenant, id, stored_ms, verb, registration, ref_id, is_voiding, voided, authority_key, full) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
    ).run(tenant, p.id, storedMs, p.verb, p.registration, p.refId, p.voids ? 1 : 0, voided ? 1 : 0, authority, full);
    const seq = r.lastInsertRowid;
    const agent = this.q('INSERT INTO statement_agents (tenant, agent_key, seq, role) VALUES (?, ?, ?, ?)');
    for (const a of p.agents) agent.run(tenant, a.key, seq, a.role);
    const activity = this.q('INSERT INTO statement_activities (tenant, activity_id, seq, direct) VALUES (?, ?, ?, ?)');
    for (const a of p.activities) activity.run(tenant, a.id, seq, a.direct ? 1 : 0);
    const link = this.q('INSERT OR IGNORE INTO statement_attachments (seq, sha2) VALUES (?, ?)');
    for (const h of p.attachmentHashes) link.run(seq, h);
    for (const d of p.definitions) {
      const kept = this.q('SELECT definition FROM activities WHERE tenant = ? AND id = ?').get(tenant, d.id) as Row | undefined;
      const keptText = kept ? String(kept.definition) : undefined;
      const merged = JSON.stringify(mergeDefinition(keptText ? (JSON.parse(keptText) as ActivityDefinition) : undefined, d.definition));
      // Most statements repeat a definition the LRS already has: skip the write then.
      if (merged === keptText) continue;
      this.q('INSERT INTO activities (tenant, id, definition) VALUES (?, ?, ?) ON CONFLICT (tenant, id) DO UPDATE SET definition = excluded.definition').run(
        tenant,
        d.id,
        merged,
      );
    }
  }

  async getStatement(tenant: string, id: string, voided: boolean, authority?: string): Promise<StoredRow | undefined> {
    const r = this.q('SELECT seq, stored_ms, full, authority_key FROM statements WHERE tenant = ? AND id = ? AND voided = ?').get(tenant, id, voided ? 1 : 0) as
      | Row
      | undefined;
    return r && (authority === undefined || r.authority_key === authority) ? toRow(r) : undefined;
  }

  async queryStatements(tenant: string, query: StatementQuery): Promise<QueryPage> {
    const w: SeqWindow = {};
    if (query.since !== undefined) {
      const r = this.storedSeq(tenant, query.since, 'since');
      if (!r) return { rows: [] };
      w.from = BigInt(r.seq as number);
    }
    if (query.until !== undefined) {
      const r = this.storedSeq(tenant, query.until, 'until');
      if (!r) return { rows: [] };
      w.to = BigInt(r.seq as number);
    }
    if (query.after !== undefined) {
      if (query.ascending) w.after = BigInt(query.after);
      else w.before = BigInt(query.after);
    }
    const { sql, params } = statementPageSql(tenant, query, w, sqlitePlaceholder);
    const rows = (this.q(sql).all(...(params as (string | number | bigint)[])) as Row[]).map(toRow);
    if (rows.length > query.limit) {
      rows.length = query.limit;
      return { rows, next: rows[rows.length - 1].position };
    }
    return { rows };
  }

  async getAttachments(tenant: string, sha2s: string[]): Promise<AttachmentBlob[]> {
    const st = this.q('SELECT sha2, content_type, content FROM attachments WHERE tenant = ? AND sha2 = ?');
    const out: AttachmentBlob[] = [];
    for (const h of new Set(sha2s)) {
      const r = st.get(tenant, h) as Row | undefined;
      if (r) out.push({ sha2: String(r.sha2), contentType: String(r.content_type), content: Buffer.from(r.content as Uint8Array) });
    }
    return out;
  }

  async consistentThrough(): Promise<Date> {
    // Writes commit synchronously before they are acknowledged: everything stored is visible.
    return new Date();
  }

  async statementsWithAgent(tenant: string, agentKey: string, limit: number): Promise<string[]> {
    const rows = this.q('SELECT s.full FROM statement_agents a JOIN statements s ON s.seq = a.seq WHERE a.tenant = ? AND a.agent_key = ? ORDER BY a.seq DESC LIMIT ?').all(
      tenant,
      agentKey,
      limit,
    ) as Row[];
    return rows.map((r) => String(r.full));
  }

  async getActivityDefinition(tenant: string, activityId: string): Promise<ActivityDefinition | undefined> {
    const r = this.q('SELECT definition FROM activities WHERE tenant = ? AND id = ?').get(tenant, activityId) as Row | undefined;
    return r ? (JSON.parse(String(r.definition)) as ActivityDefinition) : undefined;
  }

  /** The document SQL lives in ./documents.ts; it borrows the statement cache and the transaction helper. */
  private readonly docs: docs.SqliteHandle = { q: (sql) => this.q(sql), tx: (fn) => this.tx(fn) };

  async getDocument(tenant: string, key: DocumentKey): Promise<StoredDocument | undefined> {
    return docs.getDocument(this.docs, tenant, key);
  }

  async putDocument(
    tenant: string,
    key: DocumentKey,
    doc: { content: Buffer; contentType: string },
    opts: { merge: boolean; pre: DocumentPrecondition },
  ): Promise<StoredDocument> {
    return docs.putDocument(this.docs, tenant, key, doc, opts);
  }

  async deleteDocument(tenant: string, key: DocumentKey, pre: DocumentPrecondition): Promise<void> {
    docs.deleteDocument(this.docs, tenant, key, pre);
  }

  async listDocumentIds(tenant: string, key: Omit<DocumentKey, 'docId'>, sinceMs?: number): Promise<string[]> {
    return docs.listDocumentIds(this.docs, tenant, key, sinceMs);
  }

  async deleteDocuments(tenant: string, key: Omit<DocumentKey, 'docId'>): Promise<void> {
    docs.deleteDocuments(this.docs, tenant, key);
  }

  /** since/until as a seq bound (see storedSeqSql). */
  private storedSeq(tenant: string, ms: number, bound: 'since' | 'until'): Row | undefined {
    const { sql, params } = storedSeqSql(tenant, ms, bound, sqlitePlaceholder);
    return this.q(sql).get(...(params as (string | number)[])) as Row | undefined;
  }

  // ----- data lifecycle ----------------------------------------------------------------------

  /** The seq range of a stored-time window: stored order and seq order agree. */
  private seqWindow(tenant: string, opts: { sinceMs?: number; untilMs?: number }): { from: number; to: number } | undefined {
    let from = 0;
    let to = Number.MAX_SAFE_INTEGER;
    if (opts.sinceMs !== undefined) {
      const r = this.storedSeq(tenant, opts.sinceMs, 'since');
      if (!r) return undefined;
      from = Number(r.seq);
    }
    if (opts.untilMs !== undefined) {
      const r = this.storedSeq(tenant, opts.untilMs, 'until');
      if (!r) return undefined;
      to = Number(r.seq);
    }
    return { from, to };
  }

  async scanStatements(tenant: string, opts: { after?: string; limit: number; sinceMs?: number; untilMs?: number }): Promise<QueryPage> {
    const w = this.seqWindow(tenant, opts);
    if (!w) return { rows: [] };
    const from = Math.max(w.from, opts.after === undefined ? 0 : Number(opts.after) + 1);
    const rows = (
      this.q('SELECT seq, stored_ms, full FROM statements WHERE tenant = ? AND seq >= ? AND seq <= ? ORDER BY seq LIMIT ?').all(tenant, from, w.to, opts.limit + 1) as Row[]
    ).map(toRow);
    if (rows.length <= opts.limit) return { rows };
    rows.length = opts.limit;
    return { rows, next: rows[rows.length - 1].position };
  }

  async countStatements(tenant: string, opts: { sinceMs?: number; untilMs?: number }): Promise<number> {
    const w = this.seqWindow(tenant, opts);
    if (!w) return 0;
    return Number((this.q('SELECT count(*) AS n FROM statements WHERE tenant = ? AND seq >= ? AND seq <= ?').get(tenant, w.from, w.to) as Row).n);
  }

  async referringStatements(tenant: string, ids: string[]): Promise<string[]> {
    const st = this.q('SELECT id FROM statements WHERE tenant = ? AND ref_id = ?');
    return ids.flatMap((id) => (st.all(tenant, id) as Row[]).map((r) => String(r.id)));
  }

  async deleteStatements(tenant: string, ids: string[]): Promise<{ statements: number; attachments: number }> {
    return this.tx(() => {
      const hashes = new Set<string>();
      let statements = 0;
      for (const id of ids) {
        const r = this.q('SELECT seq FROM statements WHERE tenant = ? AND id = ?').get(tenant, id) as Row | undefined;
        if (!r) continue;
        const seq = Number(r.seq);
        for (const a of this.q('SELECT sha2 FROM statement_attachments WHERE seq = ?').all(seq) as Row[]) hashes.add(String(a.sha2));
        // Its forwarding, if still queued, goes too: a later statement may take the same seq.
        this.q('DELETE FROM forward_outbox WHERE seq = ?').run(seq);
        this.q('DELETE FROM statement_agents WHERE seq = ?').run(seq);
        this.q('DELETE FROM statement_activities WHERE seq = ?').run(seq);
        this.q('DELETE FROM statement_attachments WHERE seq = ?').run(seq);
        this.q('DELETE FROM statements WHERE seq = ?').run(seq);
        statements++;
      }
      let attachments = 0;
      for (const h of hashes) {
        const linked = this.q('SELECT 1 FROM statement_attachments sa JOIN statements s ON s.seq = sa.seq WHERE sa.sha2 = ? AND s.tenant = ? LIMIT 1').get(h, tenant);
        if (!linked) attachments += Number(this.q('DELETE FROM attachments WHERE tenant = ? AND sha2 = ?').run(tenant, h).changes);
      }
      return { statements, attachments };
    });
  }

  async rewriteStatements(tenant: string, rows: StatementRewrite[]): Promise<void> {
    this.tx(() => {
      const agent = this.q('INSERT INTO statement_agents (tenant, agent_key, seq, role) VALUES (?, ?, ?, ?)');
      for (const row of rows) {
        const r = this.q('SELECT seq FROM statements WHERE tenant = ? AND id = ?').get(tenant, row.id) as Row | undefined;
        if (!r) continue;
        const seq = Number(r.seq);
        this.q('UPDATE statements SET full = ?, authority_key = ? WHERE seq = ?').run(row.json, row.authorityKey, seq);
        this.q('DELETE FROM statement_agents WHERE seq = ?').run(seq);
        for (const a of row.agents) agent.run(tenant, a.key, seq, a.role);
      }
    });
  }

  async scanDocuments(tenant: string, opts: { after?: DocumentKey; limit: number }): Promise<KeyedDocument[]> {
    const cols = 'kind, activity_id, agent_key, registration, doc_id, content, content_type, etag, updated_ms';
    const a = opts.after;
    const rows = (
      a
        ? this.q(`SELECT ${cols} FROM documents WHERE tenant = ? AND (kind, activity_id, agent_key, registration, doc_id) > (?, ?, ?, ?, ?) ORDER BY kind, activity_id, agent_key, registration, doc_id LIMIT ?`).all(
            tenant, a.kind, a.activityId, a.agent, a.registration, a.docId, opts.limit,
          )
        : this.q(`SELECT ${cols} FROM documents WHERE tenant = ? ORDER BY kind, activity_id, agent_key, registration, doc_id LIMIT ?`).all(tenant, opts.limit)
    ) as Row[];
    return rows.map((r) => ({
      key: { kind: String(r.kind) as DocumentKey['kind'], activityId: String(r.activity_id), agent: String(r.agent_key), registration: String(r.registration), docId: String(r.doc_id) },
      content: Buffer.from(r.content as Uint8Array),
      contentType: String(r.content_type),
      etag: String(r.etag),
      updatedMs: Number(r.updated_ms),
    }));
  }

  async moveDocuments(tenant: string, keys: DocumentKey[], agentKey: string): Promise<void> {
    const where = 'tenant = ? AND kind = ? AND activity_id = ? AND agent_key = ? AND registration = ? AND doc_id = ?';
    this.tx(() => {
      for (const k of keys) {
        this.q(`DELETE FROM documents WHERE ${where}`).run(tenant, k.kind, k.activityId, agentKey, k.registration, k.docId);
        this.q(`UPDATE documents SET agent_key = ? WHERE ${where}`).run(agentKey, tenant, k.kind, k.activityId, k.agent, k.registration, k.docId);
      }
    });
  }
}

function toRow(r: Row): StoredRow {
  return { json: String(r.full), storedMs: Number(r.stored_ms), position: String(r.seq) };
}
