/** The Statement resource (xAPI-Communication §2.1): parse, call the store, reply. */
import { LrsError, ValidationFailed } from '../errors.ts';
import type { AttachmentBlob, Store, StoredRow } from '../store/types.ts';
import { activityIdsOf, canonicalStatement, idsStatement, parseAcceptLanguage } from '../xapi/formats.ts';
import { moreUrl, parseStatementRequest, type StatementFormat } from '../xapi/query.ts';
import { verifySignedStatement } from '../xapi/signature.ts';
import { attachmentHashes, prepareBatch, statementAttachments } from '../xapi/statement.ts';
import type { ActivityDefinition, Statement } from '../xapi/types.ts';
import { isUuid, mediaTypeOf, validateStatements } from '../xapi/validate.ts';
import { errorResponse } from './errors.ts';
import { type AttachmentPart, buildStatementsMultipart, extractStatementParts, matchAttachments } from './multipart.ts';
import { json, type XapiRequest, type XapiResponse } from './request.ts';

export interface StatementDeps {
  store: Store;
  maxSearchHits: number;
  /** Path the `more` links point at. */
  basePath: string;
}

/** Strict UTF-8 (Communication §1.4: strings are UTF-8); a leading BOM is dropped (RFC 8259 §8.1). */
const UTF8 = new TextDecoder('utf-8', { fatal: true });

/** Parses a JSON body, turning invalid UTF-8 and syntax errors into a 400 that says where. */
export function parseJsonBody(body: Buffer | undefined): unknown {
  if (!body || body.length === 0) throw new ValidationFailed([{ loc: ['body'], msg: 'a JSON body is required', type: 'value_error.missing' }]);
  let text: string;
  try {
    text = UTF8.decode(body);
  } catch {
    // Decoding leniently would store U+FFFD in place of the client's bytes.
    throw new ValidationFailed([{ loc: ['body'], msg: 'the body is not valid UTF-8', type: 'value_error.encoding' }]);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new ValidationFailed([{ loc: ['body'], msg: `malformed JSON: ${(err as Error).message}`, type: 'value_error.jsondecode' }]);
  }
}

/** What a PUT/POST carries: the statements as sent and the attachment data, by lower-case sha2. */
export interface Received {
  value: unknown;
  parts: Map<string, AttachmentPart>;
}

/**
 * Reads a PUT/POST body (Communication §1.5): application/json, whose attachments must all have a
 * fileUrl, or multipart/mixed with the statements first and one part per attachment's data.
 */
function readBody(req: XapiRequest): Received {
  const contentType = req.headers['content-type'];
  const ct = mediaTypeOf(contentType);
  if (ct === 'application/json') return { value: parseJsonBody(req.body), parts: new Map() };
  if (ct.startsWith('multipart/')) {
    const { json: first, attachments } = extractStatementParts(contentType!, req.body ?? Buffer.alloc(0));
    return { value: parseJsonBody(first), parts: attachments };
  }
  throw new LrsError('bad_request', `statements must be sent as application/json or multipart/mixed, not ${ct || 'without a Content-Type'}`);
}

/**
 * Validates the statements, checks their attachments against the parts received and verifies
 * signed statements (xAPI-Data §2.6). `id` is PUT's statementId. Returns the statements to store
 * and the attachment data to keep with them.
 */
export async function acceptStatements(received: Received, id?: string): Promise<{ statements: Statement[]; blobs: AttachmentBlob[] }> {
  const { statements, issues } = validateStatements(received.value);
  if (issues.length) throw new ValidationFailed(issues);
  if (id !== undefined) {
    const given = statements[0].id;
    if (given !== undefined && given.toLowerCase() !== id) {
      throw new ValidationFailed([{ loc: [0, 'id'], msg: `the statement id ${given} differs from the statementId parameter ${id}`, type: 'value_error.id_mismatch' }]);
    }
    statements[0] = { ...statements[0], id };
  }
  matchAttachments(statements, received.parts);
  for (let i = 0; i < statements.length; i++) {
    const signedId = await verifySignedStatement(statements[i], received.parts);
    // Sent without an id, a signed statement is stored under the id it was signed with.
    if (signedId !== undefined && statements[i].id === undefined) statements[i] = { ...statements[i], id: signedId };
  }
  // Every part matches an attachment (matchAttachments checked): keep each once, typed as declared.
  const blobs = new Map<string, AttachmentBlob>();
  for (const s of statements) {
    for (const a of statementAttachments(s)) {
      const sha2 = a.sha2.toLowerCase();
      const part = received.parts.get(sha2);
      if (part && !blobs.has(sha2)) blobs.set(sha2, { sha2, contentType: a.contentType, content: part.body });
    }
  }
  return { statements, blobs: [...blobs.values()] };
}

/**
 * Statement results are `application/json` with no parameters: JSON is UTF-8 by definition
 * (RFC 8259 §8.1, which defines no charset parameter), and the ADL suite compares the header
 * exactly (XAPI-00161).
 */
const JSON_TYPE = 'application/json';
/** As bytes: Fastify appends `; charset=utf-8` to a JSON media type sent with a string body. */
const jsonBytes = (text: string): Buffer => Buffer.from(text, 'utf8');

/** Methods of the Statement resource (Communication §2.1), for 405's Allow header. */
const ALLOWED = 'GET, HEAD, PUT, POST';

const unknownParams = (names: string[]): ValidationFailed =>
  new ValidationFailed(names.map((k) => ({ loc: ['query', k], msg: 'unknown parameter', type: 'value_error.extra' })));

async function put(deps: StatementDeps, req: XapiRequest): Promise<XapiResponse> {
  const id = req.query.statementId;
  const extra = Object.keys(req.query).filter((k) => k !== 'statementId');
  if (extra.length) throw unknownParams(extra);
  if (id === undefined) throw new ValidationFailed([{ loc: ['query', 'statementId'], msg: 'field required', type: 'value_error.missing' }]);
  if (!isUuid(id)) throw new ValidationFailed([{ loc: ['query', 'statementId'], msg: 'must be a UUID', type: 'value_error.uuid' }]);
  const received = readBody(req);
  if (Array.isArray(received.value)) {
    throw new LrsError('bad_request', 'PUT stores a single statement: send an object, not an array (use POST for batches)');
  }
  const { statements, blobs } = await acceptStatements(received, id.toLowerCase());
  await deps.store.insertStatements(req.user!.target, prepareBatch(statements, req.user!.agent), blobs);
  return { status: 204 };
}

async function post(deps: StatementDeps, req: XapiRequest): Promise<XapiResponse> {
  const extra = Object.keys(req.query);
  if (extra.length) throw unknownParams(extra);
  const { statements, blobs } = await acceptStatements(readBody(req));
  const out = await deps.store.insertStatements(req.user!.target, prepareBatch(statements, req.user!.agent), blobs);
  return { status: 200, headers: { 'content-type': JSON_TYPE }, body: jsonBytes(JSON.stringify(out.ids)) };
}

/**
 * The body of a GET: the stored JSON texts as they are for `exact` (no parse/serialise round trip
 * on the hot path), rewritten for `ids`/`canonical`; with `attachments=true`, a multipart/mixed
 * body with the JSON first and the data of every attachment of the statements after it.
 */
async function render(
  deps: StatementDeps,
  req: XapiRequest,
  rows: StoredRow[],
  opts: { format: StatementFormat; attachments: boolean },
  wrap: (jsons: string[]) => string,
): Promise<{ contentType: string; body: string | Buffer }> {
  let jsons = rows.map((r) => r.json);
  if (opts.format === 'exact' && !opts.attachments) return { contentType: JSON_TYPE, body: jsonBytes(wrap(jsons)) };
  const statements = jsons.map((j) => JSON.parse(j) as Statement);
  if (opts.format === 'ids') jsons = statements.map((s) => JSON.stringify(idsStatement(s)));
  if (opts.format === 'canonical') {
    const tenant = req.user!.target;
    const ids = [...new Set(statements.flatMap(activityIdsOf))];
    const definitions = new Map<string, ActivityDefinition>();
    for (const [i, d] of (await Promise.all(ids.map((id) => deps.store.getActivityDefinition(tenant, id)))).entries()) {
      if (d) definitions.set(ids[i], d);
    }
    const ranges = parseAcceptLanguage(req.headers['accept-language']);
    jsons = statements.map((s) => JSON.stringify(canonicalStatement(s, definitions, ranges)));
  }
  const body = wrap(jsons);
  if (!opts.attachments) return { contentType: JSON_TYPE, body: jsonBytes(body) };
  // Attachments with a fileUrl and no data received have no part.
  const blobs = await deps.store.getAttachments(req.user!.target, [...new Set(statements.flatMap(attachmentHashes))]);
  const multipart = buildStatementsMultipart(
    body,
    blobs.map((b) => ({ sha2: b.sha2, contentType: b.contentType, body: b.content })),
  );
  return { contentType: multipart.contentType, body: multipart.body };
}

async function get(deps: StatementDeps, req: XapiRequest): Promise<XapiResponse> {
  const user = req.user!;
  const parsed = parseStatementRequest(req.query, { maxLimit: deps.maxSearchHits, mineAgent: user.agent });
  if (parsed.kind === 'single') {
    const row = await deps.store.getStatement(user.target, parsed.id, parsed.voided);
    if (!row) throw new LrsError('not_found', `no ${parsed.voided ? 'voided ' : ''}statement with id ${parsed.id}`);
    const out = await render(deps, req, [row], parsed, (j) => j[0]);
    return { status: 200, headers: { 'content-type': out.contentType, 'last-modified': new Date(row.storedMs).toUTCString() }, body: out.body };
  }
  const page = await deps.store.queryStatements(user.target, parsed.query);
  const more = page.next ? moreUrl(deps.basePath, parsed.params, page.next) : '';
  const out = await render(deps, req, page.rows, parsed.query, (j) => `{"statements":[${j.join(',')}],"more":${JSON.stringify(more)}}`);
  return { status: 200, headers: { 'content-type': out.contentType }, body: out.body };
}

/** Every statements response carries this (Communication §2.1.3.s2.b5), errors included. */
export async function consistentThroughHeader(store: Store, tenant: string): Promise<Record<string, string>> {
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
  res.headers = { ...res.headers, ...(await consistentThroughHeader(deps.store, req.user?.target ?? '')) };
  return res;
}
