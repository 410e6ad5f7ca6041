/**
 * The SQLite store's document SQL (State, Activity Profile, Agent Profile). The rules (merging,
 * preconditions, ETags) live in src/xapi/documents.ts; this module reads the current document and
 * writes the planned one inside one BEGIN IMMEDIATE transaction, so no other write can slip
 * between the ETag check and the write.
 */
import type { StatementSync } from 'node:sqlite';
import { checkPrecondition, planDocumentWrite } from '../../xapi/documents.ts';
import type { DocumentKey, DocumentPrecondition, DocumentWriteOptions, StoredDocument } from '../types.ts';

/** What the SqliteStore lends: its cached prepared statements and its transaction helper. */
export interface SqliteHandle {
  q(sql: string): StatementSync;
  tx<T>(fn: () => T): T;
  /** The store's clock (epoch ms). */
  now(): number;
}

type Row = Record<string, unknown>;

const KEY = 'tenant = ? AND kind = ? AND activity_id = ? AND agent_key = ? AND registration = ? AND doc_id = ?';

const keyParams = (tenant: string, k: DocumentKey): string[] => [tenant, k.kind, k.activityId, k.agent, k.registration, k.docId];

/** The WHERE clause and parameters of a scope; registration '' matches every registration. */
function scopeWhere(tenant: string, k: Omit<DocumentKey, 'docId'>): { where: string; params: string[] } {
  const params = [tenant, k.kind, k.activityId, k.agent];
  let where = 'tenant = ? AND kind = ? AND activity_id = ? AND agent_key = ?';
  if (k.registration !== '') {
    where += ' AND registration = ?';
    params.push(k.registration);
  }
  return { where, params };
}

function read(h: SqliteHandle, tenant: string, key: DocumentKey): StoredDocument | undefined {
  const r = h.q(`SELECT content, content_type, etag, updated_ms FROM documents WHERE ${KEY}`).get(...keyParams(tenant, key)) as Row | undefined;
  if (!r) return undefined;
  return { content: Buffer.from(r.content as Uint8Array), contentType: String(r.content_type), etag: String(r.etag), updatedMs: Number(r.updated_ms) };
}

export function getDocument(h: SqliteHandle, tenant: string, key: DocumentKey): StoredDocument | undefined {
  return read(h, tenant, key);
}

export function putDocument(
  h: SqliteHandle,
  tenant: string,
  key: DocumentKey,
  doc: { content: Buffer; contentType: string },
  opts: DocumentWriteOptions,
): StoredDocument {
  return h.tx(() => {
    const next = planDocumentWrite(read(h, tenant, key), doc, opts, h.now());
    h.q(
      'INSERT INTO documents (tenant, kind, activity_id, agent_key, registration, doc_id, content, content_type, etag, updated_ms) ' +
        'VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, kind, activity_id, agent_key, registration, doc_id) DO UPDATE SET ' +
        'content = excluded.content, content_type = excluded.content_type, etag = excluded.etag, updated_ms = excluded.updated_ms',
    ).run(...keyParams(tenant, key), next.content, next.contentType, next.etag, next.updatedMs);
    return next;
  });
}

export function deleteDocument(h: SqliteHandle, tenant: string, key: DocumentKey, pre: DocumentPrecondition): void {
  h.tx(() => {
    const r = h.q(`SELECT etag FROM documents WHERE ${KEY}`).get(...keyParams(tenant, key)) as Row | undefined;
    checkPrecondition(r ? String(r.etag) : undefined, pre);
    if (r) h.q(`DELETE FROM documents WHERE ${KEY}`).run(...keyParams(tenant, key));
  });
}

export function listDocumentIds(h: SqliteHandle, tenant: string, key: Omit<DocumentKey, 'docId'>, sinceMs?: number): string[] {
  const { where, params } = scopeWhere(tenant, key);
  const rows =
    sinceMs === undefined
      ? (h.q(`SELECT DISTINCT doc_id FROM documents WHERE ${where} ORDER BY doc_id`).all(...params) as Row[])
      : (h.q(`SELECT DISTINCT doc_id FROM documents WHERE ${where} AND updated_ms > ? ORDER BY doc_id`).all(...params, sinceMs) as Row[]);
  return rows.map((r) => String(r.doc_id));
}

export function deleteDocuments(h: SqliteHandle, tenant: string, key: Omit<DocumentKey, 'docId'>): void {
  const { where, params } = scopeWhere(tenant, key);
  h.q(`DELETE FROM documents WHERE ${where}`).run(...params);
}
