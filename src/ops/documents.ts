/**
 * Writing a State, Activity Profile or Agent Profile document (PUT, POST, DELETE): what the
 * document resources (src/http/documents.ts) and a replayed rejection (./rejections.ts) share.
 */
import { LrsError } from '../errors.ts';
import type { DocumentKind, DocumentStore, StoredDocument } from '../store/types.ts';
import { checkDocumentSize, checkJsonDocument, hasPrecondition, headerlessPut, parseDocumentParams, parsePreconditions } from '../xapi/documents.ts';
import { countJson } from '../xapi/json.ts';
import { isJsonType } from '../xapi/media.ts';
import type { XapiVersion } from '../xapi/versions.ts';

/** LECTERN_MAX_DOCUMENT_SIZE and LECTERN_MAX_JSON_VALUES. */
export interface DocumentLimits {
  maxDocumentSize: number;
  maxJsonValues: number;
}

/** A document write as received. */
export interface DocumentWrite {
  method: 'PUT' | 'POST' | 'DELETE';
  query: Record<string, string>;
  /** content-type, if-match, if-none-match (lower-case names). */
  headers: Record<string, string | undefined>;
  body: Buffer | undefined;
  version: XapiVersion;
}

/** A document sent without a Content-Type is stored as what HTTP says to assume: bytes. */
const DEFAULT_CONTENT_TYPE = 'application/octet-stream';

/** Applies a write; returns the stored document (PUT, POST) or nothing (DELETE). */
export async function writeDocument(
  store: DocumentStore,
  tenant: string,
  kind: DocumentKind,
  w: DocumentWrite,
  limits: DocumentLimits,
  holdParsed?: (values: number) => void,
): Promise<StoredDocument | undefined> {
  const target = parseDocumentParams(kind, w.method, w.query);
  const ifMatch = w.headers['if-match'];
  const ifNoneMatch = w.headers['if-none-match'];
  if (w.method === 'DELETE') {
    const pre = parsePreconditions(ifMatch, ifNoneMatch);
    if (target.docId === undefined) {
      // Multi-document DELETE (State only, §2.3.s5): one ETag cannot guard many documents.
      if (hasPrecondition(pre)) throw new LrsError('bad_request', 'If-Match and If-None-Match apply to one document: give stateId');
      await store.deleteDocuments(tenant, target.scope);
    } else {
      await store.deleteDocument(tenant, { ...target.scope, docId: target.docId }, pre);
    }
    return undefined;
  }
  // PUT and POST: the parameters guarantee a docId.
  const content = w.body ?? Buffer.alloc(0);
  // Before parsing the body; the store checks a merge's result the same way (planDocumentWrite).
  checkDocumentSize(content.length, limits.maxDocumentSize);
  const doc = { content, contentType: w.headers['content-type']?.trim() || DEFAULT_CONTENT_TYPE };
  // Counted before the syntax check parses it: a few MB of `[{},{},…]` are millions of objects,
  // held against the server's budget until the answer (`holdParsed`: 503 beyond).
  const count = isJsonType(doc.contentType) ? countJson(content, { maxItems: Infinity, maxValues: limits.maxJsonValues }) : undefined;
  if (count?.over) {
    throw new LrsError('too_large', `the JSON document holds more than ${limits.maxJsonValues} JSON values, the most this LRS accepts (LECTERN_MAX_JSON_VALUES)`);
  }
  if (count) holdParsed?.(count.values);
  checkJsonDocument(doc);
  // What a PUT without If-Match/If-None-Match gets depends on the version; POST honours them when sent.
  const pre = parsePreconditions(ifMatch, ifNoneMatch, w.method === 'PUT' ? headerlessPut(kind, w.version) : 'allowed');
  return store.putDocument(tenant, { ...target.scope, docId: target.docId! }, doc, { merge: w.method === 'POST', pre, maxSize: limits.maxDocumentSize });
}
