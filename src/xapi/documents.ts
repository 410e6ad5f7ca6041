/**
 * Document resources' rules (xAPI-Communication §2.2, §3.1): ETags, JSON merging for POST, and
 * precondition checks. Pure: the store calls these inside its write transaction.
 */
import { createHash } from 'node:crypto';
import { LrsError } from '../errors.ts';
import type { DocumentPrecondition } from '../store/types.ts';

/** The quoted SHA-1 hex of the content. */
export const etagOf = (content: Buffer): string => `"${createHash('sha1').update(content).digest('hex')}"`;

export const isJsonType = (contentType: string): boolean => contentType.split(';')[0].trim().toLowerCase() === 'application/json';

function parseJsonObject(content: Buffer, what: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(content.toString('utf8'));
  } catch {
    throw new LrsError('bad_request', `${what} is labelled application/json but is not valid JSON`);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new LrsError('bad_request', `${what} must be a JSON object to be merged`);
  return v as Record<string, unknown>;
}

/**
 * POST merging (§2.2.s7): both the stored and the new document must be JSON objects; the new
 * one's top-level properties overwrite the stored one's. Anything else is a 400.
 */
export function mergeJsonDocuments(stored: { content: Buffer; contentType: string }, incoming: { content: Buffer; contentType: string }): Buffer {
  if (!isJsonType(stored.contentType) || !isJsonType(incoming.contentType)) {
    throw new LrsError('bad_request', 'POST can only merge a JSON document into a stored JSON document (both must be application/json objects)');
  }
  const merged = { ...parseJsonObject(stored.content, 'the stored document'), ...parseJsonObject(incoming.content, 'the document') };
  return Buffer.from(JSON.stringify(merged), 'utf8');
}

/** Checks a JSON document's syntax on write, so a stored JSON document always parses. */
export function checkJsonDocument(doc: { content: Buffer; contentType: string }): void {
  if (isJsonType(doc.contentType)) {
    try {
      JSON.parse(doc.content.toString('utf8'));
    } catch {
      throw new LrsError('bad_request', 'the document is labelled application/json but is not valid JSON');
    }
  }
}

/** If-Match / If-None-Match against the current ETag (undefined: no document). 412 on failure. */
export function checkPrecondition(current: string | undefined, pre: DocumentPrecondition): void {
  if (pre.ifMatch) {
    const ok = current !== undefined && (pre.ifMatch.includes('*') || pre.ifMatch.includes(current));
    if (!ok) throw new LrsError('precondition_failed', current === undefined ? 'If-Match given but no document exists' : `If-Match does not match the current ETag ${current}`);
  }
  if (pre.ifNoneMatchAny && current !== undefined) {
    throw new LrsError('precondition_failed', 'If-None-Match: * given but the document already exists');
  }
}
