/**
 * Document resources' rules (xAPI-Communication §2.2, §2.3, §2.6, §2.7, §3.1): request parameters,
 * ETags, JSON merging for POST, and precondition checks. Pure: the store calls `planDocumentWrite`
 * and `checkPrecondition` inside its write transaction.
 */
import { createHash } from 'node:crypto';
import { LrsError } from '../errors.ts';
import { ifiKey } from './agents.ts';
import type { Actor } from './types.ts';
import { is2, type XapiVersion } from './versions.ts';
import { isJsonType } from './media.ts';
import { parseParams, type ResourceName } from './params.ts';
import { MAX_JSON_DEPTH } from './validate.ts';

export type DocumentKind = 'state' | 'activity_profile' | 'agent_profile';

/** Identifies one document. Unused parts are ''. */
export interface DocumentKey {
  kind: DocumentKind;
  activityId: string;
  /** IFI key of the agent (state, agent profile). */
  agent: string;
  registration: string;
  docId: string;
}

export interface StoredDocument {
  content: Buffer;
  contentType: string;
  /** Quoted SHA-1 of the content. */
  etag: string;
  updatedMs: number;
}

/** Preconditions checked in the same transaction as the write (by checkPrecondition below). */
export interface DocumentPrecondition {
  ifMatch?: string[];
  ifNoneMatchAny?: boolean;
  /** If-None-Match entity tags other than `*`: 412 when the current ETag is one of them. */
  ifNoneMatch?: string[];
  /** PUT with neither header where the version requires one: 409 when the document exists. */
  conflictIfExists?: boolean;
  /** 1.0.3 profile PUT with neither header (§3.1.s3.b1): also 400 when it does not exist. */
  headerRequiredIfNew?: boolean;
}

/** What a document write does: merge (POST) or replace, under which preconditions, up to which size. */
export interface DocumentWriteOptions {
  merge: boolean;
  pre: DocumentPrecondition;
  /** Largest document the write may leave stored, in bytes (LECTERN_MAX_DOCUMENT_SIZE); none: no limit. */
  maxSize?: number;
  /** The Last-Modified recorded instead of now (epoch ms): `lectern import` keeps the exported one. */
  updatedMs?: number;
}

/**
 * 413 when a document of `size` bytes is over `maxSize`: the body sent (checked before it is
 * parsed) or, for a merging POST, the document the merge would leave stored.
 */
export function checkDocumentSize(size: number, maxSize: number | undefined, merged = false): void {
  if (maxSize === undefined || size <= maxSize) return;
  throw new LrsError(
    'too_large',
    merged
      ? `merging the document into the stored one would make it ${size} bytes, more than the ${maxSize} bytes this LRS accepts (LECTERN_MAX_DOCUMENT_SIZE): nothing was stored`
      : `the document is larger than the ${maxSize} bytes this LRS accepts (LECTERN_MAX_DOCUMENT_SIZE)`,
  );
}

/** The quoted SHA-1 hex of the content. */
export const etagOf = (content: Buffer): string => `"${createHash('sha1').update(content).digest('hex')}"`;

/**
 * A JSON document's text, strictly: JSON is UTF-8 (RFC 8259 §8.1), and a lenient decode would
 * store (or merge into the stored document) U+FFFD in place of the client's bytes. A leading BOM
 * is dropped from the text, as from statement bodies (§8.1 lets a parser ignore it); the stored
 * bytes keep it, and a merge, which writes the document anew, writes none.
 */
const UTF8 = new TextDecoder('utf-8', { fatal: true });

function jsonText(content: Buffer, what: string): string {
  try {
    return UTF8.decode(content);
  } catch {
    throw new LrsError('bad_request', `${what} is labelled application/json but is not valid UTF-8`);
  }
}

function parseJsonObject(content: Buffer, what: string): Record<string, unknown> {
  const text = jsonText(content, what);
  let v: unknown;
  try {
    v = JSON.parse(text);
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

/** The deepest nesting of arrays/objects in a JSON text, found without recursion. */
function nestingDepth(text: string): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) max = Math.max(max, ++depth);
    else if (c === 0x5d || c === 0x7d) depth--;
  }
  return max;
}

/**
 * Checks a JSON document's encoding (UTF-8) and syntax on write, so a stored JSON document always
 * decodes and parses, and its nesting, so merging it later cannot overflow the stack (a 400 now
 * rather than a 500 then).
 */
export function checkJsonDocument(doc: { content: Buffer; contentType: string }): void {
  if (isJsonType(doc.contentType)) {
    const text = jsonText(doc.content, 'the document');
    try {
      JSON.parse(text);
    } catch {
      throw new LrsError('bad_request', 'the document is labelled application/json but is not valid JSON');
    }
    if (nestingDepth(text) > MAX_JSON_DEPTH) {
      throw new LrsError('bad_request', `the JSON document is nested more than ${MAX_JSON_DEPTH} levels deep`);
    }
  }
}

/** If-Match / If-None-Match against the current ETag (undefined: no document). 412 (or 409) on failure. */
export function checkPrecondition(current: string | undefined, pre: DocumentPrecondition): void {
  if (pre.ifMatch) {
    const ok = current !== undefined && (pre.ifMatch.includes('*') || pre.ifMatch.includes(current));
    if (!ok) throw new LrsError('precondition_failed', current === undefined ? 'If-Match given but no document exists' : `If-Match does not match the current ETag ${current}`);
  }
  if (pre.ifNoneMatchAny && current !== undefined) {
    throw new LrsError('precondition_failed', 'If-None-Match: * given but the document already exists');
  }
  if (pre.ifNoneMatch && current !== undefined && pre.ifNoneMatch.includes(current)) {
    throw new LrsError('precondition_failed', `If-None-Match lists the current ETag ${current}`);
  }
  // A PUT with neither header: 409 on an existing document (§3.1.s4.b13); under 1.0.3 a profile
  // PUT of a new one still lacks what the client MUST send (§3.1.s3.b1), a missing argument: 400.
  if (pre.headerRequiredIfNew && current === undefined) {
    throw new LrsError('bad_request', 'a PUT to a profile resource needs If-None-Match: * to create a document (or If-Match with the ETag of the one to replace)');
  }
  if (pre.conflictIfExists && current !== undefined) {
    throw new LrsError(
      'conflict',
      'the document already exists and the PUT has neither If-Match nor If-None-Match: GET the document to check its current state, ' +
        `then PUT again with If-Match set to its ETag (currently ${current})`,
    );
  }
}

/**
 * The document a write leaves stored, given the current one: checks the preconditions, then for a
 * merging POST onto an existing document merges (§2.2.s7; a POST onto no document stores it as a
 * PUT would), refusing (413) a document over `opts.maxSize`. `incoming` has already passed checkJsonDocument. Backends call this inside the
 * transaction that read `current` and then store the result.
 */
export function planDocumentWrite(
  current: StoredDocument | undefined,
  incoming: { content: Buffer; contentType: string },
  opts: DocumentWriteOptions,
  nowMs: number,
): StoredDocument {
  checkPrecondition(current?.etag, opts.pre);
  // A merge updates the stored document, which keeps its own (JSON) Content-Type; the limit holds
  // for what it leaves stored, or POSTs of small bodies would grow one document without bound.
  if (opts.merge && current) {
    const content = mergeJsonDocuments(current, incoming);
    checkDocumentSize(content.length, opts.maxSize, true);
    return { content, contentType: current.contentType, etag: etagOf(content), updatedMs: opts.updatedMs ?? nowMs };
  }
  checkDocumentSize(incoming.content.length, opts.maxSize);
  return { content: incoming.content, contentType: incoming.contentType, etag: etagOf(incoming.content), updatedMs: opts.updatedMs ?? nowMs };
}

/**
 * Splits an If-Match / If-None-Match value into entity tags. Tags sent without quotes are quoted,
 * since some clients send the bare SHA-1; weak tags (W/"...") are kept as sent and so never match
 * (§3.1 uses strong comparison). An empty value counts as no header.
 */
function entityTags(value: string | undefined): string[] | undefined {
  if (value === undefined) return undefined;
  const tags = value
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean)
    .map((t) => (t === '*' || t.startsWith('"') || t.startsWith('W/') ? t : `"${t}"`));
  return tags.length ? tags : undefined;
}

/**
 * Whether a PUT of `kind` sent with neither If-Match nor If-None-Match is refused under `version`:
 * 1.0.3 (§3.1.s3.b1, §3.1.s4.b13) refuses it on the profile resources, 409 when the document
 * exists and 400 when it does not; 2.0 (9274.1.1 §4.1.4) on every document resource, State
 * included, with 409 when the document exists only.
 */
export function headerlessPut(kind: DocumentKind, version: XapiVersion): 'allowed' | 'conflict' | 'conflict-or-missing' {
  if (is2(version)) return 'conflict';
  return kind === 'state' ? 'allowed' : 'conflict-or-missing';
}

/** The preconditions of a request from its If-Match / If-None-Match headers, and what a PUT without either gets. */
export function parsePreconditions(ifMatch: string | undefined, ifNoneMatch: string | undefined, headerless: ReturnType<typeof headerlessPut> = 'allowed'): DocumentPrecondition {
  const pre: DocumentPrecondition = {};
  const match = entityTags(ifMatch);
  if (match) pre.ifMatch = match;
  const noneMatch = entityTags(ifNoneMatch);
  if (noneMatch?.includes('*')) pre.ifNoneMatchAny = true;
  else if (noneMatch) pre.ifNoneMatch = noneMatch;
  if (headerless !== 'allowed' && !match && !noneMatch) {
    pre.conflictIfExists = true;
    if (headerless === 'conflict-or-missing') pre.headerRequiredIfNew = true;
  }
  return pre;
}

export const hasPrecondition = (pre: DocumentPrecondition): boolean => pre.ifMatch !== undefined || pre.ifNoneMatchAny === true || pre.ifNoneMatch !== undefined;

// ---------------------------------------------------------------------------------------------
// Request parameters
// ---------------------------------------------------------------------------------------------

/** Per resource: its name, the parameter naming a document, and the table entry of its parameters. */
const SHAPES: Record<DocumentKind, { name: string; idParam: 'stateId' | 'profileId'; params: ResourceName }> = {
  state: { name: 'State', idParam: 'stateId', params: 'state' },
  activity_profile: { name: 'Activity Profile', idParam: 'profileId', params: 'activityProfile' },
  agent_profile: { name: 'Agent Profile', idParam: 'profileId', params: 'agentProfile' },
};

/** What a document request addresses: one document (docId) or every document in a scope. */
export interface DocumentTarget {
  /** The document key without its id; registration '' when none was given. */
  scope: Omit<DocumentKey, 'docId'>;
  /** The stateId/profileId, when given. */
  docId?: string;
  /** `since` (GET), epoch ms, exclusive. */
  since?: number;
}

/**
 * Validates the parameters of a State / Activity Profile / Agent Profile request (§2.3-§2.7) as
 * params.ts declares them. `since` belongs to GET (and HEAD); with an id it is accepted and has no
 * effect, as the ADL suite expects. DELETE without an id (State only, §2.3.s5) removes every
 * document in the scope.
 */
export function parseDocumentParams(kind: DocumentKind, method: string, params: Record<string, string>): DocumentTarget {
  const shape = SHAPES[kind];
  const p = parseParams(shape.params, method, params);
  const agent = p.agent as Actor | undefined;
  const scope: Omit<DocumentKey, 'docId'> = {
    kind,
    activityId: (p.activityId as string | undefined) ?? '',
    agent: agent ? (ifiKey(agent) ?? '') : '',
    registration: (p.registration as string | undefined) ?? '',
  };
  const docId = p[shape.idParam] as string | undefined;
  const since = p.since as number | undefined;
  return { scope, ...(docId !== undefined && { docId }), ...(since !== undefined && { since }) };
}

export const resourceName = (kind: DocumentKind): string => SHAPES[kind].name;
