/**
 * The SQLite backend on `node:sqlite` (no native addon): WAL mode, group-committed statement
 * writes, versioned migrations. The driver is synchronous, so a transaction never interleaves
 * with another request's in this process.
 */
import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { LrsError } from '../../errors.ts';
import { mergeDefinition } from '../../xapi/activity.ts';
import type { StatementQuery } from '../../xapi/query.ts';
import { type PreparedStatement, sameStatement, stamp } from '../../xapi/statement.ts';
import type { ActivityDefinition, Statement } from '../../xapi/types.ts';
import { actorKeys } from '../../xapi/agents.ts';
import { type SeqWindow, sqlitePlaceholder, statementPageSql } from '../sql.ts';
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

export interface SqliteOptions {
  path: string;
  synchronous?: 'FULL' | 'NORMAL';
}

type Row = Record<string, unknown>;

export class SqliteStore implements Store {
  readonly backend = 'sqlite';
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
    try {
      this.tx(() => {
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
  }

  private insertBatch(tenant: string, batch: PreparedStatement[], attachments: AttachmentBlob[], storedMs: number, storedIso: string): InsertOutcome {
    const byId = this.q('SELECT full, is_voiding FROM statements WHERE tenant = ? AND id = ?');
    const voidingInBatch = new Set(batch.filter((p) => p.voids).map((p) => p.id));
    const linked = new Set<string>();
    let inserted = 0;
    for (const p of batch) {
      const existing = byId.get(tenant, p.id) as Row | undefined;
      if (existing) {
        if (!sameStatement(p.statement, JSON.parse(String(existing.full)) as Statement)) {
          throw new LrsError('conflict', `a different statement with id ${p.id} is already stored`);
        }
        continue;
      }
      if (p.voids) {
        const target = byId.get(tenant, p.voids) as Row | undefined;
        if ((target && Number(target.is_voiding) === 1) || voidingInBatch.has(p.voids)) {
          throw new LrsError('bad_request', `statement ${p.id} voids ${p.voids}, which is itself a voiding statement and cannot be voided`);
        }
      }
      this.insertOne(tenant, p, storedMs, storedIso);
      for (const h of p.attachmentHashes) linked.add(h);
      inserted++;
    }
    // Only bytes a newly stored statement points to: a re-sent statement leaves no orphan.
    const put = this.q('INSERT OR IGNORE INTO attachments (tenant, sha2, content_type, length, content) VALUES (?, ?, ?, ?, ?)');
    for (const a of attachments) if (linked.has(a.sha2)) put.run(tenant, a.sha2, a.contentType, a.content.length, a.content);
    return { ids: batch.map((p) => p.id), inserted };
  }

  private insertOne(tenant: string, p: PreparedStatement, storedMs: number, storedIso: string): void {
    const full = JSON.stringify(stamp(p, storedIso));
    const authority = p.statement.authority ? (actorKeys(p.statement.authority)[0] ?? null) : null;
    // A voiding statement that arrived before its target voids it on arrival.
    const alreadyVoided =
      !p.voids && this.q('SELECT 1 FROM statements WHERE tenant = ? AND ref_id = ? AND is_voiding = 1 LIMIT 1').get(tenant, p.id) !== undefined;
    const r = this.q(
      'INSERT INTO statements (tenant, id, stored_ms, verb, registration, ref_id, is_voiding, voided, authority_key, full) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
    ).run(tenant, p.id, storedMs, p.verb, p.registration, p.refId, p.voids ? 1 : 0, alreadyVoided ? 1 : 0, authority, full);
    const seq = r.lastInsertRowid;
    const agent = this.q('INSERT INTO statement_agents (tenant, agent_key, seq, direct) VALUES (?, ?, ?, ?)');
    for (const a of p.agents) agent.run(tenant, a.key, seq, a.direct ? 1 : 0);
    const activity = this.q('INSERT INTO statement_activities (tenant, activity_id, seq, direct) VALUES (?, ?, ?, ?)');
    for (const a of p.activities) activity.run(tenant, a.id, seq, a.direct ? 1 : 0);
    const link = this.q('INSERT OR IGNORE INTO statement_attachments (seq, sha2) VALUES (?, ?)');
    for (const h of p.attachmentHashes) link.run(seq, h);
    if (p.voids) this.q('UPDATE statements SET voided = 1 WHERE tenant = ? AND id = ? AND is_voiding = 0').run(tenant, p.voids);
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

  async getStatement(tenant: string, id: string, voided: boolean): Promise<StoredRow | undefined> {
    const r = this.q('SELECT seq, stored_ms, full FROM statements WHERE tenant = ? AND id = ? AND voided = ?').get(tenant, id, voided ? 1 : 0) as
      | Row
      | undefined;
    return r && toRow(r);
  }

  async queryStatements(tenant: string, query: StatementQuery): Promise<QueryPage> {
    const w: SeqWindow = {};
    if (query.since !== undefined) {
      const r = this.q('SELECT seq FROM statements WHERE tenant = ? AND stored_ms > ? ORDER BY stored_ms, seq LIMIT 1').get(tenant, query.since) as Row | undefined;
      if (!r) return { rows: [] };
      w.from = BigInt(r.seq as number);
    }
    if (query.until !== undefined) {
      const r = this.q('SELECT seq FROM statements WHERE tenant = ? AND stored_ms <= ? ORDER BY stored_ms DESC, seq DESC LIMIT 1').get(tenant, query.until) as
        | Row
        | undefined;
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

  // ----- data lifecycle ----------------------------------------------------------------------

  /** The seq range of a stored-time window: stored order and seq order agree. */
  private seqWindow(tenant: string, opts: { sinceMs?: number; untilMs?: number }): { from: number; to: number } | undefined {
    let from = 0;
    let to = Number.MAX_SAFE_INTEGER;
    if (opts.sinceMs !== undefined) {
      const r = this.q('SELECT seq FROM statements WHERE tenant = ? AND stored_ms > ? ORDER BY stored_ms, seq LIMIT 1').get(tenant, opts.sinceMs) as Row | undefined;
      if (!r) return undefined;
      from = Number(r.seq);
    }
    if (opts.untilMs !== undefined) {
      const r = this.q('SELECT seq FROM statements WHERE tenant = ? AND stored_ms <= ? ORDER BY stored_ms DESC, seq DESC LIMIT 1').get(tenant, opts.untilMs) as
        | Row
        | undefined;
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
      const agent = this.q('INSERT INTO statement_agents (tenant, agent_key, seq, direct) VALUES (?, ?, ?, ?)');
      for (const row of rows) {
        const r = this.q('SELECT seq FROM statements WHERE tenant = ? AND id = ?').get(tenant, row.id) as Row | undefined;
        if (!r) continue;
        const seq = Number(r.seq);
        this.q('UPDATE statements SET full = ?, authority_key = ? WHERE seq = ?').run(row.json, row.authorityKey, seq);
        this.q('DELETE FROM statement_agents WHERE seq = ?').run(seq);
        for (const a of row.agents) agent.run(tenant, a.key, seq, a.direct ? 1 : 0);
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
