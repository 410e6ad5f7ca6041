/** The Statement resource (xAPI-Communication §2.1): parse, call the use case (src/ops/statements.ts) or the store, reply. */
import { LrsError, ValidationFailed } from '../errors.ts';
import { receiveStatements, storeStatements, validationOf, type Writer } from '../ops/statements.ts';
import type { ValidationMode } from '../xapi/accept.ts';
import type { StatementReads, Store, StoredRow } from '../store/types.ts';
import type { Received } from '../xapi/accept.ts';
import { actorKeys } from '../xapi/agents.ts';
import { attachmentHashes, attachmentsToServe } from '../xapi/attachments.ts';
import { activityIdsOf, CANONICAL_DEFINITIONS_MAX, canonicalStatement, forReader, idsStatement, needsConversion } from '../xapi/formats.ts';
import { languagePreferences, parseAcceptLanguage } from '../xapi/languages.ts';
import { parseParams } from '../xapi/params.ts';
import { moreUrl, parseStatementRequest, type StatementFormat } from '../xapi/query.ts';
import type { ActivityDefinition, Statement } from '../xapi/types.ts';
import { buildStatementsMultipart } from '../xapi/multipart.ts';
import type { XapiVersion } from '../xapi/versions.ts';
import { errorResponse } from './errors.ts';
import { json, readsOf, type XapiRequest, type XapiResponse } from './request.ts';

export interface StatementDeps {
  store: Store;
  maxSearchHits: number;
  /** LECTERN_MAX_PAGE_BYTES. */
  maxPageBytes: number;
  /** Path the `more` links point at. */
  basePath: string;
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
 * The pieces of a body written straight into one buffer. A page of statements is ≈ 130 KB: joined
 * into a string first, it would cost two large-object strings (the join, then its flattening for
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

/** The caller may read only statements of its own authority (`statements/read/mine`, LECTERN_LRS_RESTRICT_BY_AUTHORITY). */
const readsMineOnly = (req: XapiRequest): boolean => req.access?.mineOnly ?? true;

/** The request's user as the writer of its statements: its agent the authority, its access what it may do. */
const writer = (req: XapiRequest, deps: StatementDeps): Writer => ({
  authority: req.user!.agent,
  define: req.access?.define ?? false,
  mineOnly: readsMineOnly(req),
  validation: validationOf(req.user!, deps.validation),
});

/** Methods of the Statement resource (Communication §2.1), for 405's Allow header. */
const ALLOWED = 'GET, HEAD, PUT, POST';

async function put(deps: StatementDeps, req: XapiRequest): Promise<XapiResponse> {
  const id = parseParams('statements', 'PUT', req.query).statementId as string;
  const version = req.version!;
  const received = readBody(req, version, deps);
  if (Array.isArray(received.value)) {
    throw new LrsError('bad_request', 'PUT stores a single statement: send an object, not an array (use POST for batches)');
  }
  await storeStatements(deps.store, req.user!.target, received, version, writer(req, deps), id);
  return { status: 204 };
}

async function post(deps: StatementDeps, req: XapiRequest): Promise<XapiResponse> {
  parseParams('statements', 'POST', req.query);
  const version = req.version!;
  const out = await storeStatements(deps.store, req.user!.target, readBody(req, version, deps), version, writer(req, deps));
  return { status: 200, headers: { 'content-type': JSON_TYPE }, body: jsonBytes(JSON.stringify(out.ids)) };
}

/** Longest run of a page's rewriting before the event loop is given back (see mapInTurns). */
const TURN_MS = 20;

/**
 * `items.map(fn)`, giving the event loop back whenever a turn has run for TURN_MS: a statement
 * may be megabytes (tens of thousands of context activities), and a page of them parsed and
 * rewritten at once held every other request for up to a second (10 × 50,000 activities).
 */
async function mapInTurns<T, R>(items: readonly T[], fn: (item: T) => R): Promise<R[]> {
  const out: R[] = [];
  let turn = performance.now();
  for (const item of items) {
    out.push(fn(item));
    if (performance.now() - turn > TURN_MS) {
      await new Promise((resolve) => setImmediate(resolve));
      turn = performance.now();
    }
  }
  return out;
}

/**
 * mapInTurns for work done in steps (`fn` returns a generator that yields after each step): the
 * event loop is given back after every step as well, so one large item does not hold it.
 */
async function mapInSteps<T, R>(items: readonly T[], fn: (item: T) => Generator<void, R, void>): Promise<R[]> {
  const out: R[] = [];
  let turn = performance.now();
  const giveBack = async () => {
    await new Promise((resolve) => setImmediate(resolve));
    turn = performance.now();
  };
  for (const item of items) {
    const steps = fn(item);
    let r = steps.next();
    for (; !r.done; r = steps.next()) await giveBack();
    out.push(r.value);
    if (performance.now() - turn > TURN_MS) await giveBack();
  }
  return out;
}

/**
 * The body of a GET: the stored JSON texts as they are for `exact` (no parse/serialise round trip
 * on the hot path), rewritten for `ids`/`canonical`; with `attachments=true`, a multipart/mixed
 * body with the JSON first and the data of every attachment of the statements after it.
 */
async function render(
  deps: StatementDeps,
  reads: StatementReads,
  req: XapiRequest,
  rows: StoredRow[],
  opts: { format: StatementFormat; attachments: boolean },
  wrap: (jsons: string[]) => string[],
): Promise<{ contentType: string; body: string | Buffer }> {
  let jsons = rows.map((r) => r.json);
  const mine = readsMineOnly(req);
  // A 1.0.3 reader of 2.0 statements under LECTERN_XAPI_STRICT_VERSION gets them converted.
  const convert = deps.strictVersion && jsons.some((j) => needsConversion(j, req.version!));
  if (opts.format === 'exact' && !opts.attachments && !convert) return { contentType: JSON_TYPE, body: concatUtf8(wrap(jsons)) };
  const statements = await mapInTurns(jsons, (j) => forReader(JSON.parse(j) as Statement, req.version!, deps.strictVersion));
  if (opts.format === 'exact') jsons = await mapInTurns(statements, (s) => JSON.stringify(s));
  if (opts.format === 'ids') jsons = await mapInTurns(statements, (s) => JSON.stringify(idsStatement(s)));
  if (opts.format === 'canonical') {
    // The canonical definitions are assembled from every statement of the store: a reader
    // restricted to its own statements gets each statement's own definitions (language-filtered).
    // Others get them for the page's first CANONICAL_DEFINITIONS_MAX activities, read in chunks.
    const definitions = mine
      ? new Map<string, ActivityDefinition>()
      : await reads.getActivityDefinitions(req.user!.target, activityIdsOf(statements, CANONICAL_DEFINITIONS_MAX));
    const languages = languagePreferences(parseAcceptLanguage(req.headers['accept-language']));
    jsons = await mapInSteps(statements, function* (s) {
      return JSON.stringify(yield* canonicalStatement(s, definitions, languages));
    });
  }
  if (!opts.attachments) return { contentType: JSON_TYPE, body: concatUtf8(wrap(jsons)) };
  const body = wrap(jsons).join('');
  // Attachments with a fileUrl and no data received have no part, and so have those whose data
  // only statements this reader may not read carried (a declaration by hash gives nothing).
  // Their sizes first: the data read is what fits in the page's bytes (attachmentsToServe).
  const hashes = [...new Set(statements.flatMap(attachmentHashes))];
  const carrier = mine ? (actorKeys(req.user!.agent)[0] ?? '') : undefined;
  const sizes = hashes.length ? await reads.attachmentSizes(req.user!.target, hashes, carrier) : new Map<string, number>();
  const room = deps.maxPageBytes - rows.reduce((n, r) => n + Buffer.byteLength(r.json, 'utf8'), 0);
  const served = attachmentsToServe(statements, sizes, room);
  const blobs = served.length ? await reads.getAttachments(req.user!.target, served, carrier) : [];
  const multipart = buildStatementsMultipart(
    body,
    blobs.map((b) => ({ sha2: b.sha2, contentType: b.contentType, body: b.content })),
  );
  return { contentType: multipart.contentType, body: multipart.body };
}

/** A StatementResult (Data §2.5) as pieces: `{"statements":[…],"more":"…"}`. */
function statementsResult(jsons: string[], more: string): string[] {
  const pieces = ['{"statements":['];
  jsons.forEach((j, i) => (i ? pieces.push(',', j) : pieces.push(j)));
  pieces.push(`],"more":${JSON.stringify(more)}}`);
  return pieces;
}

async function get(deps: StatementDeps, req: XapiRequest): Promise<XapiResponse> {
  const user = req.user!;
  const parsed = parseStatementRequest(req.query, { maxLimit: deps.maxSearchHits, maxBytes: deps.maxPageBytes, mineAgent: user.agent, onlyMine: req.access?.mineOnly ?? true });
  const reads = readsOf(req, deps.store);
  if (parsed.kind === 'single') {
    // Another authority's statement, for a user restricted to its own, is as absent as a missing one.
    const row = await reads.getStatement(user.target, parsed.id, parsed.voided, parsed.authority);
    if (!row) throw new LrsError('not_found', `no ${parsed.voided ? 'voided ' : ''}statement with id ${parsed.id}`);
    const out = await render(deps, reads, req, [row], parsed, (j) => j);
    const headers = { 'content-type': out.contentType, 'last-modified': new Date(row.storedMs).toUTCString(), ...(await consistentThroughHeader(reads, user.target)) };
    return { status: 200, headers, body: out.body };
  }
  const page = await reads.queryStatements(user.target, parsed.query);
  const more = page.next ? moreUrl(deps.basePath, parsed.params, page.next) : '';
  const out = await render(deps, reads, req, page.rows, parsed.query, (j) => statementsResult(j, more));
  const headers: Record<string, string> = { 'content-type': out.contentType, ...(await consistentThroughHeader(reads, user.target)) };
  // The newest `stored` among the statements returned (9274.1.1 §4.1.6.1).
  if (page.rows.length) headers['last-modified'] = new Date(Math.max(...page.rows.map((r) => r.storedMs))).toUTCString();
  return { status: 200, headers, body: out.body };
}

/** Every statements response carries this (Communication §2.1.3.s2.b5), errors included. */
export async function consistentThroughHeader(store: Pick<StatementReads, 'consistentThrough'>, tenant: string): Promise<Record<string, string>> {
  const through = await store.consistentThrough(tenant).catch(() => new Date(0));
  return { 'x-experience-api-consistent-through': through.toISOString() };
}

/** Dispatches by method. */
export async function handleStatements(deps: StatementDeps, req: XapiRequest): Promise<XapiResponse> {
  let res: XapiResponse;
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
    res = errorResponse(err);
  }
  // A GET's comes from the server that read its answer.
  if (!res.headers?.['x-experience-api-consistent-through']) res.headers = { ...res.headers, ...(await consistentThroughHeader(deps.store, req.user?.target ?? '')) };
  return res;
}
