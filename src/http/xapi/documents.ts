/**
 * The document resources: State (§2.3), Activity Profile (§2.7) and Agent Profile (§2.6). Parse
 * the parameters, call the store (writes: src/ops/documents.ts), reply. Documents are opaque bytes served back
 * byte-exact with the Content-Type they were stored with.
 */
import { LrsError } from '../../errors.ts';
import type { DocumentKind, Store } from '../../store/types.ts';
import { type DocumentWrite, writeDocument } from '../../ops/documents.ts';
import { etagOf, parseDocumentParams, resourceName } from '../../xapi/documents.ts';
import { json, type XapiRequest, type XapiResponse } from '../request.ts';

export interface DocumentDeps {
  store: Store;
  /** Largest document in bytes (LECTERN_MAX_DOCUMENT_SIZE); larger ones get 413. */
  maxDocumentSize: number;
  /** Most JSON values a JSON document may hold (LECTERN_MAX_JSON_VALUES); more get 413. */
  maxJsonValues: number;
}

export async function handleDocuments(deps: DocumentDeps, kind: DocumentKind, req: XapiRequest): Promise<XapiResponse> {
  const { method } = req;
  const tenant = req.user!.target;

  if (method === 'GET' || method === 'HEAD') {
    const target = parseDocumentParams(kind, method, req.query);
    if (target.docId === undefined) {
      const ids = await deps.store.listDocumentIds(tenant, target.scope, target.since);
      const body = JSON.stringify(ids);
      return json(200, ids, { etag: etagOf(Buffer.from(body, 'utf8')) });
    }
    const doc = await deps.store.getDocument(tenant, { ...target.scope, docId: target.docId });
    if (!doc) throw new LrsError('not_found', `no ${resourceName(kind)} document with that ${kind === 'state' ? 'stateId' : 'profileId'} here`);
    return {
      status: 200,
      headers: { 'content-type': doc.contentType, etag: doc.etag, 'last-modified': new Date(doc.updatedMs).toUTCString() },
      body: doc.content,
    };
  }

  // PUT, POST, DELETE: as every document write is applied (src/ops/documents.ts).
  const stored = await writeDocument(deps.store, tenant, kind, { method: method as DocumentWrite['method'], query: req.query, headers: req.headers, body: req.body, version: req.version! }, deps, req.holdParsed);
  return stored ? { status: 204, headers: { etag: stored.etag } } : { status: 204 };
}
