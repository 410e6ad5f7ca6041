/**
 * The document resources: State (§2.3), Activity Profile (§2.7) and Agent Profile (§2.6). Reads
 * and writes are the use cases' (src/ops/reads.ts, src/ops/documents.ts). Documents are opaque
 * bytes served back byte-exact with the Content-Type they were stored with.
 */
import { readDocuments } from '../../ops/reads.ts';
import { type DocumentWrite, writeDocument } from '../../ops/documents.ts';
import type { DocumentKind, Store } from '../../store/types.ts';
import { etagOf } from '../../xapi/documents.ts';
import { type Answer, json } from '../answer.ts';
import type { XapiRequest } from './request.ts';

export interface DocumentDeps {
  store: Store;
  /** Largest document in bytes (LECTERN_MAX_DOCUMENT_SIZE); larger ones get 413. */
  maxDocumentSize: number;
  /** Most JSON values a JSON document may hold (LECTERN_MAX_JSON_VALUES); more get 413. */
  maxJsonValues: number;
}

export async function handleDocuments(deps: DocumentDeps, kind: DocumentKind, req: XapiRequest): Promise<Answer> {
  const { method } = req;
  const tenant = req.user!.target;
  if (method === 'GET' || method === 'HEAD') {
    const read = await readDocuments(deps.store, tenant, kind, req.query, method);
    if ('ids' in read) return json(200, read.ids, { etag: etagOf(Buffer.from(JSON.stringify(read.ids), 'utf8')) });
    const doc = read.document;
    return {
      status: 200,
      headers: { 'content-type': doc.contentType, etag: doc.etag, 'last-modified': new Date(doc.updatedMs).toUTCString() },
      body: doc.content,
    };
  }
  // PUT, POST, DELETE: as every document write is applied (src/ops/documents.ts).
  const w: DocumentWrite = { method: method as DocumentWrite['method'], query: req.query, headers: req.headers, body: req.body, version: req.version! };
  const stored = await writeDocument(deps.store, tenant, kind, w, deps, req.holdParsed);
  return stored ? { status: 204, headers: { etag: stored.etag } } : { status: 204 };
}
