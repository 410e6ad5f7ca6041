/**
 * The document resources (State, Activity Profile, Agent Profile) once for every backend. The
 * rules (merging, preconditions, ETags) live in src/xapi/documents.ts; this module reads the
 * current document and writes the planned one as a Program (./program.ts), run by the backend
 * synchronously (SQLite) or statement by statement on a pooled client (PostgreSQL). What differs
 * per backend is the DocumentDialect: statement names, the scan's order, and how a write keeps
 * the check and the write together (SQLite: its write transaction holds the
 * database; PostgreSQL: an advisory lock on the document's key, and the database clock).
 */
import { checkPrecondition, planDocumentWrite } from '../xapi/documents.ts';
import { type Program, row, rows, run } from './program.ts';
import type { DocumentKey, DocumentPrecondition, DocumentWriteOptions, KeyedDocument, StoredDocument } from './types.ts';

type Row = Record<string, unknown>;

/** What differs in the backends' document SQL. */
export interface DocumentDialect {
  /**
   * Inside the write's transaction: the current document (or, with `etagOnly`, just its etag)
   * and the time of the write, with no other write of this key able to come between this read
   * and the transaction's end.
   */
  current(tenant: string, key: DocumentKey, etagOnly: boolean): Program<{ current?: StoredDocument; etag?: string; nowMs: number }>;
  /** Inside a transaction: no other write of this key until it ends (what `current` takes too). */
  lock(tenant: string, key: DocumentKey): Program<void>;
  /** The scan's ORDER BY (the order of the backend's primary key). */
  scanOrder: string;
  /** Statement names (PostgreSQL prepares named statements once per connection). */
  names?: { get: string; put: string; delete: string; scan: string; scanAfter: string };
}

const KEY_COLS = ['tenant', 'kind', 'activity_id', 'agent_key', 'registration', 'doc_id'] as const;
const COLS = 'kind, activity_id, agent_key, registration, doc_id, content, content_type, etag, updated_ms';

/** `col = $i AND …` for the first `n` key columns, numbered from `from`. */
const where = (n: number, from = 1): string =>
  KEY_COLS.slice(0, n)
    .map((c, i) => `${c} = $${from + i}`)
    .join(' AND ');
/** `$from, …` for `n` values. */
const placeholders = (n: number, from = 1): string => Array.from({ length: n }, (_, i) => `$${from + i}`).join(', ');

const keyValues = (tenant: string, k: DocumentKey): string[] => [tenant, k.kind, k.activityId, k.agent, k.registration, k.docId];

/** The WHERE clause and values of a scope; registration '' matches every registration. */
function scope(tenant: string, k: Omit<DocumentKey, 'docId'>): { where: string; values: unknown[] } {
  const values = [tenant, k.kind, k.activityId, k.agent];
  if (k.registration === '') return { where: where(4), values };
  return { where: where(5), values: [...values, k.registration] };
}

export const toDocument = (r: Row): StoredDocument => ({
  content: Buffer.isBuffer(r.content) ? r.content : Buffer.from(r.content as Uint8Array),
  contentType: String(r.content_type),
  etag: String(r.etag),
  updatedMs: Number(r.updated_ms),
});

/** The document by key (its SELECT, for a backend's `current`). */
export const DOCUMENT_SQL = `SELECT content, content_type, etag, updated_ms FROM documents WHERE ${where(6)}`;

export const documentValues = keyValues;

export function* getDocument(d: DocumentDialect, tenant: string, key: DocumentKey): Program<StoredDocument | undefined> {
  const r = yield* row({ text: DOCUMENT_SQL, values: keyValues(tenant, key), name: d.names?.get });
  return r && toDocument(r);
}

/** In a transaction: checks the preconditions and writes the planned document. */
export function* putDocument(
  d: DocumentDialect,
  tenant: string,
  key: DocumentKey,
  doc: { content: Buffer; contentType: string },
  opts: DocumentWriteOptions,
): Program<StoredDocument> {
  const { current, nowMs } = yield* d.current(tenant, key, false);
  const next = planDocumentWrite(current, doc, opts, nowMs);
  yield* run({
    text:
      `INSERT INTO documents (${KEY_COLS.join(', ')}, content, content_type, etag, updated_ms) ` +
      `VALUES (${placeholders(10)}) ON CONFLICT (${KEY_COLS.join(', ')}) DO UPDATE SET ` +
      'content = excluded.content, content_type = excluded.content_type, etag = excluded.etag, updated_ms = excluded.updated_ms',
    values: [...keyValues(tenant, key), next.content, next.contentType, next.etag, next.updatedMs],
    name: d.names?.put,
  });
  return next;
}

/** In a transaction: checks the preconditions and deletes the document. */
export function* deleteDocument(d: DocumentDialect, tenant: string, key: DocumentKey, pre: DocumentPrecondition): Program<void> {
  const { etag } = yield* d.current(tenant, key, true);
  checkPrecondition(etag, pre);
  if (etag !== undefined) yield* run({ text: `DELETE FROM documents WHERE ${where(6)}`, values: keyValues(tenant, key), name: d.names?.delete });
}

export function* listDocumentIds(tenant: string, key: Omit<DocumentKey, 'docId'>, sinceMs?: number): Program<string[]> {
  const s = scope(tenant, key);
  const rs =
    sinceMs === undefined
      ? yield* rows({ text: `SELECT DISTINCT doc_id FROM documents WHERE ${s.where} ORDER BY doc_id`, values: s.values })
      : yield* rows({ text: `SELECT DISTINCT doc_id FROM documents WHERE ${s.where} AND updated_ms > $${s.values.length + 1} ORDER BY doc_id`, values: [...s.values, sinceMs] });
  return rs.map((r) => String(r.doc_id));
}

export function* deleteDocuments(tenant: string, key: Omit<DocumentKey, 'docId'>): Program<void> {
  const s = scope(tenant, key);
  yield* run({ text: `DELETE FROM documents WHERE ${s.where}`, values: s.values });
}

/** Documents of every kind in key order after `after`, at most `limit`, content included (export). */
export function* scanDocuments(d: DocumentDialect, tenant: string, opts: { after?: DocumentKey; limit: number }): Program<KeyedDocument[]> {
  const a = opts.after;
  const order = d.scanOrder;
  const rs = a
    ? yield* rows({
        text: `SELECT ${COLS} FROM documents WHERE tenant = $1 AND (kind, activity_id, agent_key, registration, doc_id) > (${placeholders(5, 2)}) ${order} LIMIT $7`,
        values: [tenant, a.kind, a.activityId, a.agent, a.registration, a.docId, opts.limit],
        name: d.names?.scanAfter,
      })
    : yield* rows({ text: `SELECT ${COLS} FROM documents WHERE tenant = $1 ${order} LIMIT $2`, values: [tenant, opts.limit], name: d.names?.scan });
  return rs.map((r) => ({
    key: {
      kind: String(r.kind) as DocumentKey['kind'],
      activityId: String(r.activity_id),
      agent: String(r.agent_key),
      registration: String(r.registration),
      docId: String(r.doc_id),
    },
    ...toDocument(r),
  }));
}

/** In a transaction: moves documents to another agent key, replacing what is there (erasure). */
export function* moveDocuments(d: DocumentDialect, tenant: string, keys: DocumentKey[], agentKey: string): Program<void> {
  for (const k of keys) {
    // As a document write locks its key, on both keys: no write interleaves with the move.
    yield* d.lock(tenant, k);
    yield* d.lock(tenant, { ...k, agent: agentKey });
    yield* run({ text: `DELETE FROM documents WHERE ${where(6)}`, values: [tenant, k.kind, k.activityId, agentKey, k.registration, k.docId] });
    yield* run({ text: `UPDATE documents SET agent_key = $1 WHERE ${where(6, 2)}`, values: [agentKey, tenant, k.kind, k.activityId, k.agent, k.registration, k.docId] });
  }
}
