/**
 * The SQLite backend's reads, on the store's own connection: single statements, attachments,
 * consistent-through, the Agents resource, canonical definitions, the violations of lax writes,
 * and the bulk scans of export. Statement pages are ./pages.ts's (on reader threads when the
 * store has some); documents and the admin figures are shared programs (../shared.ts).
 */
import type { ValidationIssue } from '../../errors.ts';
import type { StatementQuery } from '../../xapi/query.ts';
import type { ActivityDefinition } from '../../xapi/types.ts';
import { bucketsIn, DEFINITIONS_PER_QUERY, inlineBytes, sizedJson, uuidBytes, uuidText } from '../sql.ts';
import type { AttachmentBlob, QueryPage, StoredRow } from '../types.ts';
import { SqliteConnection } from './connection.ts';
import { BY_ID } from './ids.ts';
import { keptRows, readPage, storedSeq, toRow } from './pages.ts';
import { SQLITE } from './query.ts';

type Row = Record<string, unknown>;

export abstract class SqliteReaders extends SqliteConnection {
  /** One page of a statement query: on a reader thread, or on this connection without them. */
  async queryStatements(tenant: string, query: StatementQuery): Promise<QueryPage> {
    return this.threads ? this.threads.query(tenant, query) : readPage(this.source, tenant, query);
  }

  async consistentThrough(): Promise<Date> {
    // Writes commit synchronously before they are acknowledged: everything stored is visible.
    return new Date(this.clock.now());
  }

  async getStatement(tenant: string, id: string, voided: boolean, authority?: string): Promise<StoredRow | undefined> {
    const tid = this.tenantId(tenant);
    if (tid === undefined) return undefined;
    const sql = `SELECT seq, stored_ms, full FROM statements WHERE ${BY_ID} AND voided = ?`;
    const r = (
      authority === undefined
        ? this.q(sql).get(tid, uuidBytes(id), voided ? 1 : 0)
        : this.q(`${sql} AND authority = (SELECT id FROM keys WHERE tenant = ? AND key = ?)`).get(tid, uuidBytes(id), voided ? 1 : 0, tid, authority)
    ) as Row | undefined;
    return r ? toRow(r) : undefined;
  }

  /** The violations a stored statement was accepted with (ViolationStore). */
  async statementViolations(tenant: string, id: string): Promise<ValidationIssue[] | undefined> {
    const tid = this.tenantId(tenant);
    if (tid === undefined) return undefined;
    const r = this.q(`SELECT (SELECT violations FROM statement_violations v WHERE v.seq = s.seq) AS violations FROM statements s WHERE ${BY_ID}`).get(tid, uuidBytes(id)) as
      | Row
      | undefined;
    if (!r) return undefined;
    return r.violations === null ? [] : (JSON.parse(String(r.violations)) as ValidationIssue[]);
  }

  async violationsAt(tenant: string, positions: string[]): Promise<Map<string, ValidationIssue[]>> {
    const out = new Map<string, ValidationIssue[]>();
    const tid = this.tenantId(tenant);
    if (tid === undefined) return out;
    // One probe of each table's key per position: a filtered page's positions can lie far apart.
    const st = this.q('SELECT v.violations FROM statement_violations v JOIN statements s ON s.seq = v.seq WHERE v.seq = ? AND s.tenant = ?');
    for (const position of positions) {
      const r = st.get(Number(position), tid) as Row | undefined;
      if (r) out.set(position, JSON.parse(String(r.violations)) as ValidationIssue[]);
    }
    return out;
  }

  /**
   * Which of `ids` were stored with violations (ViolationStore): per id, the lookup of BY_ID and a
   * probe of the side table by seq (driven from the ids: joined, the planner scans the store's ids).
   */
  async statementsWithViolations(tenant: string, ids: readonly string[]): Promise<Set<string>> {
    const tid = this.tenantId(tenant);
    if (tid === undefined || ids.length === 0) return new Set();
    const rows = this.q(
      "SELECT lower(j.value) AS id FROM json_each(?) j WHERE EXISTS (SELECT 1 FROM statement_violations v WHERE v.seq = (SELECT seq FROM statement_seqs WHERE tenant = ? AND id = unhex(replace(j.value, '-', ''))))",
    ).all(JSON.stringify(ids), tid) as Row[];
    return new Set(rows.map((r) => String(r.id)));
  }

  /** Each hash's attachments row (`cols`), with `carrier` only if a statement of that authority carried its data. */
  private attachmentRows(tenant: string, sha2s: string[], cols: string, carrier?: string): Row[] {
    const sql = `SELECT ${cols} FROM attachments a WHERE tenant = ? AND sha2 = ?`;
    const any = this.q(sql);
    let get = (h: string) => any.get(tenant, h);
    if (carrier !== undefined) {
      const tid = this.tenantId(tenant);
      if (tid === undefined) return [];
      // One probe of the carriers' index (migration 11) per hash.
      const st = this.q(`${sql} AND EXISTS (SELECT 1 FROM statement_attachments l WHERE l.sha2 = a.sha2 AND l.carrier = (SELECT id FROM keys WHERE tenant = ? AND key = ?))`);
      get = (h) => st.get(tenant, h, tid, carrier);
    }
    return [...new Set(sha2s)].flatMap((h): Row[] => {
      const r = get(h) as Row | undefined;
      return r ? [r] : [];
    });
  }

  async getAttachments(tenant: string, sha2s: string[], carrier?: string): Promise<AttachmentBlob[]> {
    return this.attachmentRows(tenant, sha2s, 'sha2, content_type, content', carrier).map((r) => {
      const content = r.content as Uint8Array; // a copy node:sqlite made: no second one
      return { sha2: String(r.sha2), contentType: String(r.content_type), content: Buffer.from(content.buffer, content.byteOffset, content.byteLength) };
    });
  }

  async attachmentSizes(tenant: string, sha2s: string[], carrier?: string): Promise<Map<string, number>> {
    return new Map(this.attachmentRows(tenant, sha2s, 'sha2, length', carrier).map((r) => [String(r.sha2), Number(r.length)]));
  }

  async attachmentsNotCarried(tenant: string, positions: string[]): Promise<Map<string, string[]>> {
    const out = new Map<string, string[]>();
    const st = this.q(
      'SELECT l.sha2 FROM statement_attachments l WHERE l.seq = ? AND l.carrier IS NULL AND EXISTS (SELECT 1 FROM attachments a WHERE a.tenant = ? AND a.sha2 = l.sha2)',
    );
    for (const position of positions) {
      const rows = st.all(Number(position), tenant) as Row[];
      if (rows.length)
        out.set(
          position,
          rows.map((r) => String(r.sha2)),
        );
    }
    return out;
  }

  async attachmentCarrierCounts(tenant: string, sha2s: string[]): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    const tid = this.tenantId(tenant);
    if (tid === undefined) return out;
    // The carriers' index (migration 11) by hash, each link's statement checked for the tenant.
    const st = this.q('SELECT count(*) AS n FROM statement_attachments l JOIN statements s ON s.seq = l.seq WHERE l.sha2 = ? AND l.carrier IS NOT NULL AND s.tenant = ?');
    for (const h of new Set(sha2s)) {
      const n = Number((st.get(h, tid) as Row).n);
      if (n) out.set(h, n);
    }
    return out;
  }

  async statementsWithAgent(tenant: string, agentKey: string, limit: number, maxBytes: number): Promise<string[]> {
    const tid = this.tenantId(tenant);
    if (tid === undefined) return [];
    // Read as a statement page is: the JSON of small rows with the query, the others once kept.
    const st = this.q(
      `SELECT s.seq, ${sizedJson(SQLITE, 's.full', SQLITE.fullBytes('s'), () => '?')} ` +
        `FROM statement_agents a JOIN statements s ON s.seq = a.seq WHERE a.tenant = ? AND a.bucket IN ${bucketsIn()} ` +
        'AND a.agent = (SELECT id FROM keys WHERE tenant = ? AND key = ?) ORDER BY a.bucket DESC, a.seq DESC LIMIT ?',
    );
    st.setReturnArrays(true);
    const rows = st.all(inlineBytes({ limit, maxBytes }), tid, tid, agentKey, limit) as unknown as unknown[][];
    return rows.slice(0, keptRows(this.source, tid, rows, { limit, maxBytes, attachments: false }, 1)).map((r) => r[1] as string);
  }

  async getActivityDefinitions(tenant: string, activityIds: string[]): Promise<Map<string, ActivityDefinition>> {
    const out = new Map<string, ActivityDefinition>();
    const tid = this.tenantId(tenant);
    if (tid === undefined) return out;
    // A chunk's ids as one JSON array: one statement, one index probe per id.
    const st = this.q('SELECT k.key, d.definition FROM keys k JOIN definitions d ON d.key = k.id WHERE k.tenant = ? AND k.key IN (SELECT value FROM json_each(?))');
    for (let i = 0; i < activityIds.length; i += DEFINITIONS_PER_QUERY) {
      // The driver is synchronous: between chunks, the other requests get the event loop.
      if (i) await new Promise((resolve) => setImmediate(resolve));
      for (const r of st.all(tid, JSON.stringify(activityIds.slice(i, i + DEFINITIONS_PER_QUERY))) as Row[]) {
        out.set(String(r.key), JSON.parse(String(r.definition)) as ActivityDefinition);
      }
    }
    return out;
  }

  /** The seq range of a stored-time window: stored order and seq order agree. */
  private seqWindow(tenant: number, opts: { sinceMs?: number; untilMs?: number }): { from: number; to: number } | undefined {
    let from = 0;
    let to = Number.MAX_SAFE_INTEGER;
    if (opts.sinceMs !== undefined) {
      const r = storedSeq(this.source, tenant, opts.sinceMs, 'since');
      if (!r) return undefined;
      from = Number(r.seq);
    }
    if (opts.untilMs !== undefined) {
      const r = storedSeq(this.source, tenant, opts.untilMs, 'until');
      if (!r) return undefined;
      to = Number(r.seq);
    }
    return { from, to };
  }

  async scanStatements(tenant: string, opts: { after?: string; limit: number; sinceMs?: number; untilMs?: number }): Promise<QueryPage> {
    const tid = this.tenantId(tenant);
    const w = tid === undefined ? undefined : this.seqWindow(tid, opts);
    if (!w) return { rows: [] };
    const from = Math.max(w.from, opts.after === undefined ? 0 : Number(opts.after) + 1);
    const rows = (
      this.q('SELECT seq, stored_ms, full FROM statements WHERE tenant = ? AND seq >= ? AND seq <= ? ORDER BY seq LIMIT ?').all(tid!, from, w.to, opts.limit + 1) as Row[]
    ).map(toRow);
    if (rows.length <= opts.limit) return { rows };
    rows.length = opts.limit;
    return { rows, next: rows[rows.length - 1].position };
  }

  async countStatements(tenant: string, opts: { sinceMs?: number; untilMs?: number }): Promise<number> {
    const tid = this.tenantId(tenant);
    const w = tid === undefined ? undefined : this.seqWindow(tid, opts);
    if (!w) return 0;
    return Number((this.q('SELECT count(*) AS n FROM statements WHERE tenant = ? AND seq >= ? AND seq <= ?').get(tid!, w.from, w.to) as Row).n);
  }

  async referringStatements(tenant: string, ids: string[]): Promise<string[]> {
    const tid = this.tenantId(tenant);
    if (tid === undefined) return [];
    const st = this.q('SELECT id FROM statements WHERE tenant = ? AND ref_id = ?');
    return ids.flatMap((id) => (st.all(tid, uuidBytes(id)) as Row[]).map((r) => uuidText(r.id as Uint8Array)));
  }
}
