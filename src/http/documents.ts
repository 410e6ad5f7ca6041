/**
 * The document resources: State (§2.3), Activity Profile (§2.7) and Agent Profile (§2.6). Parse
 * the parameters and preconditions, call the store, reply. Documents are opaque bytes served back
 * byte-exact with the Content-Type they were stored with.
 */
import { LrsError } from '../errors.ts';
import type { DocumentKind, Store } from '../store/types.ts';
import { checkDocumentSize, checkJsonDocument, etagOf, hasPrecondition, headerlessPut, parseDocumentParams, parsePreconditions, resourceName } from '../xapi/documents.ts';
import { countJson } from '../xapi/json.ts';
import { isJsonType } from '../xapi/media.ts';
import { json, type XapiRequest, type XapiResponse } from './request.ts';

export interface DocumentDeps {
  store: Store;
  /** Largest document in bytes (LECTERN_MAX_DOCUMENT_SIZE); larger ones get 413. */
  maxDocumentSize: number;
  /** Most JSON values a JSON document may hold (LECTERN_MAX_JSON_VALUES); more get 413. */
  maxJsonValues: number;
}

/** A document sent without a Content-Type is stored as what HTTP says to assume: bytes. */
const DEFAULT_CONTENT_TYPE = 'application/octet-stream';

export async function handleDocuments(deps: DocumentDeps, kind: DocumentKind, req: XapiRequest): Promise<XapiResponse> {
  const { method } = req;
  const target = parseDocumentParams(kind, method, req.query);
  const tenant = req.user!.target;
  const ifMatch = req.headers['if-match'];
  const ifNoneMatch = req.headers['if-none-match'];

  if (method === 'GET' || method === 'HEAD') {
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

  if (method === 'DELETE') {
    const pre = parsePreconditions(ifMatch, ifNoneMatch);
    if (target.docId === undefined) {
      // Multi-document DELETE (State only, §2.3.s5): one ETag cannot guard many documents.
      if (hasPrecondition(pre)) throw new LrsError('bad_request', 'If-Match and If-None-Match apply to one document: give stateId');
      await deps.store.deleteDocuments(tenant, target.scope);
    } else {
      await deps.store.deleteDocument(tenant, { ...target.scope, docId: target.docId }, pre);
    }
    return { status: 204 };
  }

  // PUT and POST: the parameters guarantee a docId.
  const content = req.body ?? Buffer.alloc(0);
  // Before parsing the body; the store checks a merge's result the same way (planDocumentWrite).
  checkDocumentSize(content.length, deps.maxDocumentSize);
  const doc = { content, contentType: req.headers['content-type']?.trim() || DEFAULT_CONTENT_TYPE };
  // Counted before the syntax check parses it: a few MB of `[{},{},…]` are millions of objects,
  // held against the server's budget until the answer (`holdParsed`: 503 beyond).
  const count = isJsonType(doc.contentType) ? countJson(content, { maxItems: Infinity, maxValues: deps.maxJsonValues }) : undefined;
  if (count?.over) {
    throw new LrsError('too_large', `the JSON document holds more than ${deps.maxJsonValues} JSON values, the most this LRS accepts (LECTERN_MAX_JSON_VALUES)`);
  }
  if (count) req.holdParsed?.(count.values);
  checkJsonDocument(doc);
  // What a PUT without If-Match/If-None-Match gets depends on the version; POST honours them when sent.
  const pre = parsePreconditions(ifMatch, ifNoneMatch, method === 'PUT' ? headerlessPut(kind, req.version!) : 'allowed');
  const stored = await deps.store.putDocument(tenant, { ...target.scope, docId: target.docId! }, doc, { merge: method === 'POST', pre, maxSize: deps.maxDocumentSize });
  return { status: 204, headers: { etag: stored.etag } };
}
