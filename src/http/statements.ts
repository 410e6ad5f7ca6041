/** The Statement resource (xAPI-Communication §2.1): parse, call the store, reply. */
import { LrsError, ValidationFailed } from '../errors.ts';
import type { Store } from '../store/types.ts';
import { moreUrl, parseStatementRequest } from '../xapi/query.ts';
import { prepareBatch } from '../xapi/statement.ts';
import type { Statement } from '../xapi/types.ts';
import { isUuid, validateStatements } from '../xapi/validate.ts';
import { errorResponse } from './errors.ts';
import { json, mediaType, type XapiRequest, type XapiResponse } from './request.ts';

export interface StatementDeps {
  store: Store;
  maxSearchHits: number;
  /** Path the `more` links point at. */
  basePath: string;
}

/** Parses a JSON body, turning syntax errors into a 400 that says where. */
export function parseJsonBody(body: Buffer | undefined): unknown {
  if (!body || body.length === 0) throw new ValidationFailed([{ loc: ['body'], msg: 'a JSON body is required', type: 'value_error.missing' }]);
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (err) {
    throw new ValidationFailed([{ loc: ['body'], msg: `malformed JSON: ${(err as Error).message}`, type: 'value_error.jsondecode' }]);
  }
}

/** Reads the statements of a PUT/POST body (JSON; multipart/mixed with attachments). */
function readStatements(req: XapiRequest): Statement[] {
  const ct = mediaType(req.headers['content-type']);
  if (ct !== 'application/json') {
    throw new LrsError('bad_request', `statements must be sent as application/json or multipart/mixed, not ${ct || 'without a Content-Type'}`);
  }
  const { statements, issues } = validateStatements(parseJsonBody(req.body));
  if (issues.length) throw new ValidationFailed(issues);
  return statements;
}

async function put(deps: StatementDeps, req: XapiRequest): Promise<XapiResponse> {
  const id = req.query.statementId;
  const extra = Object.keys(req.query).filter((k) => k !== 'statementId');
  if (extra.length) throw new ValidationFailed(extra.map((k) => ({ loc: ['query', k], msg: 'unknown parameter', type: 'value_error.extra' })));
  if (id === undefined) throw new ValidationFailed([{ loc: ['query', 'statementId'], msg: 'field required', type: 'value_error.missing' }]);
  if (!isUuid(id)) throw new ValidationFailed([{ loc: ['query', 'statementId'], msg: 'must be a UUID', type: 'value_error.uuid' }]);
  if (req.body && req.body.length && mediaType(req.headers['content-type']) === 'application/json' && /^\s*\[/.test(req.body.toString('utf8', 0, 64))) {
    throw new LrsError('bad_request', 'PUT stores a single statement: send an object, not an array (use POST for batches)');
  }
  const [statement] = readStatements(req);
  if (statement.id !== undefined && statement.id.toLowerCase() !== id.toLowerCase()) {
    throw new ValidationFailed([{ loc: [0, 'id'], msg: `the statement id ${statement.id} differs from the statementId parameter ${id}`, type: 'value_error.id_mismatch' }]);
  }
  const batch = prepareBatch([{ ...statement, id: id.toLowerCase() }], req.user!.agent);
  await deps.store.insertStatements(req.user!.target, batch, []);
  return { status: 204 };
}

async function post(deps: StatementDeps, req: XapiRequest): Promise<XapiResponse> {
  const extra = Object.keys(req.query);
  if (extra.length) throw new ValidationFailed(extra.map((k) => ({ loc: ['query', k], msg: 'unknown parameter', type: 'value_error.extra' })));
  const statements = readStatements(req);
  const batch = prepareBatch(statements, req.user!.agent);
  const out = await deps.store.insertStatements(req.user!.target, batch, []);
  return json(200, out.ids);
}

async function get(deps: StatementDeps, req: XapiRequest): Promise<XapiResponse> {
  const user = req.user!;
  const parsed = parseStatementRequest(req.query, { maxLimit: deps.maxSearchHits, mineAgent: user.agent });
  if (parsed.kind === 'single') {
    const row = await deps.store.getStatement(user.target, parsed.id, parsed.voided);
    if (!row) throw new LrsError('not_found', `no ${parsed.voided ? 'voided ' : ''}statement with id ${parsed.id}`);
    return {
      status: 200,
      headers: { 'content-type': 'application/json; charset=utf-8', 'last-modified': new Date(row.storedMs).toUTCString() },
      body: row.json,
    };
  }
  const page = await deps.store.queryStatements(user.target, parsed.query);
  const more = page.next ? moreUrl(deps.basePath, parsed.params, page.next) : '';
  // The stored JSON is served as is: no parse/serialise round trip on the hot path.
  const body = `{"statements":[${page.rows.map((r) => r.json).join(',')}],"more":${JSON.stringify(more)}}`;
  return { status: 200, headers: { 'content-type': 'application/json; charset=utf-8' }, body };
}

/** Dispatches by method; every response (errors too) carries X-Experience-API-Consistent-Through. */
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
        throw new LrsError('bad_request', `method ${req.method} is not allowed on the statements resource`);
    }
  } catch (err) {
    if (!(err instanceof LrsError)) throw err;
    res = errorResponse(err);
  }
  const through = await deps.store.consistentThrough(req.user?.target ?? '').catch(() => new Date(0));
  res.headers = { ...res.headers, 'x-experience-api-consistent-through': through.toISOString() };
  return res;
}
