/**
 * Storing statements: what POST/PUT /statements and `lectern import` share. The statements are
 * accepted (validated under their version, attachments matched with the data received, signed
 * ones verified: src/xapi/accept.ts), prepared for the writer (src/xapi/statement.ts) and stored
 * in one transaction by the store, which queues their forwarding in it (Store.insertStatements).
 */
import { createHash } from 'node:crypto';
import { LrsError, ValidationFailed } from '../errors.ts';
import type { Store } from '../store/types.ts';
import type { AuthUser } from '../auth/types.ts';
import { acceptStatements, type Received, type ValidationMode } from '../xapi/accept.ts';
import { type AttachmentBlob, type AttachmentPart, statementParts } from '../xapi/attachments.ts';
import { countJson, parseJson } from '../xapi/json.ts';
import { mediaTypeOf } from '../xapi/media.ts';
import { parseMultipartMixed } from '../xapi/multipart.ts';
import type { InsertOutcome } from '../xapi/insert.ts';
import { type PreparedStatement, prepareBatch } from '../xapi/statement.ts';
import type { Actor } from '../xapi/types.ts';
import { statementRules, type XapiVersion } from '../xapi/versions.ts';

/**
 * The validation a user's writes get (docs/validation.md): the credential's choice
 * (AuthUser.validation: its auth.json entry, its token's claim), else the server's default
 * (LECTERN_XAPI_VALIDATION). The one place the mode of a write is decided.
 */
export const validationOf = (user: Pick<AuthUser, 'validation'>, fallback: ValidationMode): ValidationMode => user.validation ?? fallback;

/** Who stores the statements, and what their access lets them do. */
export interface Writer {
  /** How its statements are validated ({@link validationOf}); absent: strict. */
  validation?: ValidationMode;
  /** The authority the statements are stored under. */
  authority: Actor;
  /** May (re)define the canonical Activity from the definitions the statements carry. */
  define: boolean;
  /** Reads only statements of its own authority (the insert rules keep others' from it). */
  mineOnly: boolean;
}

/** Accepted and prepared statements, and the attachment data to keep with them. */
export interface PreparedBatch {
  batch: PreparedStatement[];
  blobs: AttachmentBlob[];
}

/** What one statements request may carry (LECTERN_MAX_STATEMENTS_PER_REQUEST, LECTERN_MAX_JSON_VALUES). */
export interface StatementLimits {
  maxStatements: number;
  maxJsonValues: number;
}

/**
 * Refuses (413) statements JSON holding more statements or JSON values than this LRS accepts in
 * one request, counted on the bytes before anything is parsed: parsing, validating and storing
 * cost memory per value, far more than the bytes of a body of tiny values (docs/configuration.md, LECTERN_MAX_JSON_VALUES).
 * The values counted are then held against the server's budget until the answer (`holdParsed`: 503 beyond).
 */
function checkCounts(json: Buffer | undefined, limits: StatementLimits, holdParsed?: (values: number) => void): Buffer | undefined {
  if (!json) return json;
  const count = countJson(json, { maxItems: limits.maxStatements, maxValues: limits.maxJsonValues });
  if (count.over === 'items') {
    throw new LrsError(
      'too_large',
      `the request carries more than ${limits.maxStatements} statements, the most this LRS accepts in one request (LECTERN_MAX_STATEMENTS_PER_REQUEST): send them in smaller batches`,
    );
  }
  if (count.over === 'values') {
    throw new LrsError(
      'too_large',
      `the statements hold more than ${limits.maxJsonValues} JSON values, the most this LRS accepts in one request (LECTERN_MAX_JSON_VALUES): send them in smaller batches`,
    );
  }
  holdParsed?.(count.values);
  return json;
}

/**
 * Reads a PUT/POST body (Communication §1.5): application/json, whose attachments must all have a
 * fileUrl, or multipart/mixed with the statements first and one part per attachment's data (at
 * most two per statement the request may carry: a signature and a file each). A new request and
 * a replayed rejection (./rejections.ts) are read alike.
 */
export function receiveStatements(
  body: Buffer | undefined,
  contentType: string | undefined,
  version: XapiVersion,
  limits: StatementLimits,
  holdParsed?: (values: number) => void,
): Received {
  const ct = mediaTypeOf(contentType);
  if (ct === 'application/json') return { value: parseJson(checkCounts(body, limits, holdParsed), version), parts: new Map() };
  if (ct.startsWith('multipart/')) {
    // Header bytes: 512 a part on average (an attachment part's three headers take about 200).
    const maxParts = 1 + 2 * limits.maxStatements;
    const parts = parseMultipartMixed(contentType!, body ?? Buffer.alloc(0), { maxParts, maxHeaderBytes: 512 * maxParts });
    const { json: first, attachments } = statementParts(parts);
    return { value: parseJson(checkCounts(first, limits, holdParsed), version), parts: attachments };
  }
  throw new LrsError('bad_request', `statements must be sent as application/json or multipart/mixed, not ${ct || 'without a Content-Type'}`);
}

/**
 * Accepts and prepares a request's statements; `statementId` is PUT's (lower-case). `idOf` gives
 * the id of an accepted statement sent without one (and not signed), by its place in the request:
 * a replayed rejection's (./rejections.ts, replayedStatementId); else the LRS makes a random one.
 */
export async function prepareStatements(received: Received, version: XapiVersion, writer: Writer, statementId?: string, idOf?: (index: number) => string): Promise<PreparedBatch> {
  const { statements, blobs, violations } = await acceptStatements(received, version, statementId, writer.validation);
  if (idOf) for (const [i, s] of statements.entries()) s.id ??= idOf(i);
  const batch = prepareBatch(statements, writer.authority, version, { define: writer.define, mineOnly: writer.mineOnly, received: new Set(blobs.map((b) => b.sha2)), violations });
  return { batch, blobs };
}

/**
 * Stores a request's statements, all or nothing (LrsError 'conflict' for an id stored with other
 * content, 'bad_request' for voiding a voiding statement); returns their ids and how many were new.
 */
export async function storeStatements(
  store: Store,
  tenant: string,
  received: Received,
  version: XapiVersion,
  writer: Writer,
  statementId?: string,
  idOf?: (index: number) => string,
): Promise<InsertOutcome> {
  try {
    const { batch, blobs } = await prepareStatements(received, version, writer, statementId, idOf);
    return await store.insertStatements(tenant, batch, blobs);
  } catch (err) {
    // PUT sends one statement, not a batch: its problems are located in it, without a batch index.
    if (statementId !== undefined && err instanceof ValidationFailed && err.issues) {
      throw new ValidationFailed(err.issues.map((i) => (i.loc[0] === 0 ? { ...i, loc: i.loc.slice(1) } : i)));
    }
    throw err;
  }
}

/**
 * One statement of an import (an export file, another LRS) accepted and prepared as POST would,
 * under the version it was written in, but for two things (docs/data-lifecycle.md, "Import"): it keeps the
 * authority the source LRS recorded (`authority` only for one that has none), and without an id
 * (nor a signed one) it gets one derived from its content, so that a re-run finds it stored
 * instead of storing it twice.
 */
export async function prepareImported(value: unknown, parts: Map<string, AttachmentPart>, authority: Actor, validation: ValidationMode = 'strict'): Promise<PreparedBatch> {
  const version = statementRules(value);
  const { statements, blobs, violations } = await acceptStatements({ value, parts }, version, undefined, validation);
  const s = statements[0];
  s.id ??= contentId(value);
  // The data found for the statement is what it carried (not the batch's: each has its own authority).
  const batch = prepareBatch([s], s.authority ?? authority, version, { define: true, received: new Set(blobs.map((b) => b.sha2)), violations });
  return { batch, blobs };
}

/** A UUID (version 8, RFC 9562) from the SHA-256 of a statement's JSON. */
function contentId(value: unknown): string {
  const h = createHash('sha256').update(JSON.stringify(value)).digest('hex');
  const variant = ((parseInt(h[16], 16) & 0x3) | 0x8).toString(16);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}
