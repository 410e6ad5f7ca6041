/**
 * Attachments (xAPI-Data §2.4.11, Communication §1.5.2): the xAPI rules of a multipart statement
 * request's parts (hash headers, encoding), which attachment objects a statement declares, the
 * cross-check of those objects against the parts received, and the data the store keeps. The
 * multipart codec itself is ./multipart.ts.
 */
import { createHash } from 'node:crypto';
import { LrsError } from '../errors.ts';
import { mediaTypeOf } from './media.ts';
import type { Attachment, Statement } from './types.ts';

/** The raw data of one attachment, keyed by its lower-case hex SHA-2. */
export interface AttachmentPart {
  /** The part's Content-Type header, or `application/octet-stream` when the part has none. */
  contentType: string;
  body: Buffer;
}

/** A multipart/mixed statement request split per xAPI-Communication §1.5.2. */
export interface StatementParts {
  /** The first part: the statement or the array of statements, still serialized. */
  json: Buffer;
  /** Every other part, by the lower-case hex SHA-2 of its content (verified against its header). */
  attachments: Map<string, AttachmentPart>;
}

/** Attachment data as the store keeps it: once per tenant and sha2, typed as the statement declared it. */
export interface AttachmentBlob {
  sha2: string;
  contentType: string;
  content: Buffer;
}

const bad = (message: string): LrsError => new LrsError('bad_request', message);

/** SHA-2 variants by hex digest length (§1.5.2.s4.b4: SHA-256, SHA-384 or SHA-512 SHOULD be used). */
const SHA2_BY_HEX_LENGTH: Record<number, string> = { 56: 'sha224', 64: 'sha256', 96: 'sha384', 128: 'sha512' };
const HEX = /^[0-9a-f]+$/;

/**
 * Splits the parts of a `multipart/mixed` statement request (decoded by ./multipart.ts) per
 * xAPI-Communication §1.5.2.s2.b2:
 *
 * - the first part MUST be `application/json` (parameters such as charset are allowed): it is the
 *   statement or statements;
 * - every other part MUST have an `X-Experience-API-Hash` header (a hex SHA-2 digest, checked
 *   against the part's content: 400 on mismatch) and `Content-Transfer-Encoding: binary` (missing or
 *   any other encoding is rejected: it is a MUST for the request, and the only encoding that keeps
 *   the hash meaningful);
 * - a Content-Type is only a SHOULD for attachment parts (§1.5.2.s2.b2.b6), so a part without one
 *   is accepted and recorded as `application/octet-stream`;
 * - a part's Content-Length header, when present, must equal its content length;
 * - two parts with the same hash carry the same data (§1.5.2.s2.b2.b5 asks for one copy): kept once.
 *
 * Cross-checking the parts against the statements' attachment objects is {@link matchAttachments}'s job.
 */
export function statementParts(parts: { headers: Record<string, string>; body: Buffer }[]): StatementParts {
  const first = parts[0]!;
  const firstType = first.headers['content-type'];
  if (firstType === undefined) {
    throw bad('the first multipart part (the statements) has no Content-Type; it must be application/json');
  }
  if (mediaTypeOf(firstType) !== 'application/json') {
    throw bad(`the first multipart part (the statements) must be application/json, not ${JSON.stringify(firstType)}`);
  }
  const attachments = new Map<string, AttachmentPart>();
  for (let i = 1; i < parts.length; i++) {
    const { headers, body: data } = parts[i]!;
    const n = i + 1;
    const declared = headers['x-experience-api-hash'];
    if (declared === undefined || declared === '') {
      throw bad(`multipart part ${n} (an attachment) has no X-Experience-API-Hash header`);
    }
    const sha2 = declared.toLowerCase();
    const algorithm = SHA2_BY_HEX_LENGTH[sha2.length];
    if (algorithm === undefined || !HEX.test(sha2)) {
      throw bad(`multipart part ${n}: X-Experience-API-Hash ${JSON.stringify(declared)} is not a hex SHA-256, SHA-384 or SHA-512 digest`);
    }
    const encoding = headers['content-transfer-encoding'];
    if (encoding === undefined) {
      throw bad(`multipart part ${n} (an attachment) has no Content-Transfer-Encoding header; it must be "binary"`);
    }
    if (encoding.toLowerCase() !== 'binary') {
      throw bad(`multipart part ${n}: Content-Transfer-Encoding must be "binary", not ${JSON.stringify(encoding)}`);
    }
    const length = headers['content-length'];
    if (length !== undefined && (!/^\d+$/.test(length) || Number(length) !== data.length)) {
      throw bad(`multipart part ${n}: Content-Length ${JSON.stringify(length)} does not match its ${data.length} bytes of content`);
    }
    const actual = createHash(algorithm).update(data).digest('hex');
    if (actual !== sha2) {
      throw bad(`multipart part ${n}: X-Experience-API-Hash ${sha2} does not match the ${algorithm.toUpperCase()} of its content (${actual})`);
    }
    if (!attachments.has(sha2)) {
      attachments.set(sha2, { contentType: headers['content-type'] || 'application/octet-stream', body: data });
    }
  }
  return { json: first.body, attachments };
}

/**
 * The attachment objects of a statement with where each is: its own, and those of its
 * SubStatement object.
 *
 * A SubStatement "MUST be validated as a Statement" (xAPI-Data §2.4.4.3.s8.b2) and may carry
 * attachments; the spec only *recommends* hoisting them to the containing statement
 * (§2.4.11, after the table). So their raw data travels the same way: a part may match a
 * SubStatement attachment, and a SubStatement attachment without fileUrl needs a part
 * (§1.5.2.s3.b5 "Statements having Attachments that neither contain a fileUrl nor match a received
 * Attachment part" MUST be rejected).
 */
function located(statement: Statement): { attachment: Attachment; loc: string }[] {
  const out: { attachment: Attachment; loc: string }[] = [];
  for (const [j, attachment] of (statement.attachments ?? []).entries()) out.push({ attachment, loc: `attachments[${j}]` });
  if (statement.object.objectType === 'SubStatement') {
    for (const [j, attachment] of (statement.object.attachments ?? []).entries()) out.push({ attachment, loc: `object.attachments[${j}]` });
  }
  return out;
}

/** The attachment objects of a statement: its own and its SubStatement's. */
const statementAttachments = (s: Statement): Attachment[] => located(s).map((l) => l.attachment);

/** Distinct lower-case sha2 of a statement's attachments, in order. */
export const attachmentHashes = (s: Statement): string[] => [...new Set(statementAttachments(s).map((a) => a.sha2.toLowerCase()))];

/**
 * The hashes whose data a response carries (of those in `sizes`: the data the store has and this
 * reader may be given, by sha2, with its bytes): the data of every attachment without a fileUrl,
 * which its statement's own request carried (so at most LECTERN_MAX_REQUEST_SIZE per statement),
 * then the data of attachments with a fileUrl while it fits in `room` bytes beside it. A statement
 * may declare by hash any number of attachments other requests carried: past `room`, their
 * clients have the fileUrl (the LRS serves only data it has, and bounds what one response holds).
 */
export function attachmentsToServe(statements: readonly Statement[], sizes: ReadonlyMap<string, number>, room: number): string[] {
  const required = new Set<string>();
  const optional = new Set<string>();
  for (const s of statements) {
    for (const a of statementAttachments(s)) {
      const sha2 = a.sha2.toLowerCase();
      if (sizes.has(sha2)) (a.fileUrl === undefined || a.fileUrl === '' ? required : optional).add(sha2);
    }
  }
  let left = room;
  for (const sha2 of required) left -= sizes.get(sha2)!;
  const out = [...required];
  for (const sha2 of optional) {
    const bytes = sizes.get(sha2)!;
    if (required.has(sha2) || bytes > left) continue;
    out.push(sha2);
    left -= bytes;
  }
  return out;
}

/**
 * Cross-checks validated statements against the attachment parts received with them
 * (xAPI-Communication §1.5.2.s1.b4, §1.5.2.s3.b5, and the "excess multipart sections" rule):
 *
 * - every attachment object without a `fileUrl` must have a part whose hash equals its `sha2`
 *   (compared case-insensitively);
 * - every part must match the `sha2` of some attachment object.
 *
 * Attachments of SubStatements count like the statement's own (see `located`). For an
 * `application/json` request, pass an empty Map: every attachment then needs a fileUrl
 * (§1.5.1.s1.b2). Part Content-Type and attachment `contentType`/`length` are not compared: the
 * part is identified by its hash only (§1.5.2.s1.b4 "It MUST not do so any other way"), and the
 * statement's metadata is what gets stored and returned. Throws `LrsError('bad_request')`.
 */
export function matchAttachments(statements: Statement[], parts: Map<string, AttachmentPart>): void {
  const declared = new Set<string>();
  const single = statements.length === 1;
  statements.forEach((statement, i) => {
    for (const { attachment, loc } of located(statement)) {
      const sha2 = typeof attachment.sha2 === 'string' ? attachment.sha2.toLowerCase() : '';
      declared.add(sha2);
      if (!parts.has(sha2) && (attachment.fileUrl === undefined || attachment.fileUrl === '')) {
        const where = single ? loc : `statements[${i}].${loc}`;
        throw bad(
          parts.size === 0
            ? `${where} has no fileUrl, so its data must be sent as a multipart/mixed part with X-Experience-API-Hash ${sha2}`
            : `${where} has no fileUrl and no multipart part has X-Experience-API-Hash ${sha2}`,
        );
      }
    }
  });
  for (const sha2 of parts.keys()) {
    if (!declared.has(sha2)) {
      throw bad(`multipart part with X-Experience-API-Hash ${sha2} does not match the sha2 of any attachment in the statements`);
    }
  }
}

/** The data of the statements' attachments among the parts received (each once, typed as declared). */
export function attachmentBlobs(statements: Statement[], parts: Map<string, AttachmentPart>): AttachmentBlob[] {
  const blobs = new Map<string, AttachmentBlob>();
  for (const s of statements) {
    for (const a of statementAttachments(s)) {
      const sha2 = a.sha2.toLowerCase();
      const part = parts.get(sha2);
      if (part && !blobs.has(sha2)) blobs.set(sha2, { sha2, contentType: a.contentType, content: part.body });
    }
  }
  return [...blobs.values()];
}
