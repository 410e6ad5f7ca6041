/**
 * PostgreSQL's document SQL (the resources themselves: ../documents.ts). Processes share the
 * database, so a write locks its document's key (present or not: a row lock could not cover a
 * missing document) with a transaction-level advisory lock, and stamps it with the database
 * clock, which every process agrees on.
 */
import { type DocumentDialect, DOCUMENT_SQL, documentValues, toDocument } from '../documents.ts';
import { row } from '../program.ts';
import type { DocumentKey } from '../types.ts';
import { LOCK_DOCUMENT, lockKey } from './connection.ts';
import { NOW_MS } from './write.ts';

function* lock(tenant: string, key: DocumentKey) {
  yield* row({ name: 'lock_document', text: 'SELECT pg_advisory_xact_lock($1, $2)', values: [LOCK_DOCUMENT, lockKey(tenant, key.kind, key.activityId, key.agent, key.registration, key.docId)] });
}

export const POSTGRES_DOCUMENTS: DocumentDialect = {
  lock,
  *current(tenant, key) {
    yield* lock(tenant, key);
    const r = yield* row({
      name: 'current_document',
      text: `SELECT ${NOW_MS} AS now_ms, d.* FROM (SELECT 1) one LEFT JOIN (${DOCUMENT_SQL}) d ON true`,
      values: documentValues(tenant, key),
    });
    const current = r!.etag === null ? undefined : toDocument(r!);
    return { current, etag: current?.etag, nowMs: Number(r!.now_ms) };
  },
  scanOrder: 'ORDER BY tenant, kind, activity_id, agent_key, registration, doc_id',
  names: { get: 'get_document', put: 'put_document', delete: 'delete_document', scan: 'scan_documents', scanAfter: 'scan_documents_after' },
};
