/**
 * The Statement resource (xAPI-Communication §2.1): writes parsed and stored by the use case
 * (src/ops/statements.ts), reads by the statement read (src/ops/reads.ts); the answer shaped here.
 */
import { LrsError } from '../../errors.ts';
import { consistentThrough, readStatements, readView, type StatementsRead } from '../../ops/reads.ts';
import { receiveStatements, storeStatements, validationOf, type Writer } from '../../ops/statements.ts';
import type { StatementReads, Store } from '../../store/types.ts';
import type { Received, ValidationMode } from '../../xapi/accept.ts';
import { buildStatementsMultipart } from '../../xapi/multipart.ts';
import { parseParams } from '../../xapi/params.ts';
import type { XapiVersion } from '../../xapi/versions.ts';
import { type Answer, json } from '../answer.ts';
import { errorAnswer } from '../errors.ts';
import { readerOf, type XapiRequest } from './request.ts';

export const STATEMENTS_PATH = '/xAPI/statements';
/** Every statements answer carries it (Communication §2.1.3.s2.b5), errors included. */
export const CONSISTENT_THROUGH = 'x-experience-api-consistent-through';

export interface StatementDeps {
  store: Store;
  maxSearchHits: number;
  /** LECTERN_MAX_PAGE_BYTES. */
  maxPageBytes: number;
  /** LECTERN_XAPI_STRICT_VERSION: convert 2.0 statements for 1.0.3 readers. */
  strictVersion: boolean;
  /** LECTERN_XAPI_VALIDATION: how writes are validated when the credential does not choose. */
  validation: ValidationMode;
  /** LECTERN_MAX_STATEMENTS_PER_REQUEST. */
  maxStatements: number;
  /** LECTERN_MAX_JSON_VALUES. */
  maxJsonValues: number;
}

/** Reads a PUT/POST body as every statements write is read (src/ops/statements.ts). */
const readBody = (req: XapiRequest, version: XapiVersion, deps: Pick<StatementDeps, 'maxStatements' | 'maxJsonValues'>): Received =>
  receiveStatements(req.body, req.headers['content-type'], version, deps, req.holdParsed);

/**
 * Statement results are `application/json` with no parameters: JSON is UTF-8 by definition
 * (RFC 8259 §8.1, which defines no charset parameter), and the ADL suite compares the header
 * exactly (XAPI-00161).
 */
const JSON_TYPE = 'application/json';
/** As bytes: Fastify appends `; charset=utf-8` to a JSON media type sent with a string body. */
const jsonBytes = (text: string): Buffer => Buffer.from(text, 'utf8');

/**
 * The pieces of a body written straight into one buffer. A page of statements is a large string:
 * joined into a string first, it would cost two large-object strings (the join, then its flattening for
 * the encoder) in V8's heap per response, which piled up as garbage under concurrent reads
 * (docs/performance.md, "Memory"); the buffer lives outside the heap and goes with the response.
 */
function concatUtf8(pieces: string[]): Buffer {
  let size = 0;
  for (const p of pieces) size += Buffer.byteLength(p, 'utf8');
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  for (const p of pieces) at += out.write(p, at, 'utf8');
  return out;
}

/** The request's user as the writer of its statements: its agent the authority, its access what it may do. */
const writer = (req: XapiRequest, deps: StatementDeps): Writer => ({
  authority: req.user!.agent,
  define: req.access?.define ?? false,
  mineOnly: readerOf(req).mineOnly,
  validation: validationOf(req.user!, deps.validation),
});

/** Methods of the Statement resource (Communication §2.1), for 405's Allow header. */
const ALLOWED = 'GET, HEAD, PUT, POST';

async function put(deps: StatementDeps, req: XapiRequest): Promise<Answer> {
  const id = parseParams('statements', 'PUT', req.query).statementId as string;
  const version = req.version!;
  const received = readBody(req, version, deps);
  if (Array.isArray(received.value)) {
    throw new LrsError('bad_request', 'PUT stores a single statement: send an object, not an array (use POST for batches)');
  }
  await storeStatements(deps.store, req.user!.target, received, version, writer(req, deps), id);
  return { status: 204 };
}

async function post(deps: StatementDeps, req: XapiRequest): Promise<Answer> {
  parseParams('statements', 'POST', req.query);
  const version = req.version!;
  const out = await storeStatements(deps.store, req.user!.target, readBody(req, version, deps), version, writer(req, deps));
  return { status: 200, headers: { 'content-type': JSON_TYPE }, body: jsonBytes(JSON.stringify(out.ids)) };
}

/** A StatementResult (Data §2.5) as pieces: `{"statements":[…],"more":"…"}`. */
function statementsResult(jsons: string[], more: string): string[] {
  const pieces = ['{"statements":['];
  for (const [i, j] of jsons.entries()) {
    if (i) pieces.push(',');
    pieces.push(j);
  }
  pieces.push(`],"more":${JSON.stringify(more)}}`);
  return pieces;
}

/** A GET's body: the statement or the StatementResult; with attachments=true, multipart/mixed with their data after it. */
function body(read: StatementsRead): { contentType: string; body: Buffer } {
  const pieces = read.single ? read.jsons : statementsResult(read.jsons, read.more);
  if (!read.attachments) return { contentType: JSON_TYPE, body: concatUtf8(pieces) };
  const parts = read.attachments.map((b) => ({ sha2: b.sha2, contentType: b.contentType, body: b.content }));
  return buildStatementsMultipart(pieces.join(''), parts);
}

async function get(deps: StatementDeps, req: XapiRequest): Promise<Answer> {
  const read = await readStatements(readView(deps.store), readerOf(req), req.query, {
    maxSearchHits: deps.maxSearchHits,
    maxPageBytes: deps.maxPageBytes,
    strictVersion: deps.strictVersion,
    version: req.version!,
    languages: req.headers['accept-language'],
    basePath: STATEMENTS_PATH,
  });
  const out = body(read);
  const headers: Record<string, string> = { 'content-type': out.contentType };
  // The newest `stored` among the statements returned (9274.1.1 §4.1.6.1).
  if (read.lastStoredMs !== undefined) headers['last-modified'] = new Date(read.lastStoredMs).toUTCString();
  // From the server that read them.
  headers[CONSISTENT_THROUGH] = read.through.toISOString();
  return { status: 200, headers, body: out.body };
}

/** The header of an answer whose statements were not read (an error): the store's own. */
export async function consistentThroughHeader(store: Pick<StatementReads, 'consistentThrough'>, tenant: string): Promise<Record<string, string>> {
  return { [CONSISTENT_THROUGH]: (await consistentThrough(store, tenant)).toISOString() };
}

/** Dispatches by method. */
export async function handleStatements(deps: StatementDeps, req: XapiRequest): Promise<Answer> {
  let res: Answer;
  try {
    switch (req.method) {
      case 'PUT':
        res = await put(deps, req);
        break;
      case 'POST':
        res = await post(deps, req);
        break;
      case 'GET':
      case 'HEAD':
        res = await get(deps, req);
        break;
      default:
        // Communication §3.2: a method the specification does not define for the resource is a 405.
        res = json(405, { detail: `method ${req.method} is not allowed on the statements resource` }, { allow: ALLOWED });
    }
  } catch (err) {
    if (!(err instanceof LrsError)) throw err;
    res = errorAnswer(err);
  }
  // A GET's comes from the server that read its answer.
  if (!res.headers?.[CONSISTENT_THROUGH]) res.headers = { ...res.headers, ...(await consistentThroughHeader(deps.store, req.user?.target ?? '')) };
  return res;
}
