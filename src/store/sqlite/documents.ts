/**
 * SQLite's document SQL (the resources themselves: ../documents.ts). A write runs inside one
 * BEGIN IMMEDIATE transaction, which holds the database: no other write can slip between the
 * ETag check and the write, so no lock of its own. Times are the store's clock.
 */
import { type DocumentDialect, DOCUMENT_SQL, documentValues, toDocument } from '../documents.ts';
import { row } from '../program.ts';
import type { SqliteHandle } from './runner.ts';

/** The documents dialect of a store (its clock stamps the writes). */
export function sqliteDocuments(h: SqliteHandle): DocumentDialect {
  const d: DocumentDialect = {
    *lock() {},
    *current(tenant, key, etagOnly) {
      if (etagOnly) {
        const r = yield* row({ text: 'SELECT etag FROM documents WHERE tenant = ? AND kind = ? AND activity_id = ? AND agent_key = ? AND registration = ? AND doc_id = ?', values: documentValues(tenant, key) });
        return { etag: r ? String(r.etag) : undefined, nowMs: h.now() };
      }
      const r = yield* row({ text: DOCUMENT_SQL, values: documentValues(tenant, key) });
      return { current: r && toDocument(r), nowMs: h.now() };
    },
    scanOrder: 'ORDER BY kind, activity_id, agent_key, registration, doc_id',
  };
  return d;
}
