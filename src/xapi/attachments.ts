/**
 * Attachments (xAPI-Data §2.4.11, Communication §1.5.2): which attachment objects a statement
 * declares, the cross-check of those objects against the multipart parts received, and the data
 * the store keeps. The multipart codec itself is src/http/multipart.ts.
 */
import { LrsError } from '../errors.ts';
import type { Attachment, Statement } from './types.ts';

/** The raw data of one attachment, keyed by its lower-case hex SHA-2. */
export interface AttachmentPart {
  /** The part's Content-Type header, or `application/octet-stream` when the part has none. */
  contentType: string;
  body: Buffer;
}

/** Attachment data as the store keeps it: once per tenant and sha2, typed as the statement declared it. */
export interface AttachmentBlob {
  sha2: string;
  contentType: string;
  content: Buffer;
}

const bad = (message: string): LrsError => new LrsError('bad_request', message);

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
  statement.attachments?.forEach((attachment, j) => out.push({ attachment, loc: `attachments[${j}]` }));
  if (statement.object.objectType === 'SubStatement') {
    statement.object.attachments?.forEach((attachment, j) => out.push({ attachment, loc: `object.attachments[${j}]` }));
  }
  return out;
}

/** The attachment objects of a statement: its own and its SubStatement's. */
const statementAttachments = (s: Statement): Attachment[] => located(s).map((l) => l.attachment);

/** Distinct lower-case sha2 of a statement's attachments, in order. */
export const attachmentHashes = (s: Statement): string[] => [...new Set(statementAttachments(s).map((a) => a.sha2.toLowerCase()))];

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
