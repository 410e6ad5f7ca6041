/**
 * How an xAPI resource's request is served. From the request's head: the alternate syntax, the
 * method (a method the resource does not define is a 405 before authentication, as HTTP servers
 * answer it, Communication §3.2.s3.b1; the ADL suite sends such requests without credentials), then
 * authentication and the scope check. Only then the body (../bodies.ts), the version header and the
 * resource's handler; the answer is written with the one `send`, without a body for HEAD.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Access, AccessPolicy, RouteScopes } from '../../auth/scopes.ts';
import type { Authenticator, AuthUser } from '../../auth/types.ts';
import type { Config } from '../../config.ts';
import { LrsError } from '../../errors.ts';
import { isKeptRejection, reasonsOfAnswer, type RejectionKeeper } from '../../ops/rejections.ts';
import { is2, namedVersion, negotiate, type XapiVersion } from '../../xapi/versions.ts';
import { type Admission, admit, grantScopes } from '../access.ts';
import { type Answer, json, send } from '../answer.ts';
import { BUSY_RETRY_AFTER, type BodyHold, hasBody, PARSED_BYTES_PER_VALUE, readBody, type RequestBodies } from '../bodies.ts';
import { errorAnswer, HttpRefusal } from '../errors.ts';
import { rawQuery } from '../request.ts';
import { type RequestHead, requestHead, withBody, type XapiHandler, type XapiRequest } from './request.ts';

/** An xAPI resource: its path, the methods it defines, the scopes it needs (none: no credentials) and its handler. */
export interface Resource {
  path: string;
  methods: readonly string[];
  scopes?: RouteScopes;
  /** Whether the X-Experience-API-Version header is required and negotiated (all but About). */
  versioned: boolean;
  handler: XapiHandler;
}

/** What every resource's requests are served with. */
export interface ResourceDeps {
  config: Config;
  auth: Pick<Authenticator, 'authenticate'>;
  policy: AccessPolicy;
  bodies: RequestBodies;
  /** Keeps refused writes (LECTERN_REJECTIONS_*); none kept without it. */
  rejections?: Pick<RejectionKeeper, 'keep'>;
  /** Where the method each request was served as is noted, for the metrics. */
  methods: WeakMap<FastifyRequest, string>;
}

const PARSED_BUSY = {
  total: 'the server holds as much request data as it may at once (LECTERN_MAX_BODIES_IN_FLIGHT: bodies, and the parsed size of the JSON they carry); try again shortly',
  user: "this user's requests hold as much as one user's may at once (LECTERN_MAX_BODIES_IN_FLIGHT_PER_USER: bodies, and the parsed size of the JSON they carry); try again shortly",
};

/**
 * One request as it is served: the method it is served as, what a refused write is kept with
 * (src/ops/rejections.ts: the request as parsed, its user), and what it holds of the body budget
 * (the body's bytes, then the estimated parsed size of its JSON) until it is answered.
 */
interface Call {
  method: string;
  head?: RequestHead;
  req?: XapiRequest;
  user?: AuthUser;
  access?: Access;
  bodyHold?: BodyHold;
  parsedHold?: BodyHold;
}

/**
 * The version a request is served under (X-Experience-API-Version, Communication §3.3); 2.0 drops
 * the alternate request syntax (9274.1.1 ChangeLog), so such a request is a 400 there.
 */
function checkVersion(req: XapiRequest, served: readonly XapiVersion[]): XapiVersion {
  const v = negotiate(req.headers['x-experience-api-version'], served);
  if (req.alternate && is2(v)) {
    throw new LrsError('bad_request', 'xAPI 2.0 has no alternate request syntax (the method parameter): send the request with its own method, headers and body');
  }
  return v;
}

/** Serves one request of `resource`: the answer, then a refused write handed to the keeper. */
export async function serveResource(deps: ResourceDeps, resource: Resource, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const call: Call = { method: request.method };
  let res: Answer;
  try {
    res = await answer(deps, resource, call, request, reply);
  } catch (err) {
    if (!(err instanceof LrsError || err instanceof HttpRefusal)) throw err;
    res = errorAnswer(err);
  } finally {
    call.bodyHold?.release();
    call.parsedHold?.release();
  }
  const sent = send(reply, res, call.method);
  if (call.user && isKeptRejection(resource.path, call.method, res.status)) keepRefused(deps, request, resource.path, res, { ...call, user: call.user });
  return sent;
}

/** The steps of serving a request, in their order; a refusal on the way is the answer. */
async function answer(deps: ResourceDeps, resource: Resource, call: Call, request: FastifyRequest, reply: FastifyReply): Promise<Answer> {
  const { config } = deps;
  const head = requestHead(request.method, rawQuery(request.url), request.headers);
  call.head = head;
  call.method = head.method;
  deps.methods.set(request, head.method);
  // Every answer to a request naming a served version (405 and 401 included) says that version.
  const named = namedVersion(head.headers['x-experience-api-version'], config.xapiVersions);
  if (named) reply.header('x-experience-api-version', named);
  if (!resource.methods.includes(head.method)) {
    const detail = `method ${head.method} is not allowed on ${resource.path} (${resource.methods.join(', ')})`;
    return json(405, { detail }, { allow: resource.methods.join(', ') });
  }
  const admitted = (authorization: string | undefined): Promise<Admission> | undefined =>
    resource.scopes && admit(deps.auth, authorization, request.ip, { grant: grantScopes(head.method, resource.path, resource.scopes, deps.policy) });
  // The alternate syntax may carry the credentials in its form: then the body is read first.
  const early = !head.alternate || head.headers.authorization !== undefined ? await admitted(head.headers.authorization) : undefined;
  if (early && 'refusal' in early) return early.refusal;
  call.user = early?.user;
  call.access = early?.access;
  let body: Buffer | undefined;
  if (hasBody(request.raw)) {
    call.bodyHold = deps.bodies.hold(!early, early?.user);
    body = await readBody(request.raw, reply.raw, call.bodyHold, early ? deps.bodies.limits : deps.bodies.anonymousLimits);
  }
  const xreq = withBody(head, body);
  if (head.alternate) {
    const formVersion = namedVersion(xreq.headers['x-experience-api-version'], config.xapiVersions);
    if (formVersion) reply.header('x-experience-api-version', formVersion);
  }
  const late = early ?? (await admitted(xreq.headers.authorization));
  if (late && 'refusal' in late) return late.refusal;
  xreq.user = call.user = late?.user;
  xreq.access = call.access = late?.access;
  call.req = xreq;
  xreq.holdParsed = (values) => holdParsed(deps.bodies, call, values);
  if (resource.versioned) xreq.version = checkVersion(xreq, config.xapiVersions);
  return resource.handler(xreq);
}

/**
 * Holds the estimated parsed size of `values` JSON values for the call (503 beyond). Alone, a
 * request always fits: its estimate is at most what it leaves of the budget, and of its user's
 * share, with its body.
 */
function holdParsed(bodies: RequestBodies, call: Call, values: number): void {
  const hold = (call.parsedHold ??= bodies.hold(false, call.user));
  const own = (call.bodyHold?.held ?? 0) + hold.held;
  const estimate = values * PARSED_BYTES_PER_VALUE;
  const { budget } = bodies;
  const why = hold.take(Math.min(estimate, budget.total - own), 'parsed', Math.min(estimate, budget.userTotal - own));
  if (why) throw new HttpRefusal(503, PARSED_BUSY[why], { 'retry-after': BUSY_RETRY_AFTER });
}

/**
 * A write refused with 400, 409 or 413: one log line (never the body), and the rejection handed
 * to the keeper (src/ops/rejections.ts), which writes it after the answer.
 */
function keepRefused(deps: ResourceDeps, request: FastifyRequest, path: string, res: Answer, call: Call & { user: AuthUser }): void {
  const { method } = call;
  const reasons = reasonsOfAnswer(path, res.status, res.body);
  request.log.info({ status: res.status, reasons: [...new Set(reasons.map((r) => r.type))], user: call.user.username, method, path }, 'write refused');
  const from = call.req ?? call.head;
  const length = Number(request.headers['content-length']);
  deps.rejections?.keep({
    user: call.user,
    access: call.access,
    method,
    path,
    query: from?.query ?? {},
    headers: from?.headers ?? {},
    status: res.status,
    reasons,
    body: call.req?.body,
    declaredBytes: Number.isSafeInteger(length) ? length : undefined,
  });
}
